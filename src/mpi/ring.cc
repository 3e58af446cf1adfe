#include "src/mpi/ring.h"

#include <attnpool/error.h>

#include <algorithm>
#include <climits>
#include <exception>
#include <utility>

#include "src/mpi/agreement.h"
#include "core/validate.h"

namespace attnpool {
namespace mpi {
namespace detail {
namespace {

template <typename T>
MPI_Datatype ElementType();
template <>
MPI_Datatype ElementType<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype ElementType<double>() {
  return MPI_DOUBLE;
}

// A shard as it travels: its key rows (d), then its value rows (dv), dense.
template <typename T>
struct Shard {
  std::vector<T> data;
  size_t rows = 0;
};

}  // namespace

ShardLayout GatherShardLayout(MPI_Comm comm, size_t rows) {
  const int size = Size(comm);
  std::vector<uint64_t> gathered(size);
  const uint64_t own = rows;
  MPI_Allgather(&own, 1, MPI_UINT64_T, gathered.data(), 1, MPI_UINT64_T, comm);
  ShardLayout layout;
  layout.rows.assign(gathered.begin(), gathered.end());
  layout.offset.assign(size + 1, 0);
  for (int r = 0; r < size; ++r) {
    layout.offset[r + 1] = layout.offset[r] + layout.rows[r];
  }
  layout.skipped.assign(size, 0);
  layout.most_rows = *std::max_element(layout.rows.begin(), layout.rows.end());
  return layout;
}

ShardLayout ShardsWithin(const ShardLayout& layout, size_t begin, size_t end) {
  ShardLayout part = layout;
  const size_t size = layout.rows.size();
  for (size_t r = 0; r < size; ++r) {
    const size_t first = layout.offset[r],
                 last = layout.offset[r] + layout.rows[r];
    const size_t from = std::min(std::max(first, begin), last),
                 to = std::max(std::min(last, end), from);
    part.skipped[r] = layout.skipped[r] + (from - first);
    part.offset[r] = from;
    part.rows[r] = to - from;
  }
  part.most_rows = *std::max_element(part.rows.begin(), part.rows.end());
  return part;
}

template <typename T>
void VisitShardsInRing(MPI_Comm comm, const ShardLayout& layout,
                       ConstMatrixView<T> keys, ConstMatrixView<T> values,
                       size_t depth,
                       const std::function<void(int, ConstMatrixView<T>,
                                                ConstMatrixView<T>)>& visit) {
  namespace core = ::attnpool::detail;
  const int rank = Rank(comm), size = Size(comm);
  const size_t columns = values.cols;
  Shard<T> current, next;
  Collectively(comm, [&] {
    core::CheckView("keys", keys);
    core::CheckView("values", values);
    core::CheckSize("keys.cols", keys.cols, depth, "queries.cols");
    core::CheckSize("values.rows", values.rows, keys.rows, "keys.rows");
    if (layout.most_rows > size_t(INT_MAX)) {
      throw Error("keys.rows", "a shard of more than 2³¹ − 1 rows");
    }
    current.data.resize(layout.most_rows * (depth + columns));
    next.data.resize(current.data.size());
    current.rows = layout.rows[rank];
    const size_t skipped = layout.skipped[rank];
    for (size_t j = 0; j < current.rows; ++j) {
      std::copy(keys.row(skipped + j), keys.row(skipped + j) + depth,
                current.data.data() + j * depth);
      std::copy(values.row(skipped + j), values.row(skipped + j) + columns,
                current.data.data() + (current.rows * depth + j * columns));
    }
  });
  const auto visit_current = [&](int shard) {
    const T* data = current.data.data();
    visit(
        shard, ConstMatrixView<T>(data, current.rows, depth),
        ConstMatrixView<T>(data + current.rows * depth, current.rows, columns));
  };

  MPI_Datatype row_type;  // one key row and its value row
  MPI_Type_contiguous(static_cast<int>(depth + columns), ElementType<T>(),
                      &row_type);
  MPI_Type_commit(&row_type);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  // Step s visits shard (rank − s) mod P; during it, the shard in hand
  // goes right and shard (rank − s − 1) comes from the left.
  const auto shard_of = [&](int step) { return (rank - step + size) % size; };
  const auto start_transfer = [&](int step) {
    next.rows = layout.rows[shard_of(step + 1)];
    MPI_Irecv(next.data.data(), static_cast<int>(next.rows), row_type, left, 0,
              comm, &requests[0]);
    MPI_Isend(current.data.data(), static_cast<int>(current.rows), row_type,
              right, 0, comm, &requests[1]);
  };
  for (int step = 0; step < size; ++step) {
    if (step > 0) std::swap(current, next);
    if (step + 1 < size) start_transfer(step);
    std::exception_ptr failure;
    try {
      visit_current(shard_of(step));
    } catch (...) {
      failure = std::current_exception();
    }
    MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
    try {
      ShareFailure(comm, failure);
    } catch (...) {
      MPI_Type_free(&row_type);
      throw;
    }
  }
  MPI_Type_free(&row_type);
}

#define ATTNPOOL_RING(T)                                                    \
  template void VisitShardsInRing<T>(                                       \
      MPI_Comm, const ShardLayout&, ConstMatrixView<T>, ConstMatrixView<T>, \
      size_t,                                                               \
      const std::function<void(int, ConstMatrixView<T>,                     \
                               ConstMatrixView<T>)>&);
ATTNPOOL_RING(float)
ATTNPOOL_RING(double)
#undef ATTNPOOL_RING

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
