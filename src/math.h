// Array forms of the vectorized exp and tanh (internal): what tests and
// benchmarks call. Each makes dispatch ready (ATTNPOOL_ISA applied), runs
// on the active target, writes out[i] = f(in[i]) for i < count (reading
// and writing nothing past count; in == out is allowed) and returns the
// Highway target bit it ran on (arch/math.h's MathTargetName names it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace attnpool {
namespace detail {

int64_t ExpArray(const float* in, float* out, size_t count);
int64_t ExpArray(const double* in, double* out, size_t count);
int64_t TanhArray(const float* in, float* out, size_t count);
int64_t TanhArray(const double* in, double* out, size_t count);

}  // namespace detail
}  // namespace attnpool
