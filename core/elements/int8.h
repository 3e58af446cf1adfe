// int8 elements with one float scale per row (symmetric quantization).
// Their products with float queries are exact where the query's elements
// are not extreme, so a decode may apply a row's scale to its dot and to
// its softmax weight rather than to each element (kFoldsScale): half the
// multiplies of the int8 decode.
#pragma once

#include <cstdint>

#include "core/element_traits.h"

namespace attnpool {
namespace detail {

template <>
struct ElementTraits<int8_t> {
  static constexpr bool kFoldsScale = true;
  static float Widen(int8_t stored) { return float(stored); }
};

}  // namespace detail
}  // namespace attnpool
