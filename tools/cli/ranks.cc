#include "tools/cli/ranks.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>

#include "tools/cli/run.h"
#include "tools/npy.h"

#if ATTNPOOL_CLI_MPI
#include <attnpool/mpi.h>
#include <mpi.h>
#endif

namespace attnpool_cli {
namespace {

// The world size an MPI launcher gave this process (Open MPI, or the PMI
// of MPICH and Slurm), or 0 when none launched it.
int LaunchedSize() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

Ranks ranks;

}  // namespace

const Ranks& CurrentRanks() { return ranks; }

#if ATTNPOOL_CLI_MPI

MpiSession::MpiSession(int* argc, char*** argv) {
  if (LaunchedSize() == 0) return;
  MPI_Init(argc, argv);
  ranks.launched = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &ranks.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks.size);
}

MpiSession::~MpiSession() {
  if (ranks.launched) MPI_Finalize();
}

void OnEveryRank(const std::function<void()>& local) {
  if (!ranks.launched) return local();
  bool failed = true;
  std::vector<std::string> texts(2);  // message, exit code
  try {
    local();
    failed = false;
  } catch (const CliError& error) {
    texts = {error.message, std::to_string(error.exit_code)};
  } catch (const attnpool::Error& error) {
    texts = {LibraryError(error).message, std::to_string(kExitInput)};
  } catch (const attnpool_tools::NpyError& error) {
    texts = {error.what(), std::to_string(kExitInput)};
  } catch (const std::bad_alloc&) {
    texts = {"out of memory", std::to_string(kExitInput)};
  } catch (const std::exception& error) {
    texts = {error.what(), std::to_string(kExitInput)};
  } catch (...) {
    texts = {"an unknown exception", std::to_string(kExitInput)};
  }
  const auto first =
      attnpool::mpi::first_failure(MPI_COMM_WORLD, failed, texts);
  if (!first) return;
  CliError error{first->texts[0], std::atoi(first->texts[1].c_str())};
  if (first->rank != ranks.rank) {
    error.message =
        "rank " + std::to_string(first->rank) + ": " + error.message;
  }
  error.agreed = true;
  throw error;
}

namespace {

// Rows: the keys' and values' views (ElementRows for T = float).
template <typename T, typename Rows>
void Pool(const Command& command, const attnpool::PoolSpec& spec,
          attnpool::ConstMatrixView<T> queries, const Rows& keys,
          const Rows& values, attnpool::MatrixView<T> out,
          const attnpool::Mask<T>& mask, const std::string& reduction,
          const attnpool::Execution& execution) {
  attnpool::mpi::Options options;
  options.reduction = reduction == "rank_order"
                          ? attnpool::mpi::Reduction::rank_order
                          : attnpool::mpi::Reduction::tree;
  try {
    attnpool::mpi::attention_pool(MPI_COMM_WORLD, spec, queries, keys, values,
                                  out, mask, options, execution);
  } catch (const attnpool::Error& error) {
    CliError agreed = LibraryError(error, &command);
    agreed.agreed = true;  // attnpool::mpi throws on every rank
    throw agreed;
  }
}

}  // namespace

#else  // without MPI

MpiSession::MpiSession(int*, char***) {
  if (LaunchedSize() > 1) {
    std::fprintf(stderr,
                 "attnpool: error: started by an MPI launcher on %d ranks, "
                 "but this attnpool was built without MPI (install "
                 "libopenmpi-dev and rebuild)\n",
                 LaunchedSize());
    std::exit(kExitUsage);
  }
}

MpiSession::~MpiSession() = default;

void OnEveryRank(const std::function<void()>& local) { local(); }

namespace {

template <typename T, typename Rows>
void Pool(const Command&, const attnpool::PoolSpec&,
          attnpool::ConstMatrixView<T>, const Rows&, const Rows&,
          attnpool::MatrixView<T>, const attnpool::Mask<T>&, const std::string&,
          const attnpool::Execution&) {
  throw CliError{"this attnpool was built without MPI"};
}

}  // namespace

#endif

void PoolAcrossRanks(const Command& command, const attnpool::PoolSpec& spec,
                     attnpool::ConstMatrixView<float> queries,
                     const attnpool::ElementRows& keys,
                     const attnpool::ElementRows& values,
                     attnpool::MatrixView<float> out,
                     const attnpool::Mask<float>& mask,
                     const std::string& reduction,
                     const attnpool::Execution& execution) {
  Pool<float, attnpool::ElementRows>(command, spec, queries, keys, values, out,
                                     mask, reduction, execution);
}

void PoolAcrossRanks(const Command& command, const attnpool::PoolSpec& spec,
                     attnpool::ConstMatrixView<double> queries,
                     attnpool::ConstMatrixView<double> keys,
                     attnpool::ConstMatrixView<double> values,
                     attnpool::MatrixView<double> out,
                     const attnpool::Mask<double>& mask,
                     const std::string& reduction,
                     const attnpool::Execution& execution) {
  Pool<double, attnpool::ConstMatrixView<double>>(
      command, spec, queries, keys, values, out, mask, reduction, execution);
}

unsigned long long BytesRead() {
  std::ifstream io("/proc/self/io");
  std::string key;
  unsigned long long value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  return 0;
}

void ReportInputReading(unsigned long long bytes_read) {
  const char* directory = std::getenv("ATTNPOOL_IO_REPORT");
  if (directory == nullptr) return;
  std::ofstream report(std::string(directory) + "/rank" +
                       std::to_string(ranks.rank) + ".txt");
  report << "read " << bytes_read << "\n";
}

}  // namespace attnpool_cli
