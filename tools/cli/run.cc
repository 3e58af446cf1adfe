#include "tools/cli/run.h"

#include "tools/cli/ranks.h"

#include <unistd.h>

#include <cstdio>

namespace attnpool_cli {

Progress::Progress(const char* command, size_t total,
                   const RunSettings& settings)
    : command_(command),
      total_(total),
      enabled_(!settings.quiet &&
               (settings.force_progress || isatty(STDERR_FILENO))),
      forced_(settings.force_progress),
      start_(Clock::now()) {}

void Progress::Update(size_t done) {
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

void Progress::Finish() {
  if (shown_) std::fprintf(stderr, "\n");
}

size_t RowsPerChunk(size_t key_count, const RunSettings& settings) {
  if (settings.rows_per_call > 0) return settings.rows_per_call;
  const size_t rows = (size_t{32} << 20) / std::max<size_t>(key_count, 1);
  return std::max<size_t>(96, rows / 96 * 96);
}

namespace {

// --isa: forces the library's target. (A bad ATTNPOOL_ISA or
// ATTNPOOL_TUNING is the environment's error, not the option's.)
void ApplyIsa(const Arguments& arguments) {
  if (const auto isa = arguments.Get("--isa")) {
    attnpool::active_target();
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

}  // namespace

InputReading::InputReading(const Arguments& arguments,
                           const RunSettings& settings)
    : arguments_(arguments), settings_(settings) {
  ApplyIsa(arguments);
  start_ = Clock::now();
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

namespace {

// The option of `argument` in `options`, trying "a.b.c", then "a.b", "a"
// (an entry's "a.b[3]" as "a.b").
std::string OptionIn(const std::map<std::string, std::string>& options,
                     const std::string& argument) {
  for (auto prefix = argument.substr(0, argument.find('['));;) {
    const auto found = options.find(prefix);
    if (found != options.end()) return found->second;
    const auto dot = prefix.rfind('.');
    if (dot == std::string::npos) return "";
    prefix = prefix.substr(0, dot);
  }
}

}  // namespace

std::string OptionOf(const Command& command, const std::string& argument) {
  std::map<std::string, std::string> options;
  for (const auto& option : command.options) {
    for (const auto& feed : option.feeds) options.emplace(feed, option.name);
  }
  return OptionIn(options, argument);
}

CliError LibraryError(const attnpool::Error& error, const Command* command,
                      const std::map<std::string, std::string>& overrides) {
  std::string option = OptionIn(overrides, error.argument());
  if (option.empty() && command) option = OptionOf(*command, error.argument());
  std::string what = error.what();
  if (!option.empty()) what += " (from " + option + ")";
  return {what.rfind("attnpool: ", 0) == 0 ? what.substr(10) : what};
}

Results PoolResults(const std::string& out_path,
                    const std::optional<std::string>& weights_path, size_t rows,
                    const InputMatrix& values, size_t key_count, NpyType type) {
  Results results{
      out_path,
      MakeResult("-o", type,
                 values.one_dimensional
                     ? std::vector<size_t>{rows}
                     : std::vector<size_t>{rows, values.cols}),
      weights_path,
      MakeResult("--weights", type,
                 std::vector<size_t>{weights_path ? rows : 0, key_count})};
  CheckResults(results);
  return results;
}

namespace {

std::vector<attnpool_tools::OutputFile> OutputsOf(const Results& results) {
  std::vector<attnpool_tools::OutputFile> files{
      attnpool_tools::NpyOutput("-o", results.out_path, results.out)};
  if (results.weights_path) {
    files.push_back(attnpool_tools::NpyOutput(
        "--weights", *results.weights_path, results.weights));
  }
  return files;
}

}  // namespace

void CheckResults(const Results& results) {
  // Rank 0 writes them (under mpirun every rank learns of its refusal).
  OnEveryRank([&] {
    if (CurrentRanks().rank != 0) return;
    try {
      attnpool_tools::CheckOutputs(OutputsOf(results));
    } catch (const attnpool_tools::OutputError& error) {
      throw CliError{error.what()};
    }
  });
}

namespace {

std::string Milliseconds(Clock::duration duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f ms",
                std::chrono::duration<double, std::milli>(duration).count());
  return text;
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
      (std::to_string(attnpool::thread_count(settings.execution)) +
       " threads")
          .c_str(),
      Milliseconds(read).c_str(), Milliseconds(write).c_str());
}

}  // namespace

int Finish(const Run& run, const Results& results, Clock::duration compute_time,
           const std::string& shape) {
  const auto write_start = Clock::now();
  try {
    attnpool_tools::CommitOutputs(OutputsOf(results));
  } catch (const attnpool_tools::OutputError& error) {
    throw CliError{error.what()};
  }
  if (run.settings.time) {
    PrintTiming(run.command.name, shape, NpyTypeName(results.out.type),
                run.read_time, compute_time, Clock::now() - write_start,
                run.settings);
  }
  return 0;
}

}  // namespace attnpool_cli
