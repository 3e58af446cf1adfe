// attnpool: the command line. Runs attention pooling and the distance stage
// on NumPy .npy files (see kUsage and the per-command help below).
#include <attnpool/attnpool.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/npy.h"

namespace {

using attnpool_tools::NpyArray;
using attnpool_tools::NpyError;
using attnpool_tools::NpyType;
using attnpool_tools::NpyTypeName;
using attnpool_tools::ShapeText;
using Clock = std::chrono::steady_clock;

constexpr int kExitUsage = 2;  // the command line is wrong
constexpr int kExitInput = 1;  // a file or the computation is wrong

// A problem to report: `message` is printed after "attnpool: error: ".
struct CliError {
  std::string message;
  int exit_code = kExitInput;
};

[[noreturn]] void UsageError(const std::string& message) {
  throw CliError{message, kExitUsage};
}

const char kUsage[] =
    R"usage(attnpool - attention pooling by similarity on NumPy .npy files

usage:
  attnpool pool      --queries Q.npy --keys K.npy --values V.npy -o OUT.npy [options]
  attnpool distances --queries Q.npy --keys K.npy -o OUT.npy [options]
  attnpool regress   --x X.npy --y Y.npy --queries Q.npy -o OUT.npy [options]
  attnpool sdpa      --queries Q.npy --keys K.npy --values V.npy -o OUT.npy [options]
  attnpool additive  --queries Q.npy --keys K.npy --values V.npy
                     --w-q WQ.npy --w-k WK.npy --w-v WV.npy -o OUT.npy [options]
  attnpool mha       --heads H --queries Q.npy --keys K.npy --values V.npy
                     --w-q WQ.npy --w-k WK.npy --w-v WV.npy --w-o WO.npy
                     -o OUT.npy [options]
  attnpool targets                  instruction sets compiled, supported, active
  attnpool COMMAND --help           the options of a command
  attnpool --version

pool:      out[i] = sum_j w[i,j] * values[j], where w[i,:] normalizes
           kernel(distance(queries[i], keys[j])) over the keys j
distances: out[i,j] = distance(queries[i], keys[j])
regress:   Nadaraya-Watson regression of y on x at the queries, the bandwidth
           fixed, from a rule of thumb or chosen by cross-validation
sdpa:      scaled dot-product attention per batch entry and head, with masks
additive:  additive (Bahdanau) attention, w_v . tanh(W_q q + W_k k) scores
mha:       multi-head attention with its projections (and biases)

Arrays are float32 or float64 .npy files in C order, as numpy.save writes
them: 2-D (rows x columns), or 1-D (one column); the layers also take
(B, H, n, d) arrays (sdpa, additive) or (B, n, d) ones (mha). Queries, keys
and values share one dtype, and the output gets it.

Example: Nadaraya-Watson regression with a Gaussian kernel of width 0.5
  python3 -c "import numpy as np; x = np.sort(5 * np.random.rand(40));
  np.save('x.npy', x); np.save('y.npy', 2 * np.sin(x) + x);
  np.save('q.npy', np.arange(0, 5, 0.1))"
  attnpool pool --queries q.npy --keys x.npy --values y.npy \
      --kernel gaussian --bandwidth 0.5 -o y_hat.npy --weights w.npy
)usage";

// ---------------------------------------------------------------- options

struct OptionInfo {
  const char* name;   // "--kernel"
  const char* value;  // "NAME", or nullptr for a flag
  const char* help;
};

// The names of the entries of one of the library's tables (kKernels,
// kDistances, kNormalizations) that `keep`, comma-separated, the one named
// `fallback` (if any) marked as the default.
template <typename Table, typename Keep>
std::string TableNames(const Table& table, Keep keep,
                       const char* fallback = nullptr) {
  std::string names;
  for (const auto& entry : table) {
    if (!keep(entry)) continue;
    names += (names.empty() ? "" : ", ") + std::string(entry.name);
    if (fallback && std::strcmp(entry.name, fallback) == 0) {
      names += " (default)";
    }
  }
  return names;
}
const auto kEvery = [](const auto&) { return true; };
// Regression's kernels: those of distances.
const auto kOfDistances = [](const attnpool::KernelProperties& kernel) {
  return attnpool::needs_distance(kernel.kernel);
};
const std::string kPoolKernelHelp =
    TableNames(attnpool::kKernels, kEvery, "gaussian");
const std::string kRegressKernelHelp =
    TableNames(attnpool::kKernels, kOfDistances, "gaussian");
const std::string kDistanceHelp =
    TableNames(attnpool::kDistances, kEvery, "sqeuclidean");
const std::string kNormalizationHelp =
    "over the keys of each query: " +
    TableNames(attnpool::kNormalizations, kEvery, "sum");

const OptionInfo kQueries{"--queries", "Q.npy", "queries, n x d (required)"};
const OptionInfo kKeys{"--keys", "K.npy", "keys, m x d (required)"};
const OptionInfo kOut{"-o", "OUT.npy",
                      "where to write the result (required; also --out)"};
const OptionInfo kDistance{"--distance", "NAME", kDistanceHelp.c_str()};

// Options of every command, after its own.
const std::vector<OptionInfo> kRunOptions = {
    {"--isa", "TARGET",
     "run on this instruction set (avx2, avx512, sse4, neon, sve, scalar, "
     "...; see 'attnpool targets'); default: the best this CPU supports"},
    {"--threads", "N",
     "OpenMP threads (default: OMP_NUM_THREADS or all cores)"},
    {"--time", nullptr, "print the time spent reading, computing and writing"},
    {"--progress", nullptr,
     "always show progress (default: on a terminal, for runs over 1 s)"},
    {"--quiet", nullptr, "no progress display"},
    {"--rows-per-call", "N",
     "query rows per library call (default: about 32 M query-key pairs per "
     "call)"},
};

const std::vector<OptionInfo> kPoolOptions = {
    kQueries,
    kKeys,
    {"--values", "V.npy", "values, m x dv (required)"},
    kOut,
    {"--weights", "W.npy",
     "also write the n x m attention weights (this runs the staged pipeline, "
     "which forms them; without it, the fused kernel runs)"},
    kDistance,
    {"--kernel", "NAME", kPoolKernelHelp.c_str()},
    {"--bandwidth", "H",
     "the width h of the distance kernels, > 0 (default 1)"},
    {"--scale", "S", "the factor of exp(S * score) (default 1/sqrt(d))"},
    {"--normalize", "NAME", kNormalizationHelp.c_str()},
    {"--empty-rows", "nan|zero",
     "output of a query with no weight left (empty boxcar window, all keys "
     "masked): NaN (default) or 0"},
    {"--valid-lengths", "L.npy",
     "integers, n entries: query i sees keys j < L[i]"},
    {"--causal", nullptr, "query i sees keys j <= i + causal offset"},
    {"--causal-offset", "K", "the offset of --causal (default 0)"},
    {"--bias", "B.npy", "n x m, added to the scores before a softmax"},
    {"--visible", "M.npy", "n x m, bool or uint8: 0 hides key j from query i"},
};

struct Command {
  const char* name;
  const char* summary;
  std::vector<OptionInfo> options;
};

// A command whose options are the lists of `option_lists`, in order.
Command MakeCommand(
    const char* name, const char* summary,
    std::initializer_list<std::vector<OptionInfo>> option_lists) {
  Command command{name, summary, {}};
  for (const auto& options : option_lists) {
    command.options.insert(command.options.end(), options.begin(),
                           options.end());
  }
  return command;
}

Command PoolCommand() {
  return MakeCommand(
      "pool",
      "attnpool pool --queries Q.npy --keys K.npy --values V.npy "
      "-o OUT.npy [options]\n\n"
      "Attention pooling: OUT (n x dv) = W . V, where W (n x m) "
      "holds the normalized\nkernel weights of the query-key "
      "distances. Nadaraya-Watson is the default\n(sqeuclidean, "
      "gaussian, sum); scaled dot-product attention is --distance "
      "dot\n--kernel exp --normalize softmax.",
      {kPoolOptions, kRunOptions});
}

Command DistancesCommand() {
  return MakeCommand(
      "distances",
      "attnpool distances --queries Q.npy --keys K.npy -o OUT.npy "
      "[options]\n\nAll-pairs distances: OUT (n x m)[i, j] = "
      "distance(queries[i], keys[j]).",
      {{kQueries, kKeys, kOut, kDistance}, kRunOptions});
}

// `text` in lines of at most `width` characters, each after `indent`
// spaces but the first.
std::string Wrap(const std::string& text, size_t indent, size_t width) {
  std::string wrapped, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      wrapped += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return wrapped + line;
}

