// The weighted-sum stage (out = weights · values) per target × shape, with
// the baselines a user would otherwise pick in the same binary: a naive loop,
// and OpenBLAS cblas_sgemm when built with it.
//
// Names: weighted_sum/<TARGET>/float/<n>x<m>x<dv>/threads:<t> (baselines:
// baseline/<name>/float/...), for weights n×m,
// values m×dv, float. items_per_second counts outputs (n·dv); GFLOP/s counts
// 2·n·m·dv (one multiply-add per weight and output column), the measure of
// the FMA peak.
#include <attnpool/attnpool.h>
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "bench/bench_data.h"
#include "bench/bench_targets.h"

#if ATTNPOOL_BENCH_OPENBLAS
#include <cblas.h>
// Declared here too: the cblas.h of another BLAS lacks it.
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace attnpool_bench {
namespace {

struct Shape {
  size_t n, m, dv;
};

// The goal shape (4096 queries and keys, 64 value columns) first.
const Shape kShapes[] = {{4096, 4096, 64}, {1024, 1024, 64}, {4096, 4096, 128}};

std::string Name(const Shape& s) { return ShapeName(s.n, s.m, s.dv); }

// Weights as a softmax leaves them (positive, rows summing to 1) and normal
// values.
struct Inputs {
  std::vector<float> weights;
  AlignedFloats values;
  std::vector<float> out;
  explicit Inputs(const Shape& s)
      : weights(s.n * s.m), values(Normal(s.m * s.dv, 1, 43)), out(s.n * s.dv) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> uniform(0, 2.0f / s.m);
    for (float& x : weights) x = uniform(rng);
  }
};

Rates OutputRates(const Shape& s) {
  return {double(s.n) * s.dv, 2.0 * s.n * s.m * s.dv};
}

void AttnpoolWeightedSum(benchmark::State& state, std::string target, Shape s,
                         int threads) {
  Inputs in(s);
  ForcedTarget forced(state, target);
  Measure(state, in.out, OutputRates(s), [&] {
    attnpool::weighted_sum({in.weights.data(), s.n, s.m},
                           {in.values.data(), s.m, s.dv},
                           {in.out.data(), s.n, s.dv}, {threads});
  });
}

// Per output, a loop over the weights.
void NaiveWeightedSum(benchmark::State& state, Shape s) {
  Inputs in(s);
  Measure(state, in.out, OutputRates(s), [&] {
    NaiveSums(s.n, s.dv, s.m, in.out.data(), [&](size_t i, size_t c, size_t j) {
      return in.weights[i * s.m + j] * in.values[j * s.dv + c];
    });
  });
}

#if ATTNPOOL_BENCH_OPENBLAS
void OpenblasSgemm(benchmark::State& state, Shape s, int threads) {
  Inputs in(s);
  openblas_set_num_threads(threads);
  const int n = static_cast<int>(s.n), m = static_cast<int>(s.m),
            dv = static_cast<int>(s.dv);
  Measure(state, in.out, OutputRates(s), [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dv, m, 1.0f,
                in.weights.data(), m, in.values.data(), dv, 0.0f, in.out.data(),
                dv);
  });
}
#endif

void RegisterAll() {
  RegisterShapes(
      kShapes, Name,
      [](const Shape& shape, const std::string& suffix, int threads) {
        for (const std::string& target : attnpool::supported_targets()) {
          Register("weighted_sum/" + target + "/float/" + suffix,
                   AttnpoolWeightedSum, target, shape, threads);
        }
#if ATTNPOOL_BENCH_OPENBLAS
        Register("baseline/openblas_sgemm/float/" + suffix, OpenblasSgemm,
                 shape, threads);
#endif
      },
      [](const Shape& shape, const std::string& suffix) {
        Register("baseline/naive/float/" + suffix, NaiveWeightedSum, shape);
      });
}

}  // namespace
}  // namespace attnpool_bench

int main(int argc, char** argv) {
  return attnpool_bench::RunBenchmarks(argc, argv, attnpool_bench::RegisterAll);
}
