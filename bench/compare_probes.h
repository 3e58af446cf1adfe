// Machine-limit probes of bench/compare, compiled per target (Highway) and
// dispatched to the best one the CPU supports.
#pragma once

#include <cstddef>

namespace attnpool_compare {

// Runs `iterations` rounds of independent vector multiply-adds on the
// widest vectors of the best target; returns the floating-point operations
// done (2 per lane per multiply-add).
double FmaLoop(size_t iterations);

// Σ data[0, count): the plain streaming read, as strong as a loop can make
// it (the widest vectors, eight independent accumulators, no other work);
// the sum is returned so that the reads cannot be optimized away.
float ReadSum(const float* data, size_t count);

}  // namespace attnpool_compare
