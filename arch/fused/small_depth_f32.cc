// The fused kernel's small-depth paths for float
// (arch/fused/small_depth-inl.h), compiled once per target.
#include "arch/target_policy.h"

#define ATTNPOOL_FUSED_T float
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/fused/small_depth_tu.inc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/fused/small_depth_tu.inc"
