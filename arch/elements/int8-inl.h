// int8 elements' vector loads: the integers as floats, a row's scale
// applied by the caller (core/elements/int8.h).
#if defined(ATTNPOOL_ARCH_ELEMENTS_INT8_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_ELEMENTS_INT8_INL_H_
#undef ATTNPOOL_ARCH_ELEMENTS_INT8_INL_H_
#else
#define ATTNPOOL_ARCH_ELEMENTS_INT8_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, const int8_t* HWY_RESTRICT p) {
  const hn::Rebind<int8_t, DF> d8;
  const hn::Rebind<int32_t, DF> di;
  return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_ELEMENTS_INT8_INL_H_
