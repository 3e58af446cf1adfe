// The accuracy contracts of the public headers, one bound function per
// contract: every test takes its bounds from here, and records the largest
// error ÷ bound it meets per stage and target (printed at the end of the
// run, so that slack shows).
#pragma once

#include <attnpool/kernel.h>
#include <attnpool/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <string>

#include "src/reference.h"

namespace attnpool_test {

// Unit roundoff of T: 2⁻²⁴ for float, 2⁻⁵³ for double.
template <typename T>
constexpr double kUnitRoundoff = std::numeric_limits<T>::epsilon() / 2;

template <typename T>
constexpr const char* kTypeName = sizeof(T) == 4 ? "float" : "double";

// The relative error of the vectorized exp where its result is normal
// (arch/math-inl.h's contract).
template <typename T>
constexpr double kExpError = sizeof(T) == 4 ? 2e-7 : 4e-16;
// The same for the vectorized tanh (everywhere).
template <typename T>
constexpr double kTanhError = sizeof(T) == 4 ? 2e-7 : 5e-16;

// kernel.h's contract for one weight of apply_kernel: the bound on |got −
// want| for the stage-1 value x whose reference weight is `want` (finite).
// Under the step accuracy (boxcar) the bound is 1 where r/h is within 8·u
// (4 ulp) of the step, else 0. Outside a compact kernel's support (r/h ≥
// support, with a margin of 16·u for the rounding of r/h) the weight is
// exactly 0: bound 0.
template <typename T>
double KernelErrorBound(const attnpool::KernelSpec& spec,
                        attnpool::Distance input, double x, size_t depth,
                        double want) {
  const attnpool::KernelProperties& kernel =
      attnpool::kernel_properties(spec.kernel);
  const double u = kUnitRoundoff<T>;
  if (attnpool::is_compact(spec.kernel)) {
    const double r =
        input == attnpool::Distance::sqeuclidean ? std::sqrt(x) : x;
    if (r / spec.bandwidth >= kernel.support * (1 + 16 * u)) return 0;
  }
  switch (kernel.accuracy) {
    case attnpool::KernelAccuracy::exact:
      return 0;
    case attnpool::KernelAccuracy::step: {
      const double r =
          input == attnpool::Distance::sqeuclidean ? std::sqrt(x) : x;
      return std::fabs(r / spec.bandwidth - kernel.support) <= 8 * u ? 1 : 0;
    }
    case attnpool::KernelAccuracy::absolute:
      // (The smallest normal number: results below it may flush to 0.)
      return kernel.error_units * u + std::numeric_limits<T>::min();
    case attnpool::KernelAccuracy::exp_of_logit: {
      const double logit =
          attnpool::reference::kernel(spec, input, x, depth, true);
      if (!std::isfinite(logit)) return 0;
      return (kExpError<T> + 5 * u * std::fabs(logit)) * want +
             std::numeric_limits<T>::min();
    }
  }
  return 0;
}

// The magnitudes distance.h's bounds are stated in, for one pair q, k.
struct PairMagnitudes {
  double abs_dot = 0;  // Σ|qᵢkᵢ|
  double norms = 0;    // ‖q‖² + ‖k‖²
  // Σ|qᵢkᵢ| / (‖q‖‖k‖), free of the vectors' scales (each divided by its
  // largest |entry| first, so that no sum under- or overflows); 0 when a
  // vector is 0.
  double dot_ratio = 0;
};

template <typename Q, typename K>
PairMagnitudes MagnitudesOf(const Q& q, const K& k, size_t depth) {
  PairMagnitudes s;
  double q_norm = 0, k_norm = 0, q_largest = 0, k_largest = 0;
  for (size_t p = 0; p < depth; ++p) {
    const double a = q[p], b = k[p];
    s.abs_dot += std::fabs(a * b);
    q_norm += a * a;
    k_norm += b * b;
    q_largest = std::max(q_largest, std::fabs(a));
    k_largest = std::max(k_largest, std::fabs(b));
  }
  s.norms = q_norm + k_norm;
  if (q_largest > 0 && k_largest > 0) {
    double dots = 0, q_scaled = 0, k_scaled = 0;
    for (size_t p = 0; p < depth; ++p) {
      const double a = double(q[p]) / q_largest, b = double(k[p]) / k_largest;
      dots += std::fabs(a * b);
      q_scaled += a * a;
      k_scaled += b * b;
    }
    s.dot_ratio = dots / (std::sqrt(q_scaled) * std::sqrt(k_scaled));
  }
  return s;
}

// distance.h's contract for one distance whose reference value is `want`:
// the bound on |got − want|.
template <typename T>
double DistanceErrorBound(attnpool::Distance distance, double want,
                          size_t depth, const PairMagnitudes& s) {
  const double u = kUnitRoundoff<T>;
  const double d = static_cast<double>(depth);
  // Squared distances: absolute (2d+8)·u·(‖q‖² + ‖k‖²) and relative
  // 32·(2d+8)·u (the Gram form keeps results ≥ 1/32 of the norms; 1.01 is
  // the slack of comparing a rounded result with that threshold); 0 for
  // q = k.
  const double squared_absolute = (2 * d + 8) * u * s.norms;
  const double squared_relative = 32 * 1.01 * (2 * d + 8) * u;
  switch (distance) {
    case attnpool::Distance::dot:
      return (d + 1) * u * s.abs_dot;
    case attnpool::Distance::cosine:
      return s.dot_ratio == 0 ? 0
                              : (d + 6) * u * (s.dot_ratio + std::fabs(want));
    case attnpool::Distance::manhattan:
      return (d + 1) * u * want;
    case attnpool::Distance::sqeuclidean:
      return std::min(squared_absolute, squared_relative * want);
    case attnpool::Distance::euclidean:
      // √ of the above: √(absolute), or relative/2; and the root's rounding.
      return std::min(std::sqrt(squared_absolute),
                      squared_relative / 2 * want) +
             2 * u * want;
  }
  return 0;
}

// normalize.h's contract for one weight `want` of a row of `cols` keys;
// softmax's exponents are off by u·logit_gap (the gap between the row's
// largest score and this one, plus the bias).
template <typename T>
double NormalizeErrorBound(attnpool::Normalization normalization, double want,
                           size_t cols, double logit_gap) {
  const double u = kUnitRoundoff<T>;
  switch (normalization) {
    case attnpool::Normalization::none:
    case attnpool::Normalization::argmax:
      return 0;
    case attnpool::Normalization::sum:
    case attnpool::Normalization::softmax:
      break;
  }
  const double gap =
      normalization == attnpool::Normalization::softmax ? u * logit_gap : 0;
  return ((cols + 8) * u + 2 * kExpError<T> + gap) * want +
         std::numeric_limits<T>::min();
}

// weighted_sum.h's contract for one output: (depth + 1)·u·Σⱼ|wⱼ·vⱼ|.
template <typename T>
double WeightedSumErrorBound(size_t depth, double abs_sum) {
  return (double(depth) + 1) * kUnitRoundoff<T> * abs_sum;
}

// The largest error ÷ bound seen per stage and target (thread-safe).
class AccuracyLog {
 public:
  static AccuracyLog& Get() {
    static AccuracyLog log;
    return log;
  }
  // Records |error| ÷ bound for `stage` on the target that ran last.
  void Record(const std::string& stage, double error, double bound) {
    if (!(bound > 0) || !std::isfinite(error)) return;
    const std::string key = stage + " " + attnpool::last_run_target();
    std::lock_guard<std::mutex> lock(mutex_);
    double& worst = worst_[key];
    worst = std::max(worst, std::fabs(error) / bound);
  }
  ~AccuracyLog() {
    if (worst_.empty()) return;
    std::printf("largest error / bound, per stage and target:\n");
    for (const auto& [key, worst] : worst_) {
      std::printf("  %-44s %.3g\n", key.c_str(), worst);
    }
  }

 private:
  std::mutex mutex_;
  std::map<std::string, double> worst_;
};

}  // namespace attnpool_test
