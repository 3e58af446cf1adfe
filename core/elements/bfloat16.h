// bfloat16 elements: a float's upper 16 bits, widened by a shift.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/element_traits.h"

namespace attnpool {
namespace detail {

template <>
struct ElementTraits<bf16> {
  static constexpr bool kFoldsScale = false;
  static float Widen(bf16 stored) {
    const uint32_t bits = uint32_t{stored.bits} << 16;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
};

}  // namespace detail
}  // namespace attnpool
