// The fused attention-pooling kernel for double, compiled once per target (see
// fused_tu.inc).
#include "arch/target_policy.h"

#define ATTNPOOL_FUSED_T double
#define ATTNPOOL_FUSED_SUFFIX F64
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/fused_tu.inc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/fused_tu.inc"
