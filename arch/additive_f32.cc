// Additive attention's scores for float, compiled once per target (see
// additive_tu.inc).
#include "arch/target_policy.h"

#define ATTNPOOL_ADDITIVE_T float
#define ATTNPOOL_ADDITIVE_SUFFIX F32
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/additive_tu.inc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "arch/additive_tu.inc"
