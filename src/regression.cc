// Nadaraya–Watson regression: argument checks, the fitted regressor (on top
// of attention_pool / attention_pool_staged), the rules of thumb, and the
// packing and OpenMP driver of the cross-validation kernel
// (arch/regression-inl.h).
#include <attnpool/error.h>
#include <attnpool/pool.h>
#include <attnpool/regression.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "arch/regression.h"
#include "src/aligned_buffer.h"
#include "src/dispatch.h"
#include "src/enum_names.h"
#include "src/threads.h"
#include "src/validate.h"

namespace attnpool {
namespace {

// Queries per dispatched cross-validation call: each costs a pass over all n
// points, so even small blocks amortize the dispatch and the scratch.
constexpr size_t kCrossValidationRows = 16;
// Below this many pair-operations a cross-validation runs on one thread.
constexpr double kMinParallelWork = 1 << 20;
// Cross-validation skips the Gaussian pairs whose weight is below 2^−bits / n
// of the query's largest (CrossValidationOptions::skip_distant).
constexpr double kSkipBitsFloat = 32, kSkipBitsDouble = 61;

// Regression's kernels weigh distances (kernel.h, needs_distance).
void CheckKernel(Kernel kernel) {
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
    throw Error(name, "is " + std::to_string(value) +
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

}  // namespace

// ------------------------------------------------------------ NadarayaWatson

template <typename T>
NadarayaWatson<T>::NadarayaWatson(Kernel kernel, double bandwidth,
                                  ConstMatrixView<T> x, ConstMatrixView<T> y)
    : kernel_(kernel), bandwidth_{bandwidth} {
  CheckKernel(kernel);
  CheckData(x, y, 1);
  CheckPositive<T>("bandwidth", bandwidth);
  size_ = x.rows, depth_ = x.cols, outputs_ = y.cols;
  x_.resize(size_ * depth_);
  y_.resize(size_ * outputs_);
  for (size_t j = 0; j < size_; ++j) {
    std::copy(x.row(j), x.row(j) + depth_, x_.data() + j * depth_);
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
      const T scaled = static_cast<T>(double(x(j, k)) / bandwidths[k]);
      if (!std::isfinite(scaled)) {
        throw Error("bandwidth", "x(" + std::to_string(j) + ", " +
                                     std::to_string(k) + ") / bandwidth[" +
                                     std::to_string(k) + "] overflows");
      }
      x_[j * depth_ + k] = scaled;
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

  const bool per_dimension = per_dimension_;
  PoolSpec spec;
  spec.distance = Distance::sqeuclidean;
  spec.kernel.kernel = kernel_;
  spec.kernel.bandwidth = per_dimension ? 1.0 : bandwidth_[0];
  spec.normalization = Normalization::sum;
  spec.empty_rows = empty_rows_;
  // Per-dimension bandwidths: the queries scaled like the stored x.
  std::vector<T> scaled;
  if (per_dimension && depth_ != 0) {
    scaled.resize(queries.rows * depth_);
    for (size_t i = 0; i < queries.rows; ++i) {
      for (size_t k = 0; k < depth_; ++k) {
        scaled[i * depth_ + k] =
            static_cast<T>(double(queries(i, k)) / bandwidth_[k]);
      }
    }
    queries = ConstMatrixView<T>(scaled.data(), queries.rows, depth_);
  }
  const ConstMatrixView<T> keys(x_.data(), size_, depth_);
  const ConstMatrixView<T> values(y_.data(), size_, outputs_);
  if (with_weights) {
    attention_pool_staged(spec, queries, keys, values, out, weights, {},
                          execution);
  } else {
    attention_pool(spec, queries, keys, values, out, {}, execution);
  }
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
    double squares = 0;
    for (double value : column) squares += (value - mean) * (value - mean);
    const double sd = std::sqrt(squares / double(n - 1));
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

namespace {

template <typename T>
CrossValidationResult CrossValidate(Kernel kernel, ConstMatrixView<T> x,
                                    ConstMatrixView<T> y,
                                    const std::vector<double>& grid,
                                    const CrossValidationOptions& options,
                                    const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::CheckExecution(execution);
  CheckKernel(kernel);
  CheckData(x, y, 2);
  const size_t n = x.rows, depth = x.cols, outputs = y.cols;
  if (outputs == 0) throw Error("y.cols", "is 0: nothing to score");
  const size_t bandwidths = grid.size();
  if (bandwidths == 0) throw Error("bandwidths", "is empty");
  // λ = 1/h² (and 1/h) must be finite normal numbers of T too.
  for (double h : grid) {
    CheckPositive<T>("bandwidths", h);
    CheckPositive<T>("bandwidths", 1 / (h * h));
  }
  if (options.folds == 1 || options.folds > n) {
    throw Error(
        "options.folds",
        "is " + std::to_string(options.folds) +
            "; use 0 (leave-one-out) or 2 ≤ folds ≤ n = " + std::to_string(n));
  }
  if (options.folds > size_t(std::numeric_limits<detail::FoldId<T>>::max())) {
    throw Error("options.folds", "is " + std::to_string(options.folds) +
                                     "; at most 2^32 − 1 folds with float");
  }
  if (!options.scales.empty()) {
    detail::CheckSize("options.scales", options.scales.size(), depth, "x.cols");
    for (double s : options.scales) CheckPositive<T>("options.scales", s);
  }

  // Scaled coordinates (T), checked finite.
  std::vector<T> scaled(n * depth);
  for (size_t j = 0; j < n; ++j) {
    for (size_t k = 0; k < depth; ++k) {
      const T value = options.scales.empty()
                          ? x(j, k)
                          : static_cast<T>(double(x(j, k)) / options.scales[k]);
      if (!std::isfinite(value)) {
        throw Error("options.scales", "x(" + std::to_string(j) + ", " +
                                          std::to_string(k) +
                                          ") / scales[k] overflows");
      }
      scaled[j * depth + k] = value;
    }
  }
  // Σ_k (max_k − min_k)², the largest r²; the widest coordinate sorts.
  double extent = 0, widest = -1;
  size_t sort_dimension = 0;
  for (size_t k = 0; k < depth; ++k) {
    T low = scaled[k], high = scaled[k];
    for (size_t j = 1; j < n; ++j) {
      low = std::min(low, scaled[j * depth + k]);
      high = std::max(high, scaled[j * depth + k]);
    }
    const double width = double(high) - double(low);
    extent += width * width;
    if (width > widest) widest = width, sort_dimension = k;
  }
  if (!(extent <= 0.25 * double(std::numeric_limits<T>::max()))) {
    throw Error("x", "its squared distances overflow the element type");
  }
  // Packed position p holds point point[p]: ascending along the sorted
  // coordinate, ties by index (deterministic).
  std::vector<size_t> point(n);
  std::iota(point.begin(), point.end(), size_t(0));
  if (depth != 0) {
    std::sort(point.begin(), point.end(), [&](size_t a, size_t b) {
      const T xa = scaled[a * depth + sort_dimension];
      const T xb = scaled[b * depth + sort_dimension];
      return xa < xb || (xa == xb && a < b);
    });
  }

  // Packed coordinates and targets, column-major, zero-padded.
  constexpr size_t kBlock = detail::kCrossValidationKeyBlock;
  const size_t padded = (n + kBlock - 1) / kBlock * kBlock;
  auto coordinates = detail::AllocateBuffer<T>(depth * padded);
  auto targets = detail::AllocateBuffer<T>(outputs * padded);
  std::fill(coordinates.get(), coordinates.get() + depth * padded, T(0));
  std::fill(targets.get(), targets.get() + outputs * padded, T(0));
  for (size_t p = 0; p < n; ++p) {
    for (size_t k = 0; k < depth; ++k) {
      coordinates[k * padded + p] = scaled[point[p] * depth + k];
    }
    for (size_t c = 0; c < outputs; ++c) {
      targets[c * padded + p] = y(point[p], c);
    }
  }
  scaled = std::vector<T>();
  // k-fold: the fold of each packed point (padding: fold 0, masked anyway).
  using Fold = detail::FoldId<T>;
  detail::AlignedBuffer<Fold> fold_ids;
  if (options.folds != 0) {
    fold_ids = detail::AllocateBuffer<Fold>(padded);
    std::fill(fold_ids.get(), fold_ids.get() + padded, Fold(0));
    for (size_t p = 0; p < n; ++p) {
      fold_ids[p] = static_cast<Fold>(point[p] % options.folds);
    }
  }

  detail::CrossValidationPlan<T> plan;
  plan.coordinates = coordinates.get();
  plan.targets = targets.get();
  plan.count = n;
  plan.padded_count = padded;
  plan.depth = depth;
  plan.outputs = outputs;
  plan.sort_dimension = sort_dimension;
  plan.fold_ids = fold_ids.get();
  plan.bandwidth_count = bandwidths;

  // The kernel's bandwidth order: by ascending λ on the powers path (so
  // that q = exp(−t·Δ/2) ≤ 1), the caller's otherwise.
  std::vector<size_t> order(bandwidths);
  std::iota(order.begin(), order.end(), size_t(0));
  std::vector<double> lambda(bandwidths);
  for (size_t b = 0; b < bandwidths; ++b) lambda[b] = 1 / (grid[b] * grid[b]);
  bool powers = false;
  if (kernel == Kernel::gaussian && options.allow_powers) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return lambda[a] < lambda[b]; });
    const double first = lambda[order.front()], last = lambda[order.back()];
    const double step =
        bandwidths > 1 ? (last - first) / double(bandwidths - 1) : 0;
    // A step of 0 (equal bandwidths) would make q = exp(−t·0) NaN for the
    // held-out pairs' t = +inf: one exp per bandwidth then.
    powers = bandwidths == 1 || static_cast<T>(step / 2) > 0;
    for (size_t b = 0; b < bandwidths; ++b) {
      powers &= std::fabs(lambda[order[b]] - (first + double(b) * step)) <=
                1e-9 * last;
    }
    if (powers) {
      plan.weights = detail::CrossValidationWeights::gaussian_powers;
      // (Float's kernel takes 2^x.)
      const double unit = sizeof(T) == 4 ? 1.4426950408889634 : 1.0;
      plan.half_lambda_first = static_cast<T>(first / 2 * unit);
      plan.half_lambda_step = static_cast<T>(step / 2 * unit);
      plan.floor = static_cast<T>(std::ldexp(1.0, sizeof(T) == 4 ? -64 : -600));
    } else {
      std::iota(order.begin(), order.end(), size_t(0));
    }
  }
  // Per-bandwidth parameters, padded to whole chunks with the last one.
  const size_t chunk = detail::kCrossValidationChunk;
  std::vector<T> parameters((bandwidths + chunk - 1) / chunk * chunk);
  if (!powers) {
    for (size_t b = 0; b < parameters.size(); ++b) {
      const double h = grid[std::min(b, bandwidths - 1)];
      if (kernel == Kernel::gaussian) {
        plan.weights = detail::CrossValidationWeights::gaussian_each;
        parameters[b] = static_cast<T>(-0.5 / (h * h));
      } else {
        plan.weights = detail::CrossValidationWeights::kernel_formula;
        parameters[b] = static_cast<T>(kernel_properties(kernel).argument ==
                                               KernelArgument::u
                                           ? 1 / h
                                           : 1 / (h * h));
      }
    }
  }
  plan.kernel = kernel;
  plan.parameters = parameters.data();
  // Key windows, per bandwidth in the kernel's order. Gaussian: the pairs
  // whose weight relative to the query's nearest point, exp(−(r² −
  // r²ₘᵢₙ)·λ/2), is below e^−L = 2^−bits / n, i.e. r² − r²ₘᵢₙ > 2L/λ. The
  // compact kernels: r² ≥ (support·h)²·(1 + 2⁻¹⁶), weight exactly 0 (the
  // margin covers the rounding of r² and of the kernel's 1/h² or 1/h in T).
  std::vector<T> window_extents(bandwidths, std::numeric_limits<T>::infinity());
  if (options.skip_distant) {
    const double bits = sizeof(T) == 4 ? kSkipBitsFloat : kSkipBitsDouble;
    const double log_ratio = std::log(double(n)) + bits * std::log(2.0);
    for (size_t b = 0; b < bandwidths; ++b) {
      const double h = grid[order[b]];
      const double reach = kernel_properties(kernel).support * h;
      const double bound = kernel == Kernel::gaussian
                               ? 2 * log_ratio * h * h
                               : reach * reach * (1 + std::ldexp(1.0, -16));
      // (Beyond T's range: +inf, no window.)
      if (bound <= double(std::numeric_limits<T>::max())) {
        window_extents[b] = static_cast<T>(bound);
      }
    }
  }
  plan.window_extents = window_extents.data();

  // Small problems run on one thread: waking another costs more (the
  // result is the same either way).
  int threads = detail::ThreadCount(execution);
  if (double(n) * double(n) * double(depth + bandwidths * (1 + outputs)) <
      kMinParallelWork) {
    threads = 1;
  }
  std::vector<double> errors(n * bandwidths);
  std::atomic<uint64_t> formed{0};
  detail::ForEachRowBlock(n, kCrossValidationRows, threads,
                          [&](size_t begin, size_t end) {
                            uint64_t block_formed = 0;
                            const int64_t target = detail::CrossValidationRows(
                                plan, begin, end, errors.data(), &block_formed);
                            formed += block_formed;
                            return target;
                          });

  // Mean over the predictable points, in the caller's index order
  // (thread-independent); errors are in packed order.
  std::vector<size_t> packed(n);
  for (size_t p = 0; p < n; ++p) packed[point[p]] = p;
  CrossValidationResult result;
  result.bandwidths = grid;
  result.scores.assign(bandwidths, 0.0);
  result.unpredictable.assign(bandwidths, 0);
  result.used_powers = powers;
  result.weights_formed = formed.load();
  for (size_t b = 0; b < bandwidths; ++b) {
    double total = 0;
    size_t counted = 0;
    for (size_t i = 0; i < n; ++i) {
      const double error = errors[packed[i] * bandwidths + b];
      if (std::isnan(error)) continue;
      total += error;
      ++counted;
    }
    const size_t caller = order[b];
    result.scores[caller] = counted == 0
                                ? std::numeric_limits<double>::quiet_NaN()
                                : total / double(counted);
    result.unpredictable[caller] = n - counted;
  }
  result.best_bandwidth = std::numeric_limits<double>::quiet_NaN();
  for (size_t b = 0; b < bandwidths; ++b) {
    if (result.unpredictable[b] != 0) continue;
    if (result.best == CrossValidationResult::npos ||
        result.scores[b] < result.scores[result.best]) {
      result.best = b;
    }
  }
  if (result.best != CrossValidationResult::npos) {
    result.best_bandwidth = grid[result.best];
  }
  return result;
}

}  // namespace

CrossValidationResult cross_validate(Kernel kernel, ConstMatrixView<float> x,
                                     ConstMatrixView<float> y,
                                     const std::vector<double>& bandwidths,
                                     const CrossValidationOptions& options,
                                     const Execution& execution) {
  return CrossValidate(kernel, x, y, bandwidths, options, execution);
}

CrossValidationResult cross_validate(Kernel kernel, ConstMatrixView<double> x,
                                     ConstMatrixView<double> y,
                                     const std::vector<double>& bandwidths,
                                     const CrossValidationOptions& options,
                                     const Execution& execution) {
  return CrossValidate(kernel, x, y, bandwidths, options, execution);
}

}  // namespace attnpool