void PrintHelp(const Command& command) {
  constexpr size_t kColumn = 25;
  std::printf("usage: %s\n\noptions:\n", command.summary);
  for (const auto& option : command.options) {
    std::string left = std::string("  ") + option.name;
    if (option.value) left += std::string(" ") + option.value;
    const std::string help = Wrap(option.help, kColumn, 79 - kColumn);
    if (left.size() < kColumn) {
      std::printf("%-*s%s\n", static_cast<int>(kColumn), left.c_str(),
                  help.c_str());
    } else {
      std::printf("%s\n%*s%s\n", left.c_str(), static_cast<int>(kColumn), "",
                  help.c_str());
    }
  }
  std::printf("%-*s%s\n", static_cast<int>(kColumn), "  -h, --help",
              "this help");
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Options given on the command line: name -> value ("" for flags).
class Arguments {
 public:
  Arguments(const Command& command, int argc, char** argv) : command_(command) {
    for (int i = 2; i < argc; ++i) {
      std::string word = argv[i];
      if (word == "-h" || word == "--help") {
        help_ = true;
        continue;
      }
      std::optional<std::string> inline_value;
      if (word.rfind("--", 0) == 0 && word.find('=') != std::string::npos) {
        inline_value = word.substr(word.find('=') + 1);
        word = word.substr(0, word.find('='));
      }
      if (word == "--out") word = "-o";
      const OptionInfo* info = Find(word);
      if (info == nullptr) {
        if (word.empty() || word[0] != '-') {
          UsageError("unexpected argument '" + word +
                     "' (options start with --; see 'attnpool " + command.name +
                     " --help')");
        }
        UsageError("unknown option '" + word + "' for 'attnpool " +
                   command.name + "'" + Suggestion(word));
      }
      if (values_.count(word)) UsageError(word + " is given twice");
      if (info->value == nullptr) {
        if (inline_value) UsageError(word + " takes no value");
        values_[word] = "";
      } else if (inline_value) {
        values_[word] = *inline_value;
      } else {
        if (i + 1 >= argc) {
          UsageError(word + " needs a value (" + info->value + ")");
        }
        values_[word] = argv[++i];
      }
    }
  }

  bool help() const { return help_; }
  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  std::optional<std::string> Get(const std::string& name) const {
    const auto found = values_.find(name);
    if (found == values_.end()) return std::nullopt;
    return found->second;
  }
  std::string Required(const std::string& name) const {
    const auto value = Get(name);
    if (!value) {
      UsageError(std::string("missing ") + name + " (see 'attnpool " +
                 command_.name + " --help')");
    }
    return *value;
  }

 private:
  const OptionInfo* Find(const std::string& name) const {
    for (const auto& option : command_.options)
      if (name == option.name) return &option;
    return nullptr;
  }
  std::string Suggestion(const std::string& word) const {
    const OptionInfo* best = nullptr;
    size_t best_distance = 3;  // suggest only close matches
    for (const auto& option : command_.options) {
      const size_t distance = EditDistance(word, option.name);
      if (distance < best_distance) {
        best_distance = distance;
        best = &option;
      }
    }
    return best ? std::string(" (did you mean ") + best->name + "?)" : "";
  }

  const Command& command_;
  bool help_ = false;
  std::map<std::string, std::string> values_;
};

double ParseDouble(const std::string& option, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    UsageError(option + " " + text + ": not a number");
  }
  return value;
}

long long ParseInteger(const std::string& option, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    UsageError(option + " " + text + ": not an integer");
  }
  return value;
}

// Calls a name lookup of the library, reporting an unknown name under the
// option's name.
template <typename Enum>
Enum ParseName(const std::string& option, const std::string& text,
               Enum (*from_name)(const char*)) {
  try {
    return from_name(text.c_str());
  } catch (const attnpool::Error& error) {
    const std::string what = error.what();
    const std::string prefix = "attnpool: " + error.argument() + ": ";
    UsageError(
        option + ": " +
        (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what));
  }
}

// The name given to `option`, or `fallback`, looked up by `from_name`.
template <typename Enum>
Enum NameOption(const Arguments& arguments, const std::string& option,
                const char* fallback, Enum (*from_name)(const char*)) {
  return ParseName(option, arguments.Get(option).value_or(fallback), from_name);
}

// The number given to `option`, if any.
std::optional<double> NumberOption(const Arguments& arguments,
                                   const std::string& option) {
  const auto text = arguments.Get(option);
  if (!text) return std::nullopt;
  return ParseDouble(option, *text);
}

// ---------------------------------------------------------------- arrays

// A 1-D or 2-D float array from a file, seen as a matrix.
struct InputMatrix {
  std::string option, path;
  NpyArray array;
  size_t rows = 0, cols = 0;
  bool one_dimensional = false;

  std::string Label() const { return option + " " + path; }
  std::string Describe() const {
    return Label() + " (shape " + ShapeText(array.shape) + ")";
  }
};

NpyArray Load(const std::string& option, const std::string& path) {
  try {
    return attnpool_tools::ReadNpy(path);
  } catch (const NpyError& error) {
    throw CliError{option + " " + path + ": " + error.what()};
  }
}

void RequireFloat(const std::string& label, const NpyArray& array) {
  if (array.type != NpyType::float32 && array.type != NpyType::float64) {
    throw CliError{label + ": dtype " + NpyTypeName(array.type) +
                   " is not supported: use float32 or float64 (e.g. "
                   "a.astype(np.float32))"};
  }
}

InputMatrix LoadMatrix(const std::string& option, const std::string& path) {
  InputMatrix matrix{option, path, Load(option, path)};
  const auto& shape = matrix.array.shape;
  RequireFloat(matrix.Label(), matrix.array);
  if (shape.size() == 2) {
    matrix.rows = shape[0];
    matrix.cols = shape[1];
  } else if (shape.size() == 1) {
    matrix.rows = shape[0];
    matrix.cols = 1;
    matrix.one_dimensional = true;
  } else {
    throw CliError{matrix.Describe() + ": expected a 1-D or 2-D array, not " +
                   std::to_string(shape.size()) + "-D"};
  }
  return matrix;
}

// The array of `label`, of dtype `type`, has the dtype of `reference` (an
// InputMatrix or InputTensor, as are the inputs below).
template <class Reference>
void RequireTypeOf(const Reference& reference, const std::string& label,
                   NpyType type) {
  if (type != reference.array.type) {
    throw CliError{label + " is " + NpyTypeName(type) + " but " +
                   reference.Label() + " is " +
                   NpyTypeName(reference.array.type) +
                   ": all arrays of a call must have one dtype (convert with "
                   "a.astype(...))"};
  }
}

template <class Reference, class Other>
void RequireSameType(const Reference& reference, const Other& other) {
  RequireTypeOf(reference, other.Label(), other.array.type);
}

template <class Input>
void RequireExtent(const Input& matrix, const char* what, size_t actual,
                   size_t expected, const std::string& because) {
  if (actual != expected) {
    throw CliError{matrix.Describe() + " has " + std::to_string(actual) + " " +
                   what + ", expected " + std::to_string(expected) + " " +
                   because};
  }
}

// `input` has as many `what` (`count` of them) as `reference` has columns.
template <class Reference, class Input>
void RequireColumnsOf(const Reference& reference, const Input& input,
                      const char* what, size_t count) {
  RequireExtent(input, what, count, reference.cols,
                "(the columns of " + reference.Describe() + ")");
}

template <class Reference, class Input>
void RequireSameColumns(const Reference& reference, const Input& input) {
  RequireColumnsOf(reference, input, "columns", input.cols);
}

// `values` has a row per key.
template <class Input>
void RequireRowPerKey(const Input& keys, const Input& values) {
  RequireExtent(values, "rows", values.rows, keys.rows,
                "(one per key: the rows of " + keys.Describe() + ")");
}

// `matrix` has the shape `shape`, as `why` says.
void RequireShape(const InputMatrix& matrix, const std::vector<size_t>& shape,
                  const std::string& why) {
  if (matrix.array.shape != shape) {
    throw CliError{matrix.Describe() + ": expected shape " + ShapeText(shape) +
                   ": " + why};
  }
}

// `array`, read for `label`, has the shape `shape`, as `why` says.
void RequireArrayShape(const std::string& label, const NpyArray& array,
                       const std::vector<size_t>& shape,
                       const std::string& why) {
  if (array.shape != shape) {
    throw CliError{label + ": shape " + ShapeText(array.shape) + ", expected " +
                   ShapeText(shape) + ": " + why};
  }
}

// --visible: a bool or uint8 array.
NpyArray LoadVisible(const std::string& path) {
  NpyArray visible = Load("--visible", path);
  if (visible.type != NpyType::bool8 && visible.type != NpyType::uint8) {
    throw CliError{"--visible " + path + ": dtype " +
                   NpyTypeName(visible.type) +
                   " is not supported: use bool or uint8"};
  }
  return visible;
}

void Save(const std::string& path, const NpyArray& array) {
  try {
    attnpool_tools::WriteNpy(path, array);
  } catch (const NpyError& error) {
    throw CliError{std::string("-o ") + path + ": " + error.what()};
  }
}

// ---------------------------------------------------------------- running

struct RunSettings {
  attnpool::Execution execution;
  bool time = false;
  bool force_progress = false;
  bool quiet = false;
  size_t rows_per_call = 0;  // 0: automatic
};

// Shows "attnpool pool: 42% (4200/10000 queries)" on stderr, once a run
// has taken more than a second (or from the start with --progress).
class Progress {
 public:
  Progress(const char* command, size_t total, const RunSettings& settings)
      : command_(command),
        total_(total),
        enabled_(!settings.quiet &&
                 (settings.force_progress || isatty(STDERR_FILENO))),
        forced_(settings.force_progress),
        start_(Clock::now()) {}

  void Update(size_t done) {
    if (!enabled_) return;
    const double seconds =
        std::chrono::duration<double>(Clock::now() - start_).count();
    if (!forced_ && seconds < 1.0) return;
    shown_ = true;
    std::fprintf(stderr, "\rattnpool %s: %3d%% (%zu/%zu queries)", command_,
                 static_cast<int>(total_ ? 100.0 * done / total_ : 100), done,
                 total_);
    std::fflush(stderr);
  }
  void Finish() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  const char* command_;
  size_t total_;
  bool enabled_, forced_;
  bool shown_ = false;
  Clock::time_point start_;
};

