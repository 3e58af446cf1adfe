// Cosine similarity is free of each row's scale: a row of queries or keys
// far from 1 is scaled by a power of two before its norm and dots, which
// would otherwise under- or overflow T (Σx² of float entries of 1e-24 is 0,
// of 1e19 is inf). Target-independent: the per-ISA distance and fused
// kernels share it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace attnpool {
namespace detail {

// Rows whose largest |x_p| has a binary exponent within ±kCosineRange keep
// their values: their Σx² (d < 2⁴⁶ terms) stays a finite number, and their
// norms normal ones.
template <typename T>
constexpr int kCosineRange = sizeof(T) == 4 ? 40 : 400;

// The power of two 2^s, as s, that a row (entries row[p·stride]) needs
// for cosine: 0 within range, for a row of zeros and for one with an entry
// that is not finite (they stay as they are); otherwise −e for the row's
// largest |x_p| in [2^e, 2^(e+1)), bringing it into [1, 2). Scaling by it
// is exact, but for entries that become subnormal (below the smallest
// normal number times the largest): far below a rounding of the norm.
template <typename T>
int CosineExponent(const T* row, size_t depth, size_t stride = 1) {
  T largest = 0;
  for (size_t p = 0; p < depth; ++p) {
    const T magnitude = std::fabs(row[p * stride]);
    if (!std::isfinite(magnitude)) return 0;
    largest = std::max(largest, magnitude);
  }
  if (largest == 0) return 0;
  const int exponent = std::ilogb(largest);
  return exponent >= -kCosineRange<T> && exponent <= kCosineRange<T>
             ? 0
             : -exponent;
}

// out[p·out_stride] ← row[p·stride]·2^exponent (ldexp: one rounding at
// most, whatever the exponent).
template <typename T>
void ScaleRow(const T* row, size_t depth, size_t stride, int exponent, T* out,
              size_t out_stride = 1) {
  for (size_t p = 0; p < depth; ++p) {
    out[p * out_stride] = std::ldexp(row[p * stride], exponent);
  }
}

}  // namespace detail
}  // namespace attnpool
