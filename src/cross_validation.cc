// cross_validate (regression.h) in four steps: the points packed for the
// kernel (PackPoints), the bandwidths planned (PlanBandwidths: their order,
// the powers path, parameters and key windows), the held-out errors run
// over blocks of queries (RunQueries, arch/regression-inl.h), and the
// scores aggregated in the caller's order (Aggregate).
#include <attnpool/error.h>
#include <attnpool/regression.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "arch/regression.h"
#include "src/aligned_buffer.h"
#include "src/dispatch.h"
#include "src/regression_checks.h"
#include "src/threads.h"
#include "core/validate.h"

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

// The Gaussian has its own ways (powers, shifted exps); every other kernel
// of distances takes KernelFormula's weights as they are, so none of them
// may be exponential.
constexpr bool OnlyTheGaussianIsExponential() {
  for (const KernelProperties& kernel : kKernels) {
    if (needs_distance(kernel.kernel) && kernel.exponential &&
        kernel.kernel != Kernel::gaussian) {
      return false;
    }
  }
  return true;
}
static_assert(OnlyTheGaussianIsExponential(),
              "cross-validation forms exponential kernels' weights only for "
              "the Gaussian");

// The points as the kernel reads them (arch/regression.h,
// CrossValidationPlan): scaled, in ascending order of the widest
// coordinate, column-major and zero-padded; packed position p holds the
// caller's point point[p].
template <typename T>
struct PackedPoints {
  size_t count = 0, padded = 0, depth = 0, outputs = 0, sort_dimension = 0;
  std::vector<size_t> point;
  detail::AlignedBuffer<T> coordinates, targets;
  detail::AlignedBuffer<detail::FoldId<T>> fold_ids;  // k-fold only
};

// `range_scale`: detail::GridScale of the grid, applied after the scales.
template <typename T>
PackedPoints<T> PackPoints(ConstMatrixView<T> x, ConstMatrixView<T> y,
                           const CrossValidationOptions& options,
                           double range_scale) {
  PackedPoints<T> packed;
  const size_t n = x.rows, depth = x.cols, outputs = y.cols;
  packed.count = n, packed.depth = depth, packed.outputs = outputs;
  // Scaled coordinates (T), checked finite.
  std::vector<T> scaled(n * depth);
  for (size_t j = 0; j < n; ++j) {
    for (size_t k = 0; k < depth; ++k) {
      const T value = detail::ScaledCoordinate(
          x, j, k, options.scales, "options.scales", range_scale, "bandwidths");
      scaled[j * depth + k] = value;
    }
  }
  // Σ_k (max_k − min_k)², the largest r²; the widest coordinate sorts.
  double extent = 0, widest = -1;
  for (size_t k = 0; k < depth; ++k) {
    T low = scaled[k], high = scaled[k];
    for (size_t j = 1; j < n; ++j) {
      low = std::min(low, scaled[j * depth + k]);
      high = std::max(high, scaled[j * depth + k]);
    }
    const double width = double(high) - double(low);
    extent += width * width;
    if (width > widest) widest = width, packed.sort_dimension = k;
  }
  if (!(extent <= 0.25 * double(std::numeric_limits<T>::max()))) {
    throw Error("x", "its squared distances overflow the element type");
  }
  // Ascending along the sorted coordinate, ties by index (deterministic).
  packed.point.resize(n);
  std::iota(packed.point.begin(), packed.point.end(), size_t(0));
  if (depth != 0) {
    const size_t sorted = packed.sort_dimension;
    std::sort(packed.point.begin(), packed.point.end(),
              [&](size_t a, size_t b) {
                const T xa = scaled[a * depth + sorted];
                const T xb = scaled[b * depth + sorted];
                return xa < xb || (xa == xb && a < b);
              });
  }
  constexpr size_t kBlock = detail::kCrossValidationKeyBlock;
  const size_t padded = (n + kBlock - 1) / kBlock * kBlock;
  packed.padded = padded;
  packed.coordinates = detail::AllocateBuffer<T>(depth * padded);
  packed.targets = detail::AllocateBuffer<T>(outputs * padded);
  std::fill(packed.coordinates.get(), packed.coordinates.get() + depth * padded,
            T(0));
  std::fill(packed.targets.get(), packed.targets.get() + outputs * padded,
            T(0));
  for (size_t p = 0; p < n; ++p) {
    const size_t j = packed.point[p];
    for (size_t k = 0; k < depth; ++k) {
      packed.coordinates[k * padded + p] = scaled[j * depth + k];
    }
    for (size_t c = 0; c < outputs; ++c)
      packed.targets[c * padded + p] = y(j, c);
  }
  // k-fold: the fold of each packed point (padding: fold 0, masked anyway).
  if (options.folds != 0) {
    using Fold = detail::FoldId<T>;
    packed.fold_ids = detail::AllocateBuffer<Fold>(padded);
    std::fill(packed.fold_ids.get(), packed.fold_ids.get() + padded, Fold(0));
    for (size_t p = 0; p < n; ++p) {
      packed.fold_ids[p] = static_cast<Fold>(packed.point[p] % options.folds);
    }
  }
  return packed;
}

