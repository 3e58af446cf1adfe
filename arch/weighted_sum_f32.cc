// The weighted-sum stage for float, compiled once per target (see
// weighted_sum_tu.inc).
#include "arch/target_policy.h"

#define ATTNPOOL_WSUM_T float
#define ATTNPOOL_WSUM_SUFFIX F32
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/weighted_sum_tu.inc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/weighted_sum_tu.inc"
