// The fused kernel's row policy (arch/fused-inl.h, step 2): a block's row of
// scores into its weights — kernel, score modifiers, bias and visible matrix,
// then the online softmax, the weights' running sum or the running argmax —
// and the factor by which the row's accumulator is rescaled first.

#if defined(ATTNPOOL_ARCH_FUSED_ROW_POLICY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_FUSED_ROW_POLICY_INL_H_
#undef ATTNPOOL_ARCH_FUSED_ROW_POLICY_INL_H_
#else
#define ATTNPOOL_ARCH_FUSED_ROW_POLICY_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "arch/fused.h"
#include "arch/kernel-inl.h"
#include "arch/math-inl.h"
#include "arch/normalize-inl.h"
#include "arch/prefix_io-inl.h"
#include "core/visible_run.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace fused {
namespace hn = hwy::HWY_NAMESPACE;

using RowMode = detail::FusedRowMode;

// Per-query running state.
template <typename T>
struct RowState {
  T max = -std::numeric_limits<T>::infinity();  // softmax: m; argmax: best
  T sum = 0;                                    // l, or Σw
  size_t best = 0;                              // argmax: first index
  bool nan = false;                             // a visible NaN was seen
};

// ProcessRow's softmax of exp(scale·s) scores without bias or visible
// matrix (scaled dot-product attention), scale > 0: two passes instead of
// four — the max of the raw scores (scale·max s = max scale·s), then
// p = exp(s·scale − m) by one multiply-add, stored and summed on the way.
// A NaN score makes the sum NaN (exp(NaN) = NaN), which marks the row. A
// block whose max logit is not finite returns false: the general path.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE bool ScaledSoftmaxRow(D d, T scale, T* HWY_RESTRICT row,
                                 size_t count, RowState<T>& state,
                                 T* rescale_out) {
  const size_t N = hn::Lanes(d);
  const T infinity = std::numeric_limits<T>::infinity();
  // Four chains of maxima, not one waiting on each step's latency: a max
  // is exact in any order (a NaN it drops makes the sum below NaN).
  auto maximum = hn::Set(d, -infinity), maximum1 = maximum, maximum2 = maximum,
       maximum3 = maximum;
  size_t j = 0;
  for (; j + 4 * N <= count; j += 4 * N) {
    maximum = hn::Max(maximum, hn::LoadU(d, row + j));
    maximum1 = hn::Max(maximum1, hn::LoadU(d, row + j + N));
    maximum2 = hn::Max(maximum2, hn::LoadU(d, row + j + 2 * N));
    maximum3 = hn::Max(maximum3, hn::LoadU(d, row + j + 3 * N));
  }
  for (; j < count; j += N) {
    maximum = hn::Max(maximum, LoadPadded(d, row, j, count, -infinity));
  }
  maximum = hn::Max(hn::Max(maximum, maximum1), hn::Max(maximum2, maximum3));
  // EMU128/SCALAR MaxOfLanes cannot return −inf (normalize-inl.h).
  if (hn::AllTrue(d, hn::Eq(maximum, hn::Set(d, -infinity)))) {
    return false;
  }
  const T block_max = hn::GetLane(hn::MaxOfLanes(d, maximum)) * scale;
  // scale·s − max in one fused multiply-add keeps scale·s exact: for the max
  // key, up to half a place of the rounded max logit from 0. From 2^digits
  // on that is more than ±1/2, and near 2³¹ its exp overflows or flushes to
  // 0 (a row of weight 0): the general path rounds the logits first.
  constexpr T kLargeLogit = T(uint64_t{1} << std::numeric_limits<T>::digits);
  if (!(std::abs(block_max) < kLargeLogit)) return false;  // and ±inf, NaN
  const T old_max = state.max;
  if (old_max == infinity) return false;  // earlier +inf scores take all
  const T new_max = std::max(old_max, block_max);
  const auto factor = hn::Set(d, scale), shift = hn::Set(d, -new_max);
  auto sum = hn::Zero(d);
  for (size_t j = 0; j < count; j += N) {
    auto p = attnpool::HWY_NAMESPACE::Exp(
        d, hn::MulAdd(LoadPadded(d, row, j, count, T(0)), factor, shift));
    if (count - j >= N) {
      sum = hn::Add(sum, p);
      hn::StoreU(p, d, row + j);
    } else {
      sum = hn::Add(sum, hn::IfThenElseZero(hn::FirstN(d, count - j), p));
      StorePrefix(d, p, row + j, count - j);
    }
  }
  const T block_sum = hn::GetLane(hn::SumOfLanes(d, sum));
  state.nan |= block_sum != block_sum;
  *rescale_out =
      detail::AdvanceSoftmax(&state.max, &state.sum, new_max, block_sum);
  return true;
}

