// The oracles of the API table (tests/api_table.cc): each function's
// result against the scalar reference (src/reference.h) within the bounds of
// its header's contract (tests/accuracy.h), returning a description of the
// first disagreement ("" when none).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "src/reference.h"
#include "tests/accuracy.h"
#include "tests/api_table.h"
#include "tests/pool_specs.h"

namespace attnpool_test {

// (Also the API table's names: tests/api_table.cc.)
using attnpool::ConstMatrixView;
using attnpool::Distance;
using attnpool::EmptyRows;
using attnpool::Kernel;
using attnpool::MatrixView;
using attnpool::Normalization;

namespace oracles {

// ------------------------------------------------------------ comparisons

template <typename T>
constexpr double kU = kUnitRoundoff<T>;
template <typename T>
constexpr double kTiny = std::numeric_limits<T>::min();

// The relative change e^error − 1 of exp(x) when x is off by `error`
// (first order: error); +inf where that overflows (huge logits rounded to
// T: no relative bound is left).
inline double ExpFactor(double error) { return std::expm1(error); }

// A relative bound times |x|: 0 for x = 0 even when the bound is +inf.
inline double Times(double relative, double x) {
  return x == 0 ? 0 : relative * std::fabs(x);
}

// Collects the first disagreement.
class Report {
 public:
  bool ok() const { return message_.empty(); }
  std::string str() const { return message_; }
  template <typename... Parts>
  void Fail(const Parts&... parts) {
    if (!ok()) return;
    std::ostringstream text;
    text.precision(17);
    (text << ... << parts);
    message_ = text.str();
  }

