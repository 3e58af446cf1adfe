// Helpers shared by the benchmark binaries: one entry per supported target.
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <utility>
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

// Work per iteration: items (pairs, outputs, ...) and floating-point
// operations, reported as items per second and GFLOP/s.
struct Rates {
  double items, flops;
};

// Times `run` once per iteration, keeping `out` (what it writes) live so
// that the work is not optimized away, then reports `rates`.
template <class Run>
void Measure(benchmark::State& state, const std::vector<float>& out,
             Rates rates, const Run& run) {
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(out.data());
  }
  SetRates(state, rates.items, rates.flops);
}

// Registers a benchmark timed by wall clock (it runs OpenMP threads) and
// reported in milliseconds.
template <class... Args>
benchmark::internal::Benchmark* Register(const std::string& name,
                                         Args&&... args) {
  return benchmark::RegisterBenchmark(name.c_str(), std::forward<Args>(args)...)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

// The main of every benchmark binary: registers, then runs what the command
// line selects.
int RunBenchmarks(int argc, char** argv, void (*register_all)());

// Thread counts to measure: ATTNPOOL_BENCH_THREADS="1,2,4" (default 1,2).
std::vector<int> ThreadCounts();

// For each of `shapes`: per_threads(shape, "<name>/threads:<t>", t) for each
// of ThreadCounts(), then single(shape, "<name>/threads:1") for the
// single-threaded baselines; <name> is name(shape).
template <class Shapes, class Name, class PerThreads, class Single>
void RegisterShapes(const Shapes& shapes, const Name& name,
                    const PerThreads& per_threads, const Single& single) {
  for (const auto& shape : shapes) {
    for (int threads : ThreadCounts()) {
      per_threads(shape, name(shape) + "/threads:" + std::to_string(threads),
                  threads);
    }
    single(shape, name(shape) + "/threads:1");
  }
}

}  // namespace attnpool_bench
