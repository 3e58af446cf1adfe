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

// kernel.h's contract for one weight of apply_kernel: the bound on |got −
// want| for the stage-1 value x whose reference weight is `want` (finite).
// Under the step accuracy (boxcar) the bound is 1 where u is within 8 ulp of
// the step, else 0.
template <typename T>
double KernelErrorBound(const attnpool::KernelSpec& spec,
                        attnpool::Distance input, double x, size_t depth,
                        double want) {
  const attnpool::KernelProperties& kernel =
      attnpool::kernel_properties(spec.kernel);
  const double u = kUnitRoundoff<T>;
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
