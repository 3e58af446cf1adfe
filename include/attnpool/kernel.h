// Stage 2: kernels that turn distances or scores into weights.
#pragma once

#include <attnpool/distance.h>
#include <attnpool/execution.h>
#include <attnpool/matrix.h>

#include <cstddef>
#include <optional>

namespace attnpool {

// DESIGN.md §1, stage 2. With bandwidth h and u = r / h:
enum class Kernel : int {
  gaussian = 0,      // exp(−u²/2), from squared distances without a sqrt
  boxcar = 1,        // 1 if u < 1 else 0
  triangular = 2,    // max(1 − u, 0)
  epanechnikov = 3,  // max(1 − u², 0)
  constant = 4,      // 1
  exp = 5,           // exp(scale · s) for any score s; scale default 1/√d
};
constexpr int kKernelCount = 6;

const char* kernel_name(Kernel kernel);
Kernel kernel_from_name(const char* name);  // throws Error ("kernel")

struct KernelSpec {
  Kernel kernel = Kernel::gaussian;
  // h of the distance kernels: finite, > 0 and a normal number of the
  // element type (≥ 1.2e-38 and ≤ 3.4e38 for float).
  double bandwidth = 1.0;
  // The factor of `exp`: finite; when absent, 1/√d (d = depth of the data).
  std::optional<double> scale;
};

// Whether the kernel is exp(·) of a logit (gaussian, exp): such weights are
// normalized by a max-subtracted softmax of the logits, never by dividing
// underflowed weights.
bool is_exponential(Kernel kernel);

// In place: values(i, j) ← kernel weight of values(i, j). `input` says what
// the matrix holds, i.e. which stage-1 distance produced it: sqeuclidean → r²
// (the Gaussian uses it directly, no sqrt), euclidean or manhattan → r, dot or
// cosine → a similarity score, which only `exp` and `constant` accept (a
// distance kernel on a similarity is an invalid combination). `depth` (d)
// gives exp's default scale 1/√d.
//
// Accuracy (u = unit roundoff of T, x = the exponent, −u²/2 or scale·s):
//   gaussian, exp: relative error ≤ 2e-7 + 5·u·|x| (float; 4e-16 + 5·u·|x|
//   for double); weights below the smallest normal number are 0.
//   triangular, epanechnikov: absolute error ≤ 4·u.
//   boxcar: exact except where u is within 4 ulp of 1.
// Non-finite values (README "Non-finite data"): NaN stays NaN, except under
// `constant` (weight 1); a +inf distance weighs 0; exp gives exp(+inf) =
// +inf, exp(−inf) = 0, and +inf where scale·s overflows. The distance
// kernels take distances, r ≥ 0: a negative input gets an unspecified weight.
// Throws attnpool::Error naming the argument on invalid input, before
// writing anything.
void apply_kernel(const KernelSpec& spec, Distance input,
                  MatrixView<float> values, size_t depth,
                  const Execution& execution = {});
void apply_kernel(const KernelSpec& spec, Distance input,
                  MatrixView<double> values, size_t depth,
                  const Execution& execution = {});

}  // namespace attnpool
