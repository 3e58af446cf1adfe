// Which keys contribute to a query's pooled sum, and that sum made exact
// where values are not finite. Target-independent: the fused kernel
// (arch/), the staged pipeline and additive attention (src/) share it.
//
// The contract (README "Non-finite data"): out(i, :) = Σ wᵢⱼ·vⱼ over the
// keys j that contribute to query i, in IEEE arithmetic on those terms, and
// an empty row (no visible key, or all its weights 0) is the empty-row
// policy's row whatever the values. A key contributes unless a mask hides
// it (past the valid length, after the causal limit, outside the sliding
// window, `visible` 0, bias −inf) or — for the weights of a
// non-exponential kernel under `none` or `sum` — its weight is exactly 0
// (outside a compact kernel's support). So
// whatever a non-contributing key's value row holds, NaN and ±inf included,
// it changes no bit of the output; a visible key's NaN value reaches its
// column even where its weight is 0 (an exponential weight that underflows,
// a score of −inf), as 0·NaN.
//
// The fast paths multiply every value row of a block by its weight, where
// 0·NaN = NaN would break the contract. A product sum that comes out finite
// met no non-finite value, so it stands. Otherwise the block is summed again
// over a copy of its values with the non-finite entries zeroed (which adds
// exactly what finite entries with zero weights add: ±0), and the terms of
// the zeroed entries are added back for the keys that contribute.
#pragma once

#include <attnpool/matrix.h>
#include <attnpool/normalize.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "arch/stages.h"
#include "core/visible_run.h"

namespace attnpool {
namespace detail {

// Whether the mask hides key `key` (its column in the bias and visibility
// matrices) from query `row`; the prefix masks count keys from key_offset
// (a shard's first key in the whole sequence).
template <typename T>
bool MaskHides(const Mask<T>& mask, size_t row, size_t key,
               size_t key_offset = 0) {
  const size_t position = key_offset + key;
  if (position >= VisibleLimit(mask, row, std::numeric_limits<size_t>::max()) ||
      position < VisibleStart(mask, row)) {
    return true;
  }
  if (mask.visible.data != nullptr && mask.visible(row, key) == 0) return true;
  return mask.bias.data != nullptr &&
         mask.bias(row, key) == -std::numeric_limits<T>::infinity();
}

// Whether a zero weight keeps its key out of the sum: the weights of
// non-exponential kernels under none or sum (exactly 0 outside a compact
// kernel's support, and nowhere a rounding to 0).
template <typename T>
bool ZeroWeightsContributeNothing(const NormalizePlan<T>& plan) {
  return !plan.logits && !normalizes_scores(plan.normalization);
}

// Whether key `key` contributes to query `row`, whose weight for it is
// `weight` (any scaling of it: only whether it is 0 matters).
template <typename T>
bool Contributes(const NormalizePlan<T>& plan, size_t row, size_t key,
                 size_t key_offset, T weight) {
  if (ZeroWeightsContributeNothing(plan) && weight == T(0)) return false;
  return !MaskHides(plan.mask, row, key, key_offset);
}

template <typename T>
bool AllFinite(ConstMatrixView<T> view) {
  for (size_t r = 0; r < view.rows; ++r) {
    const T* row = view.row(r);
    for (size_t c = 0; c < view.cols; ++c) {
      if (!std::isfinite(row[c])) return false;
    }
  }
  return true;
}

// copy ← values with every non-finite entry 0 (copy may have more columns:
// they are zeroed). Returns whether any entry was not finite.
template <typename T>
bool CopyZeroingNonFinite(ConstMatrixView<T> values, MatrixView<T> copy) {
  bool replaced = false;
  for (size_t j = 0; j < values.rows; ++j) {
    const T* source = values.row(j);
    T* target = copy.row(j);
    for (size_t c = 0; c < values.cols; ++c) {
      const bool finite = std::isfinite(source[c]);
      replaced |= !finite;
      target[c] = finite ? source[c] : T(0);
    }
    for (size_t c = values.cols; c < copy.cols; ++c) target[c] = T(0);
  }
  return replaced;
}

// Whether to leave alone the rows whose weights are all 0: where `weights`
// are whole normalized rows (the staged pipeline), those are the empty rows
// of the zero policy, which stay 0; a block of a fused row is not a row.
enum class EmptyRowTerms { add, skip };

// Makes out, the block's sums over the zeroed copy of its values, the sums
// over the original values: out(r, c) += weights(r, j)·values(j, c) for every
// non-finite values(j, c) whose key contributes to query row_begin + r.
// Where such a key's weight is ±inf (unnormalized exponential weights), its
// zeroed entry gave inf·0 = NaN: out(r, c) is then summed again from the
// contributing keys alone (its value is ±inf or NaN, whatever the order).
// weights: rows × keys of the block (key j is key key_begin + j of the
// call); values: the block's original value rows. With `row_runs`, row r's
// weights here are those of its block's keys [row_runs[r].start,
// row_runs[r].limit) alone: its other keys belong to its other blocks (the
// fused kernel's rows whose blocks start at their first visible key) and
// contribute there, not here.
template <typename T>
void AddNonFiniteTerms(const NormalizePlan<T>& plan, ConstMatrixView<T> weights,
                       ConstMatrixView<T> values, MatrixView<T> out,
                       size_t row_begin, size_t key_begin, size_t key_offset,
                       EmptyRowTerms empty_rows = EmptyRowTerms::add,
                       const KeyRun* row_runs = nullptr) {
  std::vector<size_t> nonfinite_keys;
  for (size_t j = 0; j < values.rows; ++j) {
    const T* value = values.row(j);
    if (!std::all_of(value, value + values.cols,
                     [](T v) { return std::isfinite(v); })) {
      nonfinite_keys.push_back(j);
    }
  }
  const auto contributes = [&](size_t r, size_t j) {
    if (row_runs != nullptr &&
        (j < row_runs[r].start || j >= row_runs[r].limit)) {
      return false;
    }
    return Contributes(plan, row_begin + r, key_begin + j, key_offset,
                       weights(r, j));
  };
  std::vector<bool> again(values.cols);
  for (size_t r = 0; r < weights.rows; ++r) {
    const T* weight = weights.row(r);
    if (empty_rows == EmptyRowTerms::skip &&
        std::all_of(weight, weight + weights.cols,
                    [](T w) { return w == T(0); })) {
      continue;
    }
    T* target = out.row(r);
    std::fill(again.begin(), again.end(), false);
    for (size_t j : nonfinite_keys) {
      if (!contributes(r, j)) continue;
      const T* value = values.row(j);
      for (size_t c = 0; c < values.cols; ++c) {
        if (std::isfinite(value[c])) continue;
        if (std::isinf(weight[j])) again[c] = true;
        target[c] += weight[j] * value[c];
      }
    }
    for (size_t c = 0; c < values.cols; ++c) {
      if (!again[c]) continue;
      T sum = 0;
      for (size_t j = 0; j < values.rows; ++j) {
        if (contributes(r, j)) sum += weight[j] * values(j, c);
      }
      target[c] = sum;
    }
  }
}

}  // namespace detail
}  // namespace attnpool
