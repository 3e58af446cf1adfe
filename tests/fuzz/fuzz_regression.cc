// The fuzz target's function "cross_validate": an input decodes into points
// (clustered, spread over 16 scales, optionally on a grid with exact ties
// and duplicates, and an outlier), their targets, a kernel of distances, a
// bandwidth grid (evenly spaced in 1/h², the Gaussian's powers path, or
// not; equal bandwidths too), leave-one-out or k folds, per-dimension
// scales and a thread count. On every target this CPU supports,
// cross_validate with and without skip_distant must
//  - give each bandwidth's score within the interval oracle's bound (below)
//    of the exact score of the points as the library scales them, and
//    count the unpredictable points the oracle finds;
//  - pick `best` by its rule and take the powers path exactly where
//    regression.h says (the Gaussian, an evenly spaced grid, allow_powers);
//  - for the compact kernels, give bitwise the same scores and counts
//    skipping as not (regression.h), and never form more weights skipping;
//  - leave x and y (and their padding) untouched, run on the forced target
//    and (on one target per input, in turn) give bitwise the result of one
//    thread;
//  - (the magnitude class) with x scaled by 2^±96 in float, 2^±960 in
//    double, and y by a power of two, give scores within the oracle's
//    bounds scaled, on either path, or refuse naming x or the bandwidths.
//
// The oracle, per held-out point i and bandwidth h: each training point's
// weight lies in an interval around its exact value, from
//  - r² in T within (d + 3)·u relative (twice that for double: the
//    oracle's own rounding), so the Gaussian's t = r² − r²ₘᵢₙ within the
//    same of r² and r²ₘᵢₙ, and u = r/h within ρ/2 + 12·u;
//  - the Gaussian's exponent t·λ/2 within 5·u relative, its exp within
//    kExpError; on the powers path B more exps and roundings (B bandwidths),
//    ε per step, and λ within 1e-9·λ_max·t/2 of the grid's;
//  - the compact kernels' formula within error_units·u (kernel.h), exactly
//    0 from the support on, and monotone (the interval's ends are the
//    kernel at u's ends);
//  - 0 where skip_distant may drop the pair (the Gaussian's exponent may
//    reach ln(n) + 32·ln 2, 61·ln 2 for double, less the rounding of r²ₘᵢₙ
//    plus the window's extent in T).
// With Δⱼ the distance from the exact weight to its interval's far end,
// |ŷ − ŷ*| ≤ Σⱼ Δⱼ·|yⱼ − ŷ*| / Σⱼ lowⱼ + 2·(n + 8)·u·max|y| (the sums'
// rounding), and each squared error within Σ_c 2·|y − ŷ*|·δ + δ². A point
// whose lower sum is 0 while its upper is not may be unpredictable or
// not: its bandwidth's count is checked within the range, not its score.
// For n ≤ 40 the oracle's scores are also held to
// reference::cross_validation_errors (src/reference_regression.h).
//
// Input layout, after [0] (the function) and [1] (flags: 1 double, 2 k-fold,
// 4 per-dimension scales, 8 an uneven grid, 16 allow_powers = false, 32
// coordinates on a grid (ties, duplicates), 64 an outlier, 128 large);
// missing bytes read as 0:
//   [2] n = 2 + b % 96, large 2 + 4·b   [3] d = b % 6   [4] dy = 1 + b % 3
//   [5] the kernel, among those of distances   [6] folds 2 + b % 9 (≤ n)
//   [7] bandwidths 1 + b % 33   [8] h_min = spread·2^(b % 64 / 8 − 6)
//   [9] h_max = h_min·(1 + b % 64 / 4); h_min for b ≥ 240
//   [10] threads 1 + b % 3   [11] clusters 1 + b % 6, spread 2^(b / 8 % 16
//   − 8)   [12] targets' magnitude 2^(b % 9 − 4); bit 128: noise only
//   [13..16] the values' seed
//   then with flag 4 one byte per dimension: scale 2^(b % 9 − 4), times 1.3
//   for bit 128; then with bit 64 of [8] the magnitude class (below): x
//   times 2^a, a = (b % 64 − 32)·3 (float) or ·30 (double), y times 2^(−a/4)
//   for bit 128.
// The bandwidths are halved (then n) until n²·bandwidths ≤ 2¹⁶, or 2²⁰
// for large inputs.
#include "tests/fuzz/fuzz_regression.h"

