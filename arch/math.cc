// Array loops over the vectorized exp and tanh (arch/math-inl.h), compiled
// once per target; arch/math.h is their interface.
#include "arch/target_policy.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/math.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstring>

#include "arch/math-inl.h"
#include "arch/math.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct ExpFunction {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x) const {
    return HWY_NAMESPACE::Exp(d, x);
  }
};

struct TanhFunction {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x) const {
    return HWY_NAMESPACE::Tanh(d, x);
  }
};

// out[i] = Function(in[i]), i < count: full vectors, then one partial vector
// through a buffer, so nothing past `count` is read or written.
template <class Function, typename T>
HWY_INLINE void ApplyArray(const T* in, T* out, size_t count) {
  const hn::ScalableTag<T> d;
  const Function function;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= count; i += N) {
    hn::StoreU(function(d, hn::LoadU(d, in + i)), d, out + i);
  }
  if (i == count) return;
  const size_t remaining = count - i;
  HWY_ALIGN T buffer[HWY_MAX_BYTES / sizeof(T)] = {};
  std::memcpy(buffer, in + i, remaining * sizeof(T));
  hn::Store(function(d, hn::Load(d, buffer)), d, buffer);
  std::memcpy(out + i, buffer, remaining * sizeof(T));
}

int64_t ExpArrayF32(const float* in, float* out, size_t count) {
  ApplyArray<ExpFunction>(in, out, count);
  return HWY_TARGET;
}
int64_t ExpArrayF64(const double* in, double* out, size_t count) {
  ApplyArray<ExpFunction>(in, out, count);
  return HWY_TARGET;
}
int64_t TanhArrayF32(const float* in, float* out, size_t count) {
  ApplyArray<TanhFunction>(in, out, count);
  return HWY_TARGET;
}
int64_t TanhArrayF64(const double* in, double* out, size_t count) {
  ApplyArray<TanhFunction>(in, out, count);
  return HWY_TARGET;
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnpool {
namespace detail {

HWY_EXPORT(ExpArrayF32);
HWY_EXPORT(ExpArrayF64);
HWY_EXPORT(TanhArrayF32);
HWY_EXPORT(TanhArrayF64);

int64_t DispatchExpArray(const float* in, float* out, size_t count) {
  return HWY_DYNAMIC_DISPATCH(ExpArrayF32)(in, out, count);
}
int64_t DispatchExpArray(const double* in, double* out, size_t count) {
  return HWY_DYNAMIC_DISPATCH(ExpArrayF64)(in, out, count);
}
int64_t DispatchTanhArray(const float* in, float* out, size_t count) {
  return HWY_DYNAMIC_DISPATCH(TanhArrayF32)(in, out, count);
}
int64_t DispatchTanhArray(const double* in, double* out, size_t count) {
  return HWY_DYNAMIC_DISPATCH(TanhArrayF64)(in, out, count);
}

const char* MathTargetName(int64_t target) { return hwy::TargetName(target); }

}  // namespace detail
}  // namespace attnpool
#endif  // HWY_ONCE
