// ElementTraits<S>: what the library knows of the element type stored as S
// (include/attnpool/element.h's table), target-independent: its scalar
// widening, whether it is scaled and whether a decode may fold its
// scale. One file per type under core/elements/ specializes it; its vector
// loads are arch/elements/<name>-inl.h's. Nothing outside these files and
// the table tests for a particular type.
#pragma once

#include <attnpool/element.h>

namespace attnpool {
namespace detail {

// Specialized, one per storage type, by core/elements/<name>.h (its type
// is ElementTypeOf<S>, the table's):
//   static float Widen(S stored);   // the float it holds, exactly
//   static constexpr bool kFoldsScale;
// kFoldsScale (scaled types): a decode may apply a row's scale once, to
// the dot of the row's stored values with a query and to its softmax
// weight, instead of to each element (arch/fused-inl.h, FoldsScale; the
// result then within two roundings of the held values', element.h).
template <typename S>
struct ElementTraits;

// Whether S's rows carry a scale (the table's column).
template <typename S>
constexpr bool kScaledElement =
    element_properties(ElementTypeOf<S>::value).scaled;

}  // namespace detail
}  // namespace attnpool

#include "core/elements/bfloat16.h"
#include "core/elements/float16.h"
#include "core/elements/float32.h"
#include "core/elements/float8.h"
#include "core/elements/int8.h"

namespace attnpool {
namespace detail {

// kScaleFolds[k]: whether ElementType(k)'s rows fold their scales in a
// decode (kFoldsScale); a table, so that the kernel's test is one load.
inline constexpr bool kScaleFolds[] = {
#define ATTNPOOL_SCALE_FOLDS(name, c_name, storage, ...) \
  ElementTraits<storage>::kFoldsScale,
    ATTNPOOL_ELEMENT_TABLE(ATTNPOOL_SCALE_FOLDS)
#undef ATTNPOOL_SCALE_FOLDS
};
inline bool ScaleFolds(ElementType type) {
  return kScaleFolds[static_cast<int>(type)];
}

}  // namespace detail
}  // namespace attnpool