// row[j] ← exp(row[j] − max) for j < count (logits ≤ max, −inf for hidden
// keys); returns their sum (NaN if a logit is NaN), in RowSum's order.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T ExpRow(D d, T* HWY_RESTRICT row, size_t count, T max) {
  const size_t N = hn::Lanes(d);
  const auto shift = hn::Set(d, max);
  auto sum = hn::Zero(d);
  for (size_t j = 0; j < count; j += N) {
    const auto p = attnpool::HWY_NAMESPACE::Exp(
        d, hn::Sub(LoadPadded(d, row, j, count,
                              -std::numeric_limits<T>::infinity()),
                   shift));
    sum = hn::Add(sum, p);  // padding: exp(−inf) = 0
    if (count - j >= N) {
      hn::StoreU(p, d, row + j);
    } else {
      StorePrefix(d, p, row + j, count - j);
    }
  }
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// Turns a block's row of `count` values in their final domain (logits or
// weights; hidden keys at the hidden value) into its weights p in place,
// updates the state and returns the factor the row's accumulator must be
// scaled by first.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T BlockWeights(D d, RowMode mode, T* HWY_RESTRICT row, size_t count,
                          size_t key, RowState<T>& state) {
  const T infinity = std::numeric_limits<T>::infinity();
  if (mode == RowMode::weights) {
    state.sum += RowSum(d, row, count);
    return T(1);
  }
  bool has_nan = false;
  const T block_max = RowMax(d, row, count, &has_nan);
  state.nan |= has_nan;
  if (mode == RowMode::argmax) {
    if (block_max > state.max) {
      state.max = block_max;
      state.best = key + static_cast<size_t>(
                             std::find(row, row + count, block_max) - row);
    }
    return T(1);
  }
  // Softmax rows.
  const T old_max = state.max;
  const T new_max = std::max(old_max, block_max);
  if (new_max == -infinity) {  // nothing visible yet
    std::fill(row, row + count, T(0));
    return T(1);
  }
  if (new_max == infinity) {
    // The limit of softmax: the +inf scores share all the weight.
    for (size_t j = 0; j < count; ++j) {
      row[j] = detail::SoftmaxWeight(row[j], new_max);
    }
    return detail::AdvanceSoftmax(&state.max, &state.sum, new_max,
                                  RowSum(d, row, count));
  }
  return detail::AdvanceSoftmax(&state.max, &state.sum, new_max,
                                ExpRow(d, row, count, new_max));
}

