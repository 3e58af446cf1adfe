// attention_pool: checks, key packing, the split of keys into chunks, and the
// OpenMP driver of the fused kernel (arch/fused-inl.h); merging and finishing
// the per-query partial states.
#include <attnpool/pool.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "arch/fused.h"
#include "hwy/aligned_allocator.h"
#include "src/dispatch.h"
#include "src/packed_keys.h"
#include "src/pool_plan.h"
#include "src/threads.h"

namespace attnpool {
namespace {

// Queries per dispatched call: a multiple of both score tile heights (6, 8)
// and of the weighted-sum tile (6); their block of scores (96 × 256 floats)
// stays in L2.
constexpr size_t kFusedRows = 96;
// With fewer query blocks than this, the keys are split into chunks so that
// all cores take part (decoding: a handful of queries over a long context).
// The split depends only on the shape, never on the thread count, so results
// do not either.
constexpr size_t kSplitBelowRowCalls = 4;
constexpr size_t kMinChunkKeys = 4096;
constexpr size_t kMaxChunks = 16;

// Merges state `part` (keys after those of `into`) into `into`, row by row:
// the log-sum-exp rule for softmax rows, sums for weight rows, the first
// strictly better score for argmax rows; NaN rows stay NaN.
template <typename T>
void MergeState(detail::FusedRowMode mode, const detail::FusedState<T>& into,
                const detail::FusedState<T>& part, size_t rows,
                size_t columns) {
  const T infinity = std::numeric_limits<T>::infinity();
  for (size_t i = 0; i < rows; ++i) {
    T* acc = into.accumulator.row(i);
    const T* add = part.accumulator.row(i);
    if (std::isnan(into.sum[i]) || std::isnan(part.sum[i])) {
      into.max[i] = into.sum[i] = std::numeric_limits<T>::quiet_NaN();
      continue;
    }
    if (mode == detail::FusedRowMode::weights) {
      into.sum[i] += part.sum[i];
      for (size_t c = 0; c < columns; ++c) acc[c] += add[c];
    } else if (mode == detail::FusedRowMode::argmax) {
      if (part.max[i] > into.max[i]) {
        into.max[i] = part.max[i];
        into.best[i] = part.best[i];
        std::memcpy(acc, add, columns * sizeof(T));
      }
    } else {
      const T old_max = into.max[i], other = part.max[i];
      const T new_max = std::max(old_max, other);
      if (new_max == -infinity) continue;
      // Weights relative to the new max; +inf maxima share equally.
      const auto factor = [&](T m) {
        if (new_max == infinity) return m == infinity ? T(1) : T(0);
        return m == -infinity ? T(0) : std::exp(m - new_max);
      };
      const T keep = factor(old_max), take = factor(other);
      into.max[i] = new_max;
      into.sum[i] = into.sum[i] * keep + part.sum[i] * take;
      for (size_t c = 0; c < columns; ++c)
        acc[c] = acc[c] * keep + add[c] * take;
    }
  }
}

// out ← the finished state (state.accumulator may be out itself).
template <typename T>
void FinishState(detail::FusedRowMode mode, Normalization normalization,
                 EmptyRows empty_rows, const detail::FusedState<T>& state,
                 MatrixView<T> out) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T empty = empty_rows == EmptyRows::zero ? T(0) : nan;
  for (size_t i = 0; i < out.rows; ++i) {
    const T* acc = state.accumulator.row(i);
    T* target = out.row(i);
    const bool is_empty =
        mode == detail::FusedRowMode::weights
            ? state.sum[i] == T(0)
            : state.max[i] == -std::numeric_limits<T>::infinity();
    T scale = T(1);
    if (std::isnan(state.sum[i])) {
      std::fill(target, target + out.cols, nan);
      continue;
    }
    if (is_empty) {
      std::fill(target, target + out.cols, empty);
      continue;
    }
    if (mode == detail::FusedRowMode::softmax ||
        (mode == detail::FusedRowMode::weights &&
         normalization == Normalization::sum)) {
      scale = T(1) / state.sum[i];
    }
    for (size_t c = 0; c < out.cols; ++c) target[c] = acc[c] * scale;
  }
}

// Per-row arrays and (for chunks after the first) an accumulator.
template <typename T>
struct StateStorage {
  std::vector<T> max, sum;
  std::vector<size_t> best;
  hwy::AlignedFreeUniquePtr<T[]> accumulator;
  detail::FusedState<T> view;

