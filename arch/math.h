// Array forms of the vectorized exp and tanh of arch/math-inl.h (internal):
// what tests and benchmarks call. Kernels of other stages call the inline
// Exp/Tanh of arch/math-inl.h directly inside their own loops.
//
// Each function dispatches (HWY_DYNAMIC_DISPATCH) to the active target,
// writes out[i] = f(in[i]) for i < count (reading and writing nothing past
// count; in == out is allowed) and returns the Highway target bit it ran on.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attnpool {
namespace detail {

int64_t ExpArray(const float* in, float* out, size_t count);
int64_t ExpArray(const double* in, double* out, size_t count);
int64_t TanhArray(const float* in, float* out, size_t count);
int64_t TanhArray(const double* in, double* out, size_t count);

// Highway's name of a target bit ("AVX3", "NEON", ...), the names
// attnpool::active_target() uses.
const char* MathTargetName(int64_t target);

}  // namespace detail
}  // namespace attnpool
