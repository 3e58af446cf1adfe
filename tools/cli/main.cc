// attnpool: the command line. Runs attention pooling, the distance stage,
// regression and the attention layers on NumPy .npy files (see kUsage and
// the per-command help). A file per command (commands.h); what they share
// is in options.h (options, parsing, help), arrays.h (.npy inputs and
// outputs) and run.h (running, timing, the library's errors).
#include <attnpool/attnpool.h>

#include <cstdio>
#include <new>
#include <optional>
#include <string>

#include "tools/cli/commands.h"
#include "tools/cli/options.h"
#include "tools/cli/ranks.h"
#include "tools/cli/run.h"

namespace attnpool_cli {
namespace {

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

// Runs `command` on its options, or prints its help.
int RunCommand(const Command& command, int argc, char** argv) {
  const Arguments arguments(command, argc, argv);
  if (arguments.help()) {
    PrintHelp(command);
    return 0;
  }
  return command.run(arguments);
}

// Under mpirun on several ranks, where only 'pool' runs: every rank reads
// its command line, then the ranks agree before any reads a file, so that a
// rank whose command or options are wrong (or that asks for help) stops
// every rank with its message instead of leaving them waiting in the run's
// first collective.
int RunOnRanks(const std::string& command, int argc, char** argv) {
  const Command pool = PoolCommand();
  std::optional<Arguments> arguments;
  OnEveryRank([&] {
    if (command != pool.name) {
      throw CliError{
          "under mpirun only 'pool' runs (each rank on its part "
          "of the keys); run '" +
              command + "' as one process",
          kExitUsage};
    }
    arguments.emplace(pool, argc, argv);
    if (arguments->help()) {
      throw CliError{
          "--help: under mpirun; run 'attnpool pool --help' as "
          "one process",
          kExitUsage};
    }
  });
  return pool.run(*arguments);
}

// The command line's main.
int Main(int argc, char** argv) {
  const MpiSession mpi(&argc, &argv);
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (CurrentRanks().size > 1) return RunOnRanks(command, argc, argv);
    if (command.empty() || command == "-h" || command == "--help" ||
        command == "help") {
      std::fputs(kUsage, command.empty() ? stderr : stdout);
      return command.empty() ? kExitUsage : 0;
    }
    if (command == "--version") {
      std::printf("attnpool %s\n", attnpool::version());
      return 0;
    }
    // The commands with options.
    for (Command (*make)() : {PoolCommand, DistancesCommand, RegressCommand,
                              SdpaCommand, AdditiveCommand, MhaCommand}) {
      const Command entry = make();
      if (command == entry.name) return RunCommand(entry, argc, argv);
    }
    if (command == "targets") return Targets();
    UsageError("unknown command '" + command +
               "' (commands: pool, distances, regress, sdpa, additive, mha, "
               "targets; see attnpool --help)");
  } catch (const CliError& error) {
    // An error every rank has is reported once, by rank 0.
    if (!error.agreed || CurrentRanks().rank == 0) {
      std::fprintf(stderr, "attnpool: error: %s\n", error.message.c_str());
    }
    return error.exit_code;
  } catch (const attnpool::Error& error) {
    // Outside a command's run (e.g. ATTNPOOL_ISA for 'attnpool targets'):
    // no option to name.
    std::fprintf(stderr, "attnpool: error: %s\n",
                 LibraryError(error).message.c_str());
    return kExitInput;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "attnpool: error: out of memory\n");
    return kExitInput;
  }
}

}  // namespace
}  // namespace attnpool_cli

int main(int argc, char** argv) { return attnpool_cli::Main(argc, argv); }