 private:
  std::string message_;
};

// got (a T) against want (exact, in double): both NaN, or the same
// infinity, or within `bound`. A want beyond the range of T may come out as
// the infinity it rounds to.
template <typename T>
bool Close(double got, double want, double bound) {
  if (std::isnan(want) || std::isnan(got)) {
    return std::isnan(want) && std::isnan(got);
  }
  if (std::isinf(want)) return got == want;
  if (std::isinf(got)) {
    return std::isinf(static_cast<double>(static_cast<T>(want))) &&
           (got > 0) == (want > 0);
  }
  return std::fabs(got - want) <= bound;
}

template <typename T>
std::vector<double> Dense(ConstMatrixView<T> view) {
  std::vector<double> dense(view.rows * view.cols);
  for (size_t r = 0; r < view.rows; ++r) {
    for (size_t c = 0; c < view.cols; ++c) {
      dense[r * view.cols + c] = view(r, c);
    }
  }
  return dense;
}

// ------------------------------------------------------------- distances

// The bound of distance.h on out(i, j) = distance(q, k), in double, around
// the reference value `want` (tests/accuracy.h).
template <typename T>
double DistanceBound(Distance distance, const double* q, const double* k,
                     size_t depth, double want) {
  return DistanceErrorBound<T>(distance, want, depth,
                               MagnitudesOf(q, k, depth));
}

template <typename T>
std::string VerifyDistances(Distance distance, ConstMatrixView<T> queries,
                            ConstMatrixView<T> keys, ConstMatrixView<T> out) {
  Report report;
  const size_t depth = queries.cols;
  const std::vector<double> q_all = Dense(queries), k_all = Dense(keys);
  for (size_t i = 0; i < queries.rows && report.ok(); ++i) {
    const double* q = q_all.data() + i * depth;
    for (size_t j = 0; j < keys.rows && report.ok(); ++j) {
      const double* k = k_all.data() + j * depth;
      const double want = attnpool::reference::distance(distance, q, k, depth);
      const double got = out(i, j);
      double bound = DistanceBound<T>(distance, q, k, depth, want);
      bound += 4 * kTiny<T>;
      if (!Close<T>(got, want, bound)) {
        report.Fail(attnpool::distance_name(distance), " (", i, ", ", j,
                    ") got ", got, " want ", want, " bound ", bound);
      }
    }
  }
  return report.str();
}

// --------------------------------------------------------------- kernels

// One kernel weight against the reference (kernel.h's accuracy). Distance
// kernels are only checked on what stage 1 produces (r ≥ 0, NaN, +inf).
template <typename T>
bool KernelClose(const attnpool::KernelSpec& spec, Distance input, double x,
                 size_t depth, double got, double* want_out) {
  const double want = attnpool::reference::kernel(spec, input, x, depth);
  *want_out = want;
  if (std::isnan(want) || std::isnan(got)) return Close<T>(got, want, 0);
  if (got == want) return true;  // also ±inf, 0
  const double bound = KernelErrorBound<T>(spec, input, x, depth, want);
  AccuracyLog::Get().Record(std::string("kernel (API table) ") +
                                attnpool::kernel_name(spec.kernel) + " " +
                                kTypeName<T>,
                            got - want, bound);
  return Close<T>(got, want, bound);
}

template <typename T>
std::string VerifyKernel(const attnpool::KernelSpec& spec, Distance input,
                         size_t depth, ConstMatrixView<T> before,
                         ConstMatrixView<T> after) {
  Report report;
  const bool distance_kernel = attnpool::needs_distance(spec.kernel);
  for (size_t i = 0; i < before.rows && report.ok(); ++i) {
    for (size_t j = 0; j < before.cols && report.ok(); ++j) {
      const double x = before(i, j), got = after(i, j);
      if (distance_kernel && x < 0) continue;  // not a distance
      double want = 0;
      if (!KernelClose<T>(spec, input, x, depth, got, &want)) {
        report.Fail(attnpool::kernel_name(spec.kernel), " of ", x, " (", i,
                    ", ", j, ") got ", got, " want ", want);
      }
    }
  }
  return report.str();
}

// --------------------------------------------------------- normalization

// Whether query i sees key j (docs/design.md §1 masks; a bias of −inf hides).
template <typename T>
bool Seen(const attnpool::Mask<T>& mask, size_t i, size_t j) {
  return !attnpool::reference::hidden(mask, i, j);
}

// Normalized weights `got` (rows×cols, of T) against the reference applied
// to `values` (the values the normalization saw: scores, weights or
// logits, in double; bias not yet added). `relative`: the relative error
// allowed besides the exps' and the normalization's own.
template <typename T>
std::string CompareNormalized(Normalization normalization, bool logits,
                              EmptyRows empty_rows,
                              const attnpool::Mask<T>& mask,
                              const std::vector<double>& values, size_t rows,
                              size_t cols, ConstMatrixView<T> got,
                              double relative) {
  Report report;
  std::vector<double> want = values;
  attnpool::reference::normalize(normalization, logits, empty_rows, mask, want,
                                 rows, cols);
  const double u = kU<T>;
  const bool scores = logits || attnpool::normalizes_scores(normalization);
  const double fill = empty_rows == EmptyRows::nan
                          ? std::numeric_limits<double>::quiet_NaN()
                          : 0.0;
  const auto magnitude = [](double x) {
    return std::isfinite(x) ? std::fabs(x) : 0.0;
  };
  std::vector<double> seen(cols), seen_error(cols);
  for (size_t i = 0; i < rows && report.ok(); ++i) {
    // The row as the normalization sees it, and its largest visible entry.
    double largest = -std::numeric_limits<double>::infinity();
    double largest_error = 0;
    bool negative = false, positive = false;
    for (size_t j = 0; j < cols; ++j) {
      seen[j] = values[i * cols + j];
      if (Seen(mask, i, j)) {
        // The error of the adjusted score in T: each of its terms rounded
        // (the soft-capped score with tanh's error too: the terms may
        // cancel to far less than they are), then their sum.
        double capped = seen[j];
        if (mask.softcap) {
          capped =
              double(*mask.softcap) * std::tanh(capped / double(*mask.softcap));
        }
        const double alibi =
            double(mask.alibi_slope.value_or(0)) *
            double(static_cast<__int128>(j) - i - mask.causal_offset);
        seen[j] = attnpool::reference::adjusted_score(mask, i, j, seen[j]);
        seen_error[j] =
            (4 * u + (mask.softcap ? kTanhError<T> : 0)) * magnitude(capped) +
            4 * u *
                (magnitude(alibi) + magnitude(seen[j]) +
                 (mask.bias.data ? magnitude(double(mask.bias(i, j))) : 0));
        if (seen[j] > largest) {
          largest = seen[j];
          largest_error = seen_error[j];
        }
        negative |= seen[j] < 0;
        positive |= seen[j] > 0;
      }
    }
    // `sum` of plain weights of both signs may cancel: ill-conditioned, and
    // outside the contract (weights are ≥ 0).
    if (normalization == Normalization::sum && !logits && negative &&
        positive) {
      continue;
    }
    const double* want_row = want.data() + i * cols;
    // Exponential weights below the smallest normal number of T are 0 there
    // (kernel.h): a row of them only may come out empty.
    if (logits && normalization == Normalization::none) {
      bool all_tiny = true;
      for (size_t j = 0; j < cols; ++j) {
        all_tiny &= std::isnan(want_row[j]) || want_row[j] < 4 * kTiny<T>;
      }
      bool got_fill = true;
      for (size_t j = 0; j < cols; ++j) {
        const double g = got(i, j);
        got_fill &= std::isnan(fill) ? std::isnan(g) : g == fill;
      }
      bool want_nan = false;
      for (size_t j = 0; j < cols; ++j) want_nan |= std::isnan(want_row[j]);
      if (all_tiny && !want_nan && got_fill) continue;
    }
    if (normalization == Normalization::argmax) {
      // One-hot on a largest score; scores that the rounding of T (the bias
      // addition, the kernel's logit) may reorder count as ties.
      size_t want_winner = cols, got_winner = cols, ones = 0;
      for (size_t j = 0; j < cols; ++j) {
        if (want_row[j] == 1) want_winner = j;
        const double g = got(i, j);
        if (g == 1) got_winner = j, ++ones;
      }
      if (want_winner == cols) {  // NaN or empty row: as the reference says
        for (size_t j = 0; j < cols && report.ok(); ++j) {
          if (!Close<T>(got(i, j), want_row[j], 0)) {
            report.Fail("argmax row ", i, " col ", j, " got ", got(i, j),
                        " want ", want_row[j]);
          }
        }
        continue;
      }
      bool zeros = true;
      for (size_t j = 0; j < cols; ++j)
        zeros &= j == got_winner || got(i, j) == 0;
      const double best = seen[want_winner];
      const double tie = std::isfinite(best)
                             ? 8 * u * (std::fabs(best) + 1) * (logits ? 4 : 1)
                             : 0;
      if (ones != 1 || !zeros || !Seen(mask, i, got_winner) ||
          !(got_winner == want_winner || seen[got_winner] >= best - tie)) {
        report.Fail("argmax row ", i, " got winner ", got_winner, " want ",
                    want_winner);
      }
      continue;
    }
    // Infinite entries: +inf scores, or ±inf weights under `sum`, share the
    // row (the reference's 1/k against T's); other entries get exactly 0.
    bool shared = scores && normalization != Normalization::none &&
                  largest == std::numeric_limits<double>::infinity();
    if (normalization == Normalization::sum && !logits) {
      for (size_t j = 0; j < cols; ++j) {
        shared |= Seen(mask, i, j) && std::isinf(seen[j]);
      }
    }
    for (size_t j = 0; j < cols && report.ok(); ++j) {
      const double w = want_row[j], g = got(i, j);
      double bound = 0;
      if (!Seen(mask, i, j) || std::isnan(w)) {
        bound = 0;  // hidden keys get exactly 0; NaN rows are all NaN
      } else if (shared) {
        bound = kU<T> * std::fabs(w);
      } else if (normalization == Normalization::none && !logits) {
        bound = 0;  // weights as they are
      } else if (scores && normalization != Normalization::none) {
        // softmax (normalize.h): (m + 8)·u + 2 exps, and the error of the
        // exponent aᵢ − max — the adjusted scores' (seen_error) and
        // `relative` — which moves the weight by a factor e^error (first
        // order: error; not so for huge logits).
        const double exponent = seen_error[j] + largest_error + relative;
        bound =
            Times((cols + 8) * u + 2 * kExpError<T> + ExpFactor(exponent), w) +
            kTiny<T>;
        // Whatever the relative error, the weight in T is at most
        // e^(aᵢ − max + error) (the max's weight is 1 in the sum it is
        // divided by; a little more for the exps' and the sum's rounding):
        // it bounds a weight that underflows in double but not in T, and
        // every weight where the error of huge logits leaves no relative
        // bound.
        if (std::isfinite(seen[j]) && std::isfinite(largest)) {
          const double at_most =
              std::exp(std::min(0.0, seen[j] - largest + exponent)) *
              (1 + 2 * kExpError<T> + (cols + 8) * u);
          bound =
              w == 0 ? bound + at_most : std::min(bound, std::max(w, at_most));
        }
      } else {  // sum of weights, none of exp(logits)
        const double exponent = (logits ? seen_error[j] : 0) + relative;
        bound =
            Times((cols + 8) * u + 2 * kExpError<T> + ExpFactor(exponent), w) +
            kTiny<T>;
      }
      if (!Close<T>(g, w, bound)) {
        report.Fail(attnpool::normalization_name(normalization),
                    logits ? " of logits" : "", " (", i, ", ", j, ") got ", g,
                    " want ", w, " bound ", bound, " from ", seen[j],
                    " largest ", largest);
      }
    }
  }
  return report.str();
}

// ---------------------------------------------------------- weighted sum

// out = W·V against the reference, within weighted_sum.h's bound over the
// terms: every term (the weighted_sum stage: IEEE W·V, 0·NaN = NaN), or with
// `pooled` the terms of the keys that contribute (the reference's
// pooled_sum; README "Non-finite data"): not hidden by `pooled->mask` and,
// unless pooled->zero_weights_count, of nonzero weight.
template <typename T>
struct PooledTerms {
  attnpool::Mask<T> mask;
  bool zero_weights_count;
};

template <typename T>
std::string VerifyWeightedSum(ConstMatrixView<T> weights,
                              ConstMatrixView<T> values, ConstMatrixView<T> out,
                              const PooledTerms<T>* pooled = nullptr) {
  Report report;
  const auto want =
      pooled ? attnpool::reference::pooled_sum(weights, values, pooled->mask,
                                               pooled->zero_weights_count)
             : attnpool::reference::weighted_sum(weights, values);
  const size_t m = weights.cols;
  for (size_t i = 0; i < out.rows && report.ok(); ++i) {
    for (size_t c = 0; c < out.cols && report.ok(); ++c) {
      double scale = 0;
      for (size_t j = 0; j < m; ++j) {
        const double w = weights(i, j), v = values(j, c);
        if (pooled && (attnpool::reference::hidden(pooled->mask, i, j) ||
                       (!pooled->zero_weights_count && w == 0))) {
          continue;
        }
        // Non-finite factors make the sum non-finite: Close() compares
        // those.
        if (std::isfinite(w) && std::isfinite(v)) scale += std::fabs(w * v);
      }
      // Finite products or sums beyond the range of T overflow to ±inf with
      // separate multiply and add but not inside a fused one: ±inf or NaN
      // then depends on the target (weighted_sum.h). Not compared.
      if (!(scale <= double(std::numeric_limits<T>::max()) / 4)) continue;
      const double bound = (m + 1) * kU<T> * scale + (m + 1) * kTiny<T>;
      const double w = want[i * out.cols + c], g = out(i, c);
      if (!Close<T>(g, w, bound)) {
        report.Fail("out (", i, ", ", c, ") got ", g, " want ", w, " bound ",
                    bound);
      }
    }
  }
  return report.str();
}

// -------------------------------------------------------- staged pipeline

// The pipeline's weights and output against: this target's stage 1 (itself
// checked against the reference), then the reference kernel, normalization
// and weighted sum in double — as tests/test_pool.cc does.
template <typename T>
std::string VerifyPipeline(const attnpool::PoolSpec& spec,
                           const attnpool::Mask<T>& mask,
                           ConstMatrixView<T> queries, ConstMatrixView<T> keys,
                           ConstMatrixView<T> values, ConstMatrixView<T> out,
                           ConstMatrixView<T> weights,
                           double* largest_logit = nullptr,
                           std::vector<double>* scores_out = nullptr) {
  Report report;
  const size_t n = queries.rows, m = keys.rows, dv = values.cols;
  if (m == 0) {  // every row empty, or beside a sink 0
    const bool sink =
        mask.sink && *mask.sink > -std::numeric_limits<T>::infinity();
    const double fill = spec.empty_rows == EmptyRows::nan && !sink
                            ? std::numeric_limits<double>::quiet_NaN()
                            : 0.0;
    for (size_t i = 0; i < n && report.ok(); ++i) {
      for (size_t c = 0; c < dv; ++c) {
        if (!Close<T>(out(i, c), fill, 0)) report.Fail("m = 0: out ", i, c);
      }
    }
    return report.str();
  }
  std::vector<T> scratch(n * m);
  const MatrixView<T> stage(scratch.data(), n, m);
  attnpool::pairwise_distances(spec.distance, queries, keys, stage);
  const std::string distance_report =
      VerifyDistances<T>(spec.distance, queries, keys, stage);
  if (!distance_report.empty()) return "stage 1: " + distance_report;
  const bool logits = attnpool::is_exponential(spec.kernel.kernel);
  if (!logits) {
    attnpool::apply_kernel(spec.kernel, spec.distance, stage, queries.cols);
  }
  std::vector<double> scores(n * m);
  double largest = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < m; ++j) {
      const double s = stage(i, j);
      scores[i * m + j] =
          logits ? attnpool::reference::kernel(spec.kernel, spec.distance, s,
                                               queries.cols, true)
                 : s;
      if (std::isfinite(scores[i * m + j])) {
        largest = std::max(largest, std::fabs(scores[i * m + j]));
      }
    }
  }
  if (logits && largest_logit != nullptr) *largest_logit = largest;
  if (scores_out != nullptr) *scores_out = scores;
  // The target rounds each logit a few times in T: u·|ℓ| per weight.
  const double relative = logits ? 8 * kU<T> * largest + 6 * kU<T> : 0;
  const std::string weights_report =
      CompareNormalized<T>(spec.normalization, logits, spec.empty_rows, mask,
                           scores, n, m, weights, relative);
  if (!weights_report.empty()) return "weights: " + weights_report;
  if (spec.normalization == Normalization::argmax) {
    // The winner's value row, exactly; a row without a winner is its
    // weights' NaN or 0 (pool.h).
    for (size_t i = 0; i < n && report.ok(); ++i) {
      size_t winner = 0;
      while (winner < m && weights(i, winner) != T(1)) ++winner;
      for (size_t c = 0; c < dv && report.ok(); ++c) {
        const double want = winner < m ? values(winner, c) : weights(i, 0);
        if (!Close<T>(out(i, c), want, 0)) {
          report.Fail("argmax out (", i, ", ", c, ") got ", out(i, c), " want ",
                      want);
        }
      }
    }
    return report.str();
  }
  const PooledTerms<T> pooled{mask, ZeroWeightsCount(spec)};
  const std::string out_report =
      VerifyWeightedSum<T>(weights, values, out, &pooled);
  if (!out_report.empty()) return "out from the weights: " + out_report;
  return "";
}

