#include "src/pool_plan.h"

#include <attnpool/error.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "src/enum_names.h"
#include "src/kernel_plan.h"
#include "core/validate.h"

namespace attnpool {
namespace detail {

template <typename T>
PoolPlans<T> CheckPoolShapes(const PoolSpec& spec, ConstMatrixView<T> queries,
                             const RowsShape& keys, const RowsShape& values,
                             MatrixView<T> out, const MatrixView<T>* weights,
                             const Mask<T>& mask, const Execution& execution,
                             bool shard, const std::string& out_name) {
  CheckEnum("spec.distance", static_cast<int>(spec.distance), kDistanceCount);
  CheckExecution(execution);
  const auto query_bytes = CheckView("queries", queries);
  const auto out_bytes = CheckView(out_name, out);
  const size_t rows = queries.rows, key_count = keys.rows;
  CheckSize("keys.cols", keys.cols, queries.cols, "queries.cols");
  CheckSize("values.rows", values.rows, key_count, "keys.rows");
  CheckSize(out_name + ".rows", out.rows, rows, "queries.rows");
  CheckSize(out_name + ".cols", out.cols, values.cols, "values.cols");
  ByteRange weight_bytes;
  if (weights != nullptr) {
    weight_bytes = CheckView("weights", *weights);
    CheckSize("weights.rows", weights->rows, rows, "queries.rows");
    CheckSize("weights.cols", weights->cols, key_count, "keys.rows");
    CheckNoOverlap(out_name, out_bytes, "weights", weight_bytes);
  }
  for (const auto& input :
       {std::make_pair("queries", query_bytes),
        std::make_pair("keys", keys.bytes),
        std::make_pair("keys.scales", keys.scale_bytes),
        std::make_pair("values", values.bytes),
        std::make_pair("values.scales", values.scale_bytes)}) {
    CheckNoOverlap(out_name, out_bytes, input.first, input.second);
    if (weights != nullptr) {
      CheckNoOverlap("weights", weight_bytes, input.first, input.second);
    }
  }
  // Exponential weights travel as logits until the normalization.
  const bool logits = is_exponential(spec.kernel.kernel);
  PoolPlans<T> plans;
  plans.kernel = MakeKernelPlan<T>(spec.kernel, spec.distance, queries.cols);
  plans.kernel.write_logits = logits;
  plans.normalize = MakeNormalizePlan(
      spec.normalization, logits, spec.empty_rows, mask, rows, key_count,
      weights ? "weights" : out_name.c_str(),
      weights ? weight_bytes : out_bytes,
      shard ? static_cast<size_t>(-1) : key_count, &plans.mask_arrays);
  // With weights, the plan above checked the mask against them; `out` must
  // not overlap it either.
  if (weights != nullptr) {
    CheckApartFromMask(out_name, out_bytes, plans.mask_arrays);
  }
  return plans;
}

template <typename T>
void FillEmptyRows(EmptyRows empty_rows, bool sink, MatrixView<T> out) {
  const T fill = empty_rows == EmptyRows::zero || sink
                     ? T(0)
                     : std::numeric_limits<T>::quiet_NaN();
  // (Rows of no column: nothing to write, however many.)
  for (size_t i = 0; out.cols != 0 && i < out.rows; ++i) {
    std::fill(out.row(i), out.row(i) + out.cols, fill);
  }
}

#define ATTNPOOL_INSTANTIATE(T)                                                \
  template PoolPlans<T> CheckPoolShapes(                                       \
      const PoolSpec&, ConstMatrixView<T>, const RowsShape&, const RowsShape&, \
      MatrixView<T>, const MatrixView<T>*, const Mask<T>&, const Execution&,   \
      bool, const std::string&);                                               \
  template void FillEmptyRows(EmptyRows, bool, MatrixView<T>);
ATTNPOOL_INSTANTIATE(float)
ATTNPOOL_INSTANTIATE(double)
#undef ATTNPOOL_INSTANTIATE

}  // namespace detail
}  // namespace attnpool
