// The kernel and normalization stages for double, compiled once per target
// (see stages_tu.inc).
#include "arch/target_policy.h"

#define ATTNPOOL_STAGES_T double
#define ATTNPOOL_STAGES_SUFFIX F64
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/stages_tu.inc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/stages_tu.inc"
