// Baseline for bench_math: glibc's libmvec (_ZGVeN16v_expf / _tanhf), what
// GCC calls for a `#pragma omp simd` loop over expf/tanhf under -ffast-math
// with AVX-512 enabled. This TU alone is compiled with
// -O3 -ffast-math -fopenmp-simd -mavx512f -mavx512dq (bench/CMakeLists.txt),
// x86-64 only; bench_math calls it only when the CPU has AVX-512F/DQ.
#include <math.h>

#include <cstddef>

namespace attnpool_bench {

__attribute__((noipa)) void LibmvecExp(const float* __restrict in,
                                       float* __restrict out, size_t count) {
#pragma omp simd simdlen(16)
  for (size_t i = 0; i < count; ++i) out[i] = expf(in[i]);
}

__attribute__((noipa)) void LibmvecTanh(const float* __restrict in,
                                        float* __restrict out, size_t count) {
#pragma omp simd simdlen(16)
  for (size_t i = 0; i < count; ++i) out[i] = tanhf(in[i]);
}

}  // namespace attnpool_bench