  StateStorage(size_t rows, MatrixView<T> out)
      : max(rows), sum(rows), best(rows) {
    view = {max.data(), sum.data(), best.data(), out};
  }
  StateStorage(size_t rows, size_t columns)
      : StateStorage(rows, MatrixView<T>()) {
    accumulator = hwy::AllocateAligned<T>(std::max<size_t>(1, rows * columns));
    if (!accumulator) throw std::bad_alloc();
    view.accumulator = MatrixView<T>(accumulator.get(), rows, columns);
  }
};

template <typename T>
void AttentionPool(const PoolSpec& spec, ConstMatrixView<T> queries,
                   ConstMatrixView<T> keys, ConstMatrixView<T> values,
                   MatrixView<T> out, const Mask<T>& mask,
                   const Execution& execution) {
  detail::EnsureDispatchReady();
  const auto plans = detail::CheckPool<T>(spec, queries, keys, values, out,
                                          nullptr, mask, execution);
  detail::RecordRunTarget(0);
  const size_t rows = queries.rows, key_count = keys.rows;
  if (rows == 0) return;
  if (key_count == 0) return detail::FillEmptyRows(spec.empty_rows, out);
  const int threads = detail::ThreadCount(execution);
  const auto packed = detail::PackKeys(spec.distance, keys, threads);
  detail::FusedPlan<T> plan;
  plan.distance = spec.distance;
  plan.kernel = plans.kernel;
  plan.normalize = plans.normalize;
  plan.queries = queries;
  plan.keys = keys;
  plan.values = values;
  plan.packed = packed.view;
  const auto mode = detail::FusedModeOf(plan.normalize);

  // Key chunks: one, or for few query blocks up to kMaxChunks of at least
  // kMinChunkKeys keys, each a multiple of the panel width.
  const size_t row_calls = (rows + kFusedRows - 1) / kFusedRows;
  const size_t width = packed.view.panel_width;
  size_t chunk_keys = key_count;
  if (row_calls < kSplitBelowRowCalls && key_count >= 2 * kMinChunkKeys) {
    chunk_keys =
        std::max(kMinChunkKeys, (key_count + kMaxChunks - 1) / kMaxChunks);
    chunk_keys = (chunk_keys + width - 1) / width * width;
  }
  const size_t chunks = (key_count + chunk_keys - 1) / chunk_keys;
  // Chunk 0 accumulates in `out`; the others in their own storage.
  std::vector<StateStorage<T>> states;
  states.reserve(chunks);
  states.emplace_back(rows, out);
  for (size_t c = 1; c < chunks; ++c) states.emplace_back(rows, values.cols);

  detail::ForEachRowBlock(
      row_calls * chunks, 1, threads, [&](size_t item, size_t) {
        const size_t chunk = item % chunks,
                     row_begin = item / chunks * kFusedRows;
        const size_t key_begin = chunk * chunk_keys;
        return detail::FusedAccumulate(
            plan, states[chunk].view, row_begin,
            std::min(rows, row_begin + kFusedRows), key_begin,
            std::min(key_count, key_begin + chunk_keys));
      });
  for (size_t c = 1; c < chunks; ++c) {
    MergeState(mode, states[0].view, states[c].view, rows, values.cols);
  }
  FinishState(mode, spec.normalization, spec.empty_rows, states[0].view, out);
}

}  // namespace

void attention_pool(const PoolSpec& spec, ConstMatrixView<float> queries,
                    ConstMatrixView<float> keys, ConstMatrixView<float> values,
                    MatrixView<float> out, const Mask<float>& mask,
                    const Execution& execution) {
  AttentionPool(spec, queries, keys, values, out, mask, execution);
}

void attention_pool(const PoolSpec& spec, ConstMatrixView<double> queries,
                    ConstMatrixView<double> keys,
                    ConstMatrixView<double> values, MatrixView<double> out,
                    const Mask<double>& mask, const Execution& execution) {
  AttentionPool(spec, queries, keys, values, out, mask, execution);
}

}  // namespace attnpool
