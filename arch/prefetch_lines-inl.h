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

// The cache a prefetch fills: the first level for rows read soon; the
// second for rows read after more bytes than the first level holds (a
// paged decode's values, read after its block's keys), which a prefetch
// into the first level loses before they are read.
enum class PrefetchTo { l1, l2 };

// Prefetches the cache line holding `line` (x86 prefetcht0 or prefetcht1;
// Arm PLDL1KEEP or PLDL2KEEP).
HWY_INLINE void PrefetchLine(const char* line, PrefetchTo level) {
  if (level == PrefetchTo::l2) {
    __builtin_prefetch(line, 0, 2);
  } else {
    hwy::Prefetch(line);
  }
}

// Prefetches every cache line of the `bytes` from `row`, from the line it
// starts in.
HWY_INLINE void PrefetchLines(const char* row, size_t bytes,
                              PrefetchTo level = PrefetchTo::l1) {
  const size_t skew = reinterpret_cast<uintptr_t>(row) % 64;
  for (size_t byte = 0; byte < bytes + skew; byte += 64) {
    PrefetchLine(row - skew + byte, level);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_PREFETCH_LINES_INL_H_