// Query rows per call (--rows-per-call, else about 32 M query-key pairs, in
// multiples of the fused kernel's 96-row blocks): calls short enough for the
// progress display, long enough that packing the keys per call is noise.
size_t RowsPerChunk(size_t key_count, const RunSettings& settings) {
  if (settings.rows_per_call > 0) return settings.rows_per_call;
  const size_t rows = (size_t{32} << 20) / std::max<size_t>(key_count, 1);
  return std::max<size_t>(96, rows / 96 * 96);
}

template <typename T>
attnpool::ConstMatrixView<T> View(const InputMatrix& matrix) {
  return {matrix.array.data<T>(), matrix.rows, matrix.cols};
}

template <typename T>
attnpool::ConstMatrixView<T> Rows(attnpool::ConstMatrixView<T> view,
                                  size_t begin, size_t count) {
  return {view.row(begin), count, view.cols, view.stride};
}
template <typename T>
attnpool::MatrixView<T> Rows(attnpool::MatrixView<T> view, size_t begin,
                             size_t count) {
  return {view.row(begin), count, view.cols, view.stride};
}

// The one place that runs the pooling, on a block of query rows: the fused
// kernel (no n x m matrix), or the staged pipeline when the weights of the
// block are wanted (weights.data non-null).
template <typename T>
void PoolBlock(const attnpool::PoolSpec& spec,
               attnpool::ConstMatrixView<T> queries,
               attnpool::ConstMatrixView<T> keys,
               attnpool::ConstMatrixView<T> values, attnpool::MatrixView<T> out,
               attnpool::MatrixView<T> weights, const attnpool::Mask<T>& mask,
               const attnpool::Execution& execution) {
  if (weights.data != nullptr) {
    attnpool::attention_pool_staged(spec, queries, keys, values, out, weights,
                                    mask, execution);
  } else {
    attnpool::attention_pool(spec, queries, keys, values, out, mask, execution);
  }
}

// The mask of query rows [begin, begin + count) of the whole call's mask.
template <typename T>
attnpool::Mask<T> MaskRows(const attnpool::Mask<T>& mask, size_t begin,
                           size_t count) {
  attnpool::Mask<T> rows = mask;
  if (mask.valid_lengths) rows.valid_lengths = mask.valid_lengths + begin;
  rows.causal_offset = mask.causal_offset + static_cast<std::ptrdiff_t>(begin);
  if (mask.bias.data) rows.bias = Rows(mask.bias, begin, count);
  if (mask.visible.data) rows.visible = Rows(mask.visible, begin, count);
  return rows;
}

std::string Milliseconds(Clock::duration duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f ms",
                std::chrono::duration<double, std::milli>(duration).count());
  return text;
}

void ApplyIsa(const Arguments& arguments) {
  if (const auto isa = arguments.Get("--isa")) {
    try {
      attnpool::force_target(*isa);
    } catch (const attnpool::Error& error) {
      const std::string what = error.what();
      const std::string prefix = "attnpool: target: ";
      UsageError(
          "--isa " + *isa + ": " +
          (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what));
    }
  }
}

RunSettings ReadSettings(const Arguments& arguments) {
  RunSettings settings;
  if (const auto threads = arguments.Get("--threads")) {
    const long long count = ParseInteger("--threads", *threads);
    if (count < 1 || count > 4096) {
      UsageError("--threads " + *threads + ": must be between 1 and 4096");
    }
    settings.execution.threads = static_cast<int>(count);
  }
  settings.time = arguments.Has("--time");
  settings.force_progress = arguments.Has("--progress");
  settings.quiet = arguments.Has("--quiet");
  if (const auto rows = arguments.Get("--rows-per-call")) {
    const long long count = ParseInteger("--rows-per-call", *rows);
    if (count < 1)
      UsageError("--rows-per-call " + *rows + ": must be positive");
    settings.rows_per_call = static_cast<size_t>(count);
  }
  return settings;
}

// The option of `argument` in `options`, trying "a.b.c", then "a.b", "a".
std::string OptionIn(const std::map<std::string, std::string>& options,
                     const std::string& argument) {
  for (auto prefix = argument;;) {
    const auto found = options.find(prefix);
    if (found != options.end()) return found->second;
    const auto dot = prefix.rfind('.');
    if (dot == std::string::npos) return "";
    prefix = prefix.substr(0, dot);
  }
}

// Maps the library's argument names to the options that feed them.
std::string OptionOf(const std::string& argument) {
  static const std::map<std::string, std::string> options = {
      {"queries", "--queries"},
      {"keys", "--keys"},
      {"values", "--values"},
      {"kernel.bandwidth", "--bandwidth"},
      {"kernel.scale", "--scale"},
      {"kernel.kernel", "--kernel"},
      {"kernel", "--kernel"},
      {"distance", "--distance"},
      {"mask.valid_lengths", "--valid-lengths"},
      {"mask.bias", "--bias"},
      {"mask.visible", "--visible"},
      {"scale", "--scale"},
      {"weights.heads", "--heads"},
      {"weights.w_q", "--w-q"},
      {"weights.w_k", "--w-k"},
      {"weights.w_v", "--w-v"},
      {"weights.w_o", "--w-o"},
      {"weights.b_q", "--b-q"},
      {"weights.b_k", "--b-k"},
      {"weights.b_v", "--b-v"},
      {"weights.b_o", "--b-o"},
  };
  return OptionIn(options, argument);
}

// `options`: a command's own names, looked up before the common ones.
CliError LibraryError(const attnpool::Error& error,
                      const std::map<std::string, std::string>& options = {}) {
  std::string option = OptionIn(options, error.argument());
  if (option.empty()) option = OptionOf(error.argument());
  std::string what = error.what();
  if (!option.empty()) what += " (from " + option + ")";
  return {what.rfind("attnpool: ", 0) == 0 ? what.substr(10) : what};
}

void PrintTiming(const char* command, const std::string& shape,
                 const char* type, Clock::duration read,
                 Clock::duration compute, Clock::duration write,
                 const RunSettings& settings) {
  const std::string target = attnpool::last_run_target();
  std::fprintf(
      stderr, "attnpool %s: %s %s: compute %s on %s, %s; read %s, write %s\n",
      command, shape.c_str(), type, Milliseconds(compute).c_str(),
      target.empty() ? attnpool::active_target().c_str() : target.c_str(),
      (std::to_string(settings.execution.threads > 0
                          ? settings.execution.threads
                          : omp_get_max_threads()) +
       " threads")
          .c_str(),
      Milliseconds(read).c_str(), Milliseconds(write).c_str());
}

// Runs the command of `command` on its options, or prints its help.
int RunCommand(const Command& command, int (*run)(const Arguments&), int argc,
               char** argv) {
  const Arguments arguments(command, argc, argv);
  if (arguments.help()) {
    PrintHelp(command);
    return 0;
  }
  return run(arguments);
}

// Calls `compute(T())` with T the element type of `type`: float or double.
template <class Compute>
int WithElementType(NpyType type, const Compute& compute) {
  return type == NpyType::float32 ? compute(float()) : compute(double());
}

// A command's run once its inputs are read: what its progress display and
// --time need.
struct Run {
  const char* command;
  RunSettings settings;
  Clock::duration read_time;
};

// Runs `compute(&progress)` for `rows` queries, reporting a library error
// under the option it comes from (looked up in `options` first), and
// returns the time it took.
template <class Compute>
Clock::duration ComputeWithProgress(
    const Run& run, size_t rows, const Compute& compute,
    const std::map<std::string, std::string>& options = {}) {
  const auto start = Clock::now();
  Progress progress(run.command, rows, run.settings);
  try {
    compute(&progress);
  } catch (const attnpool::Error& error) {
    progress.Finish();
    throw LibraryError(error, options);
  }
  progress.Finish();
  return Clock::now() - start;
}

// Calls `block(begin, count)` on the query rows [0, rows) in calls of
// RowsPerChunk rows, updating `progress` after each; with no rows, once on
// none, which still checks the arguments.
template <class Block>
void ForEachChunk(size_t rows, size_t key_count, const RunSettings& settings,
                  Progress* progress, const Block& block) {
  const size_t chunk = RowsPerChunk(key_count, settings);
  if (rows == 0) block(0, 0);
  for (size_t begin = 0; begin < rows; begin += chunk) {
    const size_t count = std::min(chunk, rows - begin);
    block(begin, count);
    progress->Update(begin + count);
  }
}

// ForEachChunk with its progress display, timed.
template <class Block>
Clock::duration ComputeInChunks(const Run& run, size_t rows, size_t key_count,
                                const Block& block) {
  return ComputeWithProgress(run, rows, [&](Progress* progress) {
    ForEachChunk(rows, key_count, run.settings, progress, block);
  });
}

// What a command writes: its output, and the attention weights where
// --weights names a file for them.
struct Results {
  std::string out_path;
  NpyArray out;
  std::optional<std::string> weights_path = std::nullopt;
  NpyArray weights = {};
};

// Rows [begin, begin + count) of a 1-D or 2-D array, as a matrix.
template <typename T>
attnpool::MatrixView<T> MatrixRows(NpyArray& array, size_t begin,
                                   size_t count) {
  const size_t cols = array.shape.size() == 2 ? array.shape[1] : 1;
  return {array.mutable_data<T>() + begin * cols, count, cols};
}

