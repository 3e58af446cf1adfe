// IEEE binary16 elements: every one, subnormals, infinities and NaN
// included, a float exactly.
#pragma once

#include <cmath>

#include "core/element_traits.h"

namespace attnpool {
namespace detail {

template <>
struct ElementTraits<f16> {
  static constexpr bool kFoldsScale = false;
  static float Widen(f16 stored) {
    const int exponent = (stored.bits >> 10) & 31,
              fraction = stored.bits & 1023;
    const float magnitude =
        exponent == 31  ? (fraction ? NAN : HUGE_VALF)
        : exponent == 0 ? std::ldexp(float(fraction), -24)
                        : std::ldexp(float(1024 + fraction), exponent - 25);
    return stored.bits & 0x8000 ? -magnitude : magnitude;
  }
};

}  // namespace detail
}  // namespace attnpool
