// Nadaraya–Watson bandwidth selection, per target: leave-one-out
// cross-validation over 32 Gaussian bandwidths (a grid evenly spaced in
// 1/h² between 0.03 and 0.6, the powers path) against one plain Nadaraya–Watson
// pass over the same pairs (NadarayaWatson::predict, the fused kernel), in the
// same run. Goal (issue #5): LOO over 32 bandwidths ≤ 4× one plain pass at n =
// 20000.
//
// Names: loo/<TARGET>/gaussian_32/n:<n>/threads:<t>,
//        plain/<TARGET>/predict/n:<n>x<n>/threads:<t>,
//        loo_every/<TARGET>/gaussian_32/n:20000/... (skip_distant = false:
//        every pair, what the key windows save),
//        loo_each/<TARGET>/gaussian_32/n:<n>/... (one exp per pair and
//        bandwidth: what the powers save; n = 2000 only).
// items_per_second counts (query, point) pairs — times 32 bandwidths for
// loo: bandwidth-pairs, nominal for loo/ (every pair counted, though most
// are skipped; no GFLOP/s there); "formed" is the fraction of them whose
// weight was formed (CrossValidationResult::weights_formed). After the run, the
// ratio loo ÷ plain is printed per target and thread count (medians when
// --benchmark_repetitions is given). The data: the seed's, x uniform on [0, 5],
// y = 2 sin x + x + N(0, 0.5²).
#include <attnpool/attnpool.h>
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_targets.h"

namespace attnpool_bench {
namespace {

constexpr size_t kBandwidths = 32;

struct Data {
  std::vector<float> x, y;
};

Data SeedData(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0, 5);
  std::normal_distribution<float> noise(0, 0.5f);
  Data data{std::vector<float>(n), std::vector<float>(n)};
  for (size_t j = 0; j < n; ++j) {
    data.x[j] = uniform(rng);
    data.y[j] = 2 * std::sin(data.x[j]) + data.x[j] + noise(rng);
  }
  return data;
}

void Loo(benchmark::State& state, std::string target, size_t n, bool powers,
         bool skip_distant, int threads) {
  const Data data = SeedData(n, 1);
  const auto grid = attnpool::gaussian_bandwidth_grid(0.03, 0.6, kBandwidths);
  attnpool::CrossValidationOptions options;
  options.allow_powers = powers;
  options.skip_distant = skip_distant;
  ForcedTarget forced(state, target);
  attnpool::CrossValidationResult result;
  for (auto _ : state) {
    result = attnpool::cross_validate(
        attnpool::Kernel::gaussian, {data.x.data(), n, 1},
        {data.y.data(), n, 1}, grid, options, {threads});
    // (Not DoNotOptimize on a double: with GCC its "+m,r" constraint can
    // lose the value.)
    benchmark::DoNotOptimize(result.scores.data());
  }
  state.counters["h"] = result.best_bandwidth;  // the chosen bandwidth
  const double pairs = double(n) * double(n - 1) * kBandwidths;
  // The fraction of the bandwidth-pairs whose weight was formed.
  state.counters["formed"] = double(result.weights_formed) / pairs;
  if (skip_distant) {
    // Nominal bandwidth-pairs (most are skipped): no flop count claimed.
    state.SetItemsProcessed(
        static_cast<int64_t>(pairs * double(state.iterations())));
  } else {
    SetRates(state, pairs, 3 * pairs);  // per bandwidth: w·q+ε, S+w, P+w·y
  }
}

void Plain(benchmark::State& state, std::string target, size_t n, int threads) {
  const Data data = SeedData(n, 1);
  const Data queries = SeedData(n, 2);
  const attnpool::NadarayaWatson<float> model(attnpool::Kernel::gaussian, 0.3,
                                              {data.x.data(), n, 1},
                                              {data.y.data(), n, 1});
  std::vector<float> out(n);
  ForcedTarget forced(state, target);
  for (auto _ : state) {
    model.predict({queries.x.data(), n, 1}, {out.data(), n, 1}, {threads});
    benchmark::DoNotOptimize(out.data());
  }
  const double pairs = double(n) * double(n);
  SetRates(state, pairs, 4 * pairs);
}

void RegisterAll() {
  for (int threads : ThreadCounts()) {
    const std::string suffix = "/threads:" + std::to_string(threads);
    for (const std::string& target : attnpool::supported_targets()) {
      for (size_t n : {size_t(20000), size_t(2000)}) {
        const std::string size = std::to_string(n);
        Register("loo/" + target + "/gaussian_32/n:" + size + suffix, Loo,
                 target, n, true, true, threads);
        if (n == 20000) {
          Register("loo_every/" + target + "/gaussian_32/n:" + size + suffix,
                   Loo, target, n, true, false, threads);
        }
        Register("plain/" + target + "/predict/n:" + size + "x" + size + suffix,
                 Plain, target, n, threads);
      }
      Register("loo_each/" + target + "/gaussian_32/n:2000" + suffix, Loo,
               target, size_t(2000), false, true, threads);
    }
  }
}

// Console output as usual, plus the loo ÷ plain ratios at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      const bool median =
          run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.run_type == Run::RT_Aggregate && !median) continue;
      std::string name = run.run_name.str();
      // Medians replace single runs of the same benchmark.
      if (median || !times_.count(name))
        times_[name] = run.GetAdjustedRealTime();
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    bool header = false;
    for (const auto& entry : times_) {
      const std::string& name = entry.first;
      const size_t prefix = name.rfind("loo/", 0) == 0         ? 4
                            : name.rfind("loo_every/", 0) == 0 ? 10
                                                               : 0;
      if (prefix == 0) continue;
      // loo/T/gaussian_32/n:N/threads:t ↔ plain/T/predict/n:NxN/threads:t
      const size_t n_at = name.find("/n:"), threads_at = name.find("/threads:");
      const std::string target =
          name.substr(prefix, name.find('/', prefix) - prefix);
      const std::string n = name.substr(n_at + 3, threads_at - n_at - 3);
      const std::string plain = "plain/" + target + "/predict/n:" + n + "x" +
                                n + name.substr(threads_at);
      const auto found = times_.find(plain);
      if (found == times_.end()) continue;
      if (!header) {
        std::printf(
            "\nLOO over %zu bandwidths ÷ one plain pass (goal ≤ 4 at "
            "n = 20000):\n",
            kBandwidths);
        header = true;
      }
      std::printf("  %-54s %8.2f ms / %8.2f ms = %.2f\n", name.c_str(),
                  entry.second, found->second, entry.second / found->second);
    }
    std::fflush(stdout);
  }

 private:
  std::map<std::string, double> times_;
};

}  // namespace
}  // namespace attnpool_bench

int main(int argc, char** argv) {
  // (Before Initialize, which removes the flags it reads.)
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    json |= std::string(argv[i]).find("--benchmark_format=json") == 0;
  }
  attnpool_bench::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  attnpool_bench::RatioReporter reporter;
  if (json) {
    benchmark::RunSpecifiedBenchmarks();  // machine-readable: no extras
  } else {
    benchmark::RunSpecifiedBenchmarks(&reporter);
  }
  benchmark::Shutdown();
  return 0;
}
