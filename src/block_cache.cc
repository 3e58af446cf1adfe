// The kept blocks of src/block_cache.h: a list under a mutex.
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

struct Kept {
  char* block;
  size_t bytes;
};

std::mutex& CacheMutex() {
  static std::mutex mutex;
  return mutex;
}
// Never destroyed: blocks freed during static destruction still find it.
std::vector<Kept>& KeptBlocks() {
  static auto* kept = new std::vector<Kept>();
  return *kept;
}
size_t held = 0;  // Σ bytes of KeptBlocks(), under CacheMutex()

}  // namespace

void* BlockCacheAllocate(void* /*opaque*/, size_t bytes) {
  if (bytes >= kCachedBlockBytes) {
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
  if (bytes > ~size_t{0} - kHeaderBytes) return nullptr;
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
  if (kBlockCacheKeeps && bytes >= kCachedBlockBytes) {
    std::lock_guard<std::mutex> lock(CacheMutex());
    if (held + bytes <= kBlockCacheBytes) {
      KeptBlocks().push_back({block, bytes});
      held += bytes;
      return;
    }
  }
  std::free(block);
}

size_t BlockCacheHeldBytes() {
  std::lock_guard<std::mutex> lock(CacheMutex());
  return held;
}

}  // namespace detail
}  // namespace attnpool
