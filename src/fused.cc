// attention_pool: checks, key packing and the OpenMP driver of the fused
// kernel (arch/fused-inl.h).
#include <attnpool/pool.h>

#include "arch/fused.h"
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

template <typename T>
void AttentionPool(const PoolSpec& spec, ConstMatrixView<T> queries,
                   ConstMatrixView<T> keys, ConstMatrixView<T> values,
                   MatrixView<T> out, const Mask<T>& mask,
                   const Execution& execution) {
  detail::EnsureDispatchReady();
  const auto plans = detail::CheckPool<T>(spec, queries, keys, values, out,
                                          nullptr, mask, execution);
  detail::RecordRunTarget(0);
  if (queries.rows == 0) return;
  if (keys.rows == 0) return detail::FillEmptyRows(spec.empty_rows, out);
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
  detail::ForEachRowBlock(queries.rows, kFusedRows, threads,
                          [&](size_t begin, size_t end) {
                            return detail::FusedRows(plan, out, begin, end);
                          });
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
