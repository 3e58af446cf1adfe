// Software prefetch of a row's cache lines (per-ISA, header-only).

#if defined(ATTNPOOL_ARCH_PREFETCH_LINES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_PREFETCH_LINES_INL_H_
#undef ATTNPOOL_ARCH_PREFETCH_LINES_INL_H_
#else
#define ATTNPOOL_ARCH_PREFETCH_LINES_INL_H_
#endif

#include <stddef.h>
#include <stdint.h>

#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {

// Prefetches every cache line of the `bytes` from `row`, from the line it
// starts in.
HWY_INLINE void PrefetchLines(const char* row, size_t bytes) {
  const size_t skew = reinterpret_cast<uintptr_t>(row) % 64;
  for (size_t byte = 0; byte < bytes + skew; byte += 64) {
    hwy::Prefetch(row - skew + byte);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_PREFETCH_LINES_INL_H_
