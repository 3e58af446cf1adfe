// Helpers shared by the benchmark binaries: one entry per supported target.
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace attnpool_bench {

// Forces `target` for the lifetime of the object (benchmarks run one at a
// time, so process-global forcing is safe here) and reports it in the label.
class ForcedTarget {
 public:
  ForcedTarget(benchmark::State& state, const std::string& target);
  ~ForcedTarget();
};

// Adds the standard counters: items (pairs, elements, ...) per second and
// GFLOP/s for `flops_per_iteration`.
void SetRates(benchmark::State& state, double items_per_iteration,
              double flops_per_iteration);

}  // namespace attnpool_bench
