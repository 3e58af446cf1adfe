// bfloat16 elements in vectors: widened by Highway's promotion (a shift,
// exact), narrowed in integers (Highway 1.0.3's demotion truncates).
#if defined(ATTNPOOL_ARCH_ELEMENTS_BFLOAT16_INL_H_) == \
    defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_ELEMENTS_BFLOAT16_INL_H_
#undef ATTNPOOL_ARCH_ELEMENTS_BFLOAT16_INL_H_
#else
#define ATTNPOOL_ARCH_ELEMENTS_BFLOAT16_INL_H_
#endif

#include <cstdint>

#include <attnpool/element.h>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// float → bfloat16 bits in 32-bit lanes: the float's bits plus 0x7FFF and
// the kept part's lowest bit (ties to even), the upper half taken; a NaN
// keeps its upper half with the quiet bit set.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> FloatToBF16Bits(DF /*df*/,
                                                             hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  const auto bits = hn::BitCast(du, v);
  const auto upper = hn::ShiftRight<16>(bits);
  const auto round =
      hn::Add(hn::Set(du, 0x7FFFu), hn::And(upper, hn::Set(du, 1u)));
  const auto rounded = hn::ShiftRight<16>(hn::Add(bits, round));
  const auto nan = hn::Or(upper, hn::Set(du, 0x40u));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan, rounded);
}

// Lanes(df) elements from p as floats.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, const bf16* HWY_RESTRICT p) {
  const hn::Rebind<hwy::bfloat16_t, DF> dh;
  return hn::PromoteTo(
      df, hn::LoadU(dh, reinterpret_cast<const hwy::bfloat16_t*>(p)));
}

// Lanes(df) floats to p, rounded.
template <class DF>
HWY_INLINE void StoreNarrow(DF df, hn::Vec<DF> v, bf16* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> dh;
  const hn::RebindToSigned<DF> di;
  hn::StoreU(hn::DemoteTo(dh, hn::BitCast(di, FloatToBF16Bits(df, v))), dh,
             reinterpret_cast<uint16_t*>(p));
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_ELEMENTS_BFLOAT16_INL_H_
