// Reduced-precision elements widened to float and float narrowed to them, a
// vector at a time (per-ISA, header-only): the conversions of element.h
// and the loads through which the kernels read bf16, f16 and int8 rows.
//
// Contract (tested on all 65,536 patterns of each format, every target):
// widening is exact; narrowing rounds to nearest, ties to even, overflows
// to ±inf and keeps NaN a (quiet) NaN of the same sign. Where the target
// converts binary16 in hardware (F16C on AVX2 and AVX3, NEON, SVE) its
// instruction does this; elsewhere Highway 1.0.3's emulation truncates and
// mishandles inf and NaN, so the integer forms below are used instead.
// Highway's bfloat16 demotion truncates everywhere: narrowing to bfloat16
// always takes the integer form.

#if defined(ATTNPOOL_ARCH_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_CONVERT_INL_H_
#undef ATTNPOOL_ARCH_CONVERT_INL_H_
#else
#define ATTNPOOL_ARCH_CONVERT_INL_H_
#endif

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "arch/prefix_io-inl.h"
#include "arch/row_list.h"
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

// The storage types the kernels read (layouts of element.h's bf16 and f16).
using BF16 = hwy::bfloat16_t;
using F16 = hwy::float16_t;

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

// ------------------------------------------------------ whole-vector loads
// LoadWide(df, p): Lanes(df) elements from p as floats (int8: the integers,
// the row's scale applied by the caller).

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, const float* HWY_RESTRICT p) {
  return hn::LoadU(df, p);
}

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, const BF16* HWY_RESTRICT p) {
  const hn::Rebind<BF16, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, const F16* HWY_RESTRICT p) {
#if ATTNPOOL_NATIVE_F16
  const hn::Rebind<F16, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
#else
  const hn::Rebind<uint16_t, DF> dh;
  const hn::RebindToUnsigned<DF> du;
  return F16BitsToFloat(
      df,
      hn::PromoteTo(du, hn::LoadU(dh, reinterpret_cast<const uint16_t*>(p))));
#endif
}

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, const int8_t* HWY_RESTRICT p) {
  const hn::Rebind<int8_t, DF> d8;
  const hn::Rebind<int32_t, DF> di;
  return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p)));
}

// `count` ≤ Lanes(df) elements, zeros beyond; never reads past p + count.
template <class DF, typename E>
HWY_INLINE hn::Vec<DF> LoadWidePrefix(DF df, const E* HWY_RESTRICT p,
                                      size_t count) {
  if (count == hn::Lanes(df)) return LoadWide(df, p);
  HWY_ALIGN E buffer[kMaxLanesBytes / sizeof(float)] = {};
  std::memcpy(buffer, p, count * sizeof(E));
  return LoadWide(df, buffer);
}

// --------------------------------------------------------- narrowing stores

template <class DF>
HWY_INLINE void StoreNarrow(DF df, hn::Vec<DF> v, BF16* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> dh;
  const hn::RebindToSigned<DF> di;
  hn::StoreU(hn::DemoteTo(dh, hn::BitCast(di, FloatToBF16Bits(df, v))), dh,
             reinterpret_cast<uint16_t*>(p));
}

template <class DF>
HWY_INLINE void StoreNarrow(DF df, hn::Vec<DF> v, F16* HWY_RESTRICT p) {
#if ATTNPOOL_NATIVE_F16
  const hn::Rebind<F16, DF> dh;
  hn::StoreU(hn::DemoteTo(dh, v), dh, p);
#else
  const hn::Rebind<uint16_t, DF> dh;
  const hn::RebindToSigned<DF> di;
  hn::StoreU(hn::DemoteTo(dh, hn::BitCast(di, FloatToF16Bits(df, v))), dh,
             reinterpret_cast<uint16_t*>(p));
#endif
}

// The first `count` ≤ Lanes(df) lanes; never writes past p + count.
template <class DF, typename E>
HWY_INLINE void StoreNarrowPrefix(DF df, hn::Vec<DF> v, E* HWY_RESTRICT p,
                                  size_t count) {
  if (count == hn::Lanes(df)) return StoreNarrow(df, v, p);
  HWY_ALIGN E buffer[kMaxLanesBytes / sizeof(float)];
  StoreNarrow(df, v, buffer);
  std::memcpy(p, buffer, count * sizeof(E));
}

// ------------------------------------------------------- rows of a RowList

// Calls visit(E()) with E the storage type of a narrow list's elements.
template <class Visit>
HWY_INLINE void VisitNarrow(ElementType element, const Visit& visit) {
  switch (element) {
    case ElementType::float32:
      return visit(float());
    case ElementType::bfloat16:
      return visit(BF16());
    case ElementType::float16:
      return visit(F16());
    case ElementType::int8:
      return visit(int8_t());
  }
}

// out[c] = in[c], c < cols, widened; int8 elements times `scale` (one
// rounding), the others exactly.
template <typename E>
HWY_INLINE void WidenScaled(const E* HWY_RESTRICT in, size_t cols, float scale,
                            float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  const auto factor = hn::Set(df, scale);
  const auto widen = [&](hn::Vec<decltype(df)> v) {
    return std::is_same<E, int8_t>::value ? hn::Mul(factor, v) : v;
  };
  size_t c = 0;
  for (; c + N <= cols; c += N) {
    hn::StoreU(widen(LoadWide(df, in + c)), df, out + c);
  }
  if (c < cols) {
    StorePrefix(df, widen(LoadWidePrefix(df, in + c, cols - c)), out + c,
                cols - c);
  }
}

// Rows [j, j + count) of a narrow float list, widened into rows of `out`
// `out_stride` apart, [0, cols) of each (int8: its scale applied, one
// rounding, as RowList's operator() does).
HWY_INLINE void WidenRows(const detail::RowList<float>& list, size_t j,
                          size_t count, float* HWY_RESTRICT out,
                          size_t out_stride) {
  VisitNarrow(list.element, [&](auto tag) {
    using E = decltype(tag);
    for (size_t r = 0; r < count; ++r) {
      const float scale =
          std::is_same<E, int8_t>::value ? list.scale(j + r) : 1.0f;
      WidenScaled(list.narrow_row<E>(j + r), list.cols, scale,
                  out + r * out_stride);
    }
  });
}
HWY_INLINE void WidenRow(const detail::RowList<float>& list, size_t j,
                         float* HWY_RESTRICT out) {
  WidenRows(list, j, 1, out, 0);
}

// Row j of `list` as T: in place, or (narrow rows) widened into `buffer`
// of list.cols elements.
template <typename T>
HWY_INLINE const T* RowOf(const detail::RowList<T>& list, size_t j,
                          T* HWY_RESTRICT buffer) {
  if constexpr (std::is_same<T, float>::value) {
    if (list.is_narrow()) {
      WidenRow(list, j, buffer);
      return buffer;
    }
  }
  (void)buffer;
  return list.row(j);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_CONVERT_INL_H_
