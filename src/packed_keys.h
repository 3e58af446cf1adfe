// Keys packed for the distance tile kernel, owned (internal).
#pragma once

#include <attnpool/distance.h>

#include "arch/distance.h"
#include "src/threads.h"
#include "hwy/aligned_allocator.h"

namespace attnpool {
namespace detail {

template <typename T>
struct OwnedPackedKeys {
  hwy::AlignedFreeUniquePtr<T[]> panels, key_factor;
  PackedKeys<T> view;
};

// Packs all `keys` for `distance` on the active target, in parallel on
// `threads`. Throws std::bad_alloc (before any output is written) when the
// copy (m × d elements, rounded up to whole panels) cannot be allocated.
template <typename T>
OwnedPackedKeys<T> PackKeys(Distance distance, const RowList<T>& keys,
                            const Workers& threads);

}  // namespace detail
}  // namespace attnpool
