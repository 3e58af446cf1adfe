// Large scratch blocks kept between calls (internal): glibc gives a freed
// block at the top of its heap back to the OS, and the next call faults
// every page of it in again (zeroed by the kernel). The fused kernel
// allocates its packed keys and states per call, so a model's repeated
// calls paid that each time (docs/benchmarks.md, "Design evidence":
// src/block_cache.h).
#pragma once

#include <cstddef>

#include "src/sanitizers.h"

namespace attnpool {
namespace detail {

// Blocks of at least this many bytes are kept when freed, while the kept
// ones total at most kBlockCacheBytes; smaller ones are malloc's own.
constexpr size_t kCachedBlockBytes = size_t{64} << 10;
constexpr size_t kBlockCacheBytes = size_t{32} << 20;

// Under AddressSanitizer nothing is kept: every freed block stays poisoned,
// so that a use after free is still caught.
constexpr bool kBlockCacheKeeps = !kAddressSanitizer;

// hwy::AllocateAligned's allocator pair (`opaque` unused): `bytes` from the
// smallest kept block that holds them and is at most twice their size, else
// from malloc (blocks that may be kept with a little room to spare);
// nullptr when malloc fails. A freed block that may be kept is, the oldest
// kept ones freed to make room. Thread-safe.
void* BlockCacheAllocate(void* opaque, size_t bytes);
void BlockCacheFree(void* opaque, void* memory);

// Bytes in kept blocks now, and freeing them all (tests).
size_t BlockCacheHeldBytes();
void BlockCacheRelease();

}  // namespace detail
}  // namespace attnpool
