// Split-keys and ring attention pooling across ranks (include/attnpool/mpi.h).
#include <attnpool/error.h>
#include <attnpool/mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "src/mpi/agreement.h"
#include "src/mpi/pool_reduce.h"
#include "src/mpi/spec_agreement.h"
#include "src/mpi/state_wire.h"
#include "src/validate.h"

namespace attnpool {
namespace mpi {
namespace {

namespace core = ::attnpool::detail;
using detail::Collectively;
using detail::OwnedState;
using detail::Rank;
using detail::SameEverywhere;
using detail::Size;

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

// The root's (or every rank's) check of `out`: n×dv, well-formed.
template <typename T>
void CheckOut(MatrixView<T> out, size_t rows, size_t columns) {
  core::CheckView("out", out);
  core::CheckSize("out.rows", out.rows, rows, "queries.rows");
  core::CheckSize("out.cols", out.cols, columns, "values.cols");
}

template <typename T, typename Rows>
void SplitKeys(MPI_Comm comm, const PoolSpec& spec, ConstMatrixView<T> queries,
               const Rows& keys, const Rows& values, MatrixView<T> out,
               const Mask<T>& mask, const Options& options,
               const Execution& execution) {
  const size_t rows = queries.rows, columns = values.cols;
  SameEverywhere same;
  detail::AddSpec(same, spec);
  detail::AddMask(same, mask);
  same.add("the element type (float or double)", sizeof(T))
      .add("queries.rows", static_cast<int64_t>(rows))
      .add("queries.cols", static_cast<int64_t>(queries.cols))
      .add("values.cols", static_cast<int64_t>(columns));
  detail::AddOptions(same, options);
  same.Check(comm);
  const uint64_t key_offset = detail::OffsetAndTotal(comm, keys.rows).first;
  const bool receives = detail::Receives(comm, options);
  OwnedState<T> state(rows, columns);
  Collectively(comm, [&] {
    detail::CheckOptions(comm, options);
    if (receives) CheckOut(out, rows, columns);
    attention_pool_partial(spec, queries, keys, values, key_offset,
                           state.view(), mask, execution);
  });
  detail::ReduceAndFinish(comm, spec, options, state, out);
}

// ------------------------------------------------------------------- ring

// A key/value shard as it travels: m rows of keys (d) then m rows of values
// (dv), dense.
template <typename T>
struct Shard {
  std::vector<T> data;
  size_t rows = 0;
  ConstMatrixView<T> keys(size_t depth) const {
    return {data.data(), rows, depth};
  }
  ConstMatrixView<T> values(size_t depth, size_t columns) const {
    return {data.data() + rows * depth, rows, columns};
  }
};

template <typename T>
void Ring(MPI_Comm comm, const PoolSpec& spec, ConstMatrixView<T> queries,
          ConstMatrixView<T> keys, ConstMatrixView<T> values, MatrixView<T> out,
          const Mask<T>& mask, const Execution& execution) {
  const size_t depth = queries.cols, columns = values.cols;
  SameEverywhere same;
  detail::AddSpec(same, spec);
  detail::AddMask(same, mask);
  same.add("the element type (float or double)", sizeof(T))
      .add("queries.cols", static_cast<int64_t>(depth))
      .add("values.cols", static_cast<int64_t>(columns))
      .Check(comm);
  const int rank = Rank(comm), size = Size(comm);
  const size_t query_offset = detail::OffsetAndTotal(comm, queries.rows).first;
  std::vector<uint64_t> shard_rows(size);
  const uint64_t own_rows = keys.rows;
  MPI_Allgather(&own_rows, 1, MPI_UINT64_T, shard_rows.data(), 1, MPI_UINT64_T,
                comm);
  std::vector<size_t> shard_offset(size + 1, 0);
  for (int r = 0; r < size; ++r) {
    shard_offset[r + 1] = shard_offset[r] + shard_rows[r];
  }
  const size_t most_rows =
      *std::max_element(shard_rows.begin(), shard_rows.end());

  // This rank's queries sit at q_r + i + causal_offset.
  Mask<T> local_mask = mask;
  local_mask.causal_offset += static_cast<std::ptrdiff_t>(query_offset);
  Shard<T> current, next;
  Collectively(comm, [&] {
    if (mask.bias.data || mask.bias.rows || mask.bias.cols) {
      throw Error("mask.bias",
                  "is not taken by ring_attention_pool (it would be n×m per "
                  "shard); use attention_pool");
    }
    if (mask.visible.data || mask.visible.rows || mask.visible.cols) {
      throw Error("mask.visible",
                  "is not taken by ring_attention_pool (it would be n×m per "
                  "shard); use attention_pool");
    }
    core::CheckView("keys", keys);
    core::CheckView("values", values);
    core::CheckSize("keys.cols", keys.cols, depth, "queries.cols");
    core::CheckSize("values.rows", values.rows, keys.rows, "keys.rows");
    CheckOut(out, queries.rows, columns);
    if (most_rows > size_t(INT_MAX)) {
      throw Error("keys.rows", "a shard of more than 2³¹ − 1 rows");
    }
    current.data.resize(most_rows * (depth + columns));
    next.data.resize(current.data.size());
    current.rows = keys.rows;
    for (size_t j = 0; j < keys.rows; ++j) {
      std::copy(keys.row(j), keys.row(j) + depth,
                current.data.data() + j * depth);
      std::copy(values.row(j), values.row(j) + columns,
                current.data.data() + (keys.rows * depth + j * columns));
    }
  });

  MPI_Datatype row_type;  // one key row and its value row
  MPI_Type_contiguous(static_cast<int>(depth + columns), ElementType<T>(),
                      &row_type);
  MPI_Type_commit(&row_type);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  // Step s pools shard (rank − s) mod P; during it, the shard in hand goes
  // right and shard (rank − s − 1) comes from the left.
  const auto shard_of = [&](int step) { return (rank - step + size) % size; };
  const auto start_transfer = [&](int step) {
    next.rows = shard_rows[shard_of(step + 1)];
    MPI_Irecv(next.data.data(), static_cast<int>(next.rows), row_type, left, 0,
              comm, &requests[0]);
    MPI_Isend(current.data.data(), static_cast<int>(current.rows), row_type,
              right, 0, comm, &requests[1]);
  };

  // Shards k ≤ rank arrive in descending order, then shards k > rank in
  // descending order: each part comes before the run it joins, so it is
  // merged as `into` and the run's state as `later`.
  OwnedState<T> low(queries.rows, columns), high(queries.rows, columns),
      part(queries.rows, columns);
  bool low_started = false, high_started = false;
  const auto pool_step = [&](int step) {
    const int shard = shard_of(step);
    OwnedState<T> fresh(queries.rows, columns);
    std::swap(part, fresh);
    attention_pool_partial(spec, queries, current.keys(depth),
                           current.values(depth, columns), shard_offset[shard],
                           part.view(), local_mask, execution);
    OwnedState<T>& run = shard <= rank ? low : high;
    bool& started = shard <= rank ? low_started : high_started;
    if (started) attention_pool_merge(spec, part.view(), run.view());
    std::swap(run, part);
    started = true;
  };

  std::exception_ptr failure;
  if (size > 1) start_transfer(0);
  try {
    pool_step(0);  // checks the rest of this rank's arguments
  } catch (...) {
    failure = std::current_exception();
  }
  MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
  try {
    detail::ShareFailure(comm, failure);
  } catch (...) {
    MPI_Type_free(&row_type);
    throw;
  }
  for (int step = 1; step < size; ++step) {
    std::swap(current, next);
    if (step + 1 < size) start_transfer(step);
    pool_step(step);
    MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
  }
  MPI_Type_free(&row_type);
  if (high_started) attention_pool_merge(spec, low.view(), high.view());
  attention_pool_finish(spec, low.view(), out);
}

}  // namespace

void attention_pool(MPI_Comm comm, const PoolSpec& spec,
                    ConstMatrixView<float> queries, const ElementRows& keys,
                    const ElementRows& values, MatrixView<float> out,
                    const Mask<float>& mask, const Options& options,
                    const Execution& execution) {
  SplitKeys<float>(comm, spec, queries, keys, values, out, mask, options,
                   execution);
}

void attention_pool(MPI_Comm comm, const PoolSpec& spec,
                    ConstMatrixView<double> queries,
                    ConstMatrixView<double> keys,
                    ConstMatrixView<double> values, MatrixView<double> out,
                    const Mask<double>& mask, const Options& options,
                    const Execution& execution) {
  SplitKeys<double>(comm, spec, queries, keys, values, out, mask, options,
                    execution);
}

void ring_attention_pool(MPI_Comm comm, const PoolSpec& spec,
                         ConstMatrixView<float> queries,
                         ConstMatrixView<float> keys,
                         ConstMatrixView<float> values, MatrixView<float> out,
                         const Mask<float>& mask, const Execution& execution) {
  Ring<float>(comm, spec, queries, keys, values, out, mask, execution);
}

void ring_attention_pool(MPI_Comm comm, const PoolSpec& spec,
                         ConstMatrixView<double> queries,
                         ConstMatrixView<double> keys,
                         ConstMatrixView<double> values, MatrixView<double> out,
                         const Mask<double>& mask, const Execution& execution) {
  Ring<double>(comm, spec, queries, keys, values, out, mask, execution);
}

}  // namespace mpi
}  // namespace attnpool
