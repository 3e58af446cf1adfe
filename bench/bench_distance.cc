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

#include "bench/bench_data.h"
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

std::string Name(const Shape& s) { return ShapeName(s.n, s.m, s.d); }

struct Inputs {
  AlignedFloats queries, keys;
  std::vector<float> out;
  explicit Inputs(const Shape& s)
      : queries(Normal(s.n * s.d, 1, 42)),
        keys(Normal(s.m * s.d, 1, 43)),
        out(s.n * s.m) {}
};

Rates PairRates(const Shape& s) {
  return {double(s.n) * s.m, 2.0 * s.n * s.m * s.d};
}

void AttnpoolDistance(benchmark::State& state, std::string target,
                      Distance distance, Shape s, int threads) {
  Inputs in(s);
  ForcedTarget forced(state, target);
  Measure(state, in.out, PairRates(s), [&] {
    attnpool::pairwise_distances(distance, {in.queries.data(), s.n, s.d},
                                 {in.keys.data(), s.m, s.d},
                                 {in.out.data(), s.n, s.m}, {threads});
  });
}

// Per pair, a loop over coordinates.
void NaiveSquaredL2(benchmark::State& state, Shape s) {
  Inputs in(s);
  Measure(state, in.out, PairRates(s), [&] {
    NaiveSums(s.n, s.m, s.d, in.out.data(), [&](size_t i, size_t j, size_t p) {
      const float diff = in.queries[i * s.d + p] - in.keys[j * s.d + p];
      return diff * diff;
    });
  });
}

#if ATTNPOOL_BENCH_FAISS
void FaissSquaredL2(benchmark::State& state, Shape s, int threads) {
  Inputs in(s);
  // FAISS splits norms with OpenMP and inner products with OpenBLAS threads:
  // both are limited to `threads`.
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  Measure(state, in.out, PairRates(s), [&] {
    faiss::pairwise_L2sqr(s.d, s.n, in.queries.data(), s.m, in.keys.data(),
                          in.out.data());
  });
  omp_set_num_threads(saved);
}
#endif

void RegisterAll() {
  RegisterShapes(
      kShapes, Name,
      [](const Shape& shape, const std::string& suffix, int threads) {
        for (const std::string& target : attnpool::supported_targets()) {
          for (int metric = 0; metric < attnpool::kDistanceCount; ++metric) {
            const auto distance = static_cast<Distance>(metric);
            Register("distance/" + target + "/" +
                         attnpool::distance_name(distance) + "/" + suffix,
                     AttnpoolDistance, target, distance, shape, threads);
          }
        }
#if ATTNPOOL_BENCH_FAISS
        Register("baseline/faiss/sqeuclidean/" + suffix, FaissSquaredL2, shape,
                 threads);
#endif
      },
      [](const Shape& shape, const std::string& suffix) {
        Register("baseline/naive/sqeuclidean/" + suffix, NaiveSquaredL2, shape);
      });
}

}  // namespace
}  // namespace attnpool_bench

int main(int argc, char** argv) {
  return attnpool_bench::RunBenchmarks(argc, argv, attnpool_bench::RegisterAll);
}
