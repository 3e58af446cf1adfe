#include "bench/bench_targets.h"

#include <attnpool/attnpool.h>

namespace attnpool_bench {

ForcedTarget::ForcedTarget(benchmark::State& state, const std::string& target) {
  attnpool::force_target(target);
  state.SetLabel(target);
}

ForcedTarget::~ForcedTarget() { attnpool::reset_target(); }

void SetRates(benchmark::State& state, double items_per_iteration,
              double flops_per_iteration) {
  const double iterations = static_cast<double>(state.iterations());
  state.SetItemsProcessed(static_cast<int64_t>(items_per_iteration * iterations));
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops_per_iteration * iterations / 1e9, benchmark::Counter::kIsRate);
}

}  // namespace attnpool_bench
