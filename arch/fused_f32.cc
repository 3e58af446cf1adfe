// The fused attention-pooling kernel for float, compiled once per target (see
// fused_tu.inc).
#include "arch/target_policy.h"

#define ATTNPOOL_FUSED_T float
#define ATTNPOOL_FUSED_SUFFIX F32
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/fused_tu.inc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/fused_tu.inc"
