// The structural masks (valid length, causal, sliding window) as one run of
// keys per query: keys [VisibleStart, VisibleLimit) of the query pass them.
// Target-independent: the per-ISA stages and src/ share it.
#pragma once

#include <attnpool/normalize.h>

#include <algorithm>
#include <cstddef>
#include <limits>

namespace attnpool {
namespace detail {

// a + b, clamped to the range of ptrdiff_t (causal offsets meant as "no
// limit" may be near its ends).
inline std::ptrdiff_t SaturatingAdd(std::ptrdiff_t a, std::ptrdiff_t b) {
  std::ptrdiff_t sum;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<std::ptrdiff_t>::max()
                 : std::numeric_limits<std::ptrdiff_t>::min();
  }
  return sum;
}

// p ± distance, clamped to the range of ptrdiff_t.
inline std::ptrdiff_t SaturatingOffset(std::ptrdiff_t p, size_t distance,
                                       bool after) {
  constexpr auto kMax = std::numeric_limits<std::ptrdiff_t>::max();
  const auto step = static_cast<std::ptrdiff_t>(
      std::min(distance, static_cast<size_t>(kMax)));
  return SaturatingAdd(p, after ? step : -step);
}

// Query `row`'s key position: row + causal_offset (normalize.h).
template <typename T>
std::ptrdiff_t KeyPosition(const Mask<T>& mask, size_t row) {
  return SaturatingAdd(static_cast<std::ptrdiff_t>(row), mask.causal_offset);
}

// The end of the keys query `row` sees: keys j ≥ limit are hidden (valid
// length, causal, the window's right side); key_count bounds it.
template <typename T>
size_t VisibleLimit(const Mask<T>& mask, size_t row, size_t key_count) {
  size_t limit = key_count;
  if (mask.valid_lengths != nullptr) {
    limit = std::min(limit, mask.valid_lengths[row]);
  }
  const auto bound_after = [&](std::ptrdiff_t last) {
    limit = last < 0 ? 0 : std::min(limit, static_cast<size_t>(last) + 1);
  };
  if (mask.causal) bound_after(KeyPosition(mask, row));
  if (mask.window_right) {
    bound_after(SaturatingOffset(KeyPosition(mask, row), *mask.window_right,
                                 /*after=*/true));
  }
  return limit;
}

// The start of the keys query `row` sees: keys j < start are hidden (the
// window's left side); 0 without one.
template <typename T>
size_t VisibleStart(const Mask<T>& mask, size_t row) {
  if (!mask.window_left) return 0;
  const std::ptrdiff_t first = SaturatingOffset(
      KeyPosition(mask, row), *mask.window_left, /*after=*/false);
  return first < 0 ? 0 : static_cast<size_t>(first);
}

// Whether the structural masks bound a query's keys from below.
template <typename T>
bool HasVisibleStart(const Mask<T>& mask) {
  return mask.window_left.has_value();
}

}  // namespace detail
}  // namespace attnpool
