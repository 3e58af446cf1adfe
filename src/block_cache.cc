// The kept blocks of src/block_cache.h: a list under a mutex, oldest first.
#include "src/block_cache.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace attnpool {
namespace detail {
namespace {

// Each block starts with its usable size; the caller's bytes follow.
constexpr size_t kHeaderBytes = 64;
// Kept-size blocks are allocated with room to spare, rounded to pages:
// Highway asks for the same buffer with up to a few hundred bytes more or
// less from one call to the next (its rotating alignment offset).
constexpr size_t kSlackBytes = 1024, kPageBytes = 4096;

struct Kept {
  char* block;
  size_t bytes;
};

// Never destroyed: blocks freed during static destruction still find them.
std::mutex& CacheMutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
std::vector<Kept>& KeptBlocks() {
  static auto* kept = new std::vector<Kept>();
  return *kept;
}
size_t held = 0;  // Σ bytes of KeptBlocks(), under CacheMutex()

}  // namespace

void* BlockCacheAllocate(void* /*opaque*/, size_t bytes) {
  const size_t limit = ~size_t{0} - kHeaderBytes - kSlackBytes - kPageBytes;
  if (bytes > limit) return nullptr;
  if (kBlockCacheKeeps && bytes >= kCachedBlockBytes) {
    {
      std::lock_guard<std::mutex> lock(CacheMutex());
      auto& kept = KeptBlocks();
      size_t best = kept.size();
      for (size_t i = 0; i < kept.size(); ++i) {
        if (kept[i].bytes >= bytes && kept[i].bytes / 2 <= bytes &&
            (best == kept.size() || kept[i].bytes < kept[best].bytes)) {
          best = i;
        }
      }
      if (best != kept.size()) {
        char* block = kept[best].block;
        held -= kept[best].bytes;
        kept.erase(kept.begin() + best);
        return block + kHeaderBytes;
      }
    }
    bytes = (bytes + kSlackBytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  }
  char* block = static_cast<char*>(std::malloc(bytes + kHeaderBytes));
  if (block == nullptr) return nullptr;
  std::memcpy(block, &bytes, sizeof bytes);
  return block + kHeaderBytes;
}

void BlockCacheFree(void* /*opaque*/, void* memory) {
  if (memory == nullptr) return;
  char* block = static_cast<char*>(memory) - kHeaderBytes;
  size_t bytes;
  std::memcpy(&bytes, block, sizeof bytes);
  if (kBlockCacheKeeps && bytes >= kCachedBlockBytes &&
      bytes <= kBlockCacheBytes) {
    std::vector<char*> evicted;
    {
      std::lock_guard<std::mutex> lock(CacheMutex());
      auto& kept = KeptBlocks();
      // The oldest make room: shapes that changed leave no dead blocks.
      size_t first = 0;
      while (bytes > kBlockCacheBytes - held) {
        held -= kept[first].bytes;
        evicted.push_back(kept[first++].block);
      }
      kept.erase(kept.begin(), kept.begin() + first);
      kept.push_back({block, bytes});
      held += bytes;
    }
    for (char* old : evicted) std::free(old);
    return;
  }
  std::free(block);
}

size_t BlockCacheHeldBytes() {
  std::lock_guard<std::mutex> lock(CacheMutex());
  return held;
}

void BlockCacheRelease() {
  std::vector<Kept> kept;
  {
    std::lock_guard<std::mutex> lock(CacheMutex());
    kept.swap(KeptBlocks());
    held = 0;
  }
  for (const Kept& block : kept) std::free(block.block);
}

}  // namespace detail
}  // namespace attnpool
