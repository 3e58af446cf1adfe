// Reports which compiled target HWY_DYNAMIC_DISPATCH selects right now.
#include "arch/target_policy.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/target_probe.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/target_probe.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
int64_t ThisTarget() { return HWY_TARGET; }
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnpool {
namespace detail {
HWY_EXPORT(ThisTarget);
int64_t DispatchedTarget() { return HWY_DYNAMIC_DISPATCH(ThisTarget)(); }
bool DispatchesBf16Family() {
  // By rank, not by name: a later Highway's targets (AVX3_ZEN4, AVX3_SPR,
  // NEON_BF16, …) rank the same way.
#if HWY_ARCH_X86
  return DispatchedTarget() <= HWY_AVX3;  // AVX3 and every better target
#elif HWY_ARCH_ARM_A64
  return (DispatchedTarget() & (HWY_EMU128 | HWY_SCALAR)) == 0;
#else
  return false;
#endif
}
}  // namespace detail
}  // namespace attnpool
#endif  // HWY_ONCE