#include <attnpool/attnpool.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "src/reference.h"
#include "src/reference_regression.h"
#include "tests/accuracy.h"

namespace attnpool_test {
namespace {

using attnpool::ConstMatrixView;
using attnpool::CrossValidationOptions;
using attnpool::CrossValidationResult;
using attnpool::Kernel;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The kernels of distances (regression's), in the table's order.
const std::vector<Kernel>& RegressionKernels() {
  static const std::vector<Kernel> kernels = [] {
    std::vector<Kernel> list;
    for (const attnpool::KernelProperties& kernel : attnpool::kKernels) {
      if (attnpool::needs_distance(kernel.kernel))
        list.push_back(kernel.kernel);
    }
    return list;
  }();
  return kernels;
}

// The decoded problem: z the coordinates as the library scales them (in T,
// n×d), y the targets (n×dy), both as doubles.
struct Problem {
  size_t n = 0, d = 0, dy = 0, folds = 0;
  Kernel kernel = Kernel::gaussian;
  std::vector<double> grid, z, y;
};

// What the oracle expects of one bandwidth: the unpredictable points'
// count within [low, high], and, where no point is ambiguous (`compare`),
// the score within `bound` of `score` (NaN: every point unpredictable).
struct Expected {
  size_t unpredictable_low = 0, unpredictable_high = 0;
  bool compare = false;
  double score = kNaN, bound = 0;
};

// The oracle (see the top of this file) for elements of type T, with or
// without skip_distant, on the powers path or not.
template <typename T>
std::vector<Expected> Expect(const Problem& p, bool skip, bool powers) {
  const double u = kUnitRoundoff<T>, u_double = std::ldexp(1.0, -53);
  const double rho = (sizeof(T) == 8 ? 2 : 1) * double(p.d + 3) * u;
  const size_t n = p.n, bandwidths = p.grid.size();
  double lambda_max = 0;
  for (double h : p.grid) lambda_max = std::max(lambda_max, 1 / (h * h));
  const double chain = powers ? double(bandwidths) : 0;
  const double epsilon =
      powers ? std::ldexp(1.0, sizeof(T) == 4 ? -64 : -600) : 0;
  const double skip_logit =
      std::log(double(n)) + (sizeof(T) == 4 ? 32 : 61) * std::log(2.0);
  const double tiny = std::numeric_limits<T>::min();
  const attnpool::KernelProperties& kernel =
      attnpool::kernel_properties(p.kernel);
  const bool gaussian = p.kernel == Kernel::gaussian;
  const auto weight = [&](double scaled) {  // the exact kernel at u
    return attnpool::reference::kernel(
        {p.kernel, 1.0}, attnpool::Distance::euclidean, scaled, p.d);
  };

  std::vector<double> total(bandwidths, 0), bound(bandwidths, 0);
  std::vector<size_t> counted(bandwidths, 0), certain(bandwidths, 0),
      ambiguous(bandwidths, 0);
  std::vector<double> r2(n), low(n), high(n), exact(n);
  for (size_t i = 0; i < n; ++i) {
    const auto held_in = [&](size_t j) {
      return p.folds == 0 ? j != i : j % p.folds != i % p.folds;
    };
    double nearest = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < n; ++j) {
      double sum = 0;
      for (size_t k = 0; k < p.d; ++k) {
        const double difference = p.z[i * p.d + k] - p.z[j * p.d + k];
        sum += difference * difference;
      }
      r2[j] = sum;
      if (held_in(j)) nearest = std::min(nearest, sum);
    }
    for (size_t b = 0; b < bandwidths; ++b) {
      const double h = p.grid[b], lambda = 1 / (h * h);
      double low_sum = 0, high_sum = 0, exact_sum = 0;
      for (size_t j = 0; j < n; ++j) {
        low[j] = high[j] = exact[j] = 0;
        if (!held_in(j)) continue;
        if (gaussian) {
          const double t = r2[j] - nearest;
          const double t_low = std::max(
              0.0, (r2[j] * (1 - rho) - nearest * (1 + rho)) * (1 - u));
          const double t_high = std::max(
              0.0, (r2[j] * (1 + rho) - nearest * (1 - rho)) * (1 + u));
          const double slack = powers ? 1e-9 * lambda_max * t_high / 2 : 0;
          const double a_low = t_low * lambda / 2 * (1 - 5 * u) - slack;
          const double a_high = t_high * lambda / 2 * (1 + 5 * u) + slack;
          exact[j] = std::exp(-t * lambda / 2);
          high[j] = std::exp(-a_low) * std::pow(1 + kExpError<T>, chain + 1) *
                        std::pow(1 + u, chain) +
                    1.01 * (chain + 1) * epsilon;
          low[j] = std::exp(-a_high) * std::pow(1 - kExpError<T>, chain + 1) *
                   std::pow(1 - u, chain);
          if (low[j] < 4 * tiny) low[j] = 0;
          if (skip &&
              a_high >= skip_logit * (1 - 1e-5) - nearest * lambda * u) {
            low[j] = 0;
          }
        } else {
          const double scaled = std::sqrt(r2[j]) / h;
          const double relative = rho / 2 + 12 * u;
          const double units = kernel.error_units * u + 2 * tiny;
          exact[j] = weight(scaled);
          low[j] = std::max(0.0, weight(scaled * (1 + relative)) - units);
          high[j] = scaled * (1 - relative) >= kernel.support
                        ? 0
                        : weight(scaled * (1 - relative)) + units;
        }
        low_sum += low[j];
        high_sum += high[j];
        exact_sum += exact[j];
      }
      if (high_sum == 0) {
        ++certain[b];
        continue;
      }
      if (!(low_sum > 0)) {
        ++ambiguous[b];
        continue;
      }
      double error = 0, error_bound = 0;
      for (size_t c = 0; c < p.dy; ++c) {
        double product = 0, largest = 0;
        for (size_t j = 0; j < n; ++j) {
          if (!held_in(j)) continue;
          product += exact[j] * p.y[j * p.dy + c];
          largest = std::max(largest, std::fabs(p.y[j * p.dy + c]));
        }
        const double predicted = product / exact_sum;
        double spread = 0;
        for (size_t j = 0; j < n; ++j) {
          const double far = std::max(high[j] - exact[j], exact[j] - low[j]);
          spread += far * std::fabs(p.y[j * p.dy + c] - predicted);
        }
        const double delta = spread / low_sum + (2.02 * u + 4 * u_double) *
                                                    double(n + 8) * largest;
        const double difference = p.y[i * p.dy + c] - predicted;
        error += difference * difference;
        error_bound += 2 * std::fabs(difference) * delta + delta * delta;
      }
      total[b] += error;
      bound[b] += error_bound + 8 * u_double * error;
      ++counted[b];
    }
  }
  std::vector<Expected> expected(bandwidths);
  for (size_t b = 0; b < bandwidths; ++b) {
    Expected& e = expected[b];
    e.unpredictable_low = certain[b];
    e.unpredictable_high = certain[b] + ambiguous[b];
    e.compare = ambiguous[b] == 0;
    if (counted[b] != 0) {
      e.score = total[b] / double(counted[b]);
      e.bound = bound[b] / double(counted[b]) +
                std::ldexp(e.score, -50);  // the means' rounding
    }
  }
  return expected;
}

bool SameResult(const CrossValidationResult& a,
                const CrossValidationResult& b) {
  return SameBits(a.scores, b.scores) && a.unpredictable == b.unpredictable &&
         a.best == b.best && a.used_powers == b.used_powers &&
         a.weights_formed == b.weights_formed &&
         SameBits(&a.best_bandwidth, &b.best_bandwidth, 1);
}

template <typename T>
void FuzzRegressionOf(Bytes& bytes, uint8_t flags) {
  const bool large = flags & 128;
  Problem p;
  const uint8_t n_byte = bytes.Next();
  p.n = large ? 2 + 4 * size_t{n_byte} : 2 + n_byte % 96;
  p.d = bytes.Next() % 6;
  p.dy = 1 + bytes.Next() % 3;
  const std::vector<Kernel>& kernels = RegressionKernels();
  p.kernel = kernels[bytes.Next() % kernels.size()];
  const uint8_t folds_byte = bytes.Next();
  size_t count = 1 + bytes.Next() % 33;
  const uint8_t h_byte = bytes.Next(), ratio_byte = bytes.Next();
  const int threads = 1 + bytes.Next() % 3;
  const uint8_t data_byte = bytes.Next(), target_byte = bytes.Next();
  uint64_t seed = 0;
  for (int k = 0; k < 4; ++k) seed = seed << 8 | bytes.Next();
  std::vector<double> scales;
  if (flags & 4) {
    for (size_t k = 0; k < p.d; ++k) {
      const uint8_t b = bytes.Next();
      scales.push_back(std::ldexp(b & 128 ? 1.3 : 1.0, b % 9 - 4));
    }
  }
  const bool magnitudes = h_byte & 64;
  const uint8_t magnitude_byte = magnitudes ? bytes.Next() : 0;
  const size_t budget = large ? size_t{1} << 20 : size_t{1} << 16;
  while (p.n * p.n * count > budget) {
    if (count > 1) {
      count = (count + 1) / 2;
    } else {
      p.n /= 2;
    }
  }
  p.n = std::max<size_t>(p.n, 2);
  p.folds = flags & 2 ? std::min<size_t>(p.n, 2 + folds_byte % 9) : 0;
  const uint64_t data_seed = seed;

  // Points: clusters of width spread/20, on a grid of spread/16 with flag
  // 32, one in eight a copy of the one before, an outlier with flag 64.
  const auto unit = [&] { return double(SplitMix(seed) >> 11) * 0x1p-53; };
  const double spread = std::ldexp(1.0, data_byte / 8 % 16 - 8);
  const size_t clusters = 1 + data_byte % 6;
  std::vector<double> centers(clusters * p.d);
  for (double& c : centers) c = unit() * spread;
  const size_t x_stride = p.d + 1, y_stride = p.dy + 1;
  std::vector<T> x(p.n * x_stride, std::numeric_limits<T>::quiet_NaN()),
      y(p.n * y_stride, std::numeric_limits<T>::quiet_NaN());
  for (size_t j = 0; j < p.n; ++j) {
    const size_t cluster = SplitMix(seed) % clusters;
    const bool copy = j > 0 && SplitMix(seed) % 8 == 0;
    double sum = 0;
    for (size_t k = 0; k < p.d; ++k) {
      double value =
          centers[cluster * p.d + k] + spread * 0.05 * (unit() - 0.5);
      if (flags & 32) value = std::round(value * 16 / spread) * spread / 16;
      T& stored = x[j * x_stride + k];
      stored = copy ? x[(j - 1) * x_stride + k] : T(value);
      sum += double(stored);
    }
    const double magnitude = std::ldexp(1.0, target_byte % 9 - 4);
    for (size_t c = 0; c < p.dy; ++c) {
      const double noise = unit() - 0.5;
      y[j * y_stride + c] =
          T(magnitude *
            (target_byte & 128
                 ? noise
                 : std::sin(3 * sum / spread + double(c)) + 0.3 * noise));
    }
  }
  if ((flags & 64) && p.d > 0) {
    x[(p.n - 1) * x_stride + SplitMix(seed) % p.d] = T(spread * 20);
  }
  p.z.resize(p.n * p.d);
  p.y.resize(p.n * p.dy);
  for (size_t j = 0; j < p.n; ++j) {
    for (size_t k = 0; k < p.d; ++k) {
      const double value = double(x[j * x_stride + k]);
      // As the library scales them (regression.cc, PackPoints).
      p.z[j * p.d + k] =
          scales.empty() ? value : double(static_cast<T>(value / scales[k]));
    }
    for (size_t c = 0; c < p.dy; ++c) {
      p.y[j * p.dy + c] = double(y[j * y_stride + c]);
    }
  }

  // Bandwidths.
  const double h_min = spread * std::ldexp(1.0, h_byte % 64 / 8 - 6);
  const double h_max =
      ratio_byte >= 240 ? h_min : h_min * (1 + ratio_byte % 64 / 4.0);
  const bool even = !(flags & 8);
  if (even) {
    p.grid = attnpool::gaussian_bandwidth_grid(h_min, h_max, count);
  } else {
    for (size_t b = 0; b < count; ++b) {
      p.grid.push_back(h_min + unit() * (h_max - h_min));
    }
  }
  CrossValidationOptions options;
  options.folds = p.folds;
  options.scales = scales;
  options.allow_powers = !(flags & 16);
  // The powers path, as regression.h states it: the Gaussian on a grid
  // evenly spaced in λ = 1/h² (to 1e-9 of the largest; any grid of one or
  // two), whose steps are above 0 in T.
  bool powers = false;
  if (p.kernel == Kernel::gaussian && options.allow_powers) {
    std::vector<double> lambda;
    for (double h : p.grid) lambda.push_back(1 / (h * h));
    std::sort(lambda.begin(), lambda.end());
    const double step =
        count > 1 ? (lambda.back() - lambda.front()) / double(count - 1) : 0;
    powers = count == 1 || static_cast<T>(step / 2) > 0;
    for (size_t b = 0; b < count; ++b) {
      powers &= std::fabs(lambda[b] - (lambda.front() + double(b) * step)) <=
                1e-9 * lambda.back();
    }
  }

  const auto call = [&] {
    std::ostringstream text;
    text.precision(17);
    text << "cross_validate<" << (sizeof(T) == 4 ? "float" : "double")
         << "> kernel=" << attnpool::kernel_name(p.kernel) << " n=" << p.n
         << " d=" << p.d << " dy=" << p.dy << " folds=" << p.folds
         << " threads=" << threads << " allow_powers=" << options.allow_powers
         << " flags=" << int(flags) << " spread=" << spread
         << " clusters=" << clusters << " targets=" << int(target_byte)
         << " seed=" << data_seed << " grid=";
    for (double h : p.grid) text << h << ",";
    text << " scales=";
    for (double s : scales) text << s << ",";
    return text.str();
  };
  // The oracle once per (skip_distant, path).
  std::map<std::pair<bool, bool>, std::vector<Expected>> oracles;
  const auto expect = [&](bool skip,
                          bool on_powers) -> const std::vector<Expected>& {
    auto found = oracles.find({skip, on_powers});
    if (found == oracles.end()) {
      found = oracles
                  .emplace(std::make_pair(skip, on_powers),
                           Expect<T>(p, skip, on_powers))
                  .first;
    }
    return found->second;
  };
  // Small problems: the oracle's own scores against the reference.
  if (p.n <= 40) {
    const std::vector<double> reference =
        attnpool::reference::cross_validation_scores(
            attnpool::reference::cross_validation_errors(
                p.kernel, p.z, p.d, p.y, p.dy, p.grid, p.folds, {}),
            count);
    const std::vector<Expected>& mine = expect(false, false);
    for (size_t b = 0; b < count; ++b) {
      if (!mine[b].compare) continue;
      const double want = reference[b], have = mine[b].score;
      if (std::isnan(want) != std::isnan(have) ||
          std::fabs(want - have) > 1e-9 * std::fabs(want) + 1e-300) {
        std::ostringstream text;
        text.precision(17);
        text << "the oracle's score " << have << " of bandwidth " << b
             << " differs from the reference's " << want;
        Fail(text.str(), call());
      }
    }
  }

  // The magnitude class: x (and the grid, or the per-dimension scales)
  // times 2^a, y times 2^b. Powers of two: the exact scores are the
  // original's times 2^2b, and the library's own scaling keeps its
  // arithmetic near 1 (design.md §5, "Magnitudes"), so the oracle's bounds
  // hold for them, scaled (on one target; either path).
  const int range = sizeof(T) == 4 ? 3 : 30;
  const int a = range * (magnitude_byte % 64 - 32);
  const int b = magnitude_byte & 128 ? -a / 4 : 0;
  std::vector<T> x_moved, y_moved;
  std::vector<double> grid;
  CrossValidationOptions moved_options = options;
  moved_options.skip_distant = true;
  if (magnitudes) {
    x_moved = x, y_moved = y, grid = p.grid;
    for (size_t j = 0; j < p.n; ++j) {
      for (size_t k = 0; k < p.d; ++k) {
        T& value = x_moved[j * x_stride + k];
        value = T(std::ldexp(double(value), a));
      }
      for (size_t c = 0; c < p.dy; ++c) {
        T& value = y_moved[j * y_stride + c];
        value = T(std::ldexp(double(value), b));
      }
    }
    for (double& h : scales.empty() ? grid : moved_options.scales) {
      h = std::ldexp(h, a);
    }
  }

  const ConstMatrixView<T> x_view(x.data(), p.n, p.d, x_stride);
  const ConstMatrixView<T> y_view(y.data(), p.n, p.dy, y_stride);
  const std::vector<T> x_before = x, y_before = y;
  struct Reset {
    ~Reset() { attnpool::reset_target(); }
  } reset;
  const std::vector<std::string> targets = attnpool::supported_targets();
  const size_t rerun_target = (flags ^ n_byte ^ seed) % targets.size();
  for (size_t t = 0; t < targets.size(); ++t) {
    const std::string& target = targets[t];
    attnpool::force_target(target);
    const auto where = [&] { return call() + " target=" + target; };
    const auto run = [&](bool skip, int thread_count) {
      CrossValidationOptions variant = options;
      variant.skip_distant = skip;
      CrossValidationResult result;
      try {
        result = attnpool::cross_validate(p.kernel, x_view, y_view, p.grid,
                                          variant, {thread_count});
      } catch (const std::exception& error) {
        Fail(std::string("unexpected exception: ") + error.what(), where());
      }
      if (attnpool::last_run_target() != target) {
        Fail("ran on " + attnpool::last_run_target(), where());
      }
      return result;
    };
    // (on_powers: the path whose oracle holds; the promised one unless
    // given.)
    const auto check = [&](const CrossValidationResult& got, bool skip,
                           std::optional<bool> on_powers = {},
                           const std::string& label = "") {
      const std::string what =
          label + (skip ? "skip_distant: " : "skip_distant = false: ");
      const bool path = on_powers.value_or(powers);
      if (got.bandwidths != p.grid || got.scores.size() != count ||
          got.unpredictable.size() != count) {
        Fail(what + "the result's sizes or bandwidths are wrong", where());
      }
      if (got.used_powers != path) {
        Fail(what +
                 (path ? "the powers path did not run" : "the powers path ran"),
             where());
      }
      const std::vector<Expected>& want = expect(skip, path);
      for (size_t b = 0; b < count; ++b) {
        const Expected& e = want[b];
        std::ostringstream text;
        text.precision(17);
        text << what << "bandwidth " << b << " (h " << p.grid[b] << "): ";
        if (got.unpredictable[b] < e.unpredictable_low ||
            got.unpredictable[b] > e.unpredictable_high) {
          text << got.unpredictable[b] << " unpredictable points, the oracle "
               << e.unpredictable_low << " to " << e.unpredictable_high;
          Fail(text.str(), where());
        }
        if (!e.compare) continue;
        const double score = got.scores[b];
        const bool close = std::isnan(e.score)
                               ? std::isnan(score)
                               : std::fabs(score - e.score) <= e.bound;
        if (!close) {
          text << "score " << score << ", the oracle " << e.score << " within "
               << e.bound;
          Fail(text.str(), where());
        }
      }
      size_t best = CrossValidationResult::npos;
      for (size_t b = 0; b < count; ++b) {
        if (got.unpredictable[b] == 0 && (best == CrossValidationResult::npos ||
                                          got.scores[b] < got.scores[best])) {
          best = b;
        }
      }
      const bool best_ok =
          got.best == best && (best == CrossValidationResult::npos
                                   ? std::isnan(got.best_bandwidth)
                                   : got.best_bandwidth == p.grid[best]);
      if (!best_ok) Fail(what + "best is not chosen by its rule", where());
    };
    const CrossValidationResult skipped = run(true, threads);
    check(skipped, true);
    const CrossValidationResult every = run(false, threads);
    check(every, false);
    if (attnpool::is_compact(p.kernel) &&
        (!SameBits(skipped.scores, every.scores) ||
         skipped.unpredictable != every.unpredictable)) {
      Fail("a compact kernel's scores differ with skip_distant", where());
    }
    if (skipped.weights_formed > every.weights_formed) {
      Fail("skip_distant formed more weights than every pair", where());
    }
    if (threads != 1 && t == rerun_target &&
        !SameResult(run(true, 1), skipped)) {
      Fail("differs from the same call on one thread", where());
    }
    if (!SameBits(x, x_before) || !SameBits(y, y_before)) {
      Fail("wrote into x or y (or their padding)", where());
    }
    if (magnitudes && t == rerun_target) {
      // Either the scores (below), or a refusal naming the data or the
      // bandwidths: squared distances past T whose grid the library does
      // not scale (every λ = 1/h² in T's range, design.md §5).
      CrossValidationResult moved;
      try {
        moved = attnpool::cross_validate(
            p.kernel, ConstMatrixView<T>(x_moved.data(), p.n, p.d, x_stride),
            ConstMatrixView<T>(y_moved.data(), p.n, p.dy, y_stride), grid,
            moved_options, {threads});
      } catch (const attnpool::Error& error) {
        const std::string argument = error.argument();
        if (argument == "x" || argument == "bandwidths" ||
            argument == "options.scales") {
          continue;
        }
        Fail(std::string("unexpected error: ") + error.what(), where());
      } catch (const std::exception& error) {
        Fail(std::string("unexpected exception: ") + error.what(), where());
      }
      const std::string label = "x times 2^" + std::to_string(a) +
                                ", y times 2^" + std::to_string(b) + ": ";
      const bool best_ok = moved.best == CrossValidationResult::npos
                               ? std::isnan(moved.best_bandwidth)
                               : moved.best_bandwidth == grid[moved.best];
      if (moved.bandwidths != grid || !best_ok) {
        Fail(label + "the bandwidths or best_bandwidth are wrong", where());
      }
      // In the original's units: the caller's grid, scores times 2^-2b.
      CrossValidationResult back = moved;
      back.bandwidths = p.grid;
      for (double& score : back.scores) score = std::ldexp(score, -2 * b);
      back.best_bandwidth = moved.best == CrossValidationResult::npos
                                ? moved.best_bandwidth
                                : p.grid[moved.best];
      check(back, true, moved.used_powers, label);
    }
  }
}

}  // namespace

void FuzzRegression(Bytes& bytes, uint8_t flags) {
  if (flags & 1) {
    FuzzRegressionOf<double>(bytes, flags);
  } else {
    FuzzRegressionOf<float>(bytes, flags);
  }
}

}  // namespace attnpool_test
