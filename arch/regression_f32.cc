// Cross-validation of Nadaraya–Watson regression for float, compiled once per
// target (see regression_tu.inc).
#include "arch/target_policy.h"

#define ATTNPOOL_REGRESSION_T float
#define ATTNPOOL_REGRESSION_SUFFIX F32
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/regression_tu.inc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/regression_tu.inc"
