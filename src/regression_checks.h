// Argument checks shared by Nadaraya–Watson regression and its
// cross-validation (internal): each throws attnpool::Error naming the
// argument.
#pragma once

#include <attnpool/error.h>
#include <attnpool/kernel.h>
#include <attnpool/matrix.h>
#include <attnpool/pool.h>
#include <attnpool/regression.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "arch/regression.h"
#include "src/enum_names.h"
#include "core/validate.h"

namespace attnpool {
namespace detail {

// The pooling of a Nadaraya–Watson prediction with bandwidth h (1 for
// per-dimension bandwidths, which scale the coordinates instead).
inline PoolSpec NadarayaWatsonSpec(Kernel kernel, double bandwidth,
                                   EmptyRows empty_rows) {
  PoolSpec spec;
  spec.distance = Distance::sqeuclidean;
  spec.kernel.kernel = kernel;
  spec.kernel.bandwidth = bandwidth;
  spec.normalization = Normalization::sum;
  spec.empty_rows = empty_rows;
  return spec;
}

// Regression's kernels weigh distances (kernel.h, needs_distance).
inline void CheckKernel(Kernel kernel) {
  detail::CheckEnum("kernel", static_cast<int>(kernel), kKernelCount);
  if (needs_distance(kernel)) return;
  std::string known;
  for (const KernelProperties& k : kKernels) {
    if (needs_distance(k.kernel))
      known += (known.empty() ? "" : ", ") + std::string(k.name);
  }
  throw Error("kernel", std::string("is ") + kernel_name(kernel) +
                            "; Nadaraya–Watson regression takes " + known);
}

template <typename T>
void CheckFinite(const std::string& name, ConstMatrixView<T> view) {
  for (size_t r = 0; r < view.rows; ++r) {
    for (size_t c = 0; c < view.cols; ++c) {
      if (!std::isfinite(view(r, c))) {
        throw Error(name, "element (" + std::to_string(r) + ", " +
                              std::to_string(c) + ") is not finite");
      }
    }
  }
}

// A bandwidth (or scale) usable in T: finite, > 0 and a normal number of T.
template <typename T>
void CheckPositive(const std::string& name, double value) {
  if (!(std::isfinite(value) &&
        value >= double(std::numeric_limits<T>::min()) &&
        value <= double(std::numeric_limits<T>::max()))) {
    throw Error(name, "is " + ValueText(value) +
                          "; it must be finite, > 0 and a normal number of "
                          "the element type");
  }
}

// The power of two 2^-e that brings a bandwidth h into [1, 2) when h lies
// outside [2^-40, 2^41) (float; [2^-400, 2^401) for double), where squared
// distances and h² would under- or overflow T; 1 otherwise. Coordinates and
// bandwidths multiplied by it give the same u = r/h (a power of two rounds
// nothing while the products stay normal), so data of any magnitude T holds
// is fitted as data near 1 is, and data within the range bitwise as before.
template <typename T>
double RangeScale(double h) {
  constexpr int kLimit = sizeof(T) == sizeof(float) ? 40 : 400;
  const int e = std::ilogb(h);
  return e < -kLimit || e > kLimit ? std::ldexp(1.0, -e) : 1.0;
}

// Whether λ = 1/h² is a normal number of T.
template <typename T>
bool NormalLambda(double h) {
  const double lambda = 1 / (h * h);
  return lambda >= double(std::numeric_limits<T>::min()) &&
         lambda <= double(std::numeric_limits<T>::max());
}

// The scale cross-validation applies to a grid (of positive entries) and
// the coordinates: 1 where every λ = 1/h² is a normal number of T already
// (the scores bitwise as before), else its largest entry's RangeScale.
template <typename T>
double GridScale(const std::vector<double>& grid) {
  bool normal = true;
  for (double h : grid) normal = normal && NormalLambda<T>(h);
  return normal ? 1.0
                : RangeScale<T>(*std::max_element(grid.begin(), grid.end()));
}

// x(j, k) divided by divisors[k] (none when empty: per-dimension
// bandwidths, cross-validation's options.scales) and times range_scale
// (RangeScale, GridScale), as the fits and cross-validation store it:
// finite in T, or an error naming `divisors_name` where divisors are given,
// else `range_name`.
template <typename T>
T ScaledCoordinate(ConstMatrixView<T> x, size_t j, size_t k,
                   const std::vector<double>& divisors,
                   const char* divisors_name, double range_scale,
                   const char* range_name) {
  const double value = double(x(j, k));
  const T scaled = static_cast<T>(
      (divisors.empty() ? value : value / divisors[k]) * range_scale);
  if (!std::isfinite(scaled)) {
    throw Error(divisors.empty() ? range_name : divisors_name,
                "x(" + std::to_string(j) + ", " + std::to_string(k) +
                    ") scaled by it overflows the element type");
  }
  return scaled;
}

// x and y of a fit or a cross-validation: views, shapes, finite elements.
template <typename T>
void CheckData(ConstMatrixView<T> x, ConstMatrixView<T> y, size_t least_rows) {
  detail::CheckView("x", x);
  detail::CheckView("y", y);
  detail::CheckSize("y.rows", y.rows, x.rows, "x.rows");
  if (x.rows < least_rows) {
    throw Error("x.rows", "is " + std::to_string(x.rows) + "; at least " +
                              std::to_string(least_rows) + " are needed");
  }
  CheckFinite("x", x);
  CheckFinite("y", y);
}

// The arguments of cross_validate, whose points x and y are a part of
// `total` rows in all (x.rows: all of them; fewer: across processes).
template <typename T>
void CheckCrossValidation(Kernel kernel, ConstMatrixView<T> x,
                          ConstMatrixView<T> y, const std::vector<double>& grid,
                          const CrossValidationOptions& options,
                          const Execution& execution, size_t total) {
  CheckExecution(execution);
  CheckKernel(kernel);
  CheckData(x, y, total == x.rows ? 2 : 0);
  if (total < 2) {
    throw Error("x.rows", "is " + std::to_string(total) +
                              " in all; at least 2 are needed");
  }
  const size_t n = total;
  if (y.cols == 0) throw Error("y.cols", "is 0: nothing to score");
  if (grid.empty()) throw Error("bandwidths", "is empty");
  // λ = 1/h² (and 1/h) must be finite normal numbers of T too, for the
  // grid as cross-validation scales it into T's range (GridScale).
  for (double h : grid) CheckPositive<T>("bandwidths", h);
  const double range_scale = GridScale<T>(grid);
  for (size_t b = 0; b < grid.size(); ++b) {
    if (!NormalLambda<T>(grid[b] * range_scale)) {
      std::ostringstream text;
      text << "entry " << b << " is " << grid[b]
           << ": its λ = 1/h² is not a normal number of the element type"
           << (range_scale == 1 ? ""
                                : " beside the grid's largest entry (the "
                                  "grid is scaled into its range by it)");
      throw Error("bandwidths", text.str());
    }
  }
  if (options.folds == 1 || options.folds > n) {
    throw Error(
        "options.folds",
        "is " + std::to_string(options.folds) +
            "; use 0 (leave-one-out) or 2 ≤ folds ≤ n = " + std::to_string(n));
  }
  if (options.folds > size_t(std::numeric_limits<FoldId<T>>::max())) {
    throw Error("options.folds", "is " + std::to_string(options.folds) +
                                     "; at most 2^32 − 1 folds with float");
  }
  if (!options.scales.empty()) {
    CheckSize("options.scales", options.scales.size(), x.cols, "x.cols");
    for (double s : options.scales) {
      CheckPositive<T>("options.scales", s);
    }
  }
}

// Sets result.best and best_bandwidth from its scores and unpredictable
// counts: the least score among the bandwidths that predict every point
// (the first on ties), or npos and NaN.
void ChooseBestBandwidth(CrossValidationResult& result);

}  // namespace detail
}  // namespace attnpool
