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
// Non-finite values follow IEEE arithmetic: a NaN in values(j, c) makes
// out(i, c) NaN for every i, even where weights(i, j) = 0 (0·NaN = NaN; an
// infinite value with a zero weight likewise), and a NaN weights(i, j) makes
// row i NaN: this stage is BLAS's W·V. (The pools leave out the keys that
// contribute nothing instead: pool.h.) Where
// finite products or partial sums exceed the range of T, an output is ±inf
// or NaN depending on the target (a fused multiply-add does not overflow
// where a separate multiply does).
// Throws attnpool::Error naming the argument on invalid input (null data with
// a non-zero size, shape mismatch, stride < cols, an output that overlaps an
// input, sizes that overflow), before writing anything.
void weighted_sum(ConstMatrixView<float> weights, ConstMatrixView<float> values,
                  MatrixView<float> out, const Execution& execution = {});
void weighted_sum(ConstMatrixView<double> weights,
                  ConstMatrixView<double> values, MatrixView<double> out,
                  const Execution& execution = {});

}  // namespace attnpool
