// The scalar reference of Nadaraya–Watson cross-validation: the oracle
// tests/test_regression.cc holds cross_validate to. Written for obviousness,
// in double, never optimized (docs/design.md §2).
#pragma once

#include <attnpool/kernel.h>
#include <attnpool/matrix.h>

#include <cstddef>
#include <vector>

namespace attnpool {
namespace reference {

// Held-out squared errors, row-major n × bandwidths: entry (i, b) is
// Σ_c (y(i, c) − ŷ(c))², ŷ the Nadaraya–Watson prediction at x(i) with
// bandwidth bandwidths[b] from the points j held in (j mod folds ≠ i mod
// folds; folds = 0: leave-one-out, j ≠ i), or NaN when those points all
// weigh 0. Coordinate k is divided by scales[k] first (empty: no scaling).
// The Gaussian is evaluated as the max-subtracted softmax of −r²/(2h²).
std::vector<double> cross_validation_errors(
    Kernel kernel, const std::vector<double>& x, size_t depth,
    const std::vector<double>& y, size_t outputs,
    const std::vector<double>& bandwidths, size_t folds,
    const std::vector<double>& scales);

// T: float or double, const or not.
template <typename T>
std::vector<double> cross_validation_errors(
    Kernel kernel, MatrixView<T> x, MatrixView<T> y,
    const std::vector<double>& bandwidths, size_t folds,
    const std::vector<double>& scales = {}) {
  std::vector<double> x_values, y_values;
  for (size_t j = 0; j < x.rows; ++j) {
    for (size_t k = 0; k < x.cols; ++k) x_values.push_back(x(j, k));
    for (size_t c = 0; c < y.cols; ++c) y_values.push_back(y(j, c));
  }
  return cross_validation_errors(kernel, x_values, x.cols, y_values, y.cols,
                                 bandwidths, folds, scales);
}

// Per bandwidth: the mean of the non-NaN entries of its column of `errors`
// (n × bandwidths), NaN if there are none.
std::vector<double> cross_validation_scores(const std::vector<double>& errors,
                                            size_t bandwidths);

}  // namespace reference
}  // namespace attnpool
