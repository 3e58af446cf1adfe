// The fused decode over narrow rows (arch/fused/narrow_decode-inl.h),
// compiled once per target.
#include "arch/target_policy.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/fused/narrow_decode.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/fused/narrow_decode-inl.h"
#include "hwy/highway.h"

// (Explicit instantiations: the templates carry the target attributes.)
namespace attnpool {
namespace HWY_NAMESPACE {
namespace fused {

// For the walkers of both types; double's do nothing (src/ widens narrow
// rows for double, so its plans never hold them).
#define ATTNPOOL_NARROW_DECODE(T)                                           \
  template void NarrowDots<T>(const detail::RowList<T>&, size_t, size_t,    \
                              size_t, const T*, size_t, T*, size_t, size_t, \
                              const char*, size_t, size_t);                 \
  template void NarrowWeightedSum<T>(                                       \
      const ConstMatrixView<T>&, const detail::RowList<T>&, size_t,         \
      const MatrixView<T>&, size_t, bool, const KeysBeside<T>&);
ATTNPOOL_NARROW_DECODE(float)
ATTNPOOL_NARROW_DECODE(double)
#undef ATTNPOOL_NARROW_DECODE

}  // namespace fused
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