// ----------------------------------------------------------------- fused

// The rounding units a fused call's dots may take beyond distance.h's bound
// where its keys are int8 rows read on the decode path, their scale
// applied to the dot of the integers (element.h): the scale's product,
// and the held elements' rounding it skips.
constexpr double kFoldedInt8DotUnits = 2;

// The largest error of an exponential kernel's logit that the distances'
// rounding (distance.h) causes, over every finite pair: |scale| times the
// score's bound for exp (a dot's `extra_dot_units`·u·Σ|q·k| more); for the
// Gaussian, r²'s bound (or r's, times 2r) over 2h². 0 for the other
// kernels.
template <typename T>
double LogitErrorOfDistances(const attnpool::PoolSpec& spec,
                             ConstMatrixView<T> queries,
                             ConstMatrixView<T> keys,
                             double extra_dot_units = 0) {
  const Kernel kernel = spec.kernel.kernel;
  if (!attnpool::is_exponential(kernel)) return 0;
  const size_t depth = queries.cols;
  const double h = spec.kernel.bandwidth;
  const double scale = spec.kernel.scale
                           ? std::fabs(*spec.kernel.scale)
                           : (depth == 0 ? 1 : 1 / std::sqrt(double(depth)));
  const std::vector<double> q_all = Dense(queries), k_all = Dense(keys);
  double largest = 0;
  for (size_t i = 0; i < queries.rows; ++i) {
    for (size_t j = 0; j < keys.rows; ++j) {
      const double* q = q_all.data() + i * depth;
      const double* k = k_all.data() + j * depth;
      const double r =
          attnpool::reference::distance(spec.distance, q, k, depth);
      double bound = DistanceBound<T>(spec.distance, q, k, depth, r);
      if (spec.distance == Distance::dot && extra_dot_units != 0) {
        bound += extra_dot_units * kU<T> * MagnitudesOf(q, k, depth).abs_dot;
      }
      double error = 0;
      if (TakesScore(kernel)) {
        error = scale * bound;
      } else if (spec.distance == Distance::sqeuclidean) {
        error = bound / (2 * h * h);
      } else {
        error = (2 * r + bound) * bound / (2 * h * h);
      }
      if (std::isfinite(error)) largest = std::max(largest, error);
    }
  }
  return largest;
}

