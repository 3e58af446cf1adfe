// The kept scratch blocks (src/block_cache.h): reuse, limits, alignment.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "src/aligned_buffer.h"
#include "src/block_cache.h"

namespace attnpool_test {
namespace {

using attnpool::detail::AllocateBuffer;
using attnpool::detail::BlockCacheHeldBytes;
using attnpool::detail::kBlockCacheBytes;
using attnpool::detail::kCachedBlockBytes;

TEST_CASE("block cache: large blocks are kept and reused, small ones not",
          "[block_cache]") {
  if (!attnpool::detail::kBlockCacheKeeps) {  // AddressSanitizer
    { auto buffer = AllocateBuffer<float>(kCachedBlockBytes); }
    REQUIRE(BlockCacheHeldBytes() == 0);
    return;
  }
  // An odd size: no block an earlier test kept fits it better.
  const size_t large = kCachedBlockBytes / sizeof(float) * 4 + 123;
  const size_t held = BlockCacheHeldBytes();
  const float* first;
  {
    auto buffer = AllocateBuffer<float>(large);
    first = buffer.get();
    REQUIRE(reinterpret_cast<uintptr_t>(first) % 64 == 0);
    std::memset(buffer.get(), 1, large * sizeof(float));  // all writable
  }
  const size_t kept = BlockCacheHeldBytes();
  REQUIRE(kept > held);
  {
    // The same size again comes from the kept block.
    auto again = AllocateBuffer<float>(large);
    REQUIRE(again.get() == first);
    REQUIRE(BlockCacheHeldBytes() == held);
  }
  {
    // A block more than twice as large as asked is not handed out.
    auto half = AllocateBuffer<float>(large / 2 - 1024);
    REQUIRE(half.get() != first);
  }
  {
    auto small = AllocateBuffer<float>(kCachedBlockBytes / sizeof(float) / 2);
    REQUIRE(small.get() != first);
  }
  {
    auto tiny = AllocateBuffer<float>(16);
    REQUIRE(reinterpret_cast<uintptr_t>(tiny.get()) % 64 == 0);
  }
  REQUIRE(BlockCacheHeldBytes() >= kept);  // small blocks go back to malloc
}

TEST_CASE("block cache: holds at most kBlockCacheBytes", "[block_cache]") {
  if (!attnpool::detail::kBlockCacheKeeps) return;  // AddressSanitizer
  const size_t block = kBlockCacheBytes / 4 / sizeof(float);
  {
    std::vector<attnpool::detail::AlignedBuffer<float>> buffers;
    for (int i = 0; i < 8; ++i) buffers.push_back(AllocateBuffer<float>(block));
  }
  REQUIRE(BlockCacheHeldBytes() <= kBlockCacheBytes);
  REQUIRE(BlockCacheHeldBytes() >= kBlockCacheBytes / 2);
}

}  // namespace
}  // namespace attnpool_test
