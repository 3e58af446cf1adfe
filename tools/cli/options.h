// The command line's options: what each command takes (OptionInfo, Command),
// the options several commands share, parsing them (Arguments, ParseDouble,
// ...), the help, and the errors a command reports (CliError).
#pragma once

#include <attnpool/attnpool.h>

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace attnpool_cli {

// Whether files of an element type with this .npy type string (element.h's
// table) hold its bit patterns in unsigned integers (bfloat16's '<u2',
// float8's '|u1'): the type is then named with a dtype option, not read off
// the file.
inline bool HoldsBitPatterns(const char* npy_descr) {
  return npy_descr[1] == 'u';
}

constexpr int kExitUsage = 2;  // the command line is wrong
constexpr int kExitInput = 1;  // a file or the computation is wrong

// A problem to report: `message` is printed after "attnpool: error: ".
struct CliError {
  std::string message;
  int exit_code = kExitInput;
  // Under mpirun: every rank has this error (ranks.h), so rank 0 alone
  // reports it.
  bool agreed = false;
};

[[noreturn]] void UsageError(const std::string& message);

// ---------------------------------------------------------------- options

struct OptionInfo {
  const char* name;   // "--kernel"
  const char* value;  // "NAME", or nullptr for a flag
  const char* help;
  // The library's argument names this option's value feeds ("kernel",
  // "mask.bias"): an attnpool::Error about one of them, or about a part of
  // one ("mask.bias.rows"), is reported "(from NAME)" (LibraryError, run.h).
  std::vector<std::string> feeds = {};
};

class Arguments;

// A command with options: their help, and what it runs on them (main.cc
// prints the help for -h or --help, else calls `run`).
struct Command {
  const char* name;
  const char* summary;
  std::vector<OptionInfo> options;
  int (*run)(const Arguments& arguments);
};

// A command whose options are the lists of `option_lists`, in order.
Command MakeCommand(const char* name, const char* summary,
                    const std::vector<std::vector<OptionInfo>>& option_lists,
                    int (*run)(const Arguments& arguments));

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
// Regression's kernels: those of distances.
inline constexpr auto kOfDistances =
    [](const attnpool::KernelProperties& kernel) {
      return attnpool::needs_distance(kernel.kernel);
    };

// The help of the options that name an entry of a table, from the tables.
extern const std::string kPoolKernelHelp;
extern const std::string kRegressKernelHelp;
extern const std::string kDistanceHelp;
extern const std::string kNormalizationHelp;

// Options of several commands. These (and the strings above) are
// initialized dynamically: use them from functions, as the XxxCommand()
// functions do, not to initialize a namespace-scope object of another file.
extern const OptionInfo kQueries;
extern const OptionInfo kKeys;
extern const OptionInfo kOut;
extern const OptionInfo kDistance;
// Options of every command, after its own.
extern const std::vector<OptionInfo> kRunOptions;
// The element type of reduced-precision keys (distances): --keys-dtype,
// --key-scales.
extern const std::vector<OptionInfo> kNarrowKeyOptions;
// Those of reduced-precision queries, keys and values (pool, sdpa):
// --queries-dtype, --query-scales, kNarrowKeyOptions, --values-dtype,
// --value-scales.
extern const std::vector<OptionInfo> kReducedPrecisionOptions;

// --empty-rows (ParseEmptyRows), `help` saying when a row is empty.
OptionInfo EmptyRowsOption(const char* help);

// `text` in lines of at most `width` characters, each after `indent`
// spaces but the first.
std::string Wrap(const std::string& text, size_t indent, size_t width);

void PrintHelp(const Command& command);

size_t EditDistance(const std::string& a, const std::string& b);

// ---------------------------------------------------------------- parsing

// Options given on the command line: name -> value ("" for flags).
class Arguments {
 public:
  Arguments(const Command& command, int argc, char** argv);

  const Command& command() const { return command_; }
  bool help() const { return help_; }
  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  std::optional<std::string> Get(const std::string& name) const {
    const auto found = values_.find(name);
    if (found == values_.end()) return std::nullopt;
    return found->second;
  }
  // The value of a required option; reports it missing.
  std::string Required(const std::string& name) const;

 private:
  const OptionInfo* Find(const std::string& name) const;
  std::string Suggestion(const std::string& word) const;

  const Command& command_;
  bool help_ = false;
  std::map<std::string, std::string> values_;
};

// The required options `names` are given: the first missing one is
// reported. Commands check theirs first, in the order of their help.
void RequireOptions(const Arguments& arguments,
                    std::initializer_list<const char*> names);

double ParseDouble(const std::string& option, const std::string& text);

long long ParseInteger(const std::string& option, const std::string& text);

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
                                   const std::string& option);

// --empty-rows: nan (the default) or zero.
attnpool::EmptyRows ParseEmptyRows(const Arguments& arguments);

}  // namespace attnpool_cli
