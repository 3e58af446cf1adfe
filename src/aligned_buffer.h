// Aligned scratch storage of src/ (internal): allocation that throws, so
// that running out of memory surfaces as std::bad_alloc before any output is
// written; large blocks are kept for the next call (src/block_cache.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <new>

#include "hwy/aligned_allocator.h"
#include "src/block_cache.h"

namespace attnpool {
namespace detail {

template <typename T>
using AlignedBuffer = hwy::AlignedFreeUniquePtr<T[]>;

// max(1, elements) uninitialized elements, aligned for every target's
// vectors; throws std::bad_alloc when they cannot be allocated.
template <typename T>
AlignedBuffer<T> AllocateBuffer(size_t elements) {
  auto buffer =
      hwy::AllocateAligned<T>(std::max<size_t>(1, elements),
                              &BlockCacheAllocate, &BlockCacheFree, nullptr);
  if (!buffer) throw std::bad_alloc();
  return buffer;
}

}  // namespace detail
}  // namespace attnpool
