// The unfused attention a numpy or BLAS user writes (the baseline of
// bench/compare and bench_layers): scores materialized by sgemm, a row
// softmax, sgemm with the values.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#if ATTNPOOL_BENCH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

namespace attnpool_bench {

// Row-wise softmax of a rows × cols matrix in place: max, exp, sum, scale.
inline void SoftmaxRows(float* scores, size_t rows, size_t cols) {
  for (size_t i = 0; i < rows; ++i) {
    float* row = scores + i * cols;
    const float largest = *std::max_element(row, row + cols);
    float sum = 0;
    for (size_t j = 0; j < cols; ++j) {
      row[j] = std::exp(row[j] - largest);
      sum += row[j];
    }
    const float inverse = 1 / sum;
    for (size_t j = 0; j < cols; ++j) row[j] *= inverse;
  }
}

#if ATTNPOOL_BENCH_OPENBLAS
// softmax(Q·Kᵀ/√d)·V of one head: q n×d, k and v m×d, out n×d, all with
// row stride ld; `scores` holds n×m.
inline void OpenblasHead(const float* q, const float* k, const float* v,
                         float* out, size_t n, size_t m, size_t d, size_t ld,
                         float* scores) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, d,
              1 / std::sqrt(float(d)), q, ld, k, ld, 0.0f, scores, m);
  SoftmaxRows(scores, n, m);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d, m, 1.0f, scores,
              m, v, ld, 0.0f, out, ld);
}
#endif

}  // namespace attnpool_bench
