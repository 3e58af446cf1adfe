// The command line under an MPI launcher (mpirun -np P attnpool pool ...):
// which rank this process is, how the ranks agree on errors, and the
// split-keys pooling across them. Built with MPI where attnpool::mpi is;
// without it, a launch on several ranks is refused.
#pragma once

#include <attnpool/attnpool.h>

#include <functional>
#include <string>
#include <vector>

#include "tools/cli/options.h"

namespace attnpool_cli {

struct Ranks {
  bool launched = false;  // started by an MPI launcher
  int rank = 0, size = 1;
};

// Initializes MPI for the process's lifetime when an MPI launcher started
// it (its environment says so), and finalizes it at the end.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

// This process's place (one rank of one when not launched by MPI).
const Ranks& CurrentRanks();

// Under a launch: runs `local` on every rank, then agrees; when any rank
// failed (a CliError, a library error, a file error, no memory), every rank
// throws CliError with the lowest failing rank's message (naming it) and
// exit code, marked `agreed`. Otherwise runs `local`.
void OnEveryRank(const std::function<void()>& local);

// attnpool::mpi::attention_pool on MPI_COMM_WORLD, the result on rank 0
// (`reduction`: "tree" or "rank_order"); float keys and values may be
// stored narrow. Library errors come back as
// agreed CliErrors naming `command`'s options.
void PoolAcrossRanks(const Command& command, const attnpool::PoolSpec& spec,
                     attnpool::ConstMatrixView<float> queries,
                     const attnpool::ElementRows& keys,
                     const attnpool::ElementRows& values,
                     attnpool::MatrixView<float> out,
                     const attnpool::Mask<float>& mask,
                     const std::string& reduction,
                     const attnpool::Execution& execution);
void PoolAcrossRanks(const Command& command, const attnpool::PoolSpec& spec,
                     attnpool::ConstMatrixView<double> queries,
                     attnpool::ConstMatrixView<double> keys,
                     attnpool::ConstMatrixView<double> values,
                     attnpool::MatrixView<double> out,
                     const attnpool::Mask<double>& mask,
                     const std::string& reduction,
                     const attnpool::Execution& execution);

// Bytes this process has read through read() and its kin so far
// (/proc/self/io rchar).
unsigned long long BytesRead();

// With ATTNPOOL_IO_REPORT=DIR: writes DIR/rank<r>.txt, "read <bytes>" (the
// bytes read while loading the inputs). For the test that no rank reads
// beyond its part of the files.
void ReportInputReading(unsigned long long bytes_read);

}  // namespace attnpool_cli
