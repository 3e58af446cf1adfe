// The kernel and normalization stages' interface between src/ and arch/.
// Plans are computed and validated in src/; the dispatched functions work on
// a block of rows and return the Highway target bit they ran on.
#pragma once

#include <cstddef>
#include <cstdint>

#include <attnpool/kernel.h>
#include <attnpool/matrix.h>
#include <attnpool/normalize.h>

namespace attnpool {
namespace detail {

template <typename T>
struct KernelPlan {
  Kernel kernel = Kernel::constant;
  // The kernel's table line (kernel.h), copied for the inner loops.
  KernelArgument argument = KernelArgument::none;
  bool exponential = false;
  // What the input holds: r², r or a score (distance.h's output column).
  DistanceOutput input = DistanceOutput::score;
  T inverse_bandwidth = 1;  // 1/h
  T scale = 1;              // exp's factor
  // For exponential kernels: write the logit ℓ instead of exp(ℓ).
  bool write_logits = false;
};

template <typename T>
struct NormalizePlan {
  Normalization normalization = Normalization::none;
  // Values are logits of exponential weights: none → exp(ℓ), sum and
  // softmax → softmax(ℓ), argmax → argmax(ℓ).
  bool logits = false;
  EmptyRows empty_rows = EmptyRows::nan;
  Mask<T> mask;
};

int64_t ApplyKernelRows(const KernelPlan<float>& plan, MatrixView<float> values,
                        size_t row_begin, size_t row_end);
int64_t ApplyKernelRows(const KernelPlan<double>& plan,
                        MatrixView<double> values, size_t row_begin,
                        size_t row_end);

int64_t NormalizeRows(const NormalizePlan<float>& plan,
                      MatrixView<float> values, size_t row_begin,
                      size_t row_end);
int64_t NormalizeRows(const NormalizePlan<double>& plan,
                      MatrixView<double> values, size_t row_begin,
                      size_t row_end);

}  // namespace detail
}  // namespace attnpool
