#include "src/reference_regression.h"

#include <attnpool/distance.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/reference.h"

namespace attnpool::reference {

std::vector<double> cross_validation_errors(
    Kernel kernel, const std::vector<double>& x, size_t depth,
    const std::vector<double>& y, size_t outputs,
    const std::vector<double>& bandwidths, size_t folds,
    const std::vector<double>& scales) {
  const size_t n =
      depth != 0 ? x.size() / depth : (outputs != 0 ? y.size() / outputs : 0);
  if (folds == 0) folds = n;
  std::vector<double> point(x);
  for (size_t j = 0; j < n; ++j) {
    for (size_t k = 0; k < depth; ++k) {
      if (!scales.empty()) point[j * depth + k] /= scales[k];
    }
  }
  std::vector<double> errors(n * bandwidths.size());
  for (size_t i = 0; i < n; ++i) {
    for (size_t b = 0; b < bandwidths.size(); ++b) {
      const KernelSpec spec{kernel, bandwidths[b], {}};
      const bool logits = kernel == Kernel::gaussian;
      // The kernel's weight (or logit) of every held-in point.
      std::vector<double> weight(n, 0.0);
      std::vector<bool> held_in(n);
      double largest = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < n; ++j) {
        held_in[j] = j % folds != i % folds;
        if (!held_in[j]) continue;
        const double r2 =
            distance(Distance::sqeuclidean, point.data() + i * depth,
                     point.data() + j * depth, depth);
        weight[j] =
            reference::kernel(spec, Distance::sqeuclidean, r2, depth, logits);
        largest = std::max(largest, weight[j]);
      }
      double sum = 0;
      std::vector<double> prediction(outputs, 0.0);
      for (size_t j = 0; j < n; ++j) {
        if (!held_in[j]) continue;
        const double w = logits ? std::exp(weight[j] - largest) : weight[j];
        sum += w;
        for (size_t c = 0; c < outputs; ++c) {
          prediction[c] += w * y[j * outputs + c];
        }
      }
      double error = std::numeric_limits<double>::quiet_NaN();
      if (sum > 0) {
        error = 0;
        for (size_t c = 0; c < outputs; ++c) {
          const double difference = y[i * outputs + c] - prediction[c] / sum;
          error += difference * difference;
        }
      }
      errors[i * bandwidths.size() + b] = error;
    }
  }
  return errors;
}

std::vector<double> cross_validation_scores(const std::vector<double>& errors,
                                            size_t bandwidths) {
  std::vector<double> scores(bandwidths);
  const size_t n = bandwidths == 0 ? 0 : errors.size() / bandwidths;
  for (size_t b = 0; b < bandwidths; ++b) {
    double total = 0;
    size_t counted = 0;
    for (size_t i = 0; i < n; ++i) {
      const double error = errors[i * bandwidths + b];
      if (std::isnan(error)) continue;
      total += error;
      ++counted;
    }
    scores[b] = counted == 0 ? std::numeric_limits<double>::quiet_NaN()
                             : total / double(counted);
  }
  return scores;
}

}  // namespace attnpool::reference
