// The vectorized exp and tanh (arch/math-inl.h) per target, over arrays of
// 4096 elements (L1) and 2^20 elements (8 MiB in + out), with the baselines
// a user would otherwise pick in the same binary:
//   baseline/hwy_<TARGET>/...      Highway 1.0.3 hn::Exp / hn::Tanh on the
//                                  best target;
//   baseline/libmvec/...           glibc libmvec (AVX-512, x86-64 with
//                                  AVX-512F/DQ only);
//   baseline/std/...               a plain std::exp / std::tanh loop.
//
// Names: math/<TARGET>/<exp|tanh>/<float|double>/<n>, the baselines
// baseline/<name>/<exp|tanh>/float/<n> (the variant and shape of the float
// entries of the same work); items_per_second counts elements. exp inputs
// are uniform in [−20, 0] (softmax arguments), tanh inputs uniform in
// [−5, 5] (both of its branches).
#include <attnpool/attnpool.h>
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "arch/math.h"
#include "bench/bench_targets.h"
#include "src/math.h"

namespace attnpool_bench {

// baseline_hwy_math.cc: return the Highway target bit they ran on.
int64_t HighwayExp(const float* in, float* out, size_t count);
int64_t HighwayTanh(const float* in, float* out, size_t count);
#if ATTNPOOL_BENCH_LIBMVEC
// baseline_libmvec.cc
void LibmvecExp(const float* in, float* out, size_t count);
void LibmvecTanh(const float* in, float* out, size_t count);
#endif

namespace {

enum class Function { exp, tanh };

const char* FunctionName(Function f) {
  return f == Function::exp ? "exp" : "tanh";
}

template <typename T>
const char* TypeName() {
  return sizeof(T) == 4 ? "float" : "double";
}

const size_t kSizes[] = {4096, size_t{1} << 20};

template <typename T>
struct Arrays {
  std::vector<T> in, out;
  Arrays(Function f, size_t count) : in(count), out(count) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<double> uniform(
        f == Function::exp ? -20.0 : -5.0, f == Function::exp ? 0.0 : 5.0);
    for (T& x : in) x = static_cast<T>(uniform(rng));
  }
};

void SetElementRates(benchmark::State& state, size_t count, size_t bytes) {
  const double iterations = static_cast<double>(state.iterations());
  state.SetItemsProcessed(static_cast<int64_t>(iterations * count));
  state.SetBytesProcessed(static_cast<int64_t>(iterations * 2 * bytes));
}

template <typename T>
void Attnpool(benchmark::State& state, std::string target, Function f,
              size_t count) {
  Arrays<T> a(f, count);
  ForcedTarget forced(state, target);
  for (auto _ : state) {
    if (f == Function::exp) {
      attnpool::detail::ExpArray(a.in.data(), a.out.data(), count);
    } else {
      attnpool::detail::TanhArray(a.in.data(), a.out.data(), count);
    }
    benchmark::DoNotOptimize(a.out.data());
    benchmark::ClobberMemory();
  }
  SetElementRates(state, count, count * sizeof(T));
}

void Highway(benchmark::State& state, Function f, size_t count) {
  Arrays<float> a(f, count);
  attnpool::reset_target();  // the best supported target
  int64_t target = 0;
  for (auto _ : state) {
    target = f == Function::exp ? HighwayExp(a.in.data(), a.out.data(), count)
                                : HighwayTanh(a.in.data(), a.out.data(), count);
    benchmark::DoNotOptimize(a.out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(attnpool::detail::MathTargetName(target));
  SetElementRates(state, count, count * sizeof(float));
}

#if ATTNPOOL_BENCH_LIBMVEC
void Libmvec(benchmark::State& state, Function f, size_t count) {
  Arrays<float> a(f, count);
  for (auto _ : state) {
    if (f == Function::exp) {
      LibmvecExp(a.in.data(), a.out.data(), count);
    } else {
      LibmvecTanh(a.in.data(), a.out.data(), count);
    }
    benchmark::DoNotOptimize(a.out.data());
    benchmark::ClobberMemory();
  }
  SetElementRates(state, count, count * sizeof(float));
}
#endif

void Standard(benchmark::State& state, Function f, size_t count) {
  Arrays<float> a(f, count);
  for (auto _ : state) {
    for (size_t i = 0; i < count; ++i) {
      a.out[i] = f == Function::exp ? std::exp(a.in[i]) : std::tanh(a.in[i]);
    }
    benchmark::DoNotOptimize(a.out.data());
    benchmark::ClobberMemory();
  }
  SetElementRates(state, count, count * sizeof(float));
}

void RegisterAll() {
  for (size_t count : kSizes) {
    for (Function f : {Function::exp, Function::tanh}) {
      const std::string suffix =
          std::string(FunctionName(f)) + "/float/" + std::to_string(count);
      for (const std::string& target : attnpool::supported_targets()) {
        const std::string prefix = "math/" + target + "/";
        benchmark::RegisterBenchmark((prefix + suffix).c_str(), Attnpool<float>,
                                     target, f, count);
        benchmark::RegisterBenchmark(
            (prefix + FunctionName(f) + "/double/" + std::to_string(count))
                .c_str(),
            Attnpool<double>, target, f, count);
      }
      const std::string best = attnpool::supported_targets().front();
      benchmark::RegisterBenchmark(
          ("baseline/hwy_" + best + "/" + suffix).c_str(), Highway, f, count);
#if ATTNPOOL_BENCH_LIBMVEC
      if (__builtin_cpu_supports("avx512f") &&
          __builtin_cpu_supports("avx512dq")) {
        benchmark::RegisterBenchmark(("baseline/libmvec/" + suffix).c_str(),
                                     Libmvec, f, count);
      }
#endif
      benchmark::RegisterBenchmark(("baseline/std/" + suffix).c_str(), Standard,
                                   f, count);
    }
  }
}

}  // namespace
}  // namespace attnpool_bench

int main(int argc, char** argv) {
  return attnpool_bench::RunBenchmarks(argc, argv, attnpool_bench::RegisterAll);
}
