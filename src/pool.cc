// attention_pool_staged: the four stages as full passes over an n×m matrix.
#include <attnpool/error.h>
#include <attnpool/pool.h>
#include <attnpool/weighted_sum.h>

#include <algorithm>
#include <limits>
#include <string>

#include "arch/stages.h"
#include "hwy/aligned_allocator.h"
#include "src/dispatch.h"
#include "src/enum_names.h"
#include "src/kernel_plan.h"
#include "src/threads.h"
#include "src/validate.h"

namespace attnpool {
namespace {

// Rows per dispatched call of the element-wise and row-wise stages.
constexpr size_t kStageBlockRows = 16;

template <typename T>
void AttentionPoolStaged(const PoolSpec& spec, ConstMatrixView<T> queries,
                         ConstMatrixView<T> keys, ConstMatrixView<T> values,
                         MatrixView<T> out, MatrixView<T> weights,
                         const Mask<T>& mask, const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::CheckEnum("spec.distance", static_cast<int>(spec.distance),
                    kDistanceCount);
  detail::CheckExecution(execution);
  const auto query_bytes = detail::CheckView("queries", queries);
  const auto key_bytes = detail::CheckView("keys", keys);
  const auto value_bytes = detail::CheckView("values", values);
  const auto out_bytes = detail::CheckView("out", out);
  const auto weight_bytes = detail::CheckView("weights", weights);
  const size_t rows = queries.rows, key_count = keys.rows;
  detail::CheckSize("keys.cols", keys.cols, queries.cols, "queries.cols");
  detail::CheckSize("values.rows", values.rows, key_count, "keys.rows");
  detail::CheckSize("out.rows", out.rows, rows, "queries.rows");
  detail::CheckSize("out.cols", out.cols, values.cols, "values.cols");
  detail::CheckSize("weights.rows", weights.rows, rows, "queries.rows");
  detail::CheckSize("weights.cols", weights.cols, key_count, "keys.rows");
  for (const auto& input : {std::make_pair("queries", query_bytes),
                            std::make_pair("keys", key_bytes),
                            std::make_pair("values", value_bytes)}) {
    detail::CheckNoOverlap("out", out_bytes, input.first, input.second);
    detail::CheckNoOverlap("weights", weight_bytes, input.first, input.second);
  }
  detail::CheckNoOverlap("out", out_bytes, "weights", weight_bytes);
  // Exponential weights travel as logits until the normalization.
  const bool logits = is_exponential(spec.kernel.kernel);
  auto kernel_plan =
      detail::MakeKernelPlan<T>(spec.kernel, spec.distance, queries.cols);
  kernel_plan.write_logits = logits;
  const auto normalize_plan =
      detail::MakeNormalizePlan(spec.normalization, logits, spec.empty_rows,
                                mask, rows, key_count, "weights", weight_bytes);
  if (mask.bias.data != nullptr) {
    detail::CheckNoOverlap("out", out_bytes, "mask.bias",
                           detail::CheckView("mask.bias", mask.bias));
  }

  detail::RecordRunTarget(0);
  if (rows == 0) return;
  if (key_count == 0) {  // every row is empty
    const T fill = spec.empty_rows == EmptyRows::zero
                       ? T(0)
                       : std::numeric_limits<T>::quiet_NaN();
    for (size_t i = 0; i < rows; ++i)
      std::fill(out.row(i), out.row(i) + out.cols, fill);
    return;
  }
  pairwise_distances(spec.distance, queries, keys, weights, execution);
  const int threads = detail::ThreadCount(execution);
  detail::ForEachRowBlock(
      rows, kStageBlockRows, threads, [&](size_t begin, size_t end) {
        return detail::ApplyKernelRows(kernel_plan, weights, begin, end);
      });
  detail::ForEachRowBlock(
      rows, kStageBlockRows, threads, [&](size_t begin, size_t end) {
        return detail::NormalizeRows(normalize_plan, weights, begin, end);
      });
  weighted_sum(weights, values, out, execution);
}

template <typename T>
void AttentionPoolStagedAllocating(const PoolSpec& spec,
                                   ConstMatrixView<T> queries,
                                   ConstMatrixView<T> keys,
                                   ConstMatrixView<T> values, MatrixView<T> out,
                                   const Mask<T>& mask,
                                   const Execution& execution) {
  size_t count = 0;
  if (__builtin_mul_overflow(queries.rows, keys.rows, &count)) {
    throw Error("queries", "n × m weights overflow the address space");
  }
  auto weights = hwy::AllocateAligned<T>(count == 0 ? 1 : count);
  if (!weights) throw std::bad_alloc();
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
