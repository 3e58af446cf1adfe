// The attention layers (attention.h) against what a user would run instead,
// in the same binary: OpenBLAS sgemm for the projections' GEMM, and the
// numpy-style multi-head forward (sgemm projections, per head sgemm Q·Kᵀ, a
// row softmax, sgemm P·V, sgemm output projection). Additive attention is
// reported as tanh terms per second beside the tanh throughput of the same
// target (detail::TanhArray over an L1-resident array): the loop's limit.
//
// Entries: layers/<TARGET>/<what>/<shape>/threads:<t> (what: linear,
// multi_head, additive, tanh), baseline/<name>/<what>/<shape>/threads:<t>
// for the same work (openblas_sgemm/linear, openblas/multi_head).
#include <attnpool/attnpool.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_data.h"
#include "bench/bench_targets.h"
#include "bench/unfused_attention.h"
#include "src/math.h"

namespace attnpool_bench {
namespace {

// ------------------------------------------------------------------ GEMM

struct GemmShape {
  size_t n, k, c;
};
// The projection shapes of the goal: 4096×512 · 512×512, 1024×512 · 512×1536.
const GemmShape kGemmShapes[] = {{4096, 512, 512}, {1024, 512, 1536}};

std::string Name(const GemmShape& s) { return ShapeName(s.n, s.k, s.c); }

void Linear(benchmark::State& state, std::string target, GemmShape s,
            int threads) {
  const auto x = Normal(s.n * s.k, 1, 1), w = Normal(s.k * s.c, 0.05f, 2);
  std::vector<float> out(s.n * s.c);
  ForcedTarget forced(state, target);
  for (auto _ : state) {
    attnpool::linear({x.data(), s.n, s.k}, {w.data(), s.k, s.c}, nullptr,
                     {out.data(), s.n, s.c}, {threads});
    benchmark::DoNotOptimize(out.data());
  }
  SetRates(state, double(s.n) * s.c, 2.0 * s.n * s.k * s.c);
}

#if ATTNPOOL_BENCH_OPENBLAS
void Sgemm(benchmark::State& state, GemmShape s, int threads) {
  const auto x = Normal(s.n * s.k, 1, 1), w = Normal(s.k * s.c, 0.05f, 2);
  std::vector<float> out(s.n * s.c);
  openblas_set_num_threads(threads);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.n, s.c, s.k, 1.0f,
                x.data(), s.k, w.data(), s.c, 0.0f, out.data(), s.c);
    benchmark::DoNotOptimize(out.data());
  }
  SetRates(state, double(s.n) * s.c, 2.0 * s.n * s.k * s.c);
}
#endif

// ------------------------------------------------------------ multi-head

// 1024 tokens, d_model 512, 8 heads of 64: self-attention, batch 1.
constexpr size_t kTokens = 1024, kModel = 512, kHeads = 8,
                 kHeadDim = kModel / kHeads;

struct MultiHeadInputs {
  AlignedFloats x = Normal(kTokens * kModel, 1, 3);
  AlignedFloats w_q = Normal(kModel * kModel, 0.044f, 4),
                w_k = Normal(kModel * kModel, 0.044f, 5),
                w_v = Normal(kModel * kModel, 0.044f, 6),
                w_o = Normal(kModel * kModel, 0.044f, 7);
  std::vector<float> out = std::vector<float>(kTokens * kModel);
};

// The forward pass's multiply-adds: four projections, Q·Kᵀ and P·V.
double MultiHeadFlops() {
  return 4 * 2.0 * kTokens * kModel * kModel +
         2 * 2.0 * kTokens * kTokens * kModel;
}

void MultiHead(benchmark::State& state, std::string target, int threads) {
  MultiHeadInputs in;
  attnpool::MultiHeadWeights<float> weights;
  weights.heads = kHeads;
  weights.w_q = {in.w_q.data(), kModel, kModel};
  weights.w_k = {in.w_k.data(), kModel, kModel};
  weights.w_v = {in.w_v.data(), kModel, kModel};
  weights.w_o = {in.w_o.data(), kModel, kModel};
  const auto x =
      attnpool::dense_tensor<const float>(in.x.data(), 1, 1, kTokens, kModel);
  ForcedTarget forced(state, target);
  for (auto _ : state) {
    attnpool::multi_head_attention(
        weights, x, x, x,
        attnpool::dense_tensor(in.out.data(), 1, 1, kTokens, kModel), {},
        attnpool::EmptyRows::nan, {threads});
    benchmark::DoNotOptimize(in.out.data());
  }
  SetRates(state, double(kTokens), MultiHeadFlops());
}

