#include "src/mpi/pool_reduce.h"

#include <attnpool/error.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace attnpool {
namespace mpi {
namespace detail {

void AddOptions(SameEverywhere& same, const Options& options) {
  same.add("options.reduction", static_cast<int64_t>(options.reduction))
      .add("options.root", options.root)
      .add("options.everywhere", options.everywhere);
}

void CheckOptions(MPI_Comm comm, const Options& options) {
  if (options.root < 0 || options.root >= Size(comm)) {
    throw Error("options.root", "is " + std::to_string(options.root) +
                                    "; the communicator has ranks 0 to " +
                                    std::to_string(Size(comm) - 1));
  }
  if (options.reduction != Reduction::tree &&
      options.reduction != Reduction::rank_order) {
    throw Error("options.reduction", "is not a Reduction");
  }
}

bool Receives(MPI_Comm comm, const Options& options) {
  return options.everywhere || Rank(comm) == options.root;
}

namespace {

// The merged state of all ranks' `state` on the root (every rank with
// options.everywhere), by options.reduction; `state` is that result there.
template <typename T>
void Reduce(MPI_Comm comm, const StateWire& wire, const Options& options,
            OwnedState<T>& state) {
  const int rank = Rank(comm), size = Size(comm);
  const size_t rows = state.rows(), step = wire.rows_per_message();
  std::vector<unsigned char> bytes(rows * wire.row_bytes());
  wire.Pack(state, 0, rows, bytes.data());
  if (options.reduction == Reduction::tree) {
    for (size_t begin = 0; begin < rows; begin += step) {
      const int count = static_cast<int>(std::min(step, rows - begin));
      unsigned char* at = bytes.data() + begin * wire.row_bytes();
      if (options.everywhere) {
        MPI_Allreduce(MPI_IN_PLACE, at, count, wire.type(), wire.op(), comm);
      } else {
        MPI_Reduce(rank == options.root ? MPI_IN_PLACE : at,
                   rank == options.root ? at : nullptr, count, wire.type(),
                   wire.op(), options.root, comm);
      }
    }
    if (options.everywhere || rank == options.root) {
      wire.Unpack(bytes.data(), 0, rows, state);
    }
    return;
  }
  // rank_order: the root folds the states from rank 0 up.
  const auto transfer = [&](int peer, bool send) {
    for (size_t begin = 0; begin < rows; begin += step) {
      const int count = static_cast<int>(std::min(step, rows - begin));
      unsigned char* at = bytes.data() + begin * wire.row_bytes();
      if (send) {
        MPI_Send(at, count, wire.type(), peer, 0, comm);
      } else {
        MPI_Recv(at, count, wire.type(), peer, 0, comm, MPI_STATUS_IGNORE);
      }
    }
  };
  if (rank != options.root) {
    transfer(options.root, /*send=*/true);
  } else {
    OwnedState<T> merged(rows, state.columns()), part(rows, state.columns());
    for (int peer = 0; peer < size; ++peer) {
      OwnedState<T>* next = &state;
      if (peer != rank) {
        transfer(peer, /*send=*/false);
        wire.Unpack(bytes.data(), 0, rows, part);
        next = &part;
      }
      if (peer == 0) {
        std::swap(merged, *next);
      } else {
        attention_pool_merge(wire.spec(), merged.view(), next->view());
      }
    }
    std::swap(state, merged);
  }
  if (options.everywhere) {
    if (rank == options.root) wire.Pack(state, 0, rows, bytes.data());
    for (size_t begin = 0; begin < rows; begin += step) {
      const int count = static_cast<int>(std::min(step, rows - begin));
      MPI_Bcast(bytes.data() + begin * wire.row_bytes(), count, wire.type(),
                options.root, comm);
    }
    wire.Unpack(bytes.data(), 0, rows, state);
  }
}

}  // namespace

template <typename T>
void ReduceAndFinish(MPI_Comm comm, const PoolSpec& spec,
                     const Options& options, OwnedState<T>& state,
                     MatrixView<T> out) {
  const StateWire wire(spec, state.columns(), static_cast<const T*>(nullptr));
  Reduce(comm, wire, options, state);
  if (Receives(comm, options)) attention_pool_finish(spec, state.view(), out);
}

template void ReduceAndFinish(MPI_Comm, const PoolSpec&, const Options&,
                              OwnedState<float>&, MatrixView<float>);
template void ReduceAndFinish(MPI_Comm, const PoolSpec&, const Options&,
                              OwnedState<double>&, MatrixView<double>);

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
