// Array forms of the vectorized exp and tanh of arch/math-inl.h (internal),
// dispatched (HWY_DYNAMIC_DISPATCH) to the active target without making
// dispatch ready: what src/math.h's ExpArray and TanhArray call after it.
// Kernels of other stages call the inline Exp/Tanh of arch/math-inl.h
// directly inside their own loops.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attnpool {
namespace detail {

int64_t DispatchExpArray(const float* in, float* out, size_t count);
int64_t DispatchExpArray(const double* in, double* out, size_t count);
int64_t DispatchTanhArray(const float* in, float* out, size_t count);
int64_t DispatchTanhArray(const double* in, double* out, size_t count);

// Highway's name of a target bit ("AVX3", "NEON", ...), the names
// attnpool::active_target() uses.
const char* MathTargetName(int64_t target);

}  // namespace detail
}  // namespace attnpool
