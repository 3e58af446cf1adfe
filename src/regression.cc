// Nadaraya–Watson regression: the fitted regressor (on top of
// attention_pool / attention_pool_staged), the rules of thumb and the
// bandwidth grid. Cross-validation is in src/cross_validation.cc.
#include <attnpool/error.h>
#include <attnpool/pool.h>
#include <attnpool/regression.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "src/dispatch.h"
#include "src/regression_checks.h"
#include "core/validate.h"

namespace attnpool {

using detail::CheckData;
using detail::CheckFinite;
using detail::CheckKernel;
using detail::CheckPositive;

// ------------------------------------------------------------ NadarayaWatson

template <typename T>
NadarayaWatson<T>::NadarayaWatson(Kernel kernel, double bandwidth,
                                  ConstMatrixView<T> x, ConstMatrixView<T> y)
    : kernel_(kernel), bandwidth_{bandwidth} {
  CheckKernel(kernel);
  CheckData(x, y, 1);
  CheckPositive<T>("bandwidth", bandwidth);
  scale_ = detail::RangeScale<T>(bandwidth);
  size_ = x.rows, depth_ = x.cols, outputs_ = y.cols;
  x_.resize(size_ * depth_);
  y_.resize(size_ * outputs_);
  for (size_t j = 0; j < size_; ++j) {
    for (size_t k = 0; k < depth_; ++k) {
      x_[j * depth_ + k] =
          detail::ScaledCoordinate(x, j, k, {}, "", scale_, "bandwidth");
    }
    std::copy(y.row(j), y.row(j) + outputs_, y_.data() + j * outputs_);
  }
}

template <typename T>
NadarayaWatson<T>::NadarayaWatson(Kernel kernel,
                                  const std::vector<double>& bandwidths,
                                  ConstMatrixView<T> x, ConstMatrixView<T> y)
    : kernel_(kernel), bandwidth_(bandwidths), per_dimension_(true) {
  CheckKernel(kernel);
  CheckData(x, y, 1);
  detail::CheckSize("bandwidth.size", bandwidths.size(), x.cols, "x.cols");
  for (double h : bandwidths) CheckPositive<T>("bandwidth", h);
  size_ = x.rows, depth_ = x.cols, outputs_ = y.cols;
  x_.resize(size_ * depth_);
  y_.resize(size_ * outputs_);
  for (size_t j = 0; j < size_; ++j) {
    for (size_t k = 0; k < depth_; ++k) {
      x_[j * depth_ + k] =
          detail::ScaledCoordinate(x, j, k, bandwidths, "bandwidth", 1.0, "");
    }
    std::copy(y.row(j), y.row(j) + outputs_, y_.data() + j * outputs_);
  }
}

template <typename T>
void NadarayaWatson<T>::predict(ConstMatrixView<T> queries, MatrixView<T> out,
                                const Execution& execution) const {
  predict(queries, out, MatrixView<T>(), execution);
}

template <typename T>
void NadarayaWatson<T>::predict(ConstMatrixView<T> queries, MatrixView<T> out,
                                MatrixView<T> weights,
                                const Execution& execution) const {
  // Every check before the query copy below, so errors name the caller's
  // arguments and nothing is written on error.
  detail::EnsureDispatchReady();
  detail::CheckExecution(execution);
  const bool with_weights = weights.data != nullptr || weights.rows != 0 ||
                            weights.cols != 0 || weights.stride != 0;
  const auto query_bytes = detail::CheckView("queries", queries);
  detail::CheckSize("queries.cols", queries.cols, depth_,
                    "the depth of the training points");
  const auto out_bytes = detail::CheckView("out", out);
  detail::CheckSize("out.rows", out.rows, queries.rows, "queries.rows");
  detail::CheckSize("out.cols", out.cols, outputs_, "the columns of y");
  detail::CheckNoOverlap("out", out_bytes, "queries", query_bytes);
  if (with_weights) {
    const auto weight_bytes = detail::CheckView("weights", weights);
    detail::CheckSize("weights.rows", weights.rows, queries.rows,
                      "queries.rows");
    detail::CheckSize("weights.cols", weights.cols, size_,
                      "the number of training points");
    detail::CheckNoOverlap("weights", weight_bytes, "queries", query_bytes);
    detail::CheckNoOverlap("weights", weight_bytes, "out", out_bytes);
  }

  const PoolSpec spec = pool_spec();
  std::vector<T> scaled;
  queries = ScaledQueries(queries, scaled);
  const ConstMatrixView<T> keys(x_.data(), size_, depth_);
  const ConstMatrixView<T> values(y_.data(), size_, outputs_);
  if (with_weights) {
    attention_pool_staged(spec, queries, keys, values, out, weights, {},
                          execution);
  } else {
    attention_pool(spec, queries, keys, values, out, {}, execution);
  }
}

template <typename T>
PoolSpec NadarayaWatson<T>::pool_spec() const {
  return detail::NadarayaWatsonSpec(
      kernel_, per_dimension_ ? 1.0 : bandwidth_[0] * scale_, empty_rows_);
}

template <typename T>
ConstMatrixView<T> NadarayaWatson<T>::ScaledQueries(
    ConstMatrixView<T> queries, std::vector<T>& scaled) const {
  if ((!per_dimension_ && scale_ == 1) || depth_ == 0) return queries;
  scaled.resize(queries.rows * depth_);
  for (size_t i = 0; i < queries.rows; ++i) {
    for (size_t k = 0; k < depth_; ++k) {
      scaled[i * depth_ + k] =
          static_cast<T>(per_dimension_ ? double(queries(i, k)) / bandwidth_[k]
                                        : double(queries(i, k)) * scale_);
    }
  }
  return ConstMatrixView<T>(scaled.data(), queries.rows, depth_);
}

template <typename T>
void NadarayaWatson<T>::predict_partial(ConstMatrixView<T> queries,
                                        size_t key_offset,
                                        const PoolPartial<T>& partial,
                                        const Execution& execution) const {
  // attention_pool_partial checks the rest, naming "queries" and "partial".
  detail::CheckView("queries", queries);
  detail::CheckSize("queries.cols", queries.cols, depth_,
                    "the depth of the training points");
  std::vector<T> scaled;
  attention_pool_partial(pool_spec(), ScaledQueries(queries, scaled),
                         ConstMatrixView<T>(x_.data(), size_, depth_),
                         ConstMatrixView<T>(y_.data(), size_, outputs_),
                         key_offset, partial, {}, execution);
}

template class NadarayaWatson<float>;
template class NadarayaWatson<double>;

// ------------------------------------------------------------ rules of thumb

namespace {

// σ̂_k = min(sd_k, IQR_k / 1.349) per column (sd_k when IQR_k = 0).
template <typename T>
std::vector<double> RobustSpread(ConstMatrixView<T> x) {
  detail::CheckView("x", x);
  if (x.rows < 2) {
    throw Error("x", "has " + std::to_string(x.rows) +
                         " rows; a bandwidth rule needs at least 2");
  }
  CheckFinite("x", x);
  const size_t n = x.rows;
  std::vector<double> spread(x.cols), column(n);
  for (size_t k = 0; k < x.cols; ++k) {
    double mean = 0;
    for (size_t j = 0; j < n; ++j) mean += (column[j] = double(x(j, k)));
    mean /= double(n);
    // Deviations beyond 2^±500 divided by the largest before squaring: no
    // square under- or overflows double, whatever the data's magnitude
    // (and within it, the same bits as the plain sum).
    double largest = 0;
    for (double value : column) {
      largest = std::max(largest, std::fabs(value - mean));
    }
    const double divisor =
        largest < 0x1p-500 || largest > 0x1p500 ? largest : 1.0;
    double squares = 0;
    for (double value : column) {
      const double deviation = divisor > 0 ? (value - mean) / divisor : 0;
      squares += deviation * deviation;
    }
    const double sd = divisor * std::sqrt(squares / double(n - 1));
    std::sort(column.begin(), column.end());
    // Linear interpolation between order statistics (R type 7).
    const auto quantile = [&](double p) {
      const double position = p * double(n - 1);
      const size_t below = static_cast<size_t>(std::floor(position));
      const size_t above = std::min(below + 1, n - 1);
      return column[below] +
             (position - double(below)) * (column[above] - column[below]);
    };
    const double iqr = quantile(0.75) - quantile(0.25);
    spread[k] = iqr > 0 ? std::min(sd, iqr / 1.349) : sd;
    if (!(spread[k] > 0) || !std::isfinite(spread[k])) {
      throw Error("x", "column " + std::to_string(k) +
                           (spread[k] > 0 ? " spreads beyond double range"
                                          : " is constant") +
                           ": no bandwidth follows from it");
    }
  }
  return spread;
}

template <typename T>
std::vector<double> NormalReference(ConstMatrixView<T> x, bool silverman) {
  detail::EnsureDispatchReady();
  std::vector<double> bandwidth = RobustSpread(x);
  const double d = double(x.cols), n = double(x.rows);
  const double factor =
      (silverman ? std::pow(4.0 / (d + 2), 1.0 / (d + 4)) : 1.059) *
      std::pow(n, -1.0 / (d + 4));
  for (double& h : bandwidth) h *= factor;
  return bandwidth;
}

}  // namespace

std::vector<double> silverman_bandwidth(ConstMatrixView<float> x) {
  return NormalReference(x, true);
}
std::vector<double> silverman_bandwidth(ConstMatrixView<double> x) {
  return NormalReference(x, true);
}
std::vector<double> scott_bandwidth(ConstMatrixView<float> x) {
  return NormalReference(x, false);
}
std::vector<double> scott_bandwidth(ConstMatrixView<double> x) {
  return NormalReference(x, false);
}

// ---------------------------------------------------------- cross-validation

std::vector<double> gaussian_bandwidth_grid(double h_min, double h_max,
                                            size_t count) {
  detail::EnsureDispatchReady();
  if (!(std::isfinite(h_min) && h_min > 0)) {
    throw Error("h_min",
                "is " + std::to_string(h_min) + "; it must be finite and > 0");
  }
  if (!(std::isfinite(h_max) && h_max >= h_min)) {
    throw Error("h_max", "is " + std::to_string(h_max) +
                             "; it must be finite and ≥ h_min");
  }
  if (count == 0) throw Error("count", "is 0");
  if (count == 1) return {h_min};
  const double lambda_max = 1 / (h_min * h_min);
  const double lambda_min = 1 / (h_max * h_max);
  const double step = (lambda_max - lambda_min) / double(count - 1);
  std::vector<double> grid(count);
  for (size_t b = 0; b < count; ++b) {
    grid[b] = 1 / std::sqrt(lambda_max - double(b) * step);
  }
  grid.back() = h_max;
  return grid;
}

}  // namespace attnpool
