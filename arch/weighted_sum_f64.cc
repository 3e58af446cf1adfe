// The weighted-sum stage for double, compiled once per target (see
// weighted_sum_tu.inc).
#include "arch/target_policy.h"

#define ATTNPOOL_WSUM_T double
#define ATTNPOOL_WSUM_SUFFIX F64
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/weighted_sum_tu.inc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/weighted_sum_tu.inc"
