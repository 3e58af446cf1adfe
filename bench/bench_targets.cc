#include "bench/bench_targets.h"

#include <attnpool/attnpool.h>

#include <algorithm>
#include <cstdlib>

namespace attnpool_bench {

ForcedTarget::ForcedTarget(benchmark::State& state, const std::string& target) {
  attnpool::force_target(target);
  state.SetLabel(target);
}

ForcedTarget::~ForcedTarget() { attnpool::reset_target(); }

void SetRates(benchmark::State& state, double items_per_iteration,
              double flops_per_iteration) {
  const double iterations = static_cast<double>(state.iterations());
  state.SetItemsProcessed(
      static_cast<int64_t>(items_per_iteration * iterations));
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops_per_iteration * iterations / 1e9, benchmark::Counter::kIsRate);
}

int RunBenchmarks(int argc, char** argv, void (*register_all)()) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

std::vector<int> ThreadCounts() {
  const char* list = std::getenv("ATTNPOOL_BENCH_THREADS");
  const std::string text = list ? list : "1,2";
  std::vector<int> counts;
  for (size_t start = 0; start < text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const int count = std::atoi(text.substr(start, comma - start).c_str());
    if (count > 0) counts.push_back(count);
    start = comma + 1;
  }
  return counts;
}

}  // namespace attnpool_bench
