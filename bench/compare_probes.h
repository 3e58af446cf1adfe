// Machine-limit probes of bench/compare, compiled per target (Highway) and
// dispatched to the best one the CPU supports.
#pragma once

#include <cstddef>

namespace attnpool_compare {

// Runs `iterations` rounds of independent vector multiply-adds on the
// widest vectors of the best target; returns the floating-point operations
// done (2 per lane per multiply-add).
double FmaLoop(size_t iterations);

// Σ first[0, count) + Σ second[0, count): the plain streaming read, as
// strong as a loop can make it (eight independent sums, no other work),
// by one of kReadLoops loops, as the fastest differs between machines:
//   0  the widest vectors, the arrays one after the other;
//   1  vectors of at most 256 bits, likewise (on Zen 4 1.15-1.2x as fast
//      as loop 0 on its 512-bit vectors);
//   2, 3  as 0 and 1, both arrays in one loop (two streams; on Zen 4
//      1.1-1.25x as fast as loop 0).
// The sum is returned so that the reads cannot be optimized away.
constexpr int kReadLoops = 4;
float ReadSum(const float* first, const float* second, size_t count, int loop);
const char* ReadLoopName(int loop);

}  // namespace attnpool_compare
