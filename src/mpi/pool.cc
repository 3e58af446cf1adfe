// Split-keys and ring attention pooling across ranks (include/attnpool/mpi.h).
#include <attnpool/error.h>
#include <attnpool/mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/visible_run.h"
#include "src/mpi/agreement.h"
#include "src/mpi/pool_reduce.h"
#include "src/mpi/ring.h"
#include "src/mpi/spec_agreement.h"
#include "src/mpi/state_wire.h"
#include "core/validate.h"

namespace attnpool {
namespace mpi {
namespace {

namespace core = ::attnpool::detail;
using detail::Collectively;
using detail::OwnedState;
using detail::Rank;
using detail::SameEverywhere;
using detail::Size;

// The root's (or every rank's) check of `out`: n×dv, well-formed.
template <typename T>
void CheckOut(MatrixView<T> out, size_t rows, size_t columns) {
  core::CheckView("out", out);
  core::CheckSize("out.rows", out.rows, rows, "queries.rows");
  core::CheckSize("out.cols", out.cols, columns, "values.cols");
}

template <typename T, typename Rows>
void SplitKeys(MPI_Comm caller, const PoolSpec& spec,
               ConstMatrixView<T> queries, const Rows& keys, const Rows& values,
               MatrixView<T> out, const Mask<T>& mask, const Options& options,
               const Execution& execution) {
  const detail::PrivateComm comm(caller);
  const size_t rows = queries.rows, columns = values.cols;
  SameEverywhere same;
  detail::AddSpec(same, spec);
  detail::AddMask(same, mask, rows);
  same.add("the element type (float or double)", sizeof(T))
      .add("queries.rows", static_cast<int64_t>(rows))
      .add("queries.cols", static_cast<int64_t>(queries.cols))
      .add("values.cols", static_cast<int64_t>(columns));
  detail::AddOptions(same, options);
  same.Check(comm);
  const auto offset_and_total = detail::OffsetAndTotal(comm, keys.rows);
  const uint64_t key_offset = offset_and_total.first,
                 total = offset_and_total.second;
  const bool receives = detail::Receives(comm, options);
  // The sink joins rank 0's state alone (ranks after empty shards have
  // key offset 0 too).
  Mask<T> shard_mask = mask;
  if (Rank(comm) != 0) shard_mask.sink.reset();
  std::optional<detail::StateReduction<T>> reduction;
  Collectively(comm, [&] {
    detail::CheckOptions(comm, options);
    if (receives) CheckOut(out, rows, columns);
    // (Within the whole sequence, as attention_pool's.)
    if (mask.valid_lengths != nullptr) {
      core::CheckValidLengths(mask.valid_lengths, rows, total, total);
    }
    reduction.emplace(comm, spec, options, rows, columns);
    attention_pool_partial(spec, queries, keys, values, key_offset,
                           reduction->state(), shard_mask, execution);
  });
  reduction->ReduceAndFinish(out);
}

// ------------------------------------------------------------------- ring

template <typename T>
void Ring(MPI_Comm caller, const PoolSpec& spec, ConstMatrixView<T> queries,
          ConstMatrixView<T> keys, ConstMatrixView<T> values, MatrixView<T> out,
          const Mask<T>& mask, const Execution& execution) {
  const detail::PrivateComm comm(caller);
  const size_t depth = queries.cols, columns = values.cols;
  SameEverywhere same;
  detail::AddSpec(same, spec);
  detail::AddMask(same, mask, queries.rows);
  same.add("the element type (float or double)", sizeof(T))
      .add("queries.cols", static_cast<int64_t>(depth))
      .add("values.cols", static_cast<int64_t>(columns))
      .Check(comm);
  const int rank = Rank(comm);
  const size_t query_offset = detail::OffsetAndTotal(comm, queries.rows).first;
  const detail::ShardLayout layout = detail::GatherShardLayout(comm, keys.rows);
  OwnedState<T> low, high, part;  // (allocated collectively)
  Collectively(comm, [&] {
    // (The ring passes keys, not an n×m matrix per shard.)
    VisitMask(mask, [](auto field, const auto& member) {
      using Kind = typename decltype(field)::Kind;
      if constexpr (std::is_same<Kind, mask_kind::matrix>::value ||
                    std::is_same<Kind, mask_kind::booleans>::value) {
        if (attnpool::detail::Given(member)) {
          throw Error(field.argument,
                      "is not taken by ring_attention_pool (it would be n×m "
                      "per shard); use attention_pool");
        }
      }
    });
    CheckOut(out, queries.rows, columns);
    if (mask.valid_lengths != nullptr) {
      const size_t total = layout.offset.back();  // (size + 1 entries)
      core::CheckValidLengths(mask.valid_lengths, queries.rows, total, total);
    }
    // Shards k ≤ rank arrive in descending order, then shards k > rank in
    // descending order: each part comes before the run it joins, so it is
    // merged as `into` and the run's state as `later`.
    low = OwnedState<T>(queries.rows, columns);
    high = OwnedState<T>(queries.rows, columns);
    part = OwnedState<T>(queries.rows, columns);
  });
  // This rank's queries sit at q_r + i + causal_offset.
  const Mask<T> local_mask =
      attnpool::detail::ShiftPositions(mask, query_offset);
  // Only keys [begin, end) of the whole sequence, from the first to the last
  // key some query of some rank sees, travel: the others are never read.
  const size_t total = layout.offset.back();
  size_t begin = total, end = 0;
  for (size_t i = 0; i < queries.rows; ++i) {
    const auto run = attnpool::detail::VisibleRun(local_mask, i, 0, total);
    if (run.start == run.limit) continue;
    begin = std::min(begin, run.start);
    end = std::max(end, run.limit);
  }
  uint64_t bounds[2] = {total - begin, end};  // (maxima over the ranks)
  MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_UINT64_T, MPI_MAX, comm);
  const detail::ShardLayout visible =
      detail::ShardsWithin(layout, total - bounds[0], bounds[1]);

