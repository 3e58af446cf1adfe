// Stage 2: kernels that turn distances or scores into weights.
#pragma once

#include <attnpool/distance.h>
#include <attnpool/execution.h>
#include <attnpool/matrix.h>
#include <attnpool/table.h>

#include <cstddef>
#include <limits>
#include <optional>

namespace attnpool {

// What a kernel's formula takes (docs/design.md §1, stage 2): with bandwidth h
// and the distance r, the scaled distance u = r / h or its square u²; `exp`
// takes a score s; `constant` nothing.
enum class KernelArgument : int { u, u_squared, score, none };

// How close a kernel's weights are to the exact ones (the accuracy contract
// of apply_kernel below; every test's bound comes from it).
enum class KernelAccuracy : int {
  // ε below is the unit roundoff of the element type (2⁻²⁴, 2⁻⁵³).
  exact,         // bit-exact
  step,          // exact, except where r/h is within 4 ulp of the step at 1
  absolute,      // |error| ≤ error_units·ε
  exp_of_logit,  // relative error ≤ 2e-7 + 5·ε·|x| (float; 4e-16 + 5·ε·|x|
                 // for double), x the logit; weights below the smallest
                 // normal number are 0
};

// The kernels, one line each: every list of kernels (the enum, names, the
// predicates below, the C enum's checks, the tests, benchmarks, fuzzer and
// CLI) is generated from this table. Columns:
//   name, C enum suffix, argument, exponential (the weight is exp of a
//   logit, normalized by a max-subtracted softmax), support (the weight is
//   exactly 0 where u ≥ support; +inf: no bounded support), accuracy,
//   error_units.
// The vector formula of each is in arch/kernel-inl.h (KernelFormula), the
// reference in src/reference.cc (reference::kernel).
#define ATTNPOOL_KERNEL_TABLE(X)                                      \
  /* exp(−u²/2), from squared distances without a sqrt */          \
  X(gaussian, GAUSSIAN, u_squared, true, kUnbounded, exp_of_logit, 0) \
  /* 1 if u < 1 else 0 */                                             \
  X(boxcar, BOXCAR, u_squared, false, 1.0, step, 0)                   \
  /* max(1 − u, 0) */                                               \
  X(triangular, TRIANGULAR, u, false, 1.0, absolute, 4)               \
  /* max(1 − u², 0) */                                             \
  X(epanechnikov, EPANECHNIKOV, u_squared, false, 1.0, absolute, 4)   \
  /* 1 */                                                             \
  X(constant, CONSTANT, none, false, kUnbounded, exact, 0)            \
  /* exp(scale · s) for any score s; scale default 1/√d */         \
  X(exp, EXP, score, true, kUnbounded, exp_of_logit, 0)               \
  /* max(1 − u², 0)², the quartic */                              \
  X(biweight, BIWEIGHT, u_squared, false, 1.0, absolute, 6)           \
  /* max(1 − u², 0)³ */                                           \
  X(triweight, TRIWEIGHT, u_squared, false, 1.0, absolute, 8)         \
  /* max(1 − u³, 0)³ */                                           \
  X(tricube, TRICUBE, u, false, 1.0, absolute, 10)                    \
  /* cos(π·u/2) if u < 1 else 0 */                                  \
  X(cosine, COSINE, u_squared, false, 1.0, absolute, 8)

// The support column of kernels whose weight is never 0 for finite u.
constexpr double kUnbounded = std::numeric_limits<double>::infinity();

enum class Kernel : int { ATTNPOOL_KERNEL_TABLE(ATTNPOOL_TABLE_ENUMERATOR) };

struct KernelProperties {
  Kernel kernel;
  const char* name;
  KernelArgument argument;
  bool exponential;
  double support;
  KernelAccuracy accuracy;
  int error_units;
};

// kKernels[k] describes Kernel(k).
inline constexpr KernelProperties kKernels[] = {
#define ATTNPOOL_KERNEL_PROPERTIES(name, c_name, argument, exponential, \
                                   support, accuracy, units)            \
  {Kernel::name, #name,   KernelArgument::argument,                     \
   exponential,  support, KernelAccuracy::accuracy,                     \
   units},
    ATTNPOOL_KERNEL_TABLE(ATTNPOOL_KERNEL_PROPERTIES)
#undef ATTNPOOL_KERNEL_PROPERTIES
};
constexpr int kKernelCount = table_size(kKernels);

// Whether `kernel` is one of the table's (a value cast from an int may not
// be); the predicates below are false for any other.
constexpr bool is_kernel(Kernel kernel) { return in_table(kKernels, kernel); }

// The table line of `kernel`, one of the table's.
constexpr const KernelProperties& kernel_properties(Kernel kernel) {
  return kKernels[static_cast<int>(kernel)];
}

const char* kernel_name(Kernel kernel);
Kernel kernel_from_name(const char* name);  // throws Error ("kernel")

// Whether the kernel is exp(·) of a logit (gaussian, exp): such weights are
// normalized by a max-subtracted softmax of the logits, never by dividing
// underflowed weights.
constexpr bool is_exponential(Kernel kernel) {
  return is_kernel(kernel) && kernel_properties(kernel).exponential;
}

// Whether the kernel weighs distances (takes u or u²): such a kernel needs a
// distance (sqeuclidean, euclidean or manhattan) and a bandwidth, and is one
// of Nadaraya–Watson regression's.
constexpr bool needs_distance(Kernel kernel) {
  return is_kernel(kernel) &&
         (kernel_properties(kernel).argument == KernelArgument::u ||
          kernel_properties(kernel).argument == KernelArgument::u_squared);
}

// Whether the weight is exactly 0 outside a bounded support (u ≥ support).
constexpr bool is_compact(Kernel kernel) {
  return is_kernel(kernel) && kernel_properties(kernel).support <
                                  std::numeric_limits<double>::infinity();
}

struct KernelSpec {
  Kernel kernel = Kernel::gaussian;
  // h of the distance kernels: finite, > 0 and a normal number of the
  // element type (≥ 1.2e-38 and ≤ 3.4e38 for float).
  double bandwidth = 1.0;
  // The factor of `exp`: finite; when absent, 1/√d (d = depth of the data;
  // for d = 0 it must be given: an error naming kernel.scale).
  std::optional<double> scale = std::nullopt;
};

// In place: values(i, j) ← kernel weight of values(i, j). `input` says what
// the matrix holds, i.e. which stage-1 distance produced it: sqeuclidean → r²
// (the Gaussian uses it directly, no sqrt), euclidean or manhattan → r, dot or
// cosine → a similarity score, which only `exp` and `constant` accept (a
// distance kernel on a similarity is an invalid combination). `depth` (d)
// gives exp's default scale 1/√d.
//
// Accuracy: each kernel's accuracy and error_units columns (KernelAccuracy;
// x = the exponent, −u²/2 or scale·s, for exp_of_logit).
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
