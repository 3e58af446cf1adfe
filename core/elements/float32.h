// float32 elements: the float kernels' own type, read as they are.
#pragma once

#include "core/element_traits.h"

namespace attnpool {
namespace detail {

template <>
struct ElementTraits<float> {
  static constexpr bool kFoldsScale = false;
  static float Widen(float stored) { return stored; }
};

}  // namespace detail
}  // namespace attnpool