// Writes `results`, then with --time how long the run took.
int Finish(const Run& run, const Results& results, Clock::duration compute_time,
           const std::string& shape) {
  const auto write_start = Clock::now();
  Save(results.out_path, results.out);
  if (results.weights_path) Save(*results.weights_path, results.weights);
  if (run.settings.time) {
    PrintTiming(run.command, shape, NpyTypeName(results.out.type),
                run.read_time, compute_time, Clock::now() - write_start,
                run.settings);
  }
  return 0;
}

// ---------------------------------------------------------------- pool

struct PoolInputs {
  InputMatrix queries, keys, values;
  std::optional<InputMatrix> bias;
  std::optional<NpyArray> visible;
  std::vector<size_t> valid_lengths;
  bool has_valid_lengths = false;
  attnpool::PoolSpec spec;
  bool causal = false;
  std::ptrdiff_t causal_offset = 0;
};

// The entries of an integer array of valid lengths, each in [0, key_count].
std::vector<size_t> LengthEntries(const std::string& label,
                                  const NpyArray& array, size_t key_count) {
  std::vector<size_t> lengths(array.count);
  for (size_t i = 0; i < array.count; ++i) {
    long double value;
    switch (array.type) {
      case NpyType::int32:
        value = array.data<int32_t>()[i];
        break;
      case NpyType::int64:
        value = array.data<int64_t>()[i];
        break;
      case NpyType::uint32:
        value = array.data<uint32_t>()[i];
        break;
      case NpyType::uint64:
        value = array.data<uint64_t>()[i];
        break;
      default:
        throw CliError{label + ": dtype " + NpyTypeName(array.type) +
                       " is not supported: use an integer array (int64, "
                       "int32, uint64 or uint32)"};
    }
    if (value < 0 || value > static_cast<long double>(key_count)) {
      throw CliError{label + ": entry " + std::to_string(i) + " is " +
                     std::to_string(static_cast<long long>(value)) +
                     ", outside [0, " + std::to_string(key_count) +
                     "] (the number of keys)"};
    }
    lengths[i] = static_cast<size_t>(value);
  }
  return lengths;
}

std::vector<size_t> LoadValidLengths(const std::string& path, size_t rows,
                                     size_t key_count) {
  const std::string label = "--valid-lengths " + path;
  const NpyArray array = Load("--valid-lengths", path);
  RequireArrayShape(label, array, {rows}, "one entry per query");
  return LengthEntries(label, array, key_count);
}

attnpool::EmptyRows ParseEmptyRows(const Arguments& arguments) {
  const std::string empty_rows = arguments.Get("--empty-rows").value_or("nan");
  if (empty_rows == "nan") return attnpool::EmptyRows::nan;
  if (empty_rows == "zero") return attnpool::EmptyRows::zero;
  UsageError("--empty-rows " + empty_rows + ": use nan or zero");
}

// --causal and --causal-offset.
void ParseCausal(const Arguments& arguments, bool* causal,
                 std::ptrdiff_t* causal_offset) {
  *causal = arguments.Has("--causal");
  if (const auto offset = arguments.Get("--causal-offset")) {
    if (!*causal) UsageError("--causal-offset needs --causal");
    *causal_offset =
        static_cast<std::ptrdiff_t>(ParseInteger("--causal-offset", *offset));
  }
}

// The results of pooling `rows` queries over `key_count` keys: rows x the
// columns of `values` (`rows` entries when `values` is 1-D), and the rows x
// key_count weights when --weights asks for them (else 0 x key_count: the
// fused kernel forms none).
Results PoolResults(const std::string& out_path,
                    const std::optional<std::string>& weights_path, size_t rows,
                    const InputMatrix& values, size_t key_count) {
  const NpyType type = values.array.type;
  return {out_path,
          attnpool_tools::MakeNpyArray(
              type, values.one_dimensional
                        ? std::vector<size_t>{rows}
                        : std::vector<size_t>{rows, values.cols}),
          weights_path,
          attnpool_tools::MakeNpyArray(
              type, std::vector<size_t>{weights_path ? rows : 0, key_count})};
}

// Rows [begin, begin + count) of the weights of `results`, or a null view
// when they are not asked for.
template <typename T>
attnpool::MatrixView<T> WeightRows(Results& results, size_t begin,
                                   size_t count) {
  return results.weights_path ? MatrixRows<T>(results.weights, begin, count)
                              : attnpool::MatrixView<T>();
}

template <typename T>
int RunPool(const PoolInputs& inputs, const std::string& out_path,
            const std::optional<std::string>& weights_path, const Run& run) {
  const size_t rows = inputs.queries.rows, key_count = inputs.keys.rows;
  Results results =
      PoolResults(out_path, weights_path, rows, inputs.values, key_count);
  attnpool::Mask<T> mask;
  if (inputs.has_valid_lengths)
    mask.valid_lengths = inputs.valid_lengths.data();
  mask.causal = inputs.causal;
  mask.causal_offset = inputs.causal_offset;
  if (inputs.bias) mask.bias = View<T>(*inputs.bias);
  if (inputs.visible) {
    mask.visible = {inputs.visible->data<uint8_t>(), rows, key_count};
  }
  const auto queries = View<T>(inputs.queries);
  const auto keys = View<T>(inputs.keys);
  const auto values = View<T>(inputs.values);
  const auto compute_time =
      ComputeInChunks(run, rows, key_count, [&](size_t begin, size_t count) {
        PoolBlock<T>(inputs.spec, Rows(queries, begin, count), keys, values,
                     MatrixRows<T>(results.out, begin, count),
                     WeightRows<T>(results, begin, count),
                     MaskRows(mask, begin, count), run.settings.execution);
      });
  return Finish(run, results, compute_time,
                "n=" + std::to_string(rows) +
                    " m=" + std::to_string(key_count) +
                    " d=" + std::to_string(inputs.queries.cols) +
                    " dv=" + std::to_string(inputs.values.cols));
}

int Pool(const Arguments& arguments) {
  const std::string queries_path = arguments.Required("--queries");
  const std::string keys_path = arguments.Required("--keys");
  const std::string values_path = arguments.Required("--values");
  const std::string out_path = arguments.Required("-o");
  const auto weights_path = arguments.Get("--weights");
  const RunSettings settings = ReadSettings(arguments);

  PoolInputs inputs{};
  auto& spec = inputs.spec;
  spec.distance = NameOption(arguments, "--distance", "sqeuclidean",
                             &attnpool::distance_from_name);
  spec.kernel.kernel = NameOption(arguments, "--kernel", "gaussian",
                                  &attnpool::kernel_from_name);
  if (const auto bandwidth = NumberOption(arguments, "--bandwidth")) {
    spec.kernel.bandwidth = *bandwidth;
  }
  spec.kernel.scale = NumberOption(arguments, "--scale");
  spec.normalization = NameOption(arguments, "--normalize", "sum",
                                  &attnpool::normalization_from_name);
  spec.empty_rows = ParseEmptyRows(arguments);
  ParseCausal(arguments, &inputs.causal, &inputs.causal_offset);
  ApplyIsa(arguments);

  const auto read_start = Clock::now();
  inputs.queries = LoadMatrix("--queries", queries_path);
  inputs.keys = LoadMatrix("--keys", keys_path);
  inputs.values = LoadMatrix("--values", values_path);
  RequireSameType(inputs.queries, inputs.keys);
  RequireSameType(inputs.queries, inputs.values);
  const size_t rows = inputs.queries.rows, key_count = inputs.keys.rows;
  RequireSameColumns(inputs.queries, inputs.keys);
  RequireRowPerKey(inputs.keys, inputs.values);
  if (const auto path = arguments.Get("--valid-lengths")) {
    inputs.valid_lengths = LoadValidLengths(*path, rows, key_count);
    inputs.has_valid_lengths = true;
  }
  if (const auto path = arguments.Get("--bias")) {
    inputs.bias = LoadMatrix("--bias", *path);
    RequireSameType(inputs.queries, *inputs.bias);
    RequireShape(*inputs.bias, {rows, key_count}, "queries x keys");
  }
  if (const auto path = arguments.Get("--visible")) {
    inputs.visible = LoadVisible(*path);
    RequireArrayShape("--visible " + *path, *inputs.visible, {rows, key_count},
                      "queries x keys");
  }
  const Run run{"pool", settings, Clock::now() - read_start};
  return WithElementType(inputs.queries.array.type, [&](auto zero) {
    return RunPool<decltype(zero)>(inputs, out_path, weights_path, run);
  });
}

// ---------------------------------------------------------------- distances

template <typename T>
int RunDistances(attnpool::Distance distance, const InputMatrix& queries_in,
                 const InputMatrix& keys_in, const std::string& out_path,
                 const Run& run) {
  const size_t rows = queries_in.rows, key_count = keys_in.rows;
  Results results{out_path, attnpool_tools::MakeNpyArray(queries_in.array.type,
                                                         {rows, key_count})};
  const auto queries = View<T>(queries_in);
  const auto keys = View<T>(keys_in);
  const auto compute_time =
      ComputeInChunks(run, rows, key_count, [&](size_t begin, size_t count) {
        attnpool::pairwise_distances(
            distance, Rows(queries, begin, count), keys,
            MatrixRows<T>(results.out, begin, count), run.settings.execution);
      });
  return Finish(run, results, compute_time,
                "n=" + std::to_string(rows) +
                    " m=" + std::to_string(key_count) +
                    " d=" + std::to_string(queries_in.cols));
}

