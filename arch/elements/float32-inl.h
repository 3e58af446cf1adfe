// float32 elements' vector loads: the float kernels' own type.
#if defined(ATTNPOOL_ARCH_ELEMENTS_FLOAT32_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_ELEMENTS_FLOAT32_INL_H_
#undef ATTNPOOL_ARCH_ELEMENTS_FLOAT32_INL_H_
#else
#define ATTNPOOL_ARCH_ELEMENTS_FLOAT32_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, const float* HWY_RESTRICT p) {
  return hn::LoadU(df, p);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_ELEMENTS_FLOAT32_INL_H_
