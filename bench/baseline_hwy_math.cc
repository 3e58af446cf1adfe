// Baseline for bench_math: Highway 1.0.3's own hn::Exp / hn::Tanh
// (hwy/contrib/math) over an array, compiled per target like arch/math.cc
// and dispatched the same way, so it runs on the best target (or the forced
// one). Not part of the library.
#include "arch/target_policy.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/baseline_hwy_math.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool_bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <bool kTanh, typename T>
void Apply(const T* in, T* out, size_t count) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= count; i += N) {
    const auto x = hn::LoadU(d, in + i);
    hn::StoreU(kTanh ? hn::Tanh(d, x) : hn::Exp(d, x), d, out + i);
  }
  if (i == count) return;
  HWY_ALIGN T buffer[HWY_MAX_BYTES / sizeof(T)] = {};
  std::memcpy(buffer, in + i, (count - i) * sizeof(T));
  const auto x = hn::Load(d, buffer);
  hn::Store(kTanh ? hn::Tanh(d, x) : hn::Exp(d, x), d, buffer);
  std::memcpy(out + i, buffer, (count - i) * sizeof(T));
}

int64_t HwyExpF32(const float* in, float* out, size_t count) {
  Apply<false>(in, out, count);
  return HWY_TARGET;
}
int64_t HwyTanhF32(const float* in, float* out, size_t count) {
  Apply<true>(in, out, count);
  return HWY_TARGET;
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool_bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnpool_bench {

// Declared in bench_math.cc; return the Highway target bit they ran on.
int64_t HighwayExp(const float* in, float* out, size_t count);
int64_t HighwayTanh(const float* in, float* out, size_t count);

HWY_EXPORT(HwyExpF32);
HWY_EXPORT(HwyTanhF32);

int64_t HighwayExp(const float* in, float* out, size_t count) {
  return HWY_DYNAMIC_DISPATCH(HwyExpF32)(in, out, count);
}
int64_t HighwayTanh(const float* in, float* out, size_t count) {
  return HWY_DYNAMIC_DISPATCH(HwyTanhF32)(in, out, count);
}

}  // namespace attnpool_bench
#endif  // HWY_ONCE
