// The fuzz target's function "cross_validate" (tests/fuzz/fuzz_regression.cc):
// Nadaraya–Watson cross-validation (regression.h) over fuzzed points,
// kernels, bandwidth grids, folds and scales, against an interval oracle.
#pragma once

#include <cstdint>

#include "tests/fuzz/fuzz_common.h"

namespace attnpool_test {

// Its name in ATTNPOOL_FUZZ_API and in the fuzz target's list.
constexpr const char* kRegressionName = "cross_validate";

// Decodes the rest of an input (after the function and flags bytes) and
// checks the calls it describes; a failure aborts with a report.
void FuzzRegression(Bytes& bytes, uint8_t flags);

}  // namespace attnpool_test