int Distances(const Arguments& arguments) {
  const std::string queries_path = arguments.Required("--queries");
  const std::string keys_path = arguments.Required("--keys");
  const std::string out_path = arguments.Required("-o");
  const RunSettings settings = ReadSettings(arguments);
  const auto distance = NameOption(arguments, "--distance", "sqeuclidean",
                                   &attnpool::distance_from_name);
  ApplyIsa(arguments);
  const auto read_start = Clock::now();
  const InputMatrix queries = LoadMatrix("--queries", queries_path);
  const InputMatrix keys = LoadMatrix("--keys", keys_path);
  RequireSameType(queries, keys);
  RequireSameColumns(queries, keys);
  const Run run{"distances", settings, Clock::now() - read_start};
  return WithElementType(queries.array.type, [&](auto zero) {
    return RunDistances<decltype(zero)>(distance, queries, keys, out_path, run);
  });
}

// ---------------------------------------------------------------- regress

const std::vector<OptionInfo> kRegressOptions = {
    {"--x", "X.npy", "training inputs, n x d (required)"},
    {"--y", "Y.npy", "training targets, n x dy, or n entries (required)"},
    {"--queries", "Q.npy", "where to predict, m x d (required)"},
    kOut,
    {"--weights", "W.npy",
     "also write the m x n weights of the training points for each query"},
    {"--kernel", "NAME", kRegressKernelHelp.c_str()},
    {"--bandwidth", "H",
     "a fixed bandwidth h > 0, or one per column of x: H1,H2,..."},
    {"--bandwidth-rule", "silverman|scott",
     "a normal-reference rule of thumb, one bandwidth per column of x (the "
     "default: silverman)"},
    {"--cv-grid", "HMIN,HMAX,COUNT",
     "choose h by cross-validation among COUNT bandwidths from HMIN to HMAX "
     "(evenly spaced in 1/h^2), printing the score of each"},
    {"--folds", "K",
     "with --cv-grid: K-fold (point i in fold i mod K) instead of "
     "leave-one-out"},
    {"--empty-rows", "nan|zero",
     "output of a query with no training point in its kernel window: NaN "
     "(default) or 0"},
};

Command RegressCommand() {
  return MakeCommand(
      "regress",
      "attnpool regress --x X.npy --y Y.npy --queries Q.npy -o OUT.npy "
      "[options]\n\n"
      "Nadaraya-Watson kernel regression: OUT[i] = sum_j K(|q_i - x_j| / h) "
      "y_j /\nsum_j K(|q_i - x_j| / h). The bandwidth h is fixed "
      "(--bandwidth), from a rule of\nthumb (--bandwidth-rule, the default) "
      "or the least cross-validation score on a\ngrid (--cv-grid); it is "
      "printed on stdout as 'bandwidth: H', after the grid's\n'h score "
      "unpredictable' lines with --cv-grid.",
      {kRegressOptions, kRunOptions});
}

// How the bandwidth is chosen.
struct BandwidthChoice {
  enum class How { fixed, rule, cross_validation } how = How::rule;
  std::string option = "--bandwidth-rule";  // the option that chose it
  std::vector<double> fixed;                // --bandwidth
  std::string fixed_text;                   // as given
  bool silverman = true;                    // --bandwidth-rule
  double h_min = 0, h_max = 0;              // --cv-grid
  size_t count = 0;
  size_t folds = 0;  // --folds; 0: leave-one-out
};

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

BandwidthChoice ParseBandwidthChoice(const Arguments& arguments) {
  BandwidthChoice choice;
  const int given = arguments.Has("--bandwidth") +
                    arguments.Has("--bandwidth-rule") +
                    arguments.Has("--cv-grid");
  if (given > 1) {
    UsageError(
        "--bandwidth, --bandwidth-rule and --cv-grid are alternatives: give "
        "one");
  }
  if (arguments.Has("--folds") && !arguments.Has("--cv-grid")) {
    UsageError("--folds needs --cv-grid");
  }
  if (const auto text = arguments.Get("--bandwidth")) {
    choice.how = BandwidthChoice::How::fixed;
    choice.option = "--bandwidth";
    choice.fixed_text = *text;
    for (const auto& part : Split(*text, ',')) {
      choice.fixed.push_back(ParseDouble("--bandwidth", part));
    }
  } else if (const auto grid = arguments.Get("--cv-grid")) {
    choice.how = BandwidthChoice::How::cross_validation;
    choice.option = "--cv-grid";
    const auto parts = Split(*grid, ',');
    if (parts.size() != 3) {
      UsageError("--cv-grid " + *grid +
                 ": expected HMIN,HMAX,COUNT (e.g. 0.05,2,32)");
    }
    choice.h_min = ParseDouble("--cv-grid", parts[0]);
    choice.h_max = ParseDouble("--cv-grid", parts[1]);
    const long long count = ParseInteger("--cv-grid", parts[2]);
    if (count < 1 || count > 100000) {
      UsageError("--cv-grid " + *grid + ": COUNT must be between 1 and 100000");
    }
    choice.count = static_cast<size_t>(count);
    if (const auto folds = arguments.Get("--folds")) {
      const long long k = ParseInteger("--folds", *folds);
      if (k < 2) {
        UsageError("--folds " + *folds +
                   ": must be at least 2 (without --folds: leave-one-out)");
      }
      choice.folds = static_cast<size_t>(k);
    }
  } else {
    const std::string rule =
        arguments.Get("--bandwidth-rule").value_or("silverman");
    if (rule != "silverman" && rule != "scott") {
      UsageError("--bandwidth-rule " + rule + ": use silverman or scott");
    }
    choice.silverman = rule == "silverman";
  }
  return choice;
}

// "0.5", "0.31 0.52": bandwidths as printed.
std::string BandwidthText(const std::vector<double>& bandwidths) {
  std::string text;
  char number[32];
  for (double h : bandwidths) {
    std::snprintf(number, sizeof(number), "%.9g", h);
    text += (text.empty() ? "" : " ") + std::string(number);
  }
  return text;
}

// The bandwidth(s) of `choice` on x and y, and how they were found: given,
// from a rule, or the minimizer of the cross-validation scores (whose curve
// is printed here, before anything else can fail).
struct ChosenBandwidth {
  std::vector<double> bandwidths;
  std::string how;
};

template <typename T>
ChosenBandwidth ChooseBandwidth(const BandwidthChoice& choice,
                                attnpool::Kernel kernel,
                                attnpool::ConstMatrixView<T> x,
                                attnpool::ConstMatrixView<T> y,
                                const RunSettings& settings) {
  switch (choice.how) {
    case BandwidthChoice::How::fixed:
      return {choice.fixed, "--bandwidth"};
    case BandwidthChoice::How::rule: {
      auto bandwidths = choice.silverman ? attnpool::silverman_bandwidth(x)
                                         : attnpool::scott_bandwidth(x);
      const bool several = bandwidths.size() > 1;
      return {std::move(bandwidths),
              std::string(choice.silverman ? "Silverman" : "Scott") +
                  "'s rule of thumb" +
                  (several ? ", one per column of --x" : "")};
    }
    case BandwidthChoice::How::cross_validation:
      break;
  }
  const auto grid = attnpool::gaussian_bandwidth_grid(
      choice.h_min, choice.h_max, choice.count);
  attnpool::CrossValidationOptions options;
  options.folds = choice.folds;
  const auto result =
      attnpool::cross_validate(kernel, x, y, grid, options, settings.execution);
  const std::string method = choice.folds == 0
                                 ? "leave-one-out"
                                 : std::to_string(choice.folds) + "-fold";
  std::printf(
      "# %s cross-validation, %s kernel, %zu points: h, score (mean held-out "
      "squared error), unpredictable points\n",
      method.c_str(), attnpool::kernel_name(kernel), x.rows);
  for (size_t b = 0; b < grid.size(); ++b) {
    std::printf("%.9g %.9g %zu\n", grid[b], result.scores[b],
                result.unpredictable[b]);
  }
  std::fflush(stdout);
  if (result.best == attnpool::CrossValidationResult::npos) {
    throw CliError{
        "--cv-grid: every bandwidth leaves some point with no other "
        "training point in its kernel window (h = " +
        BandwidthText({grid.back()}) + " leaves " +
        std::to_string(result.unpredictable.back()) +
        "): raise HMAX, or use --kernel gaussian"};
  }
  char score[64];
  std::snprintf(score, sizeof(score), "%.9g", result.scores[result.best]);
  return {{result.best_bandwidth},
          "least " + method + " score, " + std::string(score)};
}

// A --bandwidth list fits x: 1 value, or one per column.
void CheckBandwidthCount(const BandwidthChoice& choice, const InputMatrix& x) {
  const size_t count = choice.fixed.size();
  if (choice.how != BandwidthChoice::How::fixed || count == 1 ||
      count == x.cols) {
    return;
  }
  throw CliError{"--bandwidth " + choice.fixed_text + ": " +
                 std::to_string(count) + " values, expected 1" +
                 (x.cols > 1 ? " or " + std::to_string(x.cols) +
                                   " (one per column of " + x.Describe() + ")"
                             : " (" + x.Describe() + " has one column)")};
}

struct RegressInputs {
  InputMatrix x, y, queries;
  attnpool::Kernel kernel = attnpool::Kernel::gaussian;
  attnpool::EmptyRows empty_rows = attnpool::EmptyRows::nan;
  BandwidthChoice bandwidth;
};