// How the kernel forms each bandwidth's weights: order[b] is the caller's
// index of the kernel's bandwidth b (ascending λ = 1/h² on the powers path,
// so that q = exp(−t·Δ/2) ≤ 1; the caller's order otherwise).
template <typename T>
struct BandwidthPlan {
  detail::CrossValidationWeights weights =
      detail::CrossValidationWeights::gaussian_each;
  std::vector<size_t> order;
  T half_lambda_first = 0, half_lambda_step = 0, floor = 0;  // powers
  std::vector<T> parameters;      // the other ways, padded to whole chunks
  std::vector<T> window_extents;  // per bandwidth, in the kernel's order
};

template <typename T>
BandwidthPlan<T> PlanBandwidths(Kernel kernel, const std::vector<double>& grid,
                                const CrossValidationOptions& options,
                                size_t count) {
  BandwidthPlan<T> plan;
  const size_t bandwidths = grid.size();
  plan.order.resize(bandwidths);
  std::iota(plan.order.begin(), plan.order.end(), size_t(0));
  std::vector<double> lambda(bandwidths);
  for (size_t b = 0; b < bandwidths; ++b) lambda[b] = 1 / (grid[b] * grid[b]);
  bool powers = false;
  if (kernel == Kernel::gaussian && options.allow_powers) {
    std::vector<size_t> order = plan.order;
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
      plan.order = order;
      plan.weights = detail::CrossValidationWeights::gaussian_powers;
      // (Float's kernel takes 2^x.)
      const double unit = sizeof(T) == 4 ? 1.4426950408889634 : 1.0;
      plan.half_lambda_first = static_cast<T>(first / 2 * unit);
      plan.half_lambda_step = static_cast<T>(step / 2 * unit);
      plan.floor = static_cast<T>(std::ldexp(1.0, sizeof(T) == 4 ? -64 : -600));
    }
  }
  // Per-bandwidth parameters, padded to whole chunks with the last one.
  const size_t chunk = detail::kCrossValidationChunk;
  plan.parameters.assign((bandwidths + chunk - 1) / chunk * chunk, T(0));
  if (!powers) {
    plan.weights = kernel == Kernel::gaussian
                       ? detail::CrossValidationWeights::gaussian_each
                       : detail::CrossValidationWeights::kernel_formula;
    for (size_t b = 0; b < plan.parameters.size(); ++b) {
      const double h = grid[std::min(b, bandwidths - 1)];
      plan.parameters[b] = static_cast<T>(
          kernel == Kernel::gaussian ? -0.5 / (h * h)
          : kernel_properties(kernel).argument == KernelArgument::u
              ? 1 / h
              : 1 / (h * h));
    }
  }
  // Key windows, per bandwidth in the kernel's order. Gaussian: the pairs
  // whose weight relative to the query's nearest point, exp(−(r² −
  // r²ₘᵢₙ)·λ/2), is below e^−L = 2^−bits / n, i.e. r² − r²ₘᵢₙ > 2L/λ. The
  // compact kernels: r² ≥ (support·h)²·(1 + 2⁻¹⁶), weight exactly 0 (the
  // margin covers the rounding of r² and of the kernel's 1/h² or 1/h in T).
  plan.window_extents.assign(bandwidths, std::numeric_limits<T>::infinity());
  if (options.skip_distant) {
    const double bits = sizeof(T) == 4 ? kSkipBitsFloat : kSkipBitsDouble;
    const double log_ratio = std::log(double(count)) + bits * std::log(2.0);
    for (size_t b = 0; b < bandwidths; ++b) {
      const double h = grid[plan.order[b]];
      const double reach = kernel_properties(kernel).support * h;
      const double bound = kernel == Kernel::gaussian
                               ? 2 * log_ratio * h * h
                               : reach * reach * (1 + std::ldexp(1.0, -16));
      // (Beyond T's range: +inf, no window.)
      if (bound <= double(std::numeric_limits<T>::max())) {
        plan.window_extents[b] = static_cast<T>(bound);
      }
    }
  }
  return plan;
}

