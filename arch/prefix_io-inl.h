// Loads and stores of a row's last, partial vector (per-ISA, header-only).

#if defined(ATTNPOOL_ARCH_PREFIX_IO_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_PREFIX_IO_INL_H_
#undef ATTNPOOL_ARCH_PREFIX_IO_INL_H_
#else
#define ATTNPOOL_ARCH_PREFIX_IO_INL_H_
#endif

#include <cstring>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Bytes of the widest vector of any target (SVE: 2048 bits): sizes stack
// buffers of one vector.
constexpr size_t kMaxLanesBytes = HWY_MAX_BYTES;

// Loads `count` ≤ Lanes(d) elements, zeros beyond; never reads past p+count.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> LoadPrefix(D d, const T* HWY_RESTRICT p, size_t count) {
  if (count == hn::Lanes(d)) return hn::LoadU(d, p);
  HWY_ALIGN T buffer[kMaxLanesBytes / sizeof(T)] = {};
  std::memcpy(buffer, p, count * sizeof(T));
  return hn::Load(d, buffer);
}

// Stores the first `count` ≤ Lanes(d) lanes; never writes past p+count.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void StorePrefix(D d, hn::Vec<D> v, T* HWY_RESTRICT p,
                            size_t count) {
  if (count == hn::Lanes(d)) return hn::StoreU(v, d, p);
  HWY_ALIGN T buffer[kMaxLanesBytes / sizeof(T)];
  hn::Store(v, d, buffer);
  std::memcpy(p, buffer, count * sizeof(T));
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_PREFIX_IO_INL_H_
