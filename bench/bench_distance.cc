// The distance stage per target × metric × shape, with the baselines a user
// would otherwise pick in the same binary: a naive loop, and FAISS
// pairwise_L2sqr when built with it.
//
// Names: distance/<TARGET>/<metric>/<n>x<m>x<d>/threads:<t>. items_per_second
// counts pairs. GFLOP/s counts 2·n·m·d (one multiply-add per coordinate and
// pair), the measure of the FMA peak; for manhattan it is a nominal rate.
#include <attnpool/attnpool.h>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_targets.h"

#if ATTNPOOL_BENCH_FAISS
#include <faiss/utils/distances.h>
// OpenBLAS's own thread count (FAISS computes the inner products with sgemm).
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace attnpool_bench {
namespace {

using attnpool::Distance;

struct Shape {
  size_t n, m, d;
};

// W3 of docs/benchmarks.md, then the small-d shapes of regression.
const Shape kShapes[] = {
    {4096, 4096, 128}, {4096, 4096, 16}, {4096, 4096, 3}, {4096, 4096, 1}};

std::string ShapeName(const Shape& s) {
  return std::to_string(s.n) + "x" + std::to_string(s.m) + "x" +
         std::to_string(s.d);
}

struct Inputs {
  std::vector<float> queries, keys, out;
  explicit Inputs(const Shape& s)
      : queries(s.n * s.d), keys(s.m * s.d), out(s.n * s.m) {
    std::mt19937 rng(42);
    std::normal_distribution<float> normal;
    for (float& x : queries) x = normal(rng);
    for (float& x : keys) x = normal(rng);
  }
};

void SetPairRates(benchmark::State& state, const Shape& s) {
  SetRates(state, double(s.n) * s.m, 2.0 * s.n * s.m * s.d);
}

void AttnpoolDistance(benchmark::State& state, std::string target,
                      Distance distance, Shape s, int threads) {
  Inputs in(s);
  ForcedTarget forced(state, target);
  for (auto _ : state) {
    attnpool::pairwise_distances(distance, {in.queries.data(), s.n, s.d},
                                 {in.keys.data(), s.m, s.d},
                                 {in.out.data(), s.n, s.m}, {threads});
    benchmark::DoNotOptimize(in.out.data());
  }
  SetPairRates(state, s);
}

// What a user writes without a library: per pair, a loop over coordinates.
void NaiveSquaredL2(benchmark::State& state, Shape s) {
  Inputs in(s);
  for (auto _ : state) {
    for (size_t i = 0; i < s.n; ++i) {
      for (size_t j = 0; j < s.m; ++j) {
        float sum = 0;
        for (size_t p = 0; p < s.d; ++p) {
          const float diff = in.queries[i * s.d + p] - in.keys[j * s.d + p];
          sum += diff * diff;
        }
        in.out[i * s.m + j] = sum;
      }
    }
    benchmark::DoNotOptimize(in.out.data());
  }
  SetPairRates(state, s);
}

#if ATTNPOOL_BENCH_FAISS
void FaissSquaredL2(benchmark::State& state, Shape s, int threads) {
  Inputs in(s);
  // FAISS splits norms with OpenMP and inner products with OpenBLAS threads:
  // both are limited to `threads`.
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  for (auto _ : state) {
    faiss::pairwise_L2sqr(s.d, s.n, in.queries.data(), s.m, in.keys.data(),
                          in.out.data());
    benchmark::DoNotOptimize(in.out.data());
  }
  omp_set_num_threads(saved);
  SetPairRates(state, s);
}
#endif

void RegisterAll() {
  for (const Shape& shape : kShapes) {
    for (int threads : ThreadCounts()) {
      const std::string suffix =
          ShapeName(shape) + "/threads:" + std::to_string(threads);
      for (const std::string& target : attnpool::supported_targets()) {
        for (int metric = 0; metric < attnpool::kDistanceCount; ++metric) {
          const auto distance = static_cast<Distance>(metric);
          Register(("distance/" + target + "/" +
                    attnpool::distance_name(distance) + "/" + suffix),
                   AttnpoolDistance, target, distance, shape, threads);
        }
      }
#if ATTNPOOL_BENCH_FAISS
      Register(("baseline/faiss/sqeuclidean/" + suffix), FaissSquaredL2, shape,
               threads);
#endif
    }
    Register(("baseline/naive/sqeuclidean/" + ShapeName(shape) + "/threads:1"),
             NaiveSquaredL2, shape);
  }
}

}  // namespace
}  // namespace attnpool_bench

int main(int argc, char** argv) {
  return attnpool_bench::RunBenchmarks(argc, argv, attnpool_bench::RegisterAll);
}
