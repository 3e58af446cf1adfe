// The reduction of shard states across ranks (include/attnpool/mpi.h,
// Options and Reduction), shared by split-keys pooling and distributed
// Nadaraya–Watson.
#pragma once

#include <attnpool/mpi.h>

#include <cstddef>
#include <vector>

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

// A rank's shard state and the memory its reduction needs, allocated
// together when constructed: construct it inside the call's Collectively,
// so that a rank out of memory throws on every rank instead of leaving the
// others waiting in the reduction.
template <typename T>
class StateReduction {
 public:
  StateReduction(MPI_Comm comm, const PoolSpec& spec, const Options& options,
                 size_t rows, size_t columns);

  // The state of no key, for the rank's partial pooling to fill.
  PoolPartial<T> state() { return state_.view(); }

  // Merges every rank's state (rank order = key order) as options say and
  // finishes the result into `out` where it is received. Collective;
  // called only after the ranks agreed that every state is valid.
  void ReduceAndFinish(MatrixView<T> out);

 private:
  void Reduce();

  MPI_Comm comm_;
  Options options_;
  StateWire wire_;
  OwnedState<T> state_;
  // rank_order on the root: the states merged so far and the next one.
  OwnedState<T> merged_, part_;
  std::vector<unsigned char> bytes_;  // the state on the wire
};

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
