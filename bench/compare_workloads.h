// bench/compare's workloads (docs/benchmarks.md), one function each, run
// for a thread count; they report through compare_measure.h. The files:
// compare.cc (probes, W1, W3, M1, the summary), compare_attention.cc (W2,
// W4, W2n, W6, W7, W8), compare_decode.cc (W5, W5n, W9).
#pragma once

#include "bench/unfused_attention.h"

namespace attnpool_compare {

// The baselines' pieces the workload files share.
#if ATTNPOOL_BENCH_OPENBLAS
using attnpool_bench::OpenblasHead;
#endif
using attnpool_bench::SoftmaxRows;

void Probes(int threads);
void W1(int threads);
void W2(int threads);
void W2n(int threads);
void W3(int threads);
void W4(int threads);
void W5(int threads);
void W5n(int threads);
void W6(int threads);
void W7(int threads);
void W8(int threads);
void W9(int threads);
void M1(int threads);

}  // namespace attnpool_compare
