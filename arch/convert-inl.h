// Elements of every type widened to float and float narrowed to them, a
// vector at a time (per-ISA, header-only): the conversions of element.h
// and the loads through which the kernels read narrow rows. Each type's
// own arithmetic is in arch/elements/<name>-inl.h: LoadWide(df, p) (and
// StoreNarrow(df, v, p) where the library narrows to it); this file is
// what is common to them.
//
// Contract (tested on all patterns of each format, every target): widening
// is exact; narrowing rounds to nearest, ties to even, overflows to ±inf
// and keeps NaN a (quiet) NaN of the same sign.

#if defined(ATTNPOOL_ARCH_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_CONVERT_INL_H_
#undef ATTNPOOL_ARCH_CONVERT_INL_H_
#else
#define ATTNPOOL_ARCH_CONVERT_INL_H_
#endif

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "arch/elements/bfloat16-inl.h"
#include "arch/elements/float16-inl.h"
#include "arch/elements/float32-inl.h"
#include "arch/elements/float8-inl.h"
#include "arch/elements/int8-inl.h"
#include "arch/prefix_io-inl.h"
#include "arch/row_list.h"
#include "core/element_traits.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ------------------------------------------------------ whole-vector loads
// LoadWide(df, p): Lanes(df) elements from p as floats (a scaled type's
// stored values, the row's scale applied by the caller).

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

// Calls visit(S()) with S the storage type of `element` (element.h's
// table; inlined in the target's code, as visit_element_storage is not).
template <class Visit>
HWY_INLINE void VisitNarrow(ElementType element, const Visit& visit) {
  switch (element) {
#define ATTNPOOL_VISIT_NARROW(name, c_name, storage, ...) \
  case ElementType::name:                                 \
    return visit(storage());
    ATTNPOOL_ELEMENT_TABLE(ATTNPOOL_VISIT_NARROW)
#undef ATTNPOOL_VISIT_NARROW
  }
}

// out[c] = in[c], c < cols, widened; a scaled type's elements times
// `scale` (one rounding), the others exactly.
template <typename E>
HWY_INLINE void WidenScaled(const E* HWY_RESTRICT in, size_t cols, float scale,
                            float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  const auto factor = hn::Set(df, scale);
  const auto widen = [&](hn::Vec<decltype(df)> v) {
    return detail::kScaledElement<E> ? hn::Mul(factor, v) : v;
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
// `out_stride` apart, [0, cols) of each (a scaled type's scale applied, one
// rounding, as RowList's operator() does).
HWY_INLINE void WidenRows(const detail::RowList<float>& list, size_t j,
                          size_t count, float* HWY_RESTRICT out,
                          size_t out_stride) {
  VisitNarrow(list.element, [&](auto tag) {
    using E = decltype(tag);
    for (size_t r = 0; r < count; ++r) {
      const float scale = detail::kScaledElement<E> ? list.scale(j + r) : 1.0f;
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
