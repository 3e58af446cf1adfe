// The kernel and normalization stages and the staged pipeline, per target,
// with naive loops as the in-binary baseline.
//
// Names: kernel/<TARGET>/<kernel>/<n>x<m>, normalize/<TARGET>/<mode>/<n>x<m>,
// kernel_normalize/<TARGET>/gaussian_sum/<n>x<m> (the two stages in turn:
// the work of baseline/naive/gaussian_sum/<n>x<m>),
// pool_staged/<TARGET>/<case>/<n>x<m>x<d>x<dv>, all /threads:<t>.
// items_per_second counts matrix elements (n·m). The stages run in place on
// the same matrix every iteration: their cost does not depend on the values
// (no data-dependent branches), so the input is not restored.
#include <attnpool/attnpool.h>
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_targets.h"

namespace attnpool_bench {
namespace {

using attnpool::Distance;
using attnpool::Kernel;
using attnpool::Normalization;

constexpr size_t kRows = 4096, kCols = 4096;

std::vector<float> RandomMatrix(size_t count, float low, float high) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(low, high);
  std::vector<float> data(count);
  for (float& x : data) x = value(rng);
  return data;
}

void KernelStage(benchmark::State& state, std::string target, Kernel kernel,
                 int threads) {
  auto values = RandomMatrix(kRows * kCols, 0, 4);
  ForcedTarget forced(state, target);
  const attnpool::KernelSpec spec{
      kernel, 1.3,
      attnpool::kernel_properties(kernel).argument ==
              attnpool::KernelArgument::score
          ? std::optional<double>(-0.5)
          : std::nullopt};
  for (auto _ : state) {
    attnpool::apply_kernel(spec, Distance::sqeuclidean,
                           {values.data(), kRows, kCols}, 64, {threads});
    benchmark::DoNotOptimize(values.data());
  }
  SetRates(state, double(kRows) * kCols, 0);
}

void NormalizeStage(benchmark::State& state, std::string target,
                    Normalization normalization, int threads) {
  auto values = RandomMatrix(kRows * kCols, 0, 4);
  ForcedTarget forced(state, target);
  for (auto _ : state) {
    attnpool::normalize(normalization, {values.data(), kRows, kCols}, {},
                        attnpool::EmptyRows::nan, {threads});
    benchmark::DoNotOptimize(values.data());
  }
  SetRates(state, double(kRows) * kCols, 0);
}

// The Gaussian kernel (h = 1.3: exp(−x/3.38)) then sum normalization: for
// an exponential kernel, the max-subtracted softmax of its logits.
void KernelNormalize(benchmark::State& state, std::string target, int threads) {
  auto values = RandomMatrix(kRows * kCols, 0, 4);
  ForcedTarget forced(state, target);
  const attnpool::KernelSpec spec{Kernel::gaussian, 1.3};
  for (auto _ : state) {
    attnpool::apply_kernel(spec, Distance::sqeuclidean,
                           {values.data(), kRows, kCols}, 64, {threads});
    attnpool::normalize(Normalization::sum, {values.data(), kRows, kCols}, {},
                        attnpool::EmptyRows::nan, {threads});
    benchmark::DoNotOptimize(values.data());
  }
  SetRates(state, double(kRows) * kCols, 0);
}

// What a user writes without a library for the same: exp then softmax, row
// by row.
void NaiveGaussianSoftmax(benchmark::State& state) {
  auto values = RandomMatrix(kRows * kCols, 0, 4);
  for (auto _ : state) {
    for (size_t i = 0; i < kRows; ++i) {
      float* row = values.data() + i * kCols;
      float maximum = -INFINITY, sum = 0;
      for (size_t j = 0; j < kCols; ++j)
        maximum = std::max(maximum, -row[j] / 3.38f);
      for (size_t j = 0; j < kCols; ++j)
        sum += row[j] = std::exp(-row[j] / 3.38f - maximum);
      for (size_t j = 0; j < kCols; ++j) row[j] /= sum;
    }
    benchmark::DoNotOptimize(values.data());
  }
  SetRates(state, double(kRows) * kCols, 0);
}

struct PoolCase {
  const char* name;
  attnpool::PoolSpec spec;
  size_t n, m, d, dv;
};

const PoolCase kPoolCases[] = {
    {"nadaraya_watson_1d",
     {Distance::sqeuclidean, {Kernel::gaussian, 0.3}, Normalization::sum},
     4096,
     4096,
     1,
     1},
    {"sdpa",
     {Distance::dot, {Kernel::exp}, Normalization::sum},
     1024,
     1024,
     64,
     64},
};

void PoolStaged(benchmark::State& state, std::string target, PoolCase c,
                int threads) {
  auto queries = RandomMatrix(c.n * c.d, -2, 2),
       keys = RandomMatrix(c.m * c.d, -2, 2),
       values = RandomMatrix(c.m * c.dv, -1, 1);
  std::vector<float> out(c.n * c.dv), weights(c.n * c.m);
  ForcedTarget forced(state, target);
  for (auto _ : state) {
    attnpool::attention_pool_staged(
        c.spec, {queries.data(), c.n, c.d}, {keys.data(), c.m, c.d},
        {values.data(), c.m, c.dv}, {out.data(), c.n, c.dv},
        {weights.data(), c.n, c.m}, {}, {threads});
    benchmark::DoNotOptimize(out.data());
  }
  // FLOPs: distance 2nmd (3nmd for L2 counted as 2, one FMA each),
  // weighted sum 2nm·dv.
  SetRates(state, double(c.n) * c.m, 2.0 * c.n * c.m * (c.d + c.dv));
}

void RegisterAll() {
  const std::string shape = std::to_string(kRows) + "x" + std::to_string(kCols);
  for (int threads : ThreadCounts()) {
    const std::string suffix = "/threads:" + std::to_string(threads);
    for (const std::string& target : attnpool::supported_targets()) {
      for (const attnpool::KernelProperties& properties : attnpool::kKernels) {
        const Kernel kernel = properties.kernel;
        Register(("kernel/" + target + "/" + attnpool::kernel_name(kernel) +
                  "/" + shape + suffix),
                 KernelStage, target, kernel, threads);
      }
      for (Normalization normalization :
           {Normalization::softmax, Normalization::sum}) {
        Register(("normalize/" + target + "/" +
                  attnpool::normalization_name(normalization) + "/" + shape +
                  suffix),
                 NormalizeStage, target, normalization, threads);
      }
      Register("kernel_normalize/" + target + "/gaussian_sum/" + shape + suffix,
               KernelNormalize, target, threads);
      for (const PoolCase& c : kPoolCases) {
        Register(("pool_staged/" + target + "/" + c.name + "/" +
                  std::to_string(c.n) + "x" + std::to_string(c.m) + "x" +
                  std::to_string(c.d) + "x" + std::to_string(c.dv) + suffix),
                 PoolStaged, target, c, threads);
      }
    }
  }
  Register("baseline/naive/gaussian_sum/" + shape + "/threads:1",
           NaiveGaussianSoftmax);
}

}  // namespace
}  // namespace attnpool_bench

int main(int argc, char** argv) {
  return attnpool_bench::RunBenchmarks(argc, argv, attnpool_bench::RegisterAll);
}