#if ATTNPOOL_BENCH_OPENBLAS
// What numpy does for the same layer: every product an sgemm, the scores
// materialized per head, softmax row by row (max, exp, sum, scale).
void MultiHeadOpenblas(benchmark::State& state, int threads) {
  MultiHeadInputs in;
  std::vector<float> q(kTokens * kModel), k(kTokens * kModel),
      v(kTokens * kModel), concat(kTokens * kModel), scores(kTokens * kTokens);
  openblas_set_num_threads(threads);
  const auto project = [&](const AlignedFloats& w, std::vector<float>& y,
                           const float* x, size_t ld_x) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kTokens, kModel,
                kModel, 1.0f, x, ld_x, w.data(), kModel, 0.0f, y.data(),
                kModel);
  };
  for (auto _ : state) {
    project(in.w_q, q, in.x.data(), kModel);
    project(in.w_k, k, in.x.data(), kModel);
    project(in.w_v, v, in.x.data(), kModel);
    for (size_t h = 0; h < kHeads; ++h) {
      OpenblasHead(q.data() + h * kHeadDim, k.data() + h * kHeadDim,
                   v.data() + h * kHeadDim, concat.data() + h * kHeadDim,
                   kTokens, kTokens, kHeadDim, kModel, scores.data());
    }
    project(in.w_o, in.out, concat.data(), kModel);
    benchmark::DoNotOptimize(in.out.data());
  }
  SetRates(state, double(kTokens), MultiHeadFlops());
}
#endif

// -------------------------------------------------------------- additive

// n = m = 1024, h = 128, dq = dk = 64, dv = 64.
constexpr size_t kAdditiveRows = 1024, kHidden = 128, kAdditiveDepth = 64;

void Additive(benchmark::State& state, std::string target, int threads) {
  const auto q = Normal(kAdditiveRows * kAdditiveDepth, 1, 8),
             k = Normal(kAdditiveRows * kAdditiveDepth, 1, 9),
             v = Normal(kAdditiveRows * kAdditiveDepth, 1, 10),
             w_q = Normal(kHidden * kAdditiveDepth, 0.125f, 11),
             w_k = Normal(kHidden * kAdditiveDepth, 0.125f, 12),
             w_v = Normal(kHidden, 1, 13);
  std::vector<float> out(kAdditiveRows * kAdditiveDepth);
  const auto view = [](const AlignedFloats& data) {
    return attnpool::dense_tensor<const float>(data.data(), 1, 1, kAdditiveRows,
                                               kAdditiveDepth);
  };
  ForcedTarget forced(state, target);
  for (auto _ : state) {
    attnpool::additive_attention(
        {{w_q.data(), kHidden, kAdditiveDepth},
         {w_k.data(), kHidden, kAdditiveDepth},
         w_v.data()},
        view(q), view(k), view(v),
        attnpool::dense_tensor(out.data(), 1, 1, kAdditiveRows, kAdditiveDepth),
        {}, attnpool::EmptyRows::nan, {threads});
    benchmark::DoNotOptimize(out.data());
  }
  // Items: tanh terms (one per query, key and hidden unit).
  SetRates(state, double(kAdditiveRows) * kAdditiveRows * kHidden, 0);
}

// The limit of the additive loop: tanh of an L1-resident array, one thread.
void TanhThroughput(benchmark::State& state, std::string target) {
  auto in = Normal(4096, 1, 14);
  std::vector<float> out(in.size());
  ForcedTarget forced(state, target);
  for (auto _ : state) {
    attnpool::detail::TanhArray(in.data(), out.data(), in.size());
    benchmark::DoNotOptimize(out.data());
  }
  SetRates(state, double(in.size()), 0);
}

void RegisterAll() {
  for (const std::string& target : attnpool::supported_targets()) {
    Register("layers/" + target + "/tanh/4096/threads:1", TanhThroughput,
             target)
        ->Unit(benchmark::kMicrosecond);
  }
  for (int threads : ThreadCounts()) {
    const std::string suffix = "/threads:" + std::to_string(threads);
    for (const GemmShape& shape : kGemmShapes) {
      for (const std::string& target : attnpool::supported_targets()) {
        Register("layers/" + target + "/linear/" + Name(shape) + suffix, Linear,
                 target, shape, threads);
      }
#if ATTNPOOL_BENCH_OPENBLAS
      Register("baseline/openblas_sgemm/linear/" + Name(shape) + suffix, Sgemm,
               shape, threads);
#endif
    }
    for (const std::string& target : attnpool::supported_targets()) {
      Register("layers/" + target + "/multi_head/1024x512x8" + suffix,
               MultiHead, target, threads);
    }
#if ATTNPOOL_BENCH_OPENBLAS
    Register("baseline/openblas/multi_head/1024x512x8" + suffix,
             MultiHeadOpenblas, threads);
#endif
    for (const std::string& target : attnpool::supported_targets()) {
      Register("layers/" + target + "/additive/1024x1024x128" + suffix,
               Additive, target, threads);
    }
  }
}

}  // namespace
}  // namespace attnpool_bench

int main(int argc, char** argv) {
  return attnpool_bench::RunBenchmarks(argc, argv, attnpool_bench::RegisterAll);
}
