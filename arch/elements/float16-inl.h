// IEEE binary16 elements in vectors. Where the target converts binary16 in
// hardware (F16C on AVX2 and AVX3, NEON, SVE) its instruction does it;
// elsewhere Highway 1.0.3's emulation truncates and mishandles inf and
// NaN, so the integer forms below are used instead.
#if defined(ATTNPOOL_ARCH_ELEMENTS_FLOAT16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_ELEMENTS_FLOAT16_INL_H_
#undef ATTNPOOL_ARCH_ELEMENTS_FLOAT16_INL_H_
#else
#define ATTNPOOL_ARCH_ELEMENTS_FLOAT16_INL_H_
#endif

#include <cstdint>

#include <attnpool/element.h>

#include "hwy/highway.h"

#undef ATTNPOOL_NATIVE_F16
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)) || \
    (HWY_ARCH_ARM_A64 && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR)
#define ATTNPOOL_NATIVE_F16 1
#else
#define ATTNPOOL_NATIVE_F16 0
#endif

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// binary16 bits (in the low half of 32-bit lanes) → float: normal numbers,
// inf and NaN by moving the exponent field and rescaling by 2^−112 (exact);
// subnormals as (0.5 + m·2^−24) − 0.5 (exact).
template <class DF>
HWY_INLINE hn::Vec<DF> F16BitsToFloat(DF df,
                                      hn::Vec<hn::RebindToUnsigned<DF>> h) {
  const hn::RebindToUnsigned<DF> du;
  const auto shifted = hn::ShiftLeft<17>(h);  // exponent and mantissa on top
  const auto sign = hn::ShiftLeft<31>(hn::ShiftRight<15>(h));
  const auto normal =
      hn::Mul(hn::BitCast(df, hn::Add(hn::ShiftRight<4>(shifted),
                                      hn::Set(du, uint32_t{0xE0} << 23))),
              hn::Set(df, 0x1.0p-112f));
  const auto subnormal =
      hn::Sub(hn::BitCast(df, hn::Or(hn::ShiftRight<17>(shifted),
                                     hn::Set(du, uint32_t{126} << 23))),
              hn::Set(df, 0.5f));
  const auto is_subnormal =
      hn::Eq(hn::And(h, hn::Set(du, 0x7C00u)), hn::Zero(du));
  const auto magnitude =
      hn::IfThenElse(hn::RebindMask(df, is_subnormal), subnormal, normal);
  return hn::Or(magnitude, hn::BitCast(df, sign));
}

// float → binary16 bits in 32-bit lanes, rounded to nearest even: the
// magnitude is scaled so that float addition of a power of two aligned to
// the result's last place rounds it (2^112 then 2^−110 overflows what
// binary16 cannot hold to inf and keeps the rest exact).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> FloatToF16Bits(DF df,
                                                            hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  const auto bits = hn::BitCast(du, v);
  const auto doubled = hn::Add(bits, bits);  // no sign
  auto base = hn::Mul(hn::Mul(hn::Abs(v), hn::Set(df, 0x1.0p+112f)),
                      hn::Set(df, 0x1.0p-110f));
  const auto bias = hn::Max(hn::And(doubled, hn::Set(du, 0xFF000000u)),
                            hn::Set(du, 0x71000000u));
  base = hn::Add(hn::BitCast(df, hn::Add(hn::ShiftRight<1>(bias),
                                         hn::Set(du, 0x07800000u))),
                 base);
  const auto rounded = hn::BitCast(du, base);
  const auto magnitude =
      hn::Add(hn::And(hn::ShiftRight<13>(rounded), hn::Set(du, 0x7C00u)),
              hn::And(rounded, hn::Set(du, 0x0FFFu)));
  const auto nan = hn::Set(du, 0x7E00u);
  const auto sign = hn::ShiftLeft<15>(hn::ShiftRight<31>(bits));
  return hn::Or(
      sign, hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan, magnitude));
}

// Lanes(df) elements from p as floats.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, const f16* HWY_RESTRICT p) {
#if ATTNPOOL_NATIVE_F16
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(
      df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
#else
  const hn::Rebind<uint16_t, DF> dh;
  const hn::RebindToUnsigned<DF> du;
  return F16BitsToFloat(
      df,
      hn::PromoteTo(du, hn::LoadU(dh, reinterpret_cast<const uint16_t*>(p))));
#endif
}

// Lanes(df) floats to p, rounded.
template <class DF>
HWY_INLINE void StoreNarrow(DF df, hn::Vec<DF> v, f16* HWY_RESTRICT p) {
#if ATTNPOOL_NATIVE_F16
  (void)df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
#else
  const hn::Rebind<uint16_t, DF> dh;
  const hn::RebindToSigned<DF> di;
  hn::StoreU(hn::DemoteTo(dh, hn::BitCast(di, FloatToF16Bits(df, v))), dh,
             reinterpret_cast<uint16_t*>(p));
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_ELEMENTS_FLOAT16_INL_H_
