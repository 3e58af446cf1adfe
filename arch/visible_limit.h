// The prefix masks (valid length, causal) as one bound per query: keys
// [0, limit) of the query pass them. Target-independent: the per-ISA stages
// and src/ share it.
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

// Keys [0, limit) of query `row` pass the prefix masks; key_count bounds it.
template <typename T>
size_t VisibleLimit(const Mask<T>& mask, size_t row, size_t key_count) {
  size_t limit = key_count;
  if (mask.valid_lengths != nullptr) {
    limit = std::min(limit, mask.valid_lengths[row]);
  }
  if (mask.causal) {
    const std::ptrdiff_t last =
        SaturatingAdd(static_cast<std::ptrdiff_t>(row), mask.causal_offset);
    limit = last < 0 ? 0 : std::min(limit, static_cast<size_t>(last) + 1);
  }
  return limit;
}

}  // namespace detail
}  // namespace attnpool
