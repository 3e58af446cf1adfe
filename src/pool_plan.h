// Checks shared by the pooling entry points (internal).
#pragma once

#include <attnpool/pool.h>

#include <string>

#include "arch/stages.h"

namespace attnpool {
namespace detail {

template <typename T>
struct PoolPlans {
  KernelPlan<T> kernel;        // write_logits set for exponential kernels
  NormalizePlan<T> normalize;  // logits likewise
};

// Validates a pooling call: the spec against the data, shapes, overlaps of
// the outputs (out, and weights when non-null) with the inputs and each
// other, and the mask; the output is named `out_name` in errors. `shard`: the
// keys are a shard of a longer sequence, so valid lengths may exceed their
// count. Throws attnpool::Error naming the argument.
template <typename T>
PoolPlans<T> CheckPool(const PoolSpec& spec, ConstMatrixView<T> queries,
                       ConstMatrixView<T> keys, ConstMatrixView<T> values,
                       MatrixView<T> out, const MatrixView<T>* weights,
                       const Mask<T>& mask, const Execution& execution,
                       bool shard = false, const std::string& out_name = "out");

// Every row of `out` as a query that sees no key gets it (the m = 0 case):
// an empty row, or with a sink (normalize.h), which takes all the weight, 0.
template <typename T>
void FillEmptyRows(EmptyRows empty_rows, bool sink, MatrixView<T> out);

}  // namespace detail
}  // namespace attnpool
