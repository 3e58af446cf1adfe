// Stage 4: the weighted sum of value rows.
#pragma once

#include <attnpool/execution.h>
#include <attnpool/matrix.h>

namespace attnpool {

// out = weights · values: out(i, :) = Σⱼ weights(i, j) · values(j, :).
// weights: n×m, values: m×dv, out: n×dv, any strides. m = 0 gives a zero
// output.
// Accuracy (u = unit roundoff of T): |err| ≤ (m+1)·u·Σⱼ|wᵢⱼ·vⱼc|.
// Each output element is one chain of multiply-adds over j = 0, …, m−1 in
// order, accumulated in T: results are bitwise identical for every thread
// count, and an element's value does not depend on the other rows or columns
// of the call (a block of out computed on its own has the same bits). They
// may differ between targets (fused or separate multiply-add).
// Throws attnpool::Error naming the argument on invalid input (null data with
// a non-zero size, shape mismatch, stride < cols, an output that overlaps an
// input, sizes that overflow), before writing anything.
void weighted_sum(ConstMatrixView<float> weights, ConstMatrixView<float> values,
                  MatrixView<float> out, const Execution& execution = {});
void weighted_sum(ConstMatrixView<double> weights,
                  ConstMatrixView<double> values, MatrixView<double> out,
                  const Execution& execution = {});

}  // namespace attnpool
