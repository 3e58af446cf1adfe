// Per-ISA normalization stage (docs/design.md §1, stage 3): row by row, in
// place.
//
// A row is handled in the "score" domain (softmax, argmax, and every
// normalization of logits), where a hidden key is −inf, or in the "weight"
// domain (none and sum of plain weights), where it is 0. The structural
// masks (valid length, causal, sliding window) bound a run of keys: the
// row is shortened to its end, and the keys before its start (the window's
// left side) get the hidden value, as the element-wise `visible` matrix's
// hidden keys do, before the row is normalized.

#if defined(ATTNPOOL_ARCH_NORMALIZE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_NORMALIZE_INL_H_
#undef ATTNPOOL_ARCH_NORMALIZE_INL_H_
#else
#define ATTNPOOL_ARCH_NORMALIZE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <limits>

#include "arch/math-inl.h"
#include "arch/prefix_io-inl.h"
#include "arch/stages.h"
#include "core/visible_run.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using ::attnpool::detail::VisibleLimit;
using ::attnpool::detail::VisibleStart;

template <typename T>
void FillRow(T* HWY_RESTRICT row, size_t begin, size_t end, T value) {
  std::fill(row + begin, row + end, value);
}

// The vector of row[j, j + Lanes) when it is whole, else the rest padded
// with `pad`; never reads past row + count.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> LoadPadded(D d, const T* HWY_RESTRICT row, size_t j,
                                 size_t count, T pad) {
  const size_t rest = count - j;
  if (rest >= hn::Lanes(d)) return hn::LoadU(d, row + j);
  return hn::IfThenElse(hn::FirstN(d, rest), LoadPrefix(d, row + j, rest),
                        hn::Set(d, pad));
}

// row[j] ← op(row[j]) for j < count, a vector at a time; the last partial
// vector is padded with `pad`, which op must map harmlessly. Lambdas here
// capture scalars only: SVE vectors cannot be captured.
template <class D, class Op, typename T = hn::TFromD<D>>
HWY_INLINE void TransformRow(D d, T* HWY_RESTRICT row, size_t count, T pad,
                             const Op& op) {
  const size_t N = hn::Lanes(d);
  for (size_t j = 0; j < count; j += N) {
    const auto result = op(LoadPadded(d, row, j, count, pad));
    if (count - j >= N) {
      hn::StoreU(result, d, row + j);
    } else {
      StorePrefix(d, result, row + j, count - j);
    }
  }
}

// Largest value of row[0, count) (−inf if none) and whether any is NaN.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T RowMax(D d, const T* HWY_RESTRICT row, size_t count,
                    bool* has_nan) {
  const T lowest = -std::numeric_limits<T>::infinity();
  const size_t N = hn::Lanes(d);
  auto maximum = hn::Set(d, lowest);
  auto nan = hn::FirstN(d, 0);
  for (size_t j = 0; j < count; j += N) {
    const auto v = LoadPadded(d, row, j, count, lowest);
    maximum = hn::Max(maximum, v);
    nan = hn::Or(nan, hn::Not(hn::Eq(v, v)));
  }
  *has_nan = !hn::AllFalse(d, nan);
  // Highway 1.0.3's EMU128 MaxOfLanes starts from the lowest finite value, so
  // it cannot return −inf: a row of −inf must be recognized before reducing.
  if (hn::AllTrue(d, hn::Eq(maximum, hn::Set(d, lowest)))) return lowest;
  return hn::GetLane(hn::MaxOfLanes(d, maximum));
}

// Σ row[0, count).
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T RowSum(D d, const T* HWY_RESTRICT row, size_t count) {
  const size_t N = hn::Lanes(d);
  auto sum = hn::Zero(d);
  for (size_t j = 0; j < count; j += N) {
    sum = hn::Add(sum, LoadPadded(d, row, j, count, T(0)));
  }
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// Outcome of normalizing one row's visible prefix.
enum class RowResult { normalized, empty, nan };

// What `none` makes of row[0, count): a NaN anywhere makes the row NaN, all
// exactly 0 makes it empty, anything else stays as it is.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE RowResult WeightsAsIs(D d, const T* HWY_RESTRICT row, size_t count) {
  const size_t N = hn::Lanes(d);
  auto nan = hn::FirstN(d, 0);
  auto nonzero = hn::FirstN(d, 0);
  for (size_t j = 0; j < count; j += N) {
    const auto v = LoadPadded(d, row, j, count, T(0));
    nan = hn::Or(nan, hn::Not(hn::Eq(v, v)));
    nonzero = hn::Or(nonzero, hn::Not(hn::Eq(v, hn::Zero(d))));
  }
  if (!hn::AllFalse(d, nan)) return RowResult::nan;
  return hn::AllFalse(d, nonzero) ? RowResult::empty : RowResult::normalized;
}

