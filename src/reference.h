// The scalar reference: the oracle every target is tested against. Written
// for obviousness, in double, never optimized (docs/design.md §2).
#pragma once

#include <attnpool/distance.h>
#include <attnpool/element.h>
#include <attnpool/kernel.h>
#include <attnpool/matrix.h>
#include <attnpool/normalize.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace attnpool {
namespace reference {

// distance(q, k) over d coordinates, computed in double.
double distance(Distance distance, const double* query, const double* key,
                size_t depth);

// Row-major n×m matrix of reference distances.
template <typename T>
std::vector<double> pairwise_distances(Distance metric,
                                       ConstMatrixView<T> queries,
                                       ConstMatrixView<T> keys) {
  std::vector<double> out(queries.rows * keys.rows);
  std::vector<double> query(queries.cols), key(keys.cols);
  for (size_t i = 0; i < queries.rows; ++i) {
    for (size_t p = 0; p < queries.cols; ++p) query[p] = queries(i, p);
    for (size_t j = 0; j < keys.rows; ++j) {
      for (size_t p = 0; p < keys.cols; ++p) key[p] = keys(j, p);
      out[i * keys.rows + j] =
          reference::distance(metric, query.data(), key.data(), queries.cols);
    }
  }
  return out;
}

// The kernel weight of a stage-1 value, or with `logit` the logit ℓ of an
// exponential kernel (weight = exp(ℓ)). `input` is what produced the value.
double kernel(const KernelSpec& spec, Distance input, double value,
              size_t depth, bool logit = false);

// Floor division, rounding toward −∞.
inline __int128 floor_divide(__int128 a, __int128 b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}

// Whether the mask hides key j from query i: past its valid length, after
// its causal limit, outside its sliding window or its chunk, `visible` 0,
// or a bias of −inf. Positions in exact 128-bit arithmetic.
template <typename T>
bool hidden(const Mask<T>& mask, size_t i, size_t j) {
  const __int128 position = static_cast<__int128>(i) + mask.causal_offset;
  const __int128 key = j;
  return (mask.valid_lengths && j >= mask.valid_lengths[i]) ||
         (mask.chunk && floor_divide(key, __int128(*mask.chunk)) !=
                            floor_divide(position, __int128(*mask.chunk))) ||
         (mask.causal && key > position) ||
         (mask.window_left && key < position - __int128(*mask.window_left)) ||
         (mask.window_right && key > position + __int128(*mask.window_right)) ||
         (mask.visible.data && mask.visible(i, j) == 0) ||
         (mask.bias.data &&
          mask.bias(i, j) == -std::numeric_limits<T>::infinity());
}

// The score `value` of visible key j of query i as a normalization sees it:
// soft-capped, plus ALiBi's slope·(j − p) (symmetric: −slope·|j − p|), plus
// the bias (mask.h).
template <typename T>
double adjusted_score(const Mask<T>& mask, size_t i, size_t j, double value) {
  if (mask.softcap) {
    const double cap = *mask.softcap;
    value = cap * std::tanh(value / cap);
  }
  __int128 distance = static_cast<__int128>(j) - i - mask.causal_offset;
  if (mask.alibi_symmetric && distance > 0) distance = -distance;
  value += double(mask.alibi_slope.value_or(T(0))) * double(distance);
  return mask.bias.data ? value + double(mask.bias(i, j)) : value;
}

// Normalizes the row-major rows×cols `values` in place, in double, as
// docs/design.md §1 stage 3 says; `logits`: values are logits of exponential
// weights (none → exp, sum and softmax → softmax, argmax → argmax).
template <typename T>
void normalize(Normalization normalization, bool logits, EmptyRows empty_rows,
               const Mask<T>& mask, std::vector<double>& values, size_t rows,
               size_t cols) {
  const double infinity = std::numeric_limits<double>::infinity();
  const bool scores = logits || normalizes_scores(normalization);
  std::vector<bool> seen(cols);
  std::vector<double> weight(cols);
  for (size_t i = 0; i < rows; ++i) {
    double* row = values.data() + i * cols;
    for (size_t j = 0; j < cols; ++j) {
      seen[j] = !hidden(mask, i, j);
      if (seen[j]) row[j] = adjusted_score(mask, i, j, row[j]);
    }
    // The sink's logit joins a softmax (−inf: none).
    const double sink = mask.sink ? double(*mask.sink) : -infinity;
    // NaN among the visible values: a NaN row. Otherwise the weights.
    bool has_nan = false, empty = true;
    for (size_t j = 0; j < cols; ++j) has_nan |= seen[j] && std::isnan(row[j]);
    std::fill(weight.begin(), weight.end(), 0.0);
    if (normalization == Normalization::argmax) {
      double best = -infinity;
      size_t winner = cols;
      for (size_t j = 0; j < cols; ++j) {
        if (seen[j] && row[j] > best) best = row[j], winner = j;
      }
      if (winner < cols) weight[winner] = 1, empty = false;
    } else if (scores &&
               (logits ? normalization != Normalization::none : true)) {
      double best = sink;
      for (size_t j = 0; j < cols; ++j)
        if (seen[j]) best = std::max(best, row[j]);
      if (best == infinity) {
        double winners = sink == infinity;
        for (size_t j = 0; j < cols; ++j)
          winners += seen[j] && row[j] == infinity;
        for (size_t j = 0; j < cols; ++j) {
          weight[j] = seen[j] && row[j] == infinity ? 1 / winners : 0;
        }
        empty = false;
      } else if (best > -infinity) {
        double sum = std::exp(sink - best);
        for (size_t j = 0; j < cols; ++j) {
          if (seen[j]) sum += weight[j] = std::exp(row[j] - best);
        }
        for (double& w : weight) w /= sum;
        empty = false;
      }
    } else {  // none (weights or exp of logits) and sum of weights
      double sum = 0;
      for (size_t j = 0; j < cols; ++j) {
        if (seen[j]) sum += weight[j] = logits ? std::exp(row[j]) : row[j];
      }
      for (size_t j = 0; j < cols; ++j) empty &= weight[j] == 0;
      if (normalization == Normalization::sum && !empty) {
        // A sum that is NaN (+inf with −inf) or 0 (mixed signs that cancel)
        // normalizes nothing: a NaN row. Infinite weights share the row, as
        // +inf scores do in a softmax (the limit of wᵢ / Σ w).
        has_nan |= std::isnan(sum) || sum == 0;
        for (size_t j = 0; j < cols; ++j) {
          weight[j] = std::isinf(sum) ? (weight[j] == sum ? 1.0 : 0.0)
                                      : weight[j] / sum;
        }
        if (std::isinf(sum)) {
          double winners = 0;
          for (double w : weight) winners += w;
          for (double& w : weight) w /= winners;
        }
      }
    }
    const double fill = has_nan || empty_rows == EmptyRows::nan
                            ? std::numeric_limits<double>::quiet_NaN()
                            : 0.0;
    for (size_t j = 0; j < cols; ++j) {
      row[j] = has_nan || empty ? fill : weight[j];
    }
  }
}

// The pooled sum of normalized weights (README "Non-finite data"): out(i, c)
// = Σ weights(i, j)·values(j, c) over the keys j that contribute to query i
// — not hidden by the mask and, when `zero_weights_count` is false (the
// weights of a non-exponential kernel under none or sum), with a nonzero
// weight — summed in double in order of j. A row of NaN weights (a NaN row,
// or an empty row of the NaN policy) is NaN, one whose weights are all 0 (an
// empty row of the zero policy) 0, whatever the values — unless a sink
// joins the softmax: then no row is empty, and weights of 0 are ones that
// underflowed beside it.
template <typename T>
std::vector<double> pooled_sum(ConstMatrixView<T> weights,
                               ConstMatrixView<T> values, const Mask<T>& mask,
                               bool zero_weights_count) {
  std::vector<double> out(weights.rows * values.cols, 0.0);
  const bool sink =
      mask.sink && *mask.sink > -std::numeric_limits<T>::infinity();
  for (size_t i = 0; i < weights.rows; ++i) {
    bool empty = !sink, nan = false;
    for (size_t j = 0; j < weights.cols; ++j) {
      empty &= weights(i, j) == T(0);
      nan |= std::isnan(weights(i, j));
    }
    if (nan) {
      std::fill(out.begin() + i * values.cols,
                out.begin() + (i + 1) * values.cols,
                std::numeric_limits<double>::quiet_NaN());
    }
    if (empty || nan) continue;
    for (size_t c = 0; c < values.cols; ++c) {
      double sum = 0;
      for (size_t j = 0; j < weights.cols; ++j) {
        if (hidden(mask, i, j)) continue;
        if (!zero_weights_count && weights(i, j) == T(0)) continue;
        sum += double(weights(i, j)) * double(values(j, c));
      }
      out[i * values.cols + c] = sum;
    }
  }
  return out;
}

// Row-major n×dv matrix out(i, c) = Σⱼ weights(i, j) · values(j, c), summed
// in double in order of j; 0 for m = 0 (weighted_sum: IEEE, 0·NaN = NaN).
template <typename T>
std::vector<double> weighted_sum(ConstMatrixView<T> weights,
                                 ConstMatrixView<T> values) {
  std::vector<double> out(weights.rows * values.cols, 0.0);
  for (size_t i = 0; i < weights.rows; ++i) {
    for (size_t c = 0; c < values.cols; ++c) {
      double sum = 0;
      for (size_t j = 0; j < weights.cols; ++j) {
        sum += double(weights(i, j)) * double(values(j, c));
      }
      out[i * values.cols + c] = sum;
    }
  }
  return out;
}

// The value of a bfloat16 or binary16 bit pattern (NaN patterns: NaN of
// their sign).
double bfloat16_value(uint16_t bits);
double float16_value(uint16_t bits);

// The value x takes in bfloat16 or binary16 (element.h): rounded to
// nearest, ties to even; ±inf beyond the largest finite value; NaN for NaN;
// the sign of zero kept.
double round_to_bfloat16(double x);
double round_to_float16(double x);

// The value an element of `type` (element.h) stored as `bits` (its storage's
// bytes, little-endian, in the low bits) holds before any scale.
double element_value(ElementType type, uint32_t bits);

}  // namespace reference
}  // namespace attnpool
