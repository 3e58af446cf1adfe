// Stage 3: normalization of each query's weights over its keys, with masks.
#pragma once

#include <attnpool/execution.h>
#include <attnpool/mask.h>
#include <attnpool/matrix.h>
#include <attnpool/table.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace attnpool {

// What a normalization takes: weights (≥ 0; a masked key weighs 0, and a
// zero weight of a non-exponential kernel contributes nothing) or scores
// (any real; a masked key scores −inf, and a bias is added).
enum class NormalizationInput : int { weights, scores };

// The normalizations of stage 3 (docs/design.md §1), one line each; the enum,
// names, kNormalizations and the predicate below are generated from it.
// Columns: name, C enum suffix, input.
#define ATTNPOOL_NORMALIZATION_TABLE(X)                                        \
  X(none, NORMALIZE_NONE, weights) /* weights as they are (masked keys 0) */   \
  X(sum, NORMALIZE_SUM, weights) /* aᵢ / Σⱼ aⱼ — Nadaraya–Watson */ \
  /* exp(aᵢ − max) / Σⱼ exp(aⱼ − max) */                            \
  X(softmax, NORMALIZE_SOFTMAX, scores)                                        \
  /* 1 on the largest visible value (ties: lowest index), else 0 */            \
  X(argmax, NORMALIZE_ARGMAX, scores)

enum class Normalization : int {
  ATTNPOOL_NORMALIZATION_TABLE(ATTNPOOL_TABLE_ENUMERATOR)
};

struct NormalizationProperties {
  Normalization normalization;
  const char* name;
  NormalizationInput input;
};

// kNormalizations[k] describes Normalization(k).
inline constexpr NormalizationProperties kNormalizations[] = {
#define ATTNPOOL_NORMALIZATION_PROPERTIES(name, c_name, input) \
  {Normalization::name, #name, NormalizationInput::input},
    ATTNPOOL_NORMALIZATION_TABLE(ATTNPOOL_NORMALIZATION_PROPERTIES)
#undef ATTNPOOL_NORMALIZATION_PROPERTIES
};
constexpr int kNormalizationCount = table_size(kNormalizations);

// Whether it takes scores (softmax, argmax) rather than weights; false for
// a value outside the table.
constexpr bool normalizes_scores(Normalization normalization) {
  return in_table(kNormalizations, normalization) &&
         kNormalizations[static_cast<int>(normalization)].input ==
             NormalizationInput::scores;
}

const char* normalization_name(Normalization normalization);
Normalization normalization_from_name(const char* name);  // throws Error

// What a query whose weights are all exactly zero, or whose keys are all
// masked, gets: a row of NaN (the default: it cannot pass unnoticed) or a
// row of zeros.
enum class EmptyRows : int { nan = 0, zero = 1 };

// In place on an n×m matrix of values a (scores or kernel weights), as the
// formulas above say, restricted to the keys the mask shows; hidden keys get
// weight 0. A row is empty when no key is visible, or when its visible
// weights are all exactly 0 (none, sum) or its visible scores all −inf
// (softmax, argmax): empty rows follow `empty_rows`. A +inf among a row's
// softmax scores takes all the weight (shared equally by the +inf entries);
// a NaN visible value makes its row NaN whatever the policy, and a hidden
// key's value (NaN or not) changes nothing. `sum` takes weights ≥ 0 (what
// the kernels give): ±inf weights share the row as +inf scores do, and a
// sum that is NaN (+inf with −inf) or 0 with weights that are not all 0
// (mixed signs) makes the row NaN. README "Non-finite data".
//
// Accuracy (float): every weight w of sum or softmax has relative error
// ≤ (m + 8)·u + 4e-7 + u·|aᵢ − max| (the last term only for softmax), or
// absolute error ≤ the smallest normal number where it underflows. With
// adjustments, the error of aᵢ and of max grows by a few u times the
// magnitudes of their terms (the soft-capped score, with tanh's relative
// 2e-7 beside; ALiBi's term; the bias), which their sum may cancel.
void normalize(Normalization normalization, MatrixView<float> values,
               const Mask<float>& mask = {},
               EmptyRows empty_rows = EmptyRows::nan,
               const Execution& execution = {});
void normalize(Normalization normalization, MatrixView<double> values,
               const Mask<double>& mask = {},
               EmptyRows empty_rows = EmptyRows::nan,
               const Execution& execution = {});

}  // namespace attnpool