// The limit of a normalization whose row contains `infinity` (±inf): those
// entries (and `others` more outside the row: a sink) share all the weight,
// the others get 0. `infinity` occurs in row[0, count), or else the row is
// left as it is (false).
template <typename T>
bool ShareAmongInfinities(T* HWY_RESTRICT row, size_t count, T infinity,
                          size_t others = 0) {
  size_t winners = 0;
  for (size_t j = 0; j < count; ++j) winners += row[j] == infinity;
  if (winners == 0) return false;
  winners += others;
  const T share = T(1) / static_cast<T>(winners);
  for (size_t j = 0; j < count; ++j) row[j] = row[j] == infinity ? share : T(0);
  return true;
}

// softmax(row[0, count)), scores with hidden keys at −inf, and a sink's
// logit (−inf: none) in the denominator (normalize.h).
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE RowResult SoftmaxRow(D d, T* HWY_RESTRICT row, size_t count,
                                T sink) {
  bool has_nan = false;
  const T maximum = std::max(RowMax(d, row, count, &has_nan), sink);
  if (has_nan) return RowResult::nan;
  const T infinity = std::numeric_limits<T>::infinity();
  if (maximum == -infinity) return RowResult::empty;
  if (maximum == infinity) {
    // The limit of softmax: the +inf scores (and sink) share all the weight.
    if (!ShareAmongInfinities(row, count, infinity, sink == infinity)) {
      FillRow(row, 0, count, T(0));  // the sink's alone
    }
    return RowResult::normalized;
  }
  // x − max ≤ 0 here, so exp cannot overflow; the max itself gives 1, so the
  // sum is ≥ 1.
  const size_t N = hn::Lanes(d);
  const auto shift = hn::Set(d, maximum);
  auto sum = hn::Zero(d);
  for (size_t j = 0; j < count; j += N) {
    const auto e = attnpool::HWY_NAMESPACE::Exp(
        d, hn::Sub(LoadPadded(d, row, j, count, -infinity), shift));
    sum = hn::Add(sum, e);  // padding lanes: exp(−inf) = 0
    if (count - j >= N) {
      hn::StoreU(e, d, row + j);
    } else {
      StorePrefix(d, e, row + j, count - j);
    }
  }
  const T scale =
      T(1) / (hn::GetLane(hn::SumOfLanes(d, sum)) +
              (sink == -infinity ? T(0) : std::exp(sink - maximum)));
  TransformRow(d, row, count, T(0), [d, scale](hn::Vec<D> v) HWY_ATTR {
    return hn::Mul(v, hn::Set(d, scale));
  });
  return RowResult::normalized;
}

// One-hot on the first maximum of row[0, count) (hidden keys at −inf).
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE RowResult ArgmaxRow(D d, T* HWY_RESTRICT row, size_t count) {
  bool has_nan = false;
  const T maximum = RowMax(d, row, count, &has_nan);
  if (has_nan) return RowResult::nan;
  if (count == 0 || maximum == -std::numeric_limits<T>::infinity()) {
    return RowResult::empty;
  }
  const size_t winner =
      static_cast<size_t>(std::find(row, row + count, maximum) - row);
  FillRow(row, 0, count, T(0));
  row[winner] = T(1);
  return RowResult::normalized;
}

// a / Σa over row[0, count) (hidden keys at 0). A NaN sum (a NaN weight, or
// +inf with −inf) makes the row NaN; a sum of ±inf from infinite weights is
// shared among them, as softmax does; a zero sum is an empty row when every
// weight is 0, else (mixed signs that cancel) NaN.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE RowResult SumRow(D d, T* HWY_RESTRICT row, size_t count) {
  const T sum = RowSum(d, row, count);
  if (sum != sum) return RowResult::nan;
  if (sum == T(0)) {
    return WeightsAsIs(d, row, count) == RowResult::empty ? RowResult::empty
                                                          : RowResult::nan;
  }
  T scale = T(1) / sum;
  if (std::abs(sum) == std::numeric_limits<T>::infinity()) {
    if (ShareAmongInfinities(row, count, sum)) return RowResult::normalized;
    // Finite weights whose sum overflows: summed again scaled by 2^-64 (an
    // exact power of two; weights that become subnormal are far below the
    // result's precision), then divided by that sum.
    const T shrink = T(1.0 / 18446744073709551616.0);
    TransformRow(d, row, count, T(0), [d, shrink](hn::Vec<D> v) HWY_ATTR {
      return hn::Mul(v, hn::Set(d, shrink));
    });
    scale = T(1) / RowSum(d, row, count);
  }
  TransformRow(d, row, count, T(0), [d, scale](hn::Vec<D> v) HWY_ATTR {
    return hn::Mul(v, hn::Set(d, scale));
  });
  return RowResult::normalized;
}

// score + bias, or −inf where the bias is −inf (the key is hidden, whatever
// its score).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V AddBias(D d, V score, V bias) {
  using T = hn::TFromD<D>;
  const V minus_infinity = hn::Set(d, -std::numeric_limits<T>::infinity());
  return hn::IfThenElse(hn::Eq(bias, minus_infinity), minus_infinity,
                        hn::Add(score, bias));
}