// A fused result (attention_pool, or its shards merged) against the staged
// pipeline on the same target, itself checked against the reference: both
// are Σⱼ wᵢⱼ vⱼc with weights that differ by the online rescaling (a few u
// per key block) and the exps, so the bound is relative to Σⱼ |wᵢⱼ vⱼc| of
// the staged weights; NaN exactly where the staged output is NaN; argmax
// copies the same value row. `extra_dot_units`: the fused call's dots may
// err that many u·Σ|q·k| beyond distance.h's bound (kFoldedInt8DotUnits).
template <typename T>
std::string VerifyFused(const Args<T>& before, ConstMatrixView<T> fused,
                        double extra_dot_units = 0) {
  const attnpool::PoolSpec spec = before.spec();
  const ConstMatrixView<T> queries = before.views[0], keys = before.views[1],
                           values = before.views[2];
  const size_t n = queries.rows, m = keys.rows, dv = values.cols;
  std::vector<T> weight_storage(std::max<size_t>(1, n * m)),
      staged_storage(std::max<size_t>(1, n * dv));
  const MatrixView<T> weights(weight_storage.data(), n, m),
      staged(staged_storage.data(), n, dv);
  attnpool::attention_pool_staged(spec, queries, keys, values, staged, weights,
                                  before.mask, before.execution);
  // The largest finite |logit| (the exps' argument error grows with it):
  // the kernel's here, the adjusted ones below.
  double largest_logit = 0;
  std::vector<double> scores;  // the reference's logits or kernel values
  const std::string staged_report =
      VerifyPipeline<T>(spec, before.mask, queries, keys, values, staged,
                        weights, &largest_logit, &scores);
  if (!staged_report.empty()) return "staged: " + staged_report;
  // The exps' arguments are the logits as the mask adjusts them (bias,
  // ALiBi, soft-cap) less a row's largest, the sink's among them: each
  // rounded in T moves its weight by up to u·|ℓ|.
  if (attnpool::is_exponential(spec.kernel.kernel) ||
      attnpool::normalizes_scores(spec.normalization)) {
    const auto& mask = before.mask;
    if (mask.sink && std::isfinite(double(*mask.sink))) {
      largest_logit = std::max(largest_logit, std::fabs(double(*mask.sink)));
    }
    for (size_t i = 0; i < n && !scores.empty(); ++i) {
      for (size_t j = 0; j < m; ++j) {
        if (attnpool::reference::hidden(mask, i, j)) continue;
        const double logit =
            attnpool::reference::adjusted_score(mask, i, j, scores[i * m + j]);
        if (std::isfinite(logit)) {
          largest_logit = std::max(largest_logit, std::fabs(logit));
        }
      }
    }
  }
  const double u = kU<T>;
  const double blocks = 1 + m / 128.0;
  // The logits' rounding moves weights by a factor e^error (first order:
  // error; not so for huge logits), and so do the distances both paths
  // form, each within distance.h's bound (the fused one's int8 dots
  // extra_dot_units more) but in their own order.
  const double staged_distances = LogitErrorOfDistances<T>(spec, queries, keys);
  const double logit_error =
      u * (16 * largest_logit + 12) + staged_distances +
      (extra_dot_units == 0
           ? staged_distances
           : LogitErrorOfDistances<T>(spec, queries, keys, extra_dot_units));
  const double relative =
      (m + 16 + 8 * blocks) * u + 6 * kExpError<T> + ExpFactor(logit_error);
  // A visible key whose staged weight is 0 (its weight underflowed in T, or
  // its logit, rounded in T, fell that far below the row's largest) may
  // keep a weight in the fused kernel: at most e^(ℓⱼ − max ℓ + 2·error) of
  // the reference logits in a normalized row, kTiny·e^(2·error) under none.
  // For huge logits, whose error leaves no relative bound, that is more than
  // kTiny (the row's values' kTiny·Σ|v| below).
  const bool logits = attnpool::is_exponential(spec.kernel.kernel);
  const bool normalized = spec.normalization != Normalization::none;
  std::vector<double> zero_weight_shares(n * dv, 0.0);
  for (size_t i = 0; logits && !scores.empty() && i < n; ++i) {
    double top = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < m; ++j) {
      if (attnpool::reference::hidden(before.mask, i, j)) continue;
      top = std::max(top, attnpool::reference::adjusted_score(
                              before.mask, i, j, scores[i * m + j]));
    }
    if (!std::isfinite(top)) continue;
    for (size_t j = 0; j < m; ++j) {
      if (attnpool::reference::hidden(before.mask, i, j) ||
          weights(i, j) != 0) {
        continue;
      }
      const double logit = attnpool::reference::adjusted_score(
          before.mask, i, j, scores[i * m + j]);
      if (std::isnan(logit)) continue;
      const double at_most =
          normalized ? std::exp(std::min(0.0, logit - top + 2 * logit_error))
                     : kTiny<T> * std::exp(std::min(700.0, 2 * logit_error));
      for (size_t c = 0; c < dv; ++c) {
        const double v = values(j, c);
        if (std::isfinite(v)) {
          zero_weight_shares[i * dv + c] += at_most * std::fabs(v);
        }
      }
    }
  }
  const bool zero_weights_count = ZeroWeightsCount(spec);
  Report report;
  for (size_t i = 0; i < n && report.ok(); ++i) {
    for (size_t c = 0; c < dv && report.ok(); ++c) {
      double scale = 0;  // over the keys that contribute
      double largest_value = 0;
      double values_sum = 0;  // Σ |v| over the visible finite values
      bool infinite_value = false;
      for (size_t j = 0; j < m; ++j) {
        if (attnpool::reference::hidden(before.mask, i, j) ||
            (!zero_weights_count && weights(i, j) == 0)) {
          continue;
        }
        const double w = weights(i, j), v = values(j, c);
        infinite_value |= std::isinf(v);
        // Non-finite factors make both sums non-finite: Close() compares
        // those (finite ones that overflow are not compared, below).
        if (std::isfinite(w) && std::isfinite(v)) scale += std::fabs(w * v);
        if (std::isfinite(v)) {
          largest_value = std::max(largest_value, std::fabs(v));
          values_sum += std::fabs(v);
        }
      }
      if (!(scale <= double(std::numeric_limits<T>::max()) / 4)) continue;
      const double got = fused(i, c), want = staged(i, c);
      // An infinite value whose weight underflows to 0 in one path and not
      // in the other (the online rescaling): 0·inf = NaN there, ±inf here.
      if (infinite_value && !std::isfinite(got) && !std::isfinite(want) &&
          (std::isnan(got) || std::isnan(want))) {
        continue;
      }
      const bool argmax = spec.normalization == Normalization::argmax;
      // A weight below the smallest normal number is 0 in the staged
      // pipeline (exp's contract) but kept by the fused kernel, whose state
      // is relative to its own max until the sink or a merge scales it:
      // up to kTiny·|v| per key (the sink of a row whose keys are far).
      double bound = argmax ? 0
                            : Times(relative, scale) +
                                  kTiny<T> * (4 + values_sum) +
                                  zero_weight_shares[i * dv + c];
      // Normalized weights make both outputs convex combinations of the
      // contributing values: within 2·max|v| of each other whatever the
      // logits' error (which for huge logits leaves no relative bound).
      if (spec.normalization == Normalization::sum ||
          spec.normalization == Normalization::softmax) {
        bound = std::min(bound, 2 * largest_value * (1 + 4 * u) + 4 * kTiny<T>);
      }
      if (!Close<T>(got, want, bound)) {
        report.Fail("fused out (", i, ", ", c, ") got ", got, " staged ", want,
                    " bound ", bound);
      }
    }
  }
  return report.str();
}

