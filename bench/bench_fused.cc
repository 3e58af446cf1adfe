// The fused kernel on the workloads of docs/benchmarks.md, per target, with
// the staged pipeline in the same binary where its n×m weights fit.
//
// Names: fused/<TARGET>/<workload>/<shape>/threads:<t> and
// staged/<TARGET>/<workload>/... . items_per_second counts the (query, key)
// pairs formed: n·m per head, but for W1_boxcar_sorted_keys only the pairs
// of keys within the kernel's support of each query (|x − q| < h, about 2%
// of them; the other keys weigh 0, and the sorted keys' window skips them);
// GFLOP/s counts 2·(d + dv) per pair formed (W2 and W4: 4nmd, the attention
// convention); bytes_per_second (W5) counts K and V read once.
#include <attnpool/attnpool.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_targets.h"

namespace attnpool_bench {
namespace {

using attnpool::Distance;
using attnpool::Kernel;
using attnpool::Normalization;

struct Workload {
  const char* name;
  attnpool::PoolSpec spec;
  size_t heads, n, m, d, dv;
  bool staged;  // the n×m weights of the staged pipeline fit comfortably
  bool sorted_keys = false;  // 1-D keys in ascending order
};

const Workload kWorkloads[] = {
    {"W1_nadaraya_watson_1d",
     {Distance::sqeuclidean, {Kernel::gaussian, 0.3}, Normalization::sum},
     1,
     20000,
     20000,
     1,
     1,
     false},
    // A compact kernel: sorted 1-D keys let each query visit only its
    // window of keys (h = 0.05 on [0, 5]: 2% of them); unsorted, every key.
    {"W1_boxcar_sorted_keys",
     {Distance::sqeuclidean, {Kernel::boxcar, 0.05}, Normalization::sum},
     1,
     20000,
     20000,
     1,
     1,
     false,
     true},
    {"W1_boxcar_unsorted_keys",
     {Distance::sqeuclidean, {Kernel::boxcar, 0.05}, Normalization::sum},
     1,
     20000,
     20000,
     1,
     1,
     false},
    {"W2_sdpa",
     {Distance::dot, {Kernel::exp}, Normalization::sum},
     1,
     4096,
     4096,
     64,
     64,
     true},
    {"W4_multi_head",
     {Distance::dot, {Kernel::exp}, Normalization::sum},
     8,
     1024,
     1024,
     64,
     64,
     true},
    {"W5_decode",
     {Distance::dot, {Kernel::exp}, Normalization::sum},
     8,
     1,
     65536,
     64,
     64,
     false},
};

std::vector<float> Random(size_t count, float low, float high, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(low, high);
  std::vector<float> data(count);
  for (float& x : data) x = value(rng);
  return data;
}

void Run(benchmark::State& state, std::string target, Workload w, bool fused,
         int threads) {
  // W1's inputs span [0, 5] like the seed's data; the others are unit-scale.
  const float spread = w.d == 1 ? 5.0f : 1.0f;
  const auto queries = Random(w.heads * w.n * w.d, 0, spread, 1);
  auto keys = Random(w.heads * w.m * w.d, 0, spread, 2);
  if (w.sorted_keys) std::sort(keys.begin(), keys.end());  // d = 1, 1 head
  const auto values = Random(w.heads * w.m * w.dv, -1, 1, 3);
  std::vector<float> out(w.heads * w.n * w.dv);
  std::vector<float> weights(fused ? 0 : w.n * w.m);
  // The pairs formed: with sorted keys, those of keys in each query's
  // support (the boxcar's weight is 1 where |x − q| < h, else 0).
  double pairs = double(w.heads) * w.n * w.m;
  if (w.sorted_keys) {
    pairs = 0;
    for (const float query : queries) {
      pairs += std::lower_bound(keys.begin(), keys.end(),
                                query + w.spec.kernel.bandwidth) -
               std::upper_bound(keys.begin(), keys.end(),
                                query - w.spec.kernel.bandwidth);
    }
  }
  ForcedTarget forced(state, target);
  if (w.sorted_keys) state.SetLabel(target + ", items: pairs in the support");
  for (auto _ : state) {
    for (size_t h = 0; h < w.heads; ++h) {
      const attnpool::MatrixView<const float> q(queries.data() + h * w.n * w.d,
                                                w.n, w.d),
          k(keys.data() + h * w.m * w.d, w.m, w.d),
          v(values.data() + h * w.m * w.dv, w.m, w.dv);
      const attnpool::MatrixView<float> o(out.data() + h * w.n * w.dv, w.n,
                                          w.dv);
      if (fused) {
        attnpool::attention_pool(w.spec, q, k, v, o, {}, {threads});
      } else {
        attnpool::attention_pool_staged(
            w.spec, q, k, v, o, {weights.data(), w.n, w.m}, {}, {threads});
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  SetRates(state, pairs, 2.0 * pairs * (w.d + w.dv));
  state.SetBytesProcessed(
      static_cast<int64_t>(state.iterations() * double(w.heads) * w.m *
                           (w.d + w.dv) * sizeof(float)));
}

void RegisterAll() {
  for (const Workload& w : kWorkloads) {
    const std::string shape = std::to_string(w.heads) + "x" +
                              std::to_string(w.n) + "x" + std::to_string(w.m) +
                              "x" + std::to_string(w.d) + "x" +
                              std::to_string(w.dv);
    for (int threads : ThreadCounts()) {
      const std::string suffix =
          "/" + shape + "/threads:" + std::to_string(threads);
      for (const std::string& target : attnpool::supported_targets()) {
        Register("fused/" + target + "/" + w.name + suffix, Run, target, w,
                 true, threads);
        if (w.staged) {
          Register("staged/" + target + "/" + w.name + suffix, Run, target, w,
                   false, threads);
        }
      }
    }
  }
}

}  // namespace
}  // namespace attnpool_bench

int main(int argc, char** argv) {
  return attnpool_bench::RunBenchmarks(argc, argv, attnpool_bench::RegisterAll);
}
