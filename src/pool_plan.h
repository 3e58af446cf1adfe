// Checks shared by the pooling entry points (internal).
#pragma once

#include <attnpool/pool.h>

#include <string>

#include "arch/stages.h"
#include "src/enum_names.h"
#include "core/mask.h"
#include "core/validate.h"

namespace attnpool {
namespace detail {

template <typename T>
struct PoolPlans {
  KernelPlan<T> kernel;        // write_logits set for exponential kernels
  NormalizePlan<T> normalize;  // logits likewise
  MaskArrays mask_arrays;      // what the mask reads (core/mask.h)
};

// Keys or values as CheckPool sees them: a well-formed view's shape, its
// bytes and (int8) its scales' bytes.
struct RowsShape {
  size_t rows = 0, cols = 0;
  ByteRange bytes, scale_bytes;
};

template <typename T>
RowsShape ShapeOf(const std::string& name, ConstMatrixView<T> view) {
  return {view.rows, view.cols, CheckView(name, view), {}};
}
inline RowsShape ShapeOf(const std::string& name, const ElementRows& rows) {
  RowsShape shape{rows.rows, rows.cols, {}, {}};
  shape.bytes = CheckView(name, rows, &shape.scale_bytes);
  return shape;
}

// CheckPool on the shapes of keys and values.
template <typename T>
PoolPlans<T> CheckPoolShapes(const PoolSpec& spec, ConstMatrixView<T> queries,
                             const RowsShape& keys, const RowsShape& values,
                             MatrixView<T> out, const MatrixView<T>* weights,
                             const Mask<T>& mask, const Execution& execution,
                             bool shard, const std::string& out_name);

// Validates a pooling call: the spec against the data, shapes, overlaps of
// the outputs (out, and weights when non-null) with the inputs and each
// other, and the mask; the output is named `out_name` in errors. `shard`: the
// keys are a shard of a longer sequence, so valid lengths may exceed their
// count. Keys and values are views of T or, for T = float, ElementRows.
// Throws attnpool::Error naming the argument.
template <typename T, typename Rows>
PoolPlans<T> CheckPool(const PoolSpec& spec, ConstMatrixView<T> queries,
                       const Rows& keys, const Rows& values, MatrixView<T> out,
                       const MatrixView<T>* weights, const Mask<T>& mask,
                       const Execution& execution, bool shard = false,
                       const std::string& out_name = "out") {
  CheckEnum("spec.distance", static_cast<int>(spec.distance), kDistanceCount);
  CheckExecution(execution);
  CheckView("queries", queries);
  const RowsShape key_shape = ShapeOf("keys", keys);
  return CheckPoolShapes(spec, queries, key_shape, ShapeOf("values", values),
                         out, weights, mask, execution, shard, out_name);
}

// Every row of `out` as a query that sees no key gets it (the m = 0 case):
// an empty row, or with a sink (normalize.h), which takes all the weight, 0.
template <typename T>
void FillEmptyRows(EmptyRows empty_rows, bool sink, MatrixView<T> out);

}  // namespace detail
}  // namespace attnpool