// The regression of `inputs`, with its bandwidth(s) chosen into `bandwidths`
// and printed on stdout.
template <typename T>
attnpool::NadarayaWatson<T> Fit(const RegressInputs& inputs,
                                attnpool::ConstMatrixView<T> x,
                                attnpool::ConstMatrixView<T> y,
                                const RunSettings& settings,
                                std::vector<double>* bandwidths) {
  const auto chosen =
      ChooseBandwidth(inputs.bandwidth, inputs.kernel, x, y, settings);
  *bandwidths = chosen.bandwidths;
  auto model =
      bandwidths->size() == 1
          ? attnpool::NadarayaWatson<T>(inputs.kernel, (*bandwidths)[0], x, y)
          : attnpool::NadarayaWatson<T>(inputs.kernel, *bandwidths, x, y);
  model.set_empty_rows(inputs.empty_rows);
  std::printf("bandwidth: %s (%s)\n", BandwidthText(*bandwidths).c_str(),
              chosen.how.c_str());
  std::fflush(stdout);
  return model;
}

template <typename T>
int RunRegress(const RegressInputs& inputs, const std::string& out_path,
               const std::optional<std::string>& weights_path, const Run& run) {
  const size_t rows = inputs.queries.rows, size = inputs.x.rows;
  // The library's argument names of this command, before the common ones.
  const std::map<std::string, std::string> options = {
      {"x", "--x"},
      {"y", "--y"},
      {"queries", "--queries"},
      {"out", "-o"},
      {"weights", "--weights"},
      {"kernel", "--kernel"},
      {"bandwidth", inputs.bandwidth.option},
      {"bandwidths", "--cv-grid"},
      {"h_min", "--cv-grid"},
      {"h_max", "--cv-grid"},
      {"count", "--cv-grid"},
      {"options.folds", "--folds"},
  };
  Results results = PoolResults(out_path, weights_path, rows, inputs.y, size);
  const auto x = View<T>(inputs.x);
  const auto y = View<T>(inputs.y);
  const auto queries = View<T>(inputs.queries);
  std::vector<double> bandwidths;
  const auto compute_time = ComputeWithProgress(
      run, rows,
      [&](Progress* progress) {
        const auto model = Fit(inputs, x, y, run.settings, &bandwidths);
        ForEachChunk(
            rows, size, run.settings, progress,
            [&](size_t begin, size_t count) {
              const auto block = Rows(queries, begin, count);
              const auto out = MatrixRows<T>(results.out, begin, count);
              if (weights_path) {
                model.predict(block, out, WeightRows<T>(results, begin, count),
                              run.settings.execution);
              } else {
                model.predict(block, out, run.settings.execution);
              }
            });
      },
      options);
  return Finish(run, results, compute_time,
                "n=" + std::to_string(size) + " m=" + std::to_string(rows) +
                    " d=" + std::to_string(inputs.x.cols) +
                    " dy=" + std::to_string(inputs.y.cols) +
                    " h=" + BandwidthText(bandwidths));
}

int Regress(const Arguments& arguments) {
  const std::string x_path = arguments.Required("--x");
  const std::string y_path = arguments.Required("--y");
  const std::string queries_path = arguments.Required("--queries");
  const std::string out_path = arguments.Required("-o");
  const auto weights_path = arguments.Get("--weights");
  const RunSettings settings = ReadSettings(arguments);

  RegressInputs inputs{};
  const std::string kernel = arguments.Get("--kernel").value_or("gaussian");
  inputs.kernel = ParseName("--kernel", kernel, &attnpool::kernel_from_name);
  if (!attnpool::needs_distance(inputs.kernel)) {
    UsageError("--kernel " + kernel + ": regression takes " +
               TableNames(attnpool::kKernels, kOfDistances));
  }
  inputs.empty_rows = ParseEmptyRows(arguments);
  inputs.bandwidth = ParseBandwidthChoice(arguments);
  ApplyIsa(arguments);

  const auto read_start = Clock::now();
  inputs.x = LoadMatrix("--x", x_path);
  inputs.y = LoadMatrix("--y", y_path);
  inputs.queries = LoadMatrix("--queries", queries_path);
  RequireSameType(inputs.x, inputs.y);
  RequireSameType(inputs.x, inputs.queries);
  RequireExtent(
      inputs.y, "rows", inputs.y.rows, inputs.x.rows,
      "(one per training point: the rows of " + inputs.x.Describe() + ")");
  RequireSameColumns(inputs.x, inputs.queries);
  CheckBandwidthCount(inputs.bandwidth, inputs.x);
  const Run run{"regress", settings, Clock::now() - read_start};
  return WithElementType(inputs.x.array.type, [&](auto zero) {
    return RunRegress<decltype(zero)>(inputs, out_path, weights_path, run);
  });
}

// ---------------------------------------------------------------- layers

// --isa, --threads and --time: the run options that apply to one call.
std::vector<OptionInfo> LayerRunOptions() {
  std::vector<OptionInfo> options;
  for (const auto& option : kRunOptions) {
    const std::string name = option.name;
    if (name == "--isa" || name == "--threads" || name == "--time") {
      options.push_back(option);
    }
  }
  return options;
}

// The masks of the attention layers, after the layer's own options.
const std::vector<OptionInfo> kLayerMaskOptions = {
    {"--valid-lengths", "L.npy",
     "integers, each <= m: one per batch entry, shape (B,), or one per "
     "query, shape (B, n); with 2-D inputs one per query, shape (n,)"},
    {"--causal", nullptr, "query i sees keys j <= i + causal offset"},
    {"--causal-offset", "K", "the offset of --causal (default 0)"},
    {"--bias", "B.npy",
     "added to the scores: shape (n, m), or (B or 1, H or 1, n, m) (a 1 is "
     "broadcast), the dtype of the inputs"},
    {"--visible", "M.npy",
     "bool or uint8, shaped as --bias: 0 hides key j from query i"},
    {"--empty-rows", "nan|zero",
     "output of a query that sees no key: NaN (default) or 0"},
};

Command LayerCommand(const char* name, const char* summary,
                     std::vector<OptionInfo> options) {
  return MakeCommand(
      name, summary,
      {std::move(options), kLayerMaskOptions, LayerRunOptions()});
}

Command SdpaCommand() {
  return LayerCommand(
      "sdpa",
      "attnpool sdpa --queries Q.npy --keys K.npy --values V.npy -o OUT.npy "
      "[options]\n\nScaled dot-product attention: OUT = softmax(scale * Q . "
      "K^T + bias, masked) . V\nper batch entry and head. Q (B, H, n, d), K "
      "(B, Hkv, m, d), V (B, Hkv, m, dv),\nOUT (B, H, n, dv); Hkv divides H "
      "(grouped-query attention). 2-D arrays (n, d)\nare one batch entry of "
      "one head.",
      {{"--queries", "Q.npy", "queries, (B, H, n, d) or (n, d) (required)"},
       {"--keys", "K.npy", "keys, (B, Hkv, m, d) or (m, d) (required)"},
       {"--values", "V.npy", "values, (B, Hkv, m, dv) or (m, dv) (required)"},
       kOut,
       {"--scale", "S", "the factor of the scores (default 1/sqrt(d))"}});
}

Command AdditiveCommand() {
  return LayerCommand(
      "additive",
      "attnpool additive --queries Q.npy --keys K.npy --values V.npy\n"
      "    --w-q WQ.npy --w-k WK.npy --w-v WV.npy -o OUT.npy [options]\n\n"
      "Additive (Bahdanau) attention: score(q, k) = w_v . tanh(W_q q + W_k "
      "k), then\nthe masks, softmax and the weighted sum of the values. Q "
      "(B, H, n, dq),\nK (B, Hkv, m, dk), V (B, Hkv, m, dv), OUT (B, H, n, "
      "dv), or 2-D arrays.",
      {{"--queries", "Q.npy", "queries, (B, H, n, dq) or (n, dq) (required)"},
       {"--keys", "K.npy", "keys, (B, Hkv, m, dk) or (m, dk) (required)"},
       {"--values", "V.npy", "values, (B, Hkv, m, dv) or (m, dv) (required)"},
       kOut,
       {"--w-q", "WQ.npy", "W_q, (h, dq) (required)"},
       {"--w-k", "WK.npy", "W_k, (h, dk) (required)"},
       {"--w-v", "WV.npy", "w_v, (h,) (required)"}});
}

Command MhaCommand() {
  return LayerCommand(
      "mha",
      "attnpool mha --heads H --queries Q.npy --keys K.npy --values V.npy\n"
      "    --w-q WQ.npy --w-k WK.npy --w-v WV.npy --w-o WO.npy -o OUT.npy "
      "[options]\n\n"
      "Multi-head attention: OUT = concat_h(sdpa(Q W_q^h + b_q^h, K W_k^h + "
      "b_k^h,\nV W_v^h + b_v^h)) W_o + b_o, head h owning columns [h dh, "
      "(h+1) dh) of the\nprojections (PyTorch's nn.MultiheadAttention "
      "weights, transposed).\nQ (B, n, d_q), K (B, m, d_k), V (B, m, d_v), "
      "OUT (B, n, d_out), or 2-D arrays\nwithout B.",
      {{"--heads", "H", "the number of heads (required)"},
       {"--queries", "Q.npy", "queries, (B, n, d_q) or (n, d_q) (required)"},
       {"--keys", "K.npy", "keys, (B, m, d_k) or (m, d_k) (required)"},
       {"--values", "V.npy", "values, (B, m, d_v) or (m, d_v) (required)"},
       kOut,
       {"--w-q", "WQ.npy", "(d_q, H dh) (required)"},
       {"--w-k", "WK.npy", "(d_k, H dh) (required)"},
       {"--w-v", "WV.npy", "(d_v, H dv) (required)"},
       {"--w-o", "WO.npy", "(H dv, d_out) (required)"},
       {"--b-q", "BQ.npy", "bias of the query projection, (H dh,)"},
       {"--b-k", "BK.npy", "bias of the key projection, (H dh,)"},
       {"--b-v", "BV.npy", "bias of the value projection, (H dv,)"},
       {"--b-o", "BO.npy", "bias of the output projection, (d_out,)"}});
}

