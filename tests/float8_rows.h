// Float rows stored as an OCP float8 type (element.h) the way an inference
// engine quantizes a KV cache: one scale a row, max|row| / the type's
// largest finite value (1 for a row of zeros), each element x / scale
// rounded to the nearest pattern, ties to the even one. The patterns'
// values are the reference's (reference::element_value), not the
// library's, so that the tests of the library's widening stay independent.
#pragma once

#include <attnpool/element.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "src/reference.h"

namespace attnpool_test {

// The largest finite pattern: positive patterns' values increase with
// their bits up to it.
inline uint8_t LargestFloat8(attnpool::ElementType type) {
  return type == attnpool::ElementType::float8_e4m3fn ? 0x7E : 0x7B;
}

inline double Float8Value(attnpool::ElementType type, uint8_t bits) {
  return attnpool::reference::element_value(type, bits);
}

// The pattern nearest to finite x, |x| at most the largest finite value.
inline uint8_t NearestFloat8(attnpool::ElementType type, double x) {
  const double magnitude = std::fabs(x);
  int low = 0, high = LargestFloat8(type);  // value(low) ≤ |x| < value(high]
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (Float8Value(type, uint8_t(middle)) <= magnitude) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  int bits = low;
  if (low < LargestFloat8(type)) {
    const double below = magnitude - Float8Value(type, uint8_t(low));
    const double above = Float8Value(type, uint8_t(low + 1)) - magnitude;
    if (above < below || (above == below && (low & 1))) bits = low + 1;
  }
  return uint8_t(bits | (std::signbit(x) ? 0x80 : 0));
}

// Row `row` of `cols` finite floats into `out`, its scale returned.
inline float StoreFloat8Row(attnpool::ElementType type, const float* row,
                            size_t cols, uint8_t* out) {
  float largest = 0;
  for (size_t c = 0; c < cols; ++c) {
    largest = std::fmax(largest, std::fabs(row[c]));
  }
  const float scale =
      largest > 0 ? largest / float(Float8Value(type, LargestFloat8(type)))
                  : 1.0f;
  for (size_t c = 0; c < cols; ++c) {
    const double ratio = double(row[c]) / double(scale);
    const double top = Float8Value(type, LargestFloat8(type));
    out[c] = NearestFloat8(type, std::fmax(-top, std::fmin(top, ratio)));
  }
  return scale;
}

// The float a stored element holds: its scale times its value, in float.
inline float HeldFloat8(attnpool::ElementType type, uint8_t bits, float scale) {
  return scale * float(Float8Value(type, bits));
}

}  // namespace attnpool_test