  bool low_started = false, high_started = false;
  detail::VisitShardsInRing<T>(
      comm, visible, keys, values, depth,
      [&](int shard, ConstMatrixView<T> shard_keys,
          ConstMatrixView<T> shard_values) {
        // (attention_pool_partial writes every row of `part`.)
        // The sink joins shard 0's state alone.
        Mask<T> shard_mask = local_mask;
        if (shard != 0) shard_mask.sink.reset();
        // (The first call, on the own shard, checks the rest.)
        attention_pool_partial(spec, queries, shard_keys, shard_values,
                               visible.offset[shard], part.view(), shard_mask,
                               execution);
        // A shard 0 that starts past key 0 has not taken the sink (pool.h):
        // it joins as a shard of no key at key 0, before it.
        if (shard == 0 && visible.offset[0] != 0 &&
            attnpool::detail::HasSink(shard_mask)) {
          OwnedState<T> sink(queries.rows, columns);
          attention_pool_partial(
              spec, queries, ConstMatrixView<T>(shard_keys.data, 0, depth),
              ConstMatrixView<T>(shard_values.data, 0, columns), 0, sink.view(),
              shard_mask, execution);
          attention_pool_merge(spec, sink.view(), part.view());
          std::swap(sink, part);
        }
        OwnedState<T>& run = shard <= rank ? low : high;
        bool& started = shard <= rank ? low_started : high_started;
        if (started) attention_pool_merge(spec, part.view(), run.view());
        std::swap(run, part);
        started = true;
      });
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
                    ConstMatrixView<float> queries, ConstMatrixView<float> keys,
                    ConstMatrixView<float> values, MatrixView<float> out,
                    const Mask<float>& mask, const Options& options,
                    const Execution& execution) {
  SplitKeys<float>(comm, spec, queries, ElementRows(keys), ElementRows(values),
                   out, mask, options, execution);
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