// A float array seen as a (batch, heads, rows, cols) tensor: 2-D arrays are
// (1, 1, rows, cols); 3-D ones (batch, 1, rows, cols) where `ranks` allows 3
// (multi-head attention's sequences); 4-D ones as they are.
struct InputTensor {
  std::string option, path;
  NpyArray array;
  size_t batch = 1, heads = 1, rows = 0, cols = 0;

  size_t rank() const { return array.shape.size(); }
  std::string Label() const { return option + " " + path; }
  std::string Describe() const {
    return Label() + " (shape " + ShapeText(array.shape) + ")";
  }
  template <typename T>
  attnpool::TensorView<const T> View() const {
    return attnpool::dense_tensor(array.data<T>(), batch, heads, rows, cols);
  }
};

InputTensor LoadTensor(const std::string& option, const std::string& path,
                       size_t high_rank) {
  InputTensor tensor{option, path, Load(option, path)};
  RequireFloat(tensor.Label(), tensor.array);
  const auto& shape = tensor.array.shape;
  if (shape.size() == 2) {
    tensor.rows = shape[0];
    tensor.cols = shape[1];
  } else if (shape.size() == 3 && high_rank == 3) {
    tensor.batch = shape[0];
    tensor.rows = shape[1];
    tensor.cols = shape[2];
  } else if (shape.size() == 4 && high_rank == 4) {
    tensor.batch = shape[0];
    tensor.heads = shape[1];
    tensor.rows = shape[2];
    tensor.cols = shape[3];
  } else {
    throw CliError{tensor.Describe() + ": expected a 2-D or " +
                   std::to_string(high_rank) + "-D array, not " +
                   std::to_string(shape.size()) + "-D"};
  }
  return tensor;
}

void RequireSameRank(const InputTensor& reference, const InputTensor& other) {
  if (other.rank() != reference.rank()) {
    throw CliError{other.Describe() + " is " + std::to_string(other.rank()) +
                   "-D but " + reference.Describe() + " is " +
                   std::to_string(reference.rank()) + "-D"};
  }
}

// The masks of a layer call over `batch` entries, `heads` query heads, n
// queries and m keys, as arrays read from their files.
struct LayerMask {
  std::vector<size_t> lengths;
  bool has_lengths = false, lengths_per_query = false;
  bool causal = false;
  std::ptrdiff_t causal_offset = 0;
  std::optional<NpyArray> bias, visible;
  size_t bias_batch = 1, bias_heads = 1, visible_batch = 1, visible_heads = 1;
  size_t n = 0, m = 0;

  template <typename T>
  attnpool::AttentionMask<T> Get() const {
    attnpool::AttentionMask<T> mask;
    if (has_lengths) mask.valid_lengths = lengths.data();
    mask.lengths_per_query = lengths_per_query;
    mask.causal = causal;
    mask.causal_offset = causal_offset;
    if (bias) {
      mask.bias =
          attnpool::dense_tensor(bias->data<T>(), bias_batch, bias_heads, n, m);
    }
    if (visible) {
      mask.visible = attnpool::dense_tensor(visible->data<uint8_t>(),
                                            visible_batch, visible_heads, n, m);
    }
    return mask;
  }
};

// The (batch, heads) of a --bias or --visible array of shape (n, m) or
// (B or 1, H or 1, n, m).
void MaskExtents(const std::string& label, const std::vector<size_t>& shape,
                 size_t batch, size_t heads, size_t n, size_t m,
                 size_t* mask_batch, size_t* mask_heads) {
  const bool matrix = shape.size() == 2 && shape[0] == n && shape[1] == m;
  const bool tensor =
      shape.size() == 4 && (shape[0] == 1 || shape[0] == batch) &&
      (shape[1] == 1 || shape[1] == heads) && shape[2] == n && shape[3] == m;
  if (!matrix && !tensor) {
    const std::string nm = std::to_string(n) + ", " + std::to_string(m);
    throw CliError{label + ": shape " + ShapeText(shape) + ", expected (" + nm +
                   ") or (1 or " + std::to_string(batch) + ", 1 or " +
                   std::to_string(heads) + ", " + nm +
                   "): (batch, heads,) queries x keys"};
  }
  *mask_batch = tensor ? shape[0] : 1;
  *mask_heads = tensor ? shape[1] : 1;
}

// Reads the mask options of `heads` query heads; 2-D inputs are one
// sequence.
LayerMask LoadLayerMask(const Arguments& arguments, const InputTensor& queries,
                        const InputTensor& keys, size_t heads) {
  LayerMask mask;
  const size_t batch = queries.batch, n = queries.rows, m = keys.rows;
  const bool flat = queries.rank() == 2;
  mask.n = n;
  mask.m = m;
  ParseCausal(arguments, &mask.causal, &mask.causal_offset);
  if (const auto path = arguments.Get("--valid-lengths")) {
    const std::string label = "--valid-lengths " + *path;
    const NpyArray array = Load("--valid-lengths", *path);
    const auto& shape = array.shape;
    if (flat ? shape.size() == 1 && shape[0] == n
             : shape.size() == 2 && shape[0] == batch && shape[1] == n) {
      mask.lengths_per_query = true;
    } else if (flat || shape.size() != 1 || shape[0] != batch) {
      throw CliError{label + ": shape " + ShapeText(shape) + ", expected " +
                     (flat ? "(" + std::to_string(n) + ",): one entry per query"
                           : "(" + std::to_string(batch) +
                                 ",): one entry per batch "
                                 "entry, or (" +
                                 std::to_string(batch) + ", " +
                                 std::to_string(n) + "): one per query")};
    }
    mask.lengths = LengthEntries(label, array, m);
    mask.has_lengths = true;
  }
  if (const auto path = arguments.Get("--bias")) {
    const std::string label = "--bias " + *path;
    mask.bias = Load("--bias", *path);
    RequireFloat(label, *mask.bias);
    RequireTypeOf(queries, label, mask.bias->type);
    MaskExtents(label, mask.bias->shape, batch, heads, n, m, &mask.bias_batch,
                &mask.bias_heads);
  }
  if (const auto path = arguments.Get("--visible")) {
    const std::string label = "--visible " + *path;
    mask.visible = LoadVisible(*path);
    MaskExtents(label, mask.visible->shape, batch, heads, n, m,
                &mask.visible_batch, &mask.visible_heads);
  }
  return mask;
}

std::string TensorShapeText(const InputTensor& queries, const InputTensor& keys,
                            const InputTensor& values) {
  return "B=" + std::to_string(queries.batch) +
         " H=" + std::to_string(queries.heads) +
         " n=" + std::to_string(queries.rows) +
         " m=" + std::to_string(keys.rows) +
         " d=" + std::to_string(queries.cols) +
         " dv=" + std::to_string(values.cols);
}

// Queries, keys and values of an attention layer: one dtype and rank, one
// batch, a value per key, keys and values with the same heads.
struct LayerInputs {
  InputTensor queries, keys, values;
};

// --queries, --keys and --values are given (checked before a layer's own
// options; LoadLayerInputs reads them).
void RequireLayerInputs(const Arguments& arguments) {
  for (const char* option : {"--queries", "--keys", "--values"}) {
    arguments.Required(option);
  }
}

LayerInputs LoadLayerInputs(const Arguments& arguments, size_t high_rank) {
  LayerInputs inputs{
      LoadTensor("--queries", arguments.Required("--queries"), high_rank),
      LoadTensor("--keys", arguments.Required("--keys"), high_rank),
      LoadTensor("--values", arguments.Required("--values"), high_rank)};
  const InputTensor &queries = inputs.queries, &keys = inputs.keys,
                    &values = inputs.values;
  for (const InputTensor* other : {&keys, &values}) {
    RequireSameType(queries, *other);
    RequireSameRank(queries, *other);
    RequireExtent(*other, "batch entries", other->batch, queries.batch,
                  "(the batch of " + queries.Describe() + ")");
  }
  RequireRowPerKey(keys, values);
  RequireExtent(values, "heads", values.heads, keys.heads,
                "(the heads of " + keys.Describe() + ")");
  return inputs;
}

// The shape of a layer's output: the queries' with `cols` last.
std::vector<size_t> OutputShape(const InputTensor& queries, size_t cols) {
  std::vector<size_t> shape = queries.array.shape;
  shape.back() = cols;
  return shape;
}

