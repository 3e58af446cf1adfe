// Argument checks shared by Nadaraya–Watson regression and its
// cross-validation (internal): each throws attnpool::Error naming the
// argument.
#pragma once

#include <attnpool/error.h>
#include <attnpool/kernel.h>
#include <attnpool/matrix.h>
#include <attnpool/pool.h>
#include <attnpool/regression.h>

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
  // λ = 1/h² (and 1/h) must be finite normal numbers of T too.
  for (size_t b = 0; b < grid.size(); ++b) {
    const double h = grid[b], lambda = 1 / (h * h);
    CheckPositive<T>("bandwidths", h);
    if (!(lambda >= double(std::numeric_limits<T>::min()) &&
          lambda <= double(std::numeric_limits<T>::max()))) {
      std::ostringstream text;
      text << "entry " << b << " is " << h << ": its λ = 1/h² = " << lambda
           << " is not a normal number of the element type";
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
