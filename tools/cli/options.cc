#include "tools/cli/options.h"

#include <attnpool/element.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace attnpool_cli {

void UsageError(const std::string& message) {
  throw CliError{message, kExitUsage};
}

// ---------------------------------------------------------------- options

namespace {
const auto kEvery = [](const auto&) { return true; };
}  // namespace

const std::string kPoolKernelHelp =
    TableNames(attnpool::kKernels, kEvery, "gaussian");
const std::string kRegressKernelHelp =
    TableNames(attnpool::kKernels, kOfDistances, "gaussian");
const std::string kDistanceHelp =
    TableNames(attnpool::kDistances, kEvery, "sqeuclidean");
const std::string kNormalizationHelp =
    "over the keys of each query: " +
    TableNames(attnpool::kNormalizations, kEvery, "sum");

const OptionInfo kQueries{
    "--queries", "Q.npy", "queries, n x d (required)", {"queries"}};
const OptionInfo kKeys{"--keys", "K.npy", "keys, m x d (required)", {"keys"}};
const OptionInfo kOut{"-o", "OUT.npy",
                      "where to write the result (required; also --out)"};
const OptionInfo kDistance{
    "--distance", "NAME", kDistanceHelp.c_str(), {"distance"}};

// The dtype options' help, from element.h's table: the types whose files
// hold bit patterns are named; the others are read as their .npy type.
const std::string& DtypeHelp() {
  static const std::string help = [] {
    std::string named, read;
    for (const auto& entry : attnpool::kElementTypes) {
      std::string& list = HoldsBitPatterns(entry.npy_descr) ? named : read;
      list += std::string(list.empty() ? "" : ", ") + entry.name + " '" +
              entry.npy_descr + "'";
    }
    return named + ": the file holds that type's bit patterns (" + read +
           " files need no option)";
  }();
  return help;
}
const char* const kScalesHelp =
    "row scales of a scaled element type, float32, the file's shape "
    "without its last axis: row j is S[j] * X[j]";

const std::vector<OptionInfo> kNarrowKeyOptions = {
    {"--keys-dtype", "NAME", DtypeHelp().c_str()},
    {"--key-scales", "S.npy", kScalesHelp}};

const std::vector<OptionInfo> kReducedPrecisionOptions = [] {
  static const std::string queries_dtype =
      "for the queries: " + DtypeHelp() +
      "; the scores of bfloat16 queries and keys use the CPU's bf16 "
      "dot-product instruction where it has one, see 'attnpool targets'";
  std::vector<OptionInfo> options = {
      {"--queries-dtype", "NAME", queries_dtype.c_str()},
      {"--query-scales", "S.npy", "the queries' row scales, likewise"}};
  options.insert(options.end(), kNarrowKeyOptions.begin(),
                 kNarrowKeyOptions.end());
  options.push_back({"--values-dtype", "NAME", "the same for the values"});
  options.push_back(
      {"--value-scales", "S.npy", "the values' row scales, likewise"});
  return options;
}();

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
     "call; at most 65536 calls)"},
};

OptionInfo EmptyRowsOption(const char* help) {
  return {"--empty-rows", "nan|zero", help};
}

Command MakeCommand(const char* name, const char* summary,
                    const std::vector<std::vector<OptionInfo>>& option_lists,
                    int (*run)(const Arguments& arguments)) {
  Command command{name, summary, {}, run};
  for (const auto& options : option_lists) {
    command.options.insert(command.options.end(), options.begin(),
                           options.end());
  }
  return command;
}

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

// ---------------------------------------------------------------- parsing

Arguments::Arguments(const Command& command, int argc, char** argv)
    : command_(command) {
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
      UsageError("unknown option '" + word + "' for 'attnpool " + command.name +
                 "'" + Suggestion(word));
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

std::string Arguments::Required(const std::string& name) const {
  const auto value = Get(name);
  if (!value) {
    UsageError(std::string("missing ") + name + " (see 'attnpool " +
               command_.name + " --help')");
  }
  return *value;
}

const OptionInfo* Arguments::Find(const std::string& name) const {
  for (const auto& option : command_.options)
    if (name == option.name) return &option;
  return nullptr;
}

std::string Arguments::Suggestion(const std::string& word) const {
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

void RequireOptions(const Arguments& arguments,
                    std::initializer_list<const char*> names) {
  for (const char* name : names) arguments.Required(name);
}

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

std::optional<double> NumberOption(const Arguments& arguments,
                                   const std::string& option) {
  const auto text = arguments.Get(option);
  if (!text) return std::nullopt;
  return ParseDouble(option, *text);
}

attnpool::EmptyRows ParseEmptyRows(const Arguments& arguments) {
  const std::string empty_rows = arguments.Get("--empty-rows").value_or("nan");
  if (empty_rows == "nan") return attnpool::EmptyRows::nan;
  if (empty_rows == "zero") return attnpool::EmptyRows::zero;
  UsageError("--empty-rows " + empty_rows + ": use nan or zero");
}

}  // namespace attnpool_cli
