// OCP 8-bit float elements (element.h): E4M3FN and E5M2, one template over
// the exponent's width. Scaled (a float scale per row, applied to each
// element as held: a decode does not fold it, so that the results are
// bitwise the float call's on the held values).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/element_traits.h"

namespace attnpool {
namespace detail {

// The float an 8-bit float of kExponentBits exponent bits holds (IEEE-style
// bias 2^(e−1) − 1, subnormals). With kInfinities, an all-ones exponent is
// ±inf or NaN (E5M2); without, only S.1111.111 is NaN and the rest of that
// exponent are numbers (E4M3FN's "finite" form, largest 448).
template <int kExponentBits, bool kInfinities>
float WidenFloat8(uint8_t bits) {
  constexpr int kMantissaBits = 7 - kExponentBits;
  constexpr int kBias = (1 << (kExponentBits - 1)) - 1;
  constexpr int kTop = (1 << kExponentBits) - 1;
  const int exponent = (bits >> kMantissaBits) & kTop;
  const int mantissa = bits & ((1 << kMantissaBits) - 1);
  float magnitude;
  if (kInfinities && exponent == kTop) {
    magnitude = mantissa != 0 ? NAN : HUGE_VALF;
  } else if (!kInfinities && (bits & 0x7F) == 0x7F) {
    magnitude = NAN;
  } else if (exponent == 0) {
    magnitude = std::ldexp(float(mantissa), 1 - kBias - kMantissaBits);
  } else {
    magnitude = std::ldexp(float(mantissa + (1 << kMantissaBits)),
                           exponent - kBias - kMantissaBits);
  }
  return bits & 0x80 ? -magnitude : magnitude;
}

template <>
struct ElementTraits<fp8_e4m3fn> {
  static constexpr bool kFoldsScale = false;
  static float Widen(fp8_e4m3fn stored) {
    return WidenFloat8<4, false>(stored.bits);
  }
};

template <>
struct ElementTraits<fp8_e5m2> {
  static constexpr bool kFoldsScale = false;
  static float Widen(fp8_e5m2 stored) {
    return WidenFloat8<5, true>(stored.bits);
  }
};

}  // namespace detail
}  // namespace attnpool
