// attention_pool_staged: the four stages as full passes over an n×m matrix.
#include <attnpool/error.h>
#include <attnpool/pool.h>
#include <attnpool/weighted_sum.h>

#include <algorithm>
#include <limits>
#include <string>

#include "arch/contributions.h"
#include "arch/stages.h"
#include "core/visible_run.h"
#include "src/aligned_buffer.h"
#include "src/dispatch.h"
#include "src/pool_plan.h"
#include "src/threads.h"
#include "src/kept_outputs.h"

namespace attnpool {
namespace {

// Rows per dispatched call of the element-wise and row-wise stages.
constexpr size_t kStageBlockRows = 16;

// argmax: out(i, :) is the value row of the key whose one-hot weight is 1,
// copied exactly (the fused kernel's result too); a row without one (NaN or
// empty) is already NaN or 0 in its weights and gets that.
template <typename T>
void GatherWinners(ConstMatrixView<T> weights, ConstMatrixView<T> values,
                   MatrixView<T> out) {
  for (size_t i = 0; i < out.rows; ++i) {
    const T* row = weights.row(i);
    const T* winner = std::find(row, row + weights.cols, T(1));
    T* target = out.row(i);
    if (winner != row + weights.cols) {
      std::copy(values.row(winner - row), values.row(winner - row) + out.cols,
                target);
    } else {
      std::fill(target, target + out.cols, row[0]);
    }
  }
}

template <typename T>
void AttentionPoolStaged(const PoolSpec& spec, ConstMatrixView<T> queries,
                         ConstMatrixView<T> keys, ConstMatrixView<T> values,
                         MatrixView<T> out, MatrixView<T> weights,
                         const Mask<T>& mask, const Execution& execution) {
  detail::EnsureDispatchReady();
  const auto plans = detail::CheckPool(spec, queries, keys, values, out,
                                       &weights, mask, execution);
  detail::RecordRunTarget(0);
  if (queries.rows == 0) return;
  if (keys.rows == 0) {
    return detail::FillEmptyRows(spec.empty_rows, detail::HasSink(mask), out);
  }
  detail::KeptOutputs kept(execution);
  kept.Keep(out);
  kept.Keep(weights);
  pairwise_distances(spec.distance, queries, keys, weights, execution);
  const detail::Workers threads = detail::WorkersOf(execution);
  const size_t rows = queries.rows;
  detail::ForEachRowBlock(
      rows, kStageBlockRows, threads, [&](size_t begin, size_t end) {
        return detail::ApplyKernelRows(plans.kernel, weights, begin, end);
      });
  detail::ForEachRowBlock(
      rows, kStageBlockRows, threads, [&](size_t begin, size_t end) {
        return detail::NormalizeRows(plans.normalize, weights, begin, end);
      });
  if (spec.normalization == Normalization::argmax) {
    GatherWinners(ConstMatrixView<T>(weights), values, out);
  } else if (values.cols == 0) {
    // No output columns: the weights were the work (last_run_target()
    // keeps the stages' target).
  } else if (detail::AllFinite(values)) {
    weighted_sum(weights, values, out, execution);
  } else {
    // Keys that contribute nothing (arch/contributions.h) must not turn
    // their value rows' NaN and ±inf into 0·NaN.
    auto zeroed = detail::AllocateBuffer<T>(values.rows * values.cols);
    const MatrixView<T> finite(zeroed.get(), values.rows, values.cols);
    detail::CopyZeroingNonFinite(values, finite);
    weighted_sum(weights, finite, out, execution);
    detail::AddNonFiniteTerms(
        plans.normalize, ConstMatrixView<T>(weights), values, out, 0, 0, 0,
        // Beside a sink a row is never empty: one
        // whose weights all underflowed still sums
        // its keys' non-finite values.
        detail::HasSink(mask) ? detail::EmptyRowTerms::add
                              : detail::EmptyRowTerms::skip);
  }
}

template <typename T>
void AttentionPoolStagedAllocating(const PoolSpec& spec,
                                   ConstMatrixView<T> queries,
                                   ConstMatrixView<T> keys,
                                   ConstMatrixView<T> values, MatrixView<T> out,
                                   const Mask<T>& mask,
                                   const Execution& execution) {
  // Everything is checked before the workspace is allocated: bad views are
  // attnpool::Error naming them, not std::bad_alloc (nor a short workspace).
  // The workspace's size first, from the shapes alone: the mask's arrays
  // (n entries, n × m) are read only for a call that can run.
  detail::EnsureDispatchReady();
  size_t count = 0, bytes = 0;
  if (__builtin_mul_overflow(queries.rows, keys.rows, &count) ||
      __builtin_mul_overflow(count, sizeof(T), &bytes)) {
    throw Error("queries", "n × m weights overflow the address space");
  }
  detail::CheckPool<T>(spec, queries, keys, values, out, nullptr, mask,
                       execution);
  auto weights = detail::AllocateBuffer<T>(count);
  // (Its output alone kept: the guard inside, on the workspace too, keeps
  // nothing within this one.)
  detail::KeptOutputs kept(execution);
  kept.Keep(out);
  AttentionPoolStaged(spec, queries, keys, values, out,
                      MatrixView<T>(weights.get(), queries.rows, keys.rows),
                      mask, execution);
}

}  // namespace

void attention_pool_staged(const PoolSpec& spec, ConstMatrixView<float> queries,
                           ConstMatrixView<float> keys,
                           ConstMatrixView<float> values, MatrixView<float> out,
                           MatrixView<float> weights, const Mask<float>& mask,
                           const Execution& execution) {
  AttentionPoolStaged(spec, queries, keys, values, out, weights, mask,
                      execution);
}

void attention_pool_staged(const PoolSpec& spec,
                           ConstMatrixView<double> queries,
                           ConstMatrixView<double> keys,
                           ConstMatrixView<double> values,
                           MatrixView<double> out, MatrixView<double> weights,
                           const Mask<double>& mask,
                           const Execution& execution) {
  AttentionPoolStaged(spec, queries, keys, values, out, weights, mask,
                      execution);
}

void attention_pool_staged(const PoolSpec& spec, ConstMatrixView<float> queries,
                           ConstMatrixView<float> keys,
                           ConstMatrixView<float> values, MatrixView<float> out,
                           const Mask<float>& mask,
                           const Execution& execution) {
  AttentionPoolStagedAllocating(spec, queries, keys, values, out, mask,
                                execution);
}

void attention_pool_staged(const PoolSpec& spec,
                           ConstMatrixView<double> queries,
                           ConstMatrixView<double> keys,
                           ConstMatrixView<double> values,
                           MatrixView<double> out, const Mask<double>& mask,
                           const Execution& execution) {
  AttentionPoolStagedAllocating(spec, queries, keys, values, out, mask,
                                execution);
}

}  // namespace attnpool
