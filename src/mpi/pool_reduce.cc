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

template <typename T>
StateReduction<T>::StateReduction(MPI_Comm comm, const PoolSpec& spec,
                                  const Options& options, size_t rows,
                                  size_t columns)
    : comm_(comm),
      options_(options),
      wire_(spec, columns, static_cast<const T*>(nullptr)),
      state_(rows, columns),
      bytes_(rows * wire_.row_bytes()) {
  if (options.reduction == Reduction::rank_order &&
      Rank(comm) == options.root) {
    merged_ = OwnedState<T>(rows, columns);
    part_ = OwnedState<T>(rows, columns);
  }
}

template <typename T>
void StateReduction<T>::ReduceAndFinish(MatrixView<T> out) {
  Reduce();
  if (Receives(comm_, options_)) {
    attention_pool_finish(wire_.spec(), state_.view(), out);
  }
}

// The merged state of all ranks on the root (every rank with
// options.everywhere), by options.reduction, into state_ there.
template <typename T>
void StateReduction<T>::Reduce() {
  const int rank = Rank(comm_), size = Size(comm_);
  const size_t rows = state_.rows(), step = wire_.rows_per_message();
  wire_.Pack(state_, 0, rows, bytes_.data());
  if (options_.reduction == Reduction::tree) {
    for (size_t begin = 0; begin < rows; begin += step) {
      const int count = static_cast<int>(std::min(step, rows - begin));
      unsigned char* at = bytes_.data() + begin * wire_.row_bytes();
      if (options_.everywhere) {
        MPI_Allreduce(MPI_IN_PLACE, at, count, wire_.type(), wire_.op(), comm_);
      } else {
        MPI_Reduce(rank == options_.root ? MPI_IN_PLACE : at,
                   rank == options_.root ? at : nullptr, count, wire_.type(),
                   wire_.op(), options_.root, comm_);
      }
    }
    if (Receives(comm_, options_)) wire_.Unpack(bytes_.data(), 0, rows, state_);
    return;
  }
  // rank_order: the root folds the states from rank 0 up.
  const auto transfer = [&](int peer, bool send) {
    for (size_t begin = 0; begin < rows; begin += step) {
      const int count = static_cast<int>(std::min(step, rows - begin));
      unsigned char* at = bytes_.data() + begin * wire_.row_bytes();
      if (send) {
        MPI_Send(at, count, wire_.type(), peer, 0, comm_);
      } else {
        MPI_Recv(at, count, wire_.type(), peer, 0, comm_, MPI_STATUS_IGNORE);
      }
    }
  };
  if (rank != options_.root) {
    transfer(options_.root, /*send=*/true);
  } else {
    for (int peer = 0; peer < size; ++peer) {
      OwnedState<T>* next = &state_;
      if (peer != rank) {
        transfer(peer, /*send=*/false);
        wire_.Unpack(bytes_.data(), 0, rows, part_);
        next = &part_;
      }
      if (peer == 0) {
        std::swap(merged_, *next);
      } else {
        attention_pool_merge(wire_.spec(), merged_.view(), next->view());
      }
    }
    std::swap(state_, merged_);
  }
  if (options_.everywhere) {
    if (rank == options_.root) wire_.Pack(state_, 0, rows, bytes_.data());
    for (size_t begin = 0; begin < rows; begin += step) {
      const int count = static_cast<int>(std::min(step, rows - begin));
      MPI_Bcast(bytes_.data() + begin * wire_.row_bytes(), count, wire_.type(),
                options_.root, comm_);
    }
    wire_.Unpack(bytes_.data(), 0, rows, state_);
  }
}

template class StateReduction<float>;
template class StateReduction<double>;

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
