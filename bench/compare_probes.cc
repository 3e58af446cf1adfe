// The machine-limit probes. FMA peak: enough independent accumulators to
// cover the latency of every FMA pipe (4 cycles × 2 pipes ≥ 8 chains; 12
// leave slack), no memory traffic, the result kept live so nothing is
// optimized away. Read bandwidth: vector loads into eight sums, four loops.
#include "arch/target_policy.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/compare_probes.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "bench/compare_probes.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool_compare {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// chain = chain·a + b on every chain: independent multiply-adds.
template <class V, class... Chains>
HWY_INLINE void StepChains(V a, V b, Chains&... chains) {
  ((chains = hn::MulAdd(chains, a, b)), ...);
}

double FmaLoop(size_t iterations) {
  const hn::ScalableTag<float> d;
  const auto a = hn::Set(d, 0.999999f), b = hn::Set(d, 1e-7f);
  auto x0 = hn::Set(d, 1.0f), x1 = hn::Set(d, 1.1f), x2 = hn::Set(d, 1.2f),
       x3 = hn::Set(d, 1.3f), x4 = hn::Set(d, 1.4f), x5 = hn::Set(d, 1.5f),
       x6 = hn::Set(d, 1.6f), x7 = hn::Set(d, 1.7f), x8 = hn::Set(d, 1.8f),
       x9 = hn::Set(d, 1.9f), x10 = hn::Set(d, 2.0f), x11 = hn::Set(d, 2.1f);
  constexpr int kChains = 12;
  for (size_t i = 0; i < iterations; ++i) {
    StepChains(a, b, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11);
  }
  const auto sum = hn::Add(hn::Add(hn::Add(hn::Add(x0, x1), hn::Add(x2, x3)),
                                   hn::Add(hn::Add(x4, x5), hn::Add(x6, x7))),
                           hn::Add(hn::Add(x8, x9), hn::Add(x10, x11)));
  // Never true; keeps the chains' results live.
  if (hn::GetLane(sum) == 42.0f) return 0;
  return 2.0 * kChains * hn::Lanes(d) * static_cast<double>(iterations);
}

// Σ over `steps` steps of the four vectors of `d` at a + step·stride and
// the four at b + step·stride, into eight independent sums.
template <class D>
HWY_INLINE float EightSums(D d, const float* HWY_RESTRICT a,
                           const float* HWY_RESTRICT b, size_t steps,
                           size_t stride) {
  const size_t N = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0,
       s7 = s0;
  for (size_t i = 0; i < steps * stride; i += stride) {
    s0 = hn::Add(s0, hn::LoadU(d, a + i));
    s1 = hn::Add(s1, hn::LoadU(d, a + i + N));
    s2 = hn::Add(s2, hn::LoadU(d, a + i + 2 * N));
    s3 = hn::Add(s3, hn::LoadU(d, a + i + 3 * N));
    s4 = hn::Add(s4, hn::LoadU(d, b + i));
    s5 = hn::Add(s5, hn::LoadU(d, b + i + N));
    s6 = hn::Add(s6, hn::LoadU(d, b + i + 2 * N));
    s7 = hn::Add(s7, hn::LoadU(d, b + i + 3 * N));
  }
  const auto sum = hn::Add(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)),
                           hn::Add(hn::Add(s4, s5), hn::Add(s6, s7)));
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// Σ data[from, count).
HWY_INLINE float Tail(const float* HWY_RESTRICT data, size_t from,
                      size_t count) {
  float sum = 0;
  for (; from < count; ++from) sum += data[from];
  return sum;
}

// Σ first[0, count) + Σ second[0, count) on vectors of `d`: each array in
// turn, eight vectors a step, or both arrays in one loop (two streams),
// four vectors of each a step.
template <class D>
HWY_INLINE float ReadOn(D d, const float* HWY_RESTRICT first,
                        const float* HWY_RESTRICT second, size_t count,
                        bool together) {
  const size_t N = hn::Lanes(d);
  if (together) {
    const size_t steps = count / (4 * N);
    return EightSums(d, first, second, steps, 4 * N) +
           Tail(first, steps * 4 * N, count) +
           Tail(second, steps * 4 * N, count);
  }
  const size_t steps = count / (8 * N);
  float sum = 0;
  for (const float* data : {first, second}) {
    sum += EightSums(d, data, data + 4 * N, steps, 8 * N) +
           Tail(data, steps * 8 * N, count);
  }
  return sum;
}

float ReadSum(const float* HWY_RESTRICT first, const float* HWY_RESTRICT second,
              size_t count, int loop) {
  const bool together = loop == 2 || loop == 3;
  if (loop == 1 || loop == 3) {
    return ReadOn(hn::CappedTag<float, 8>(), first, second, count, together);
  }
  return ReadOn(hn::ScalableTag<float>(), first, second, count, together);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool_compare
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnpool_compare {
HWY_EXPORT(FmaLoop);
double FmaLoop(size_t iterations) {
  return HWY_DYNAMIC_DISPATCH(FmaLoop)(iterations);
}
HWY_EXPORT(ReadSum);
float ReadSum(const float* first, const float* second, size_t count, int loop) {
  return HWY_DYNAMIC_DISPATCH(ReadSum)(first, second, count, loop);
}

const char* ReadLoopName(int loop) {
  static const char* const names[kReadLoops] = {
      "widest vectors", "vectors of <= 256 bits", "widest vectors, two streams",
      "vectors of <= 256 bits, two streams"};
  return names[loop];
}
}  // namespace attnpool_compare
#endif
