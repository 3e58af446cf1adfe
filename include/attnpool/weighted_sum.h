// Stage 4: the weighted sum of value rows.
#pragma once

#include <attnpool/execution.h>
#include <attnpool/matrix.h>

namespace attnpool {

// out = weights · values: out(i, :) = Σⱼ weights(i, j) · values(j, :).
// weights: n×m, values: m×dv, out: n×dv. m = 0 gives a zero output.
// Accuracy (u = unit roundoff of T): |err| ≤ (m+1)·u·Σⱼ|wᵢⱼ·vⱼc|.
// Results are bitwise identical for every thread count.
// Throws attnpool::Error naming the argument on invalid input (null data with
// a non-zero size, shape mismatch, stride < cols, an output that overlaps an
// input, sizes that overflow), before writing anything.
void weighted_sum(ConstMatrixView<float> weights, ConstMatrixView<float> values,
                  MatrixView<float> out, const Execution& execution = {});
void weighted_sum(ConstMatrixView<double> weights,
                  ConstMatrixView<double> values, MatrixView<double> out,
                  const Execution& execution = {});

}  // namespace attnpool
