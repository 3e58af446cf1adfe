// Running a command once its options are read: the run options (--isa,
// --threads, --time, --progress, ...), the progress display, the query rows
// in chunks, the library's errors reported under the options they come
// from, and writing the results.
#pragma once

#include <attnpool/attnpool.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "tools/cli/arrays.h"
#include "tools/cli/options.h"

namespace attnpool_cli {

using Clock = std::chrono::steady_clock;

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
  Progress(const char* command, size_t total, const RunSettings& settings);

  void Update(size_t done);
  void Finish();

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
size_t RowsPerChunk(size_t key_count, const RunSettings& settings);

// --threads, --time, --progress, --quiet and --rows-per-call.
RunSettings ReadSettings(const Arguments& arguments);

// The option of `command` whose value feeds the library's `argument`
// (OptionInfo::feeds), trying "a.b.c", then "a.b", "a"; "" if none.
std::string OptionOf(const Command& command, const std::string& argument);

// `error` as the command line reports it, "(from OPTION)" added where the
// option is known: looked up in `overrides` (argument name -> option: what
// only the run knows), then in the options of `command` (if any).
CliError LibraryError(const attnpool::Error& error,
                      const Command* command = nullptr,
                      const std::map<std::string, std::string>& overrides = {});

// Calls `compute(T())` with T the element type of `type`: float or double.
template <class Compute>
int WithElementType(NpyType type, const Compute& compute) {
  return type == NpyType::float32 ? compute(float()) : compute(double());
}

// A command's run once its inputs are read: what its progress display,
// --time and its error messages need.
struct Run {
  const Command& command;
  RunSettings settings;
  Clock::duration read_time;
};

// The reading of a command's input files, once its options are read: the
// constructor applies --isa and starts the clock of --time's "read";
// Compute stops it.
class InputReading {
 public:
  InputReading(const Arguments& arguments, const RunSettings& settings);

  // Returns compute(T(), run): T the element type of `type`, the inputs'
  // dtype; `run` the command's run, its inputs read.
  template <class Computation>
  int Compute(NpyType type, const Computation& compute) const {
    const Run run{arguments_.command(), settings_, Clock::now() - start_};
    return WithElementType(type, [&](auto zero) { return compute(zero, run); });
  }

 private:
  const Arguments& arguments_;
  const RunSettings settings_;
  Clock::time_point start_;  // after --isa is applied
};

// Runs `compute(&progress)` for `rows` queries, reporting a library error
// under the option it comes from (looked up in `overrides` first), and
// returns the time it took.
template <class Compute>
Clock::duration ComputeWithProgress(
    const Run& run, size_t rows, const Compute& compute,
    const std::map<std::string, std::string>& overrides = {}) {
  const auto start = Clock::now();
  Progress progress(run.command.name, rows, run.settings);
  try {
    compute(&progress);
  } catch (const attnpool::Error& error) {
    progress.Finish();
    throw LibraryError(error, &run.command, overrides);
  }
  progress.Finish();
  return Clock::now() - start;
}

// Calls `block(begin, count)` on the query rows [0, rows) in calls of
// RowsPerChunk rows, updating `progress` after each; with no rows, once on
// none, which still checks the arguments.
// At most kMaxChunks calls: rows of no column (a .npy header may claim
// 2^63 of them) cost the library nothing, but a call each would.
constexpr size_t kMaxChunks = size_t{1} << 16;
template <class Block>
void ForEachChunk(size_t rows, size_t key_count, const RunSettings& settings,
                  Progress* progress, const Block& block) {
  const size_t chunk =
      std::max(RowsPerChunk(key_count, settings), rows / kMaxChunks + 1);
  if (rows == 0) block(0, 0);
  for (size_t begin = 0; begin < rows;) {  // (no overflow near SIZE_MAX)
    const size_t count = std::min(chunk, rows - begin);
    block(begin, count);
    begin += count;
    progress->Update(begin);
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

// The results of pooling `rows` queries over `key_count` keys: rows x the
// columns of `values` (`rows` entries when `values` is 1-D), and the rows x
// key_count weights when --weights asks for them (else 0 x key_count: the
// fused kernel forms none), both of dtype `type` (the queries').
Results PoolResults(const std::string& out_path,
                    const std::optional<std::string>& weights_path, size_t rows,
                    const InputMatrix& values, size_t key_count, NpyType type);

// Refuses (CliError) outputs that cannot be written (output_files.h: a
// directory, a read-only file, an input, two names of one file), before
// anything is computed; Finish writes them all or none.
void CheckResults(const Results& results);

// Rows [begin, begin + count) of the weights of `results`, or a null view
// when they are not asked for.
template <typename T>
attnpool::MatrixView<T> WeightRows(Results& results, size_t begin,
                                   size_t count) {
  return results.weights_path ? MatrixRows<T>(results.weights, begin, count)
                              : attnpool::MatrixView<T>();
}

// Writes `results`, then with --time how long the run took.
int Finish(const Run& run, const Results& results, Clock::duration compute_time,
           const std::string& shape);

}  // namespace attnpool_cli
