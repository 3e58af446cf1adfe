// Stage 1: all-pairs distances and similarity scores.
#pragma once

#include <attnpool/element.h>
#include <attnpool/execution.h>
#include <attnpool/matrix.h>
#include <attnpool/table.h>

namespace attnpool {

// What a distance gives the kernels (kernel.h): a squared distance r², a
// distance r, or a similarity score (which only kernels of scores take).
enum class DistanceOutput : int { squared_distance, distance, score };

// The distances and similarities of stage 1 (docs/design.md §1), one line each;
// the enum, names, kDistances and the predicates below are generated from
// it. For q, k in R^d. Columns: name, C enum suffix, output.
#define ATTNPOOL_DISTANCE_TABLE(X)                                             \
  X(sqeuclidean, SQEUCLIDEAN, squared_distance) /* Σ (qᵢ − kᵢ)² */     \
  X(euclidean, EUCLIDEAN, distance)             /* √ Σ (qᵢ − kᵢ)² */ \
  X(manhattan, MANHATTAN, distance)             /* Σ |qᵢ − kᵢ| */       \
  X(dot, DOT, score)                            /* Σ qᵢ kᵢ */             \
  /* dot / (‖q‖ ‖k‖); 0 when either norm is 0 */                       \
  X(cosine, COSINE, score)

enum class Distance : int {
  ATTNPOOL_DISTANCE_TABLE(ATTNPOOL_TABLE_ENUMERATOR)
};

struct DistanceProperties {
  Distance distance;
  const char* name;
  DistanceOutput output;
};

// kDistances[k] describes Distance(k).
inline constexpr DistanceProperties kDistances[] = {
#define ATTNPOOL_DISTANCE_PROPERTIES(name, c_name, output) \
  {Distance::name, #name, DistanceOutput::output},
    ATTNPOOL_DISTANCE_TABLE(ATTNPOOL_DISTANCE_PROPERTIES)
#undef ATTNPOOL_DISTANCE_PROPERTIES
};
constexpr int kDistanceCount = table_size(kDistances);

// Whether `distance` is one of the table's; the predicates are false for
// any other.
constexpr bool is_distance(Distance distance) {
  return in_table(kDistances, distance);
}

// The table line of `distance`, one of the table's.
constexpr const DistanceProperties& distance_properties(Distance distance) {
  return kDistances[static_cast<int>(distance)];
}

// Whether it gives similarity scores (dot, cosine) rather than distances
// r ≥ 0; for d = 1 a distance is a function of |q − k|.
constexpr bool is_similarity(Distance distance) {
  return is_distance(distance) &&
         distance_properties(distance).output == DistanceOutput::score;
}

// "sqeuclidean", "euclidean", ...; throws attnpool::Error for an invalid value.
const char* distance_name(Distance distance);
// Inverse of distance_name; throws attnpool::Error (argument "distance").
Distance distance_from_name(const char* name);

// out(i, j) = distance(queries row i, keys row j) for all i < n, j < m.
// queries: n×d, keys: m×d, out: n×m. d = 0 gives 0 everywhere.
//
// Accuracy (u = unit roundoff of T: 2⁻²⁴ for float, 2⁻⁵³ for double):
//  - dot:         |err| ≤ (d+1)·u·Σ|qᵢkᵢ|
//  - cosine:      |err| ≤ (d+6)·u·(Σ|qᵢkᵢ| / (‖q‖‖k‖) + |cos|), for any
//                 finite vectors: one whose largest |xᵢ| is beyond 2^±40
//                 (2^±400 for double), where Σx² would under- or overflow,
//                 is first scaled by a power of two (exactly, but for
//                 entries that become subnormal beside its largest); a
//                 product qᵢkᵢ below T's smallest normal number adds its
//                 subnormal rounding (2⁻¹⁴⁹ in float) on top.
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
// pairwise_distances of float queries to keys stored in any element type
// (element.h), computed in float on the values they hold.
void pairwise_distances(Distance distance, ConstMatrixView<float> queries,
                        const ElementRows& keys, MatrixView<float> out,
                        const Execution& execution = {});

}  // namespace attnpool