// ------------------------------------------------------------- additive

// What an output must hold: element (i, c) of `want` (row-major), NaN
// exactly where want is, else within `bound`.
struct ExpectedOutput {
  size_t rows = 0, cols = 0;
  std::vector<double> want, bound;
};

template <typename T>
std::string CompareOutput(const ExpectedOutput& expected,
                          ConstMatrixView<T> out) {
  Report report;
  for (size_t i = 0; i < expected.rows && report.ok(); ++i) {
    for (size_t c = 0; c < expected.cols && report.ok(); ++c) {
      const double want = expected.want[i * expected.cols + c];
      const double bound = expected.bound[i * expected.cols + c];
      if (!Close<T>(out(i, c), want, bound)) {
        report.Fail("out (", i, ", ", c, ") got ", out(i, c), " want ", want,
                    " bound ", bound);
      }
    }
  }
  return report.str();
}

// One head of additive_attention (attention.h) by the reference: the
// scores Σᵤ w_v[u]·tanh(W_q q + W_k k)ᵤ in double, each within the header's
// bound e = Σᵤ |w_v[u]|·((dq + dk + 4)·u·(Σ|W_q q| + Σ|W_k k|)ᵤ + tanh's
// error + (h + 2)·u); then the masks, softmax and weighted sum of the
// reference in double. A row's logits move by at most E = its largest e
// plus the adjustments' rounding (4·u of each term where they add up, and
// the soft-cap's tanh) and the exps' argument rounding u·(16·max|logit| +
// 12), so its weights by e^(2E) − 1 relative: the output within that times
// Σⱼ |wⱼ·vⱼ|, plus the sums' (m + 16)·u and the exps' error, and kTiny·Σ|v|
// for weights flushed to 0. Values of visible keys must be finite; hidden
// keys may hold anything.
template <typename T>
ExpectedOutput ExpectAdditive(const attnpool::AdditiveWeights<T>& weights,
                              ConstMatrixView<T> queries,
                              ConstMatrixView<T> keys,
                              ConstMatrixView<T> values,
                              const attnpool::Mask<T>& mask,
                              EmptyRows empty_rows) {
  const size_t n = queries.rows, m = keys.rows, dv = values.cols;
  const size_t hidden = weights.w_q.rows, dq = queries.cols, dk = keys.cols;
  const double u = kU<T>;
  // Projections and their magnitudes, rows×h.
  const auto project = [&](ConstMatrixView<T> x, ConstMatrixView<T> w,
                           std::vector<double>& sums,
                           std::vector<double>& magnitudes) {
    sums.assign(x.rows * hidden, 0.0);
    magnitudes.assign(x.rows * hidden, 0.0);
    for (size_t r = 0; r < x.rows; ++r) {
      for (size_t a = 0; a < hidden; ++a) {
        for (size_t p = 0; p < x.cols; ++p) {
          const double term = double(w(a, p)) * double(x(r, p));
          sums[r * hidden + a] += term;
          magnitudes[r * hidden + a] += std::fabs(term);
        }
      }
    }
  };
  std::vector<double> pq, mq, pk, mk;
  project(queries, weights.w_q, pq, mq);
  project(keys, weights.w_k, pk, mk);
  std::vector<double> scores(n * m), errors(n * m);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < m; ++j) {
      double score = 0, error = 0;
      for (size_t a = 0; a < hidden; ++a) {
        const double w = weights.w_v[a];
        score += w * std::tanh(pq[i * hidden + a] + pk[j * hidden + a]);
        error += std::fabs(w) * (double(dq + dk + 4) * u *
                                     (mq[i * hidden + a] + mk[j * hidden + a]) +
                                 kTanhError<T> + double(hidden + 2) * u);
      }
      scores[i * m + j] = score;
      errors[i * m + j] = error;
    }
  }
  std::vector<double> normalized = scores;
  attnpool::reference::normalize(Normalization::softmax, true, empty_rows, mask,
                                 normalized, n, m);
  ExpectedOutput expected;
  expected.rows = n;
  expected.cols = dv;
  expected.want.assign(n * dv, 0.0);
  expected.bound.assign(n * dv, 0.0);
  const double cap = mask.softcap ? std::fabs(double(*mask.softcap)) : 0;
  // Without keys the row is empty (NaN under that policy) unless a sink
  // joins its softmax; otherwise `normalized` holds the row's fate.
  const bool sink =
      mask.sink && *mask.sink > -std::numeric_limits<T>::infinity();
  for (size_t i = 0; i < n; ++i) {
    double largest_error = 0, largest_logit = 0;
    if (mask.sink) largest_logit = std::fabs(double(*mask.sink));
    bool nan_row = m == 0 && !sink && empty_rows == EmptyRows::nan;
    for (size_t j = 0; j < m; ++j) {
      nan_row |= std::isnan(normalized[i * m + j]);
      if (attnpool::reference::hidden(mask, i, j)) continue;
      const double logit =
          attnpool::reference::adjusted_score(mask, i, j, scores[i * m + j]);
      const double alibi =
          double(mask.alibi_slope.value_or(0)) *
          double(static_cast<__int128>(j) - i - mask.causal_offset);
      const double bias = mask.bias.data ? double(mask.bias(i, j)) : 0;
      const double adjustment_error =
          4 * u *
              (std::fabs(scores[i * m + j]) + std::fabs(alibi) +
               std::fabs(bias) + std::fabs(logit)) +
          cap * (kTanhError<T> + 4 * u);
      largest_error =
          std::max(largest_error, errors[i * m + j] + adjustment_error);
      if (std::isfinite(logit)) {
        largest_logit = std::max(largest_logit, std::fabs(logit));
      }
    }
    const double logit_error = largest_error + u * (16 * largest_logit + 12);
    const double relative =
        ExpFactor(2 * logit_error) + double(m + 16) * u + 6 * kExpError<T>;
    for (size_t c = 0; c < dv; ++c) {
      double want = nan_row ? std::numeric_limits<double>::quiet_NaN() : 0;
      double scale = 0, values_sum = 0;
      for (size_t j = 0; j < m && !nan_row; ++j) {
        if (attnpool::reference::hidden(mask, i, j)) continue;
        const double w = normalized[i * m + j], v = values(j, c);
        want += w * v;
        scale += std::fabs(w * v);
        values_sum += std::fabs(v);
      }
      expected.want[i * dv + c] = want;
      expected.bound[i * dv + c] =
          Times(relative, scale) + kTiny<T> * (4 + values_sum);
    }
  }
  return expected;
}

}  // namespace oracles
}  // namespace attnpool_test
