// The reduction of shard states across ranks (include/attnpool/mpi.h,
// Options and Reduction), shared by split-keys pooling and distributed
// Nadaraya–Watson.
#pragma once

#include <attnpool/mpi.h>

#include "src/mpi/agreement.h"
#include "src/mpi/state_wire.h"

namespace attnpool {
namespace mpi {
namespace detail {

// The options every rank must share.
void AddOptions(SameEverywhere& same, const Options& options);
// Throws attnpool::Error for a root outside the communicator or an unknown
// reduction.
void CheckOptions(MPI_Comm comm, const Options& options);
// Whether this rank's `out` gets the result.
bool Receives(MPI_Comm comm, const Options& options);

// Merges every rank's `state` (rank order = key order) as options say and
// finishes the result into `out` where it is received. Collective; called
// only after the ranks agreed that every state is valid.
template <typename T>
void ReduceAndFinish(MPI_Comm comm, const PoolSpec& spec,
                     const Options& options, OwnedState<T>& state,
                     MatrixView<T> out);

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
