// The weighted-sum stage's interface between target-independent src/ and the
// per-ISA arch/ code.
// Each function dispatches (HWY_DYNAMIC_DISPATCH) to the active target; the
// computing ones return the Highway target bit they ran on. No OpenMP here:
// src/ splits the work into blocks and calls these once per block.
#pragma once

#include <cstddef>
#include <cstdint>

#include <attnpool/matrix.h>

namespace attnpool {
namespace detail {

// Output columns per panel on the active target: the width of the widest
// register tile (a multiple of the vector length). Column ranges handed to
// WeightedSumRows start at a multiple of it.
size_t WeightedSumPanelWidth(float);
size_t WeightedSumPanelWidth(double);

// Elements of the packed copy of `values` that WeightedSumRows wants on the
// active target, or 0 when it reads `values` in place (its rows are dense and
// whole vectors, or there are too few output rows for a copy to pay).
// Packed layout: column panels in order; the panel starting at column c has
// width w (the panel width, or the columns left rounded up to whole vectors)
// and holds element (j, c + k) at packed[c·m + j·w + k], zero for c + k ≥ dv.
size_t WeightedSumPackedSize(ConstMatrixView<float> values, size_t out_rows);
size_t WeightedSumPackedSize(ConstMatrixView<double> values, size_t out_rows);

// Packs rows [row_begin, row_end) of `values` (all columns) into `packed`,
// which holds WeightedSumPackedSize elements.
int64_t PackWeightedSumValues(ConstMatrixView<float> values, size_t row_begin,
                              size_t row_end, float* packed);
int64_t PackWeightedSumValues(ConstMatrixView<double> values, size_t row_begin,
                              size_t row_end, double* packed);

// out(i, c) = Σⱼ weights(i, j) · values(j, c) for rows [row_begin, row_end)
// and columns [column_begin, column_end). `packed` is the packed copy of
// `values`, or null when WeightedSumPackedSize said 0.
int64_t WeightedSumRows(ConstMatrixView<float> weights,
                        ConstMatrixView<float> values, const float* packed,
                        MatrixView<float> out, size_t row_begin, size_t row_end,
                        size_t column_begin, size_t column_end);
int64_t WeightedSumRows(ConstMatrixView<double> weights,
                        ConstMatrixView<double> values, const double* packed,
                        MatrixView<double> out, size_t row_begin,
                        size_t row_end, size_t column_begin, size_t column_end);

}  // namespace detail
}  // namespace attnpool
