// OCP 8-bit float elements in vectors (core/elements/float8.h), widened
// exactly: E5M2 is binary16's upper byte, and E4M3FN's fields moved into
// binary16's are its value · 2^-8 — on x86 with F16C its conversion
// instruction does the rest. Elsewhere, in integer operations: E4M3FN's
// normal numbers are a float's fields moved and rebiased (never a
// subnormal float, which some CPUs slow down), its subnormals m·2^-9
// converted from the integer m.
#if defined(ATTNPOOL_ARCH_ELEMENTS_FLOAT8_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_ELEMENTS_FLOAT8_INL_H_
#undef ATTNPOOL_ARCH_ELEMENTS_FLOAT8_INL_H_
#else
#define ATTNPOOL_ARCH_ELEMENTS_FLOAT8_INL_H_
#endif

#include <attnpool/element.h>

#include <cstdint>
#include <limits>

#include "arch/elements/float16-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef ATTNPOOL_FLOAT8_F16C
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define ATTNPOOL_FLOAT8_F16C 1
#else
#define ATTNPOOL_FLOAT8_F16C 0
#endif

// Lanes(df) elements from p as floats.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, const fp8_e4m3fn* HWY_RESTRICT p) {
  const hn::Rebind<int8_t, DF> d8;
  const auto stored = hn::LoadU(d8, reinterpret_cast<const int8_t*>(p));
#if ATTNPOOL_FLOAT8_F16C
  // As binary16 (sign-extended, shifted: the sign bit, the exponent and
  // mantissa in the low fields) it is the value · 2^-8, subnormals
  // included; S.1111.111 comes out as ±480, which no number is.
  const hn::Rebind<int16_t, DF> d16;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const auto half = hn::And(hn::ShiftLeft<7>(hn::PromoteTo(d16, stored)),
                            hn::Set(d16, int16_t(0xBF80)));
  const auto value =
      hn::Mul(hn::PromoteTo(df, hn::BitCast(dh, half)), hn::Set(df, 256.0f));
  const auto nan = hn::Eq(hn::Abs(value), hn::Set(df, 480.0f));
  return hn::IfThenElse(
      nan, hn::Or(value, hn::Set(df, std::numeric_limits<float>::quiet_NaN())),
      value);
#else
  const hn::RebindToSigned<DF> di;
  // Sign-extended: the sign in bit 31.
  const auto x = hn::PromoteTo(di, stored);
  const auto fields = hn::And(x, hn::Set(di, 0x7F));  // exponent, mantissa
  const auto normal = hn::BitCast(
      df, hn::Add(hn::ShiftLeft<20>(fields), hn::Set(di, (127 - 7) << 23)));
  const auto subnormal =
      hn::Mul(hn::ConvertTo(df, fields), hn::Set(df, 0x1p-9f));
  auto magnitude = hn::IfThenElse(
      hn::RebindMask(df, hn::Lt(fields, hn::Set(di, 8))), subnormal, normal);
  magnitude = hn::IfThenElse(
      hn::RebindMask(df, hn::Eq(fields, hn::Set(di, 0x7F))),
      hn::Set(df, std::numeric_limits<float>::quiet_NaN()), magnitude);
  return hn::Or(magnitude, hn::BitCast(df, hn::And(x, hn::Set(di, INT32_MIN))));
#endif
}

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, const fp8_e5m2* HWY_RESTRICT p) {
  const hn::Rebind<uint8_t, DF> d8;
  const auto stored = hn::LoadU(d8, reinterpret_cast<const uint8_t*>(p));
#if ATTNPOOL_FLOAT8_F16C
  const hn::Rebind<uint16_t, DF> d16;
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(
      df, hn::BitCast(dh, hn::ShiftLeft<8>(hn::PromoteTo(d16, stored))));
#else
  const hn::RebindToUnsigned<DF> du;
  return F16BitsToFloat(df, hn::ShiftLeft<8>(hn::PromoteTo(du, stored)));
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_ELEMENTS_FLOAT8_INL_H_