// errors[p·bandwidths + b] for packed query p and the kernel's bandwidth b
// (arch/regression.h, CrossValidationRows), over blocks of queries on the
// threads; *formed counts the weights formed.
template <typename T>
std::vector<double> RunQueries(Kernel kernel, const PackedPoints<T>& packed,
                               const BandwidthPlan<T>& bandwidths,
                               const Execution& execution, uint64_t* formed) {
  detail::CrossValidationPlan<T> plan;
  plan.weights = bandwidths.weights;
  plan.kernel = kernel;
  plan.coordinates = packed.coordinates.get();
  plan.targets = packed.targets.get();
  plan.count = packed.count;
  plan.padded_count = packed.padded;
  plan.depth = packed.depth;
  plan.outputs = packed.outputs;
  plan.sort_dimension = packed.sort_dimension;
  plan.fold_ids = packed.fold_ids.get();
  plan.bandwidth_count = bandwidths.order.size();
  plan.half_lambda_first = bandwidths.half_lambda_first;
  plan.half_lambda_step = bandwidths.half_lambda_step;
  plan.floor = bandwidths.floor;
  plan.parameters = bandwidths.parameters.data();
  plan.window_extents = bandwidths.window_extents.data();
  // Small problems run on one thread: waking another costs more (the
  // result is the same either way).
  const size_t n = packed.count;
  detail::Workers threads = detail::WorkersOf(execution);
  if (double(n) * double(n) *
          double(packed.depth + plan.bandwidth_count * (1 + packed.outputs)) <
      kMinParallelWork) {
    threads.threads = 1;
  }
  std::vector<double> errors(n * plan.bandwidth_count);
  std::atomic<uint64_t> total{0};
  detail::ForEachRowBlock(n, kCrossValidationRows, threads,
                          [&](size_t begin, size_t end) {
                            uint64_t block_formed = 0;
                            const int64_t target = detail::CrossValidationRows(
                                plan, begin, end, errors.data(), &block_formed);
                            total += block_formed;
                            return target;
                          });
  *formed = total.load();
  return errors;
}

// The mean held-out error of each bandwidth over its predictable points, in
// the caller's index order (thread-independent; errors are in packed
// order), and the best bandwidth among those that predict every point.
template <typename T>
CrossValidationResult Aggregate(const std::vector<double>& grid,
                                const PackedPoints<T>& packed,
                                const BandwidthPlan<T>& bandwidths,
                                const std::vector<double>& errors) {
  const size_t n = packed.count, count = grid.size();
  std::vector<size_t> position(n);
  for (size_t p = 0; p < n; ++p) position[packed.point[p]] = p;
  CrossValidationResult result;
  result.bandwidths = grid;
  result.scores.assign(count, 0.0);
  result.unpredictable.assign(count, 0);
  result.used_powers =
      bandwidths.weights == detail::CrossValidationWeights::gaussian_powers;
  for (size_t b = 0; b < count; ++b) {
    double total = 0;
    size_t counted = 0;
    for (size_t i = 0; i < n; ++i) {
      const double error = errors[position[i] * count + b];
      if (std::isnan(error)) continue;
      total += error;
      ++counted;
    }
    const size_t caller = bandwidths.order[b];
    result.scores[caller] = counted == 0
                                ? std::numeric_limits<double>::quiet_NaN()
                                : total / double(counted);
    result.unpredictable[caller] = n - counted;
  }
  detail::ChooseBestBandwidth(result);
  return result;
}

template <typename T>
CrossValidationResult CrossValidate(Kernel kernel, ConstMatrixView<T> x,
                                    ConstMatrixView<T> y,
                                    const std::vector<double>& grid,
                                    const CrossValidationOptions& options,
                                    const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::CheckCrossValidation(kernel, x, y, grid, options, execution, x.rows);
  // Beyond T's range, coordinates and bandwidths by one power of two: the
  // same u = r/h.
  const double range_scale = detail::GridScale<T>(grid);
  std::vector<double> scaled_grid = grid;
  for (double& h : scaled_grid) h *= range_scale;
  const PackedPoints<T> packed = PackPoints(x, y, options, range_scale);
  const BandwidthPlan<T> bandwidths =
      PlanBandwidths<T>(kernel, scaled_grid, options, x.rows);
  uint64_t formed = 0;
  const std::vector<double> errors =
      RunQueries(kernel, packed, bandwidths, execution, &formed);
  CrossValidationResult result = Aggregate(grid, packed, bandwidths, errors);
  result.weights_formed = formed;
  return result;
}

}  // namespace

namespace detail {
void ChooseBestBandwidth(CrossValidationResult& result) {
  result.best_bandwidth = std::numeric_limits<double>::quiet_NaN();
  for (size_t b = 0; b < result.scores.size(); ++b) {
    if (result.unpredictable[b] != 0) continue;
    if (result.best == CrossValidationResult::npos ||
        result.scores[b] < result.scores[result.best]) {
      result.best = b;
    }
  }
  if (result.best != CrossValidationResult::npos) {
    result.best_bandwidth = result.bandwidths[result.best];
  }
}
}  // namespace detail

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