// ProcessRow's softmax of exp(scale·s) scores with soft-capping or ALiBi
// (and no bias or visible matrix): the adjusted logits stored with their
// max on the way, then p = exp(a − m) stored and summed. A block whose max
// is not finite, or a row whose earlier max is +inf, goes on as
// BlockWeights does.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T AdjustedSoftmaxRow(D d, const detail::FusedPlan<T>& plan,
                                const ScoreAdjuster<T>& adjust,
                                T* HWY_RESTRICT row, size_t count, size_t query,
                                size_t key, RowState<T>& state) {
  const size_t N = hn::Lanes(d);
  const T infinity = std::numeric_limits<T>::infinity();
  const Mask<T>& mask = plan.normalize.mask;
  const int64_t distance =
      detail::KeyDistance(mask, query, plan.key_offset + key);
  const auto scale = hn::Set(d, plan.kernel.scale);
  auto maximum = hn::Set(d, -infinity);
  for (size_t j = 0; j < count; j += N) {
    const auto a = adjust(d, hn::Mul(LoadPadded(d, row, j, count, T(0)), scale),
                          distance + static_cast<int64_t>(j));
    if (count - j >= N) {
      maximum = hn::Max(maximum, a);
      hn::StoreU(a, d, row + j);
    } else {  // the padding lanes' logits are not the row's
      maximum = hn::Max(maximum, hn::IfThenElse(hn::FirstN(d, count - j), a,
                                                hn::Set(d, -infinity)));
      StorePrefix(d, a, row + j, count - j);
    }
  }
  // EMU128/SCALAR MaxOfLanes cannot return −inf (normalize-inl.h).
  const bool none = hn::AllTrue(d, hn::Eq(maximum, hn::Set(d, -infinity)));
  const T block_max =
      none ? -infinity : hn::GetLane(hn::MaxOfLanes(d, maximum));
  if (!(std::abs(block_max) < infinity) || state.max == infinity) {
    return BlockWeights(d, RowMode::softmax, row, count, key, state);
  }
  const T new_max = std::max(state.max, block_max);
  const T block_sum = ExpRow(d, row, count, new_max);
  state.nan |= block_sum != block_sum;  // a NaN logit
  return detail::AdvanceSoftmax(&state.max, &state.sum, new_max, block_sum);
}

// Turns a row of `count` > 0 scores (keys [key, key + count) of query
// `query`, all passing the structural masks) into the block's weights p in
// place, updates the state and returns the factor the row's accumulator
// must be scaled by first.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T ProcessRow(D d, const detail::FusedPlan<T>& plan, RowMode mode,
                        T* HWY_RESTRICT row, size_t count, size_t query,
                        size_t key, RowState<T>& state) {
  const size_t N = hn::Lanes(d);
  const T infinity = std::numeric_limits<T>::infinity();
  const Mask<T>& mask = plan.normalize.mask;
  const T hidden = mode == RowMode::weights ? T(0) : -infinity;
  // Kernel, score adjustments, bias.
  const T* bias = mask.bias.data ? mask.bias.row(query) + key : nullptr;
  const ScoreAdjuster<T> adjust(mask);
  if (mode == RowMode::softmax && plan.kernel.kernel == Kernel::exp &&
      bias == nullptr && mask.visible.data == nullptr &&
      plan.kernel.scale > T(0)) {
    if (adjust.any()) {
      return AdjustedSoftmaxRow(d, plan, adjust, row, count, query, key, state);
    }
    T rescale;
    if (ScaledSoftmaxRow(d, plan.kernel.scale, row, count, state, &rescale)) {
      return rescale;
    }
  }
  const int64_t distance =
      adjust.any() ? detail::KeyDistance(mask, query, plan.key_offset + key)
                   : 0;
  for (size_t j = 0; j < count; j += N) {
    auto v = KernelWeights(d, plan.kernel, LoadPadded(d, row, j, count, T(0)));
    if (adjust.any()) v = adjust(d, v, distance + static_cast<int64_t>(j));
    if (bias != nullptr) v = AddBias(d, v, LoadPadded(d, bias, j, count, T(0)));
    if (mode == RowMode::weights && plan.normalize.logits) {
      v = attnpool::HWY_NAMESPACE::Exp(d, v);  // exp(ℓ + bias) under none
    }
    if (count - j >= N) {
      hn::StoreU(v, d, row + j);
    } else {
      StorePrefix(d, v, row + j, count - j);
    }
  }
  if (mask.visible.data != nullptr) {
    const uint8_t* flags = mask.visible.row(query) + key;
    // After the bias: a hidden key's bias (+inf, NaN) must not reach it.
    for (size_t j = 0; j < count; ++j) {
      if (flags[j] == 0) row[j] = hidden;
    }
  }
  return BlockWeights(d, mode, row, count, key, state);
}

}  // namespace fused
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_FUSED_ROW_POLICY_INL_H_