// Runs one layer call into a new output, the queries' batch, heads and rows
// of `cols` columns, then writes it and the timing.
template <typename T, class Call>
int RunLayer(const Run& run, const std::string& out_path,
             const InputTensor& queries, size_t cols, const std::string& shape,
             const Call& call) {
  Results results{out_path,
                  attnpool_tools::MakeNpyArray(queries.array.type,
                                               OutputShape(queries, cols))};
  const auto out =
      attnpool::dense_tensor(results.out.mutable_data<T>(), queries.batch,
                             queries.heads, queries.rows, cols);
  const auto start = Clock::now();
  try {
    call(out);
  } catch (const attnpool::Error& error) {
    throw LibraryError(error);
  }
  return Finish(run, results, Clock::now() - start, shape);
}

int Sdpa(const Arguments& arguments) {
  RequireLayerInputs(arguments);
  const std::string out_path = arguments.Required("-o");
  const RunSettings settings = ReadSettings(arguments);
  const std::optional<double> scale = NumberOption(arguments, "--scale");
  const auto empty_rows = ParseEmptyRows(arguments);
  ApplyIsa(arguments);

  const auto read_start = Clock::now();
  const LayerInputs inputs = LoadLayerInputs(arguments, 4);
  const InputTensor &queries = inputs.queries, &keys = inputs.keys,
                    &values = inputs.values;
  RequireSameColumns(queries, keys);
  const LayerMask mask = LoadLayerMask(arguments, queries, keys, queries.heads);
  const Run run{"sdpa", settings, Clock::now() - read_start};
  return WithElementType(queries.array.type, [&](auto zero) {
    using T = decltype(zero);
    return RunLayer<T>(run, out_path, queries, values.cols,
                       TensorShapeText(queries, keys, values),
                       [&](attnpool::TensorView<T> out) {
                         attnpool::scaled_dot_product_attention(
                             queries.View<T>(), keys.View<T>(),
                             values.View<T>(), out, mask.Get<T>(), scale,
                             empty_rows, settings.execution);
                       });
  });
}

int Additive(const Arguments& arguments) {
  RequireLayerInputs(arguments);
  const std::string out_path = arguments.Required("-o");
  const std::string w_q_path = arguments.Required("--w-q");
  const std::string w_k_path = arguments.Required("--w-k");
  const std::string w_v_path = arguments.Required("--w-v");
  const RunSettings settings = ReadSettings(arguments);
  const auto empty_rows = ParseEmptyRows(arguments);
  ApplyIsa(arguments);

  const auto read_start = Clock::now();
  const LayerInputs inputs = LoadLayerInputs(arguments, 4);
  const InputTensor &queries = inputs.queries, &keys = inputs.keys,
                    &values = inputs.values;
  const InputMatrix w_q = LoadMatrix("--w-q", w_q_path);
  const InputMatrix w_k = LoadMatrix("--w-k", w_k_path);
  const InputMatrix w_v = LoadMatrix("--w-v", w_v_path);
  for (const InputMatrix* weight : {&w_q, &w_k, &w_v}) {
    RequireSameType(queries, *weight);
  }
  RequireSameColumns(queries, w_q);
  RequireSameColumns(keys, w_k);
  RequireExtent(w_k, "rows", w_k.rows, w_q.rows,
                "(the rows of " + w_q.Describe() + ")");
  RequireShape(w_v, {w_q.rows}, "one entry per row of " + w_q.Label());
  const LayerMask mask = LoadLayerMask(arguments, queries, keys, queries.heads);
  const Run run{"additive", settings, Clock::now() - read_start};
  return WithElementType(queries.array.type, [&](auto zero) {
    using T = decltype(zero);
    attnpool::AdditiveWeights<T> weights;
    weights.w_q = View<T>(w_q);
    weights.w_k = View<T>(w_k);
    weights.w_v = w_v.array.data<T>();
    return RunLayer<T>(run, out_path, queries, values.cols,
                       TensorShapeText(queries, keys, values) +
                           " h=" + std::to_string(w_q.rows),
                       [&](attnpool::TensorView<T> out) {
                         attnpool::additive_attention(
                             weights, queries.View<T>(), keys.View<T>(),
                             values.View<T>(), out, mask.Get<T>(), empty_rows,
                             settings.execution);
                       });
  });
}

int Mha(const Arguments& arguments) {
  const std::string heads_text = arguments.Required("--heads");
  RequireLayerInputs(arguments);
  const std::string out_path = arguments.Required("-o");
  const char* const weight_options[4] = {"--w-q", "--w-k", "--w-v", "--w-o"};
  std::vector<std::string> weight_paths;
  for (const char* option : weight_options) {
    weight_paths.push_back(arguments.Required(option));
  }
  const long long heads = ParseInteger("--heads", heads_text);
  if (heads < 1) UsageError("--heads " + heads_text + ": must be at least 1");
  const RunSettings settings = ReadSettings(arguments);
  const auto empty_rows = ParseEmptyRows(arguments);
  ApplyIsa(arguments);

  const auto read_start = Clock::now();
  const LayerInputs inputs = LoadLayerInputs(arguments, 3);
  const InputTensor &queries = inputs.queries, &keys = inputs.keys,
                    &values = inputs.values;
  std::vector<InputMatrix> w;
  for (size_t k = 0; k < 4; ++k) {
    w.push_back(LoadMatrix(weight_options[k], weight_paths[k]));
    RequireSameType(queries, w.back());
  }
  const InputMatrix &w_q = w[0], &w_k = w[1], &w_v = w[2], &w_o = w[3];
  RequireColumnsOf(queries, w_q, "rows", w_q.rows);
  RequireColumnsOf(keys, w_k, "rows", w_k.rows);
  RequireColumnsOf(values, w_v, "rows", w_v.rows);
  RequireSameColumns(w_q, w_k);
  RequireColumnsOf(w_v, w_o, "rows", w_o.rows);
  // The biases: 1-D, as long as their projection's columns.
  const char* const bias_options[4] = {"--b-q", "--b-k", "--b-v", "--b-o"};
  std::optional<InputMatrix> b[4];
  for (size_t k = 0; k < 4; ++k) {
    const auto path = arguments.Get(bias_options[k]);
    if (!path) continue;
    b[k] = LoadMatrix(bias_options[k], *path);
    RequireSameType(queries, *b[k]);
    RequireShape(*b[k], {w[k].cols}, "one entry per column of " + w[k].Label());
  }
  const LayerMask mask =
      LoadLayerMask(arguments, queries, keys, static_cast<size_t>(heads));
  const Run run{"mha", settings, Clock::now() - read_start};
  return WithElementType(queries.array.type, [&](auto zero) {
    using T = decltype(zero);
    attnpool::MultiHeadWeights<T> weights;
    weights.heads = static_cast<size_t>(heads);
    weights.w_q = View<T>(w_q);
    weights.w_k = View<T>(w_k);
    weights.w_v = View<T>(w_v);
    weights.w_o = View<T>(w_o);
    const T** biases[4] = {&weights.b_q, &weights.b_k, &weights.b_v,
                           &weights.b_o};
    for (size_t k = 0; k < 4; ++k) {
      if (b[k]) *biases[k] = b[k]->array.data<T>();
    }
    return RunLayer<T>(
        run, out_path, queries, w_o.cols,
        "B=" + std::to_string(queries.batch) + " heads=" +
            std::to_string(heads) + " n=" + std::to_string(queries.rows) +
            " m=" + std::to_string(keys.rows) + " d=" +
            std::to_string(queries.cols) + " d_out=" + std::to_string(w_o.cols),
        [&](attnpool::TensorView<T> out) {
          attnpool::multi_head_attention(
              weights, queries.View<T>(), keys.View<T>(), values.View<T>(), out,
              mask.Get<T>(), empty_rows, settings.execution);
        });
  });
}

// ---------------------------------------------------------------- targets

int Targets() {
  const auto join = [](const std::vector<std::string>& names) {
    std::string text;
    for (const auto& name : names) text += (text.empty() ? "" : " ") + name;
    return text;
  };
  std::printf("compiled:  %s\n", join(attnpool::compiled_targets()).c_str());
  std::printf("supported: %s\n", join(attnpool::supported_targets()).c_str());
  std::printf("active:    %s\n", attnpool::active_target().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command.empty() || command == "-h" || command == "--help" ||
        command == "help") {
      std::fputs(kUsage, command.empty() ? stderr : stdout);
      return command.empty() ? kExitUsage : 0;
    }
    if (command == "--version") {
      std::printf("attnpool %s\n", ATTNPOOL_VERSION);
      return 0;
    }
    // The commands with options: their options and help, what they run.
    const struct {
      const char* name;
      Command (*make)();
      int (*run)(const Arguments&);
    } commands[] = {
        {"pool", PoolCommand, Pool},
        {"distances", DistancesCommand, Distances},
        {"regress", RegressCommand, Regress},
        {"sdpa", SdpaCommand, Sdpa},
        {"additive", AdditiveCommand, Additive},
        {"mha", MhaCommand, Mha},
    };
    for (const auto& entry : commands) {
      if (command == entry.name) {
        return RunCommand(entry.make(), entry.run, argc, argv);
      }
    }
    if (command == "targets") return Targets();
    UsageError("unknown command '" + command +
               "' (commands: pool, distances, regress, sdpa, additive, mha, "
               "targets; see attnpool --help)");
  } catch (const CliError& error) {
    std::fprintf(stderr, "attnpool: error: %s\n", error.message.c_str());
    return error.exit_code;
  } catch (const attnpool::Error& error) {  // e.g. ATTNPOOL_ISA
    std::fprintf(stderr, "attnpool: error: %s\n",
                 LibraryError(error).message.c_str());
    return kExitInput;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "attnpool: error: out of memory\n");
    return kExitInput;
  }
}