// A mask's score adjustments (mask.h: soft-capping, then ALiBi), in
// registers: of a vector of scores whose first key lies `distance` = j − p
// (KeyDistance) after the query's position. Accuracy: soft-capping adds
// tanh's error and one rounding of s/cap (relative, 2 u); ALiBi one rounding
// of the distance (exact below 2^24 in float) and one of the multiply-add.
// Symmetric ALiBi's −|j − p| is min(t, −t) of t = j − p, and the signed
// one's min(t, t): one form, no branch.
template <typename T>
class ScoreAdjuster {
 public:
  explicit ScoreAdjuster(const Mask<T>& mask)
      : softcap_(mask.softcap.has_value()),
        alibi_(mask.alibi_slope.value_or(T(0)) != T(0)),
        cap_(mask.softcap.value_or(T(1))),
        inverse_cap_(T(1) / cap_),
        slope_(mask.alibi_slope.value_or(T(0))),
        mirror_(mask.alibi_symmetric ? T(-1) : T(1)) {}

  bool any() const { return softcap_ || alibi_; }

  template <class D, class V = hn::Vec<D>>
  HWY_INLINE V operator()(D d, V score, int64_t distance) const {
    if (softcap_) {
      // Scores well inside the cap (the usual case) skip tanh's large branch.
      const V x = hn::Mul(score, hn::Set(d, inverse_cap_));
      score = hn::Mul(hn::Set(d, cap_),
                      AllTanhSmall(d, x) ? TanhOfSmall(d, x) : Tanh(d, x));
    }
    if (alibi_) {
      const V t = hn::Iota(d, static_cast<T>(distance));
      score = hn::MulAdd(hn::Set(d, slope_),
                         hn::Min(t, hn::Mul(t, hn::Set(d, mirror_))), score);
    }
    return score;
  }

 private:
  bool softcap_, alibi_;
  T cap_, inverse_cap_, slope_, mirror_;
};

template <typename T>
void NormalizeRows(const detail::NormalizePlan<T>& plan, MatrixView<T> values,
                   size_t row_begin, size_t row_end) {
  const hn::ScalableTag<T> d;
  const Mask<T>& mask = plan.mask;
  const Normalization normalization = plan.normalization;
  const bool score_domain = plan.logits || normalizes_scores(normalization);
  const T hidden = score_domain ? -std::numeric_limits<T>::infinity() : T(0);
  const size_t key_count = values.cols;
  const ScoreAdjuster<T> adjust(mask);
  const T sink = mask.sink.value_or(-std::numeric_limits<T>::infinity());
  for (size_t i = row_begin; i < row_end; ++i) {
    T* HWY_RESTRICT row = values.row(i);
    const size_t limit = VisibleLimit(mask, i, key_count);
    if (adjust.any()) {
      const size_t N = hn::Lanes(d);
      const int64_t distance = detail::KeyDistance(mask, i, 0);
      for (size_t j = 0; j < limit; j += N) {
        const auto v = adjust(d, LoadPadded(d, row, j, limit, T(0)),
                              distance + static_cast<int64_t>(j));
        if (limit - j >= N) {
          hn::StoreU(v, d, row + j);
        } else {
          StorePrefix(d, v, row + j, limit - j);
        }
      }
    }
    if (mask.bias.data != nullptr) {
      // A bias of −inf hides its key: −inf whatever the score (NaN too).
      const T* HWY_RESTRICT bias = mask.bias.row(i);
      const size_t N = hn::Lanes(d);
      size_t j = 0;
      for (; j + N <= limit; j += N) {
        hn::StoreU(AddBias(d, hn::LoadU(d, row + j), hn::LoadU(d, bias + j)), d,
                   row + j);
      }
      for (; j < limit; ++j) {  // exact either way: one add
        row[j] = bias[j] == -std::numeric_limits<T>::infinity()
                     ? bias[j]
                     : row[j] + bias[j];
      }
    }
    if (mask.visible.data != nullptr) {
      const uint8_t* HWY_RESTRICT visible = mask.visible.row(i);
      for (size_t j = 0; j < limit; ++j) {
        if (visible[j] == 0) row[j] = hidden;
      }
    }
    // After the bias: a hidden key's bias (+inf, NaN) must not reach it.
    std::fill(row, row + std::min(VisibleStart(mask, i), limit), hidden);
    RowResult result = RowResult::normalized;
    if (normalization == Normalization::argmax) {
      result = ArgmaxRow(d, row, limit);
    } else if (plan.logits && normalization == Normalization::none) {
      TransformRow(d, row, limit, hidden, [d](hn::Vec<decltype(d)> v) HWY_ATTR {
        return attnpool::HWY_NAMESPACE::Exp(d, v);
      });
      result = WeightsAsIs(d, row, limit);
    } else if (score_domain) {
      result = SoftmaxRow(d, row, limit, sink);
    } else if (normalization == Normalization::sum) {
      result = SumRow(d, row, limit);
    } else {  // none
      result = WeightsAsIs(d, row, limit);
    }
    if (result == RowResult::normalized) {
      FillRow(row, limit, key_count, T(0));
    } else {
      const bool zero =
          result == RowResult::empty && plan.empty_rows == EmptyRows::zero;
      FillRow(row, 0, key_count,
              zero ? T(0) : std::numeric_limits<T>::quiet_NaN());
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_NORMALIZE_INL_H_
