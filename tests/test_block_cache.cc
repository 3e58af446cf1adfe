// The kept scratch blocks (src/block_cache.h): reuse, limits, eviction.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "src/aligned_buffer.h"
#include "src/block_cache.h"

namespace attnpool_test {
namespace {

using attnpool::detail::BlockCacheAllocate;
using attnpool::detail::BlockCacheFree;
using attnpool::detail::BlockCacheHeldBytes;
using attnpool::detail::BlockCacheRelease;
using attnpool::detail::kBlockCacheBytes;
using attnpool::detail::kBlockCacheKeeps;
using attnpool::detail::kCachedBlockBytes;

TEST_CASE("block cache: large blocks are kept and reused, small ones not",
          "[block_cache]") {
  BlockCacheRelease();  // what earlier tests kept
  const size_t large = 4 * kCachedBlockBytes + 123;
  void* first = BlockCacheAllocate(nullptr, large);
  REQUIRE(first != nullptr);
  std::memset(first, 1, large);  // all writable
  BlockCacheFree(nullptr, first);
  if (!kBlockCacheKeeps) {  // AddressSanitizer: nothing is kept
    REQUIRE(BlockCacheHeldBytes() == 0);
    return;
  }
  const size_t kept = BlockCacheHeldBytes();
  REQUIRE(kept >= large);
  // The same size, or a few hundred bytes more (Highway's alignment
  // offsets), comes from the kept block.
  for (const size_t bytes : {large, large + 256, large - 4096}) {
    INFO(bytes);
    void* again = BlockCacheAllocate(nullptr, bytes);
    REQUIRE(again == first);
    REQUIRE(BlockCacheHeldBytes() == 0);
    BlockCacheFree(nullptr, again);
    REQUIRE(BlockCacheHeldBytes() == kept);
  }
  // Not a block more than twice the size asked, nor below kCachedBlockBytes.
  for (const size_t bytes :
       {large / 2 - 4096, kCachedBlockBytes / 2, size_t{64}}) {
    INFO(bytes);
    const size_t before = BlockCacheHeldBytes();
    void* other = BlockCacheAllocate(nullptr, bytes);
    REQUIRE(other != first);
    REQUIRE(BlockCacheHeldBytes() == before);
    BlockCacheFree(nullptr, other);
  }
  // The half-size block was kept beside the first; small ones never are.
  REQUIRE(BlockCacheHeldBytes() > kept);
  REQUIRE(BlockCacheHeldBytes() < kept + large);
  BlockCacheRelease();
  REQUIRE(BlockCacheHeldBytes() == 0);
}

TEST_CASE("block cache: holds at most kBlockCacheBytes, the newest",
          "[block_cache]") {
  if (!kBlockCacheKeeps) return;  // AddressSanitizer
  BlockCacheRelease();
  const size_t block = kBlockCacheBytes / 4;
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) {
    blocks.push_back(BlockCacheAllocate(nullptr, block));
    REQUIRE(blocks.back() != nullptr);
  }
  for (void* memory : blocks) BlockCacheFree(nullptr, memory);
  REQUIRE(BlockCacheHeldBytes() <= kBlockCacheBytes);
  REQUIRE(BlockCacheHeldBytes() >= 3 * block);
  // The newest freed were kept (the oldest made room for them).
  const auto newest = blocks.end() - BlockCacheHeldBytes() / block;
  void* again = BlockCacheAllocate(nullptr, block);
  REQUIRE(std::find(newest, blocks.end(), again) != blocks.end());
  BlockCacheFree(nullptr, again);
  // AllocateBuffer goes through the cache, aligned for every target.
  {
    auto buffer =
        attnpool::detail::AllocateBuffer<float>(kCachedBlockBytes / 2 + 7);
    REQUIRE(reinterpret_cast<uintptr_t>(buffer.get()) % 64 == 0);
  }
  BlockCacheRelease();
}

}  // namespace
}  // namespace attnpool_test
