// Vectorized exp and tanh (per-ISA, header-only).
// PLACEHOLDER until the own implementation lands: delegates to Highway's
// contrib math. The contract below is the one the own implementation meets.
//
// Exp(d, x), float and double lanes:
//   relative error ≤ 2e-7 (float) over the whole range; exp(−inf) = 0;
//   results below the smallest normal number are 0 (no denormals);
//   NaN → NaN; x above the overflow threshold → +inf.
// Tanh(d, x): relative error ≤ 2e-7 (float); tanh(±inf) = ±1; NaN → NaN.

#if defined(ATTNPOOL_ARCH_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_MATH_INL_H_
#undef ATTNPOOL_ARCH_MATH_INL_H_
#else
#define ATTNPOOL_ARCH_MATH_INL_H_
#endif

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D, class V>
HWY_INLINE V Exp(D d, V x) {
  return hn::Exp(d, x);
}

template <class D, class V>
HWY_INLINE V Tanh(D d, V x) {
  return hn::Tanh(d, x);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_MATH_INL_H_
