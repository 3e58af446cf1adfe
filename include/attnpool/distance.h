// Stage 1: all-pairs distances and similarity scores.
#pragma once

#include <attnpool/execution.h>
#include <attnpool/matrix.h>

namespace attnpool {

// Values of DESIGN.md §1, stage 1. For q, k in R^d:
enum class Distance : int {
  sqeuclidean = 0,  // Σ (qᵢ − kᵢ)²
  euclidean = 1,    // √ Σ (qᵢ − kᵢ)²
  manhattan = 2,    // Σ |qᵢ − kᵢ|
  dot = 3,          // Σ qᵢ kᵢ
  cosine = 4,       // dot / (‖q‖ ‖k‖); 0 when either norm is 0
};
constexpr int kDistanceCount = 5;

// "sqeuclidean", "euclidean", ...; throws attnpool::Error for an invalid value.
const char* distance_name(Distance distance);
// Inverse of distance_name; throws attnpool::Error (argument "distance").
Distance distance_from_name(const char* name);

// out(i, j) = distance(queries row i, keys row j) for all i < n, j < m.
// queries: n×d, keys: m×d, out: n×m. d = 0 gives 0 everywhere.
//
// Accuracy (u = unit roundoff of T: 2⁻²⁴ for float, 2⁻⁵³ for double):
//  - dot:         |err| ≤ (d+1)·u·Σ|qᵢkᵢ|
//  - cosine:      |err| ≤ (d+6)·u·(Σ|qᵢkᵢ| / (‖q‖‖k‖) + |cos|)
//  - manhattan:   |err| ≤ (d+1)·u·result
//  - sqeuclidean: |err| ≤ (2d+8)·u·(‖q‖² + ‖k‖²), and relative error
//                 ≤ 32·(2d+8)·u; exactly 0 when q = k. For d ≥ 16 it is
//                 computed as ‖q‖² + ‖k‖² − 2q·k (GEMM-like), pairs with
//                 result < (‖q‖² + ‖k‖²)/32 are recomputed as Σ (qᵢ − kᵢ)².
//  - euclidean:   √ of the above.
// Non-finite coordinates follow IEEE arithmetic on the formulas: a NaN in
// query i or key j makes out(i, j) NaN and nothing else; an infinite one
// gives +inf (NaN where inf − inf occurs), dot's sum its IEEE value, cosine
// NaN (inf/inf); cosine's 0 for a zero norm becomes NaN when the other
// vector is not finite. Every target gives NaN exactly where the reference
// does. README "Non-finite data".
// Throws attnpool::Error naming the argument on invalid input (null data
// with a non-zero size, shape mismatch, stride < cols, an output that
// overlaps an input, sizes that overflow), before writing anything.
void pairwise_distances(Distance distance, ConstMatrixView<float> queries,
                        ConstMatrixView<float> keys, MatrixView<float> out,
                        const Execution& execution = {});
void pairwise_distances(Distance distance, ConstMatrixView<double> queries,
                        ConstMatrixView<double> keys, MatrixView<double> out,
                        const Execution& execution = {});

}  // namespace attnpool
