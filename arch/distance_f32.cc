// The distance stage for float, compiled once per target (see distance_tu.inc).
#include "arch/target_policy.h"

#define ATTNPOOL_DISTANCE_T float
#define ATTNPOOL_DISTANCE_SUFFIX F32
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/distance_tu.inc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/distance_tu.inc"
