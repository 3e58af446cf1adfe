// The distance stage for double, compiled once per target (see
// distance_tu.inc).
#include "arch/target_policy.h"

#define ATTNPOOL_DISTANCE_T double
#define ATTNPOOL_DISTANCE_SUFFIX F64
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/distance_tu.inc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/distance_tu.inc"
