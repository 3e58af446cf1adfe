// The rows of the API table (tests/api_table.h), their reference checks, and
// the Workspace that lays out one call.
#include "tests/accuracy.h"
#include "tests/api_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <sstream>
#include <stdexcept>

#include "src/reference.h"
#include "tests/pool_specs.h"

namespace attnpool_test {

using attnpool::ConstMatrixView;
using attnpool::Distance;
using attnpool::EmptyRows;
using attnpool::Kernel;
using attnpool::MatrixView;
using attnpool::Normalization;

// LeakSanitizer (ASan builds): libomp keeps its thread teams' structures
// until exit; they are not leaks of ours. A weak hook: inert elsewhere.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libomp.so\n";
}

const char* DimName(Dim dim) {
  static const char* const kNames[kDimCount] = {"n", "m", "d", "dv"};
  return kNames[dim];
}

template <typename T>
size_t Api<T>::SlotIndex(const std::string& slot) const {
  for (size_t s = 0; s < slots.size(); ++s) {
    if (slot == slots[s].name) return s;
  }
  throw std::logic_error(std::string(name) + " has no slot " + slot);
}

namespace {

// ------------------------------------------------------------ comparisons

template <typename T>
constexpr double kU = kUnitRoundoff<T>;
template <typename T>
constexpr double kTiny = std::numeric_limits<T>::min();

// The relative change e^error − 1 of exp(x) when x is off by `error`
// (first order: error); +inf where that overflows (huge logits rounded to
// T: no relative bound is left).
double ExpFactor(double error) { return std::expm1(error); }

// A relative bound times |x|: 0 for x = 0 even when the bound is +inf.
double Times(double relative, double x) {
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
  std::vector<double> seen(cols);
  for (size_t i = 0; i < rows && report.ok(); ++i) {
    // The row as the normalization sees it, and its largest visible entry.
    double largest = -std::numeric_limits<double>::infinity();
    bool negative = false, positive = false;
    for (size_t j = 0; j < cols; ++j) {
      seen[j] = values[i * cols + j];
      if (mask.bias.data && Seen(mask, i, j)) seen[j] += mask.bias(i, j);
      if (Seen(mask, i, j)) {
        largest = std::max(largest, seen[j]);
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
    const auto magnitude = [](double x) {
      return std::isfinite(x) ? std::fabs(x) : 0.0;
    };
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
        // exponent aᵢ − max — u·|aᵢ − max|, the scores rounded to T once
        // (bias) or a few times (logits) — which moves the weight by a
        // factor e^error (first order: error; not so for huge logits).
        const double exponent =
            4 * u * (magnitude(seen[j]) + magnitude(largest)) + relative;
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
        const double exponent =
            (logits ? 4 * u * magnitude(seen[j]) : 0) + relative;
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
                           double* largest_logit = nullptr) {
  Report report;
  const size_t n = queries.rows, m = keys.rows, dv = values.cols;
  if (m == 0) {  // every row empty
    const double fill = spec.empty_rows == EmptyRows::nan
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

// The largest error of an exponential kernel's logit that the distances'
// rounding (distance.h) causes, over every finite pair: |scale| times the
// score's bound for exp; for the Gaussian, r²'s bound (or r's, times 2r)
// over 2h². 0 for the other kernels.
template <typename T>
double LogitErrorOfDistances(const attnpool::PoolSpec& spec,
                             ConstMatrixView<T> queries,
                             ConstMatrixView<T> keys) {
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
      const double bound = DistanceBound<T>(spec.distance, q, k, depth, r);
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
// copies the same value row.
template <typename T>
std::string VerifyFused(const Args<T>& before, ConstMatrixView<T> fused) {
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
  // The largest finite |logit| (the exps' argument error grows with it).
  double largest_logit = 0;
  const std::string staged_report =
      VerifyPipeline<T>(spec, before.mask, queries, keys, values, staged,
                        weights, &largest_logit);
  if (!staged_report.empty()) return "staged: " + staged_report;
  const double u = kU<T>;
  const double blocks = 1 + m / 128.0;
  // The logits' rounding moves weights by a factor e^error (first order:
  // error; not so for huge logits), and so do the distances both paths
  // form, each within distance.h's bound but in their own order.
  const double relative =
      (m + 16 + 8 * blocks) * u + 6 * kExpError<T> +
      ExpFactor(u * (16 * largest_logit + 12) +
                2 * LogitErrorOfDistances<T>(spec, queries, keys));
  const bool zero_weights_count = ZeroWeightsCount(spec);
  Report report;
  for (size_t i = 0; i < n && report.ok(); ++i) {
    for (size_t c = 0; c < dv && report.ok(); ++c) {
      double scale = 0;  // over the keys that contribute
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
      const double bound = argmax ? 0 : Times(relative, scale) + 4 * kTiny<T>;
      if (!Close<T>(got, want, bound)) {
        report.Fail("fused out (", i, ", ", c, ") got ", got, " staged ", want,
                    " bound ", bound);
      }
    }
  }
  return report.str();
}

// -------------------------------------------------------------- the rows

template <typename T>
std::vector<Api<T>> MakeApis() {
  using A = Args<T>;
  std::vector<Api<T>> apis;
  const auto set_distance = [](A& a, int v) {
    a.distance = static_cast<Distance>(v);
  };
  const auto set_kernel = [](A& a, int v) {
    a.kernel.kernel = static_cast<Kernel>(v);
  };
  const auto set_normalization = [](A& a, int v) {
    a.normalization = static_cast<Normalization>(v);
  };
  const auto set_empty_rows = [](A& a, int v) {
    a.empty_rows = static_cast<EmptyRows>(v);
  };

  {
    Api<T> api;
    api.name = "pairwise_distances";
    api.slots = {{"queries", kN, kD, Role::input},
                 {"keys", kM, kD, Role::input},
                 {"out", kN, kM, Role::output}};
    api.enums = {{"distance", attnpool::kDistanceCount, set_distance}};
    api.setup = [](A& a, const Sizes&) { a.distance = Distance::sqeuclidean; };
    api.run = [](const A& a) {
      attnpool::pairwise_distances(a.distance, a.views[0], a.views[1],
                                   a.views[2], a.execution);
    };
    api.verify = [](const A& before, const A& after) {
      return VerifyDistances<T>(before.distance, before.views[0],
                                before.views[1], after.views[2]);
    };
    apis.push_back(api);
  }
  {
    Api<T> api;
    api.name = "apply_kernel";
    api.slots = {{"values", kN, kM, Role::in_place}};
    api.uses_kernel = true;
    api.enums = {{"kernel.kernel", attnpool::kKernelCount, set_kernel},
                 {"input", attnpool::kDistanceCount, set_distance}};
    api.setup = [](A& a, const Sizes& sizes) {
      a.distance = Distance::sqeuclidean;
      a.kernel = {Kernel::gaussian, 1.5};
      a.depth = sizes[kD];
    };
    api.run = [](const A& a) {
      attnpool::apply_kernel(a.kernel, a.distance, a.views[0], a.depth,
                             a.execution);
    };
    api.verify = [](const A& before, const A& after) {
      return VerifyKernel<T>(before.kernel, before.distance, before.depth,
                             before.views[0], after.views[0]);
    };
    apis.push_back(api);
  }
  {
    Api<T> api;
    api.name = "normalize";
    api.slots = {{"values", kN, kM, Role::in_place}};
    api.uses_mask = true;
    api.enums = {
        {"normalization", attnpool::kNormalizationCount, set_normalization},
        {"empty_rows", 2, set_empty_rows}};
    api.setup = [](A& a, const Sizes&) {
      a.normalization = Normalization::softmax;
    };
    api.run = [](const A& a) {
      attnpool::normalize(a.normalization, a.views[0], a.mask, a.empty_rows,
                          a.execution);
    };
    api.verify = [](const A& before, const A& after) {
      const ConstMatrixView<T> values = before.views[0];
      return CompareNormalized<T>(before.normalization, false,
                                  before.empty_rows, before.mask, Dense(values),
                                  values.rows, values.cols, after.views[0], 0);
    };
    apis.push_back(api);
  }
  {
    Api<T> api;
    api.name = "weighted_sum";
    api.slots = {{"weights", kN, kM, Role::input},
                 {"values", kM, kDv, Role::input},
                 {"out", kN, kDv, Role::output}};
    api.setup = [](A&, const Sizes&) {};
    api.run = [](const A& a) {
      attnpool::weighted_sum(a.views[0], a.views[1], a.views[2], a.execution);
    };
    api.verify = [](const A& before, const A& after) {
      return VerifyWeightedSum<T>(before.views[0], before.views[1],
                                  after.views[2]);
    };
    apis.push_back(api);
  }
  const auto pool_setup = [](A& a, const Sizes&) {
    a.distance = Distance::sqeuclidean;
    a.kernel = {Kernel::gaussian, 1.5};
    a.normalization = Normalization::sum;
  };
  const std::vector<EnumArgument<T>> pool_enums = {
      {"spec.distance", attnpool::kDistanceCount, set_distance},
      {"kernel.kernel", attnpool::kKernelCount, set_kernel},
      {"normalization", attnpool::kNormalizationCount, set_normalization},
      {"empty_rows", 2, set_empty_rows}};
  // A pooling row: queries, keys, values and the n×dv output `out` (as its
  // errors name it), with the kernel, the mask and the spec's enums.
  const auto pool_row = [&](const char* name, const char* out) {
    Api<T> api;
    api.name = name;
    api.slots = {{"queries", kN, kD, Role::input},
                 {"keys", kM, kD, Role::input},
                 {"values", kM, kDv, Role::input},
                 {out, kN, kDv, Role::output}};
    api.uses_kernel = api.uses_mask = true;
    api.enums = pool_enums;
    api.setup = pool_setup;
    return api;
  };
  // The fused output (slot 3) against the staged pipeline.
  const auto verify_fused = [](const A& before, const A& after) {
    return VerifyFused<T>(before, after.views[3]);
  };
  {
    Api<T> api = pool_row("attention_pool_staged", "out");
    api.slots.push_back({"weights", kN, kM, Role::output});
    api.run = [](const A& a) {
      attnpool::attention_pool_staged(a.spec(), a.views[0], a.views[1],
                                      a.views[2], a.views[3], a.views[4],
                                      a.mask, a.execution);
    };
    api.verify = [](const A& before, const A& after) {
      return VerifyPipeline<T>(before.spec(), before.mask, before.views[0],
                               before.views[1], before.views[2], after.views[3],
                               after.views[4]);
    };
    apis.push_back(api);
  }
  {
    Api<T> api = pool_row("attention_pool_staged/workspace", "out");
    api.products = {{{kN, kM}, "queries"}};
    api.run = [](const A& a) {
      attnpool::attention_pool_staged(a.spec(), a.views[0], a.views[1],
                                      a.views[2], a.views[3], a.mask,
                                      a.execution);
    };
    // The same call with caller-supplied weights must give the same bits;
    // those weights and that output are then checked as above.
    api.verify = [](const A& before, const A& after) {
      const size_t n = before.views[0].rows, m = before.views[1].rows;
      const size_t dv = before.views[2].cols;
      std::vector<T> weights(std::max<size_t>(1, n * m)), out(n * dv + 1);
      const MatrixView<T> w(weights.data(), n, m), o(out.data(), n, dv);
      attnpool::attention_pool_staged(before.spec(), before.views[0],
                                      before.views[1], before.views[2], o, w,
                                      before.mask, before.execution);
      if (!SameBits<T>(o, after.views[3])) {
        return std::string("differs from the call with weights");
      }
      return VerifyPipeline<T>(before.spec(), before.mask, before.views[0],
                               before.views[1], before.views[2], o, w);
    };
    apis.push_back(api);
  }
  {
    Api<T> api = pool_row("attention_pool", "out");
    api.run = [](const A& a) {
      attnpool::attention_pool(a.spec(), a.views[0], a.views[1], a.views[2],
                               a.views[3], a.mask, a.execution);
    };
    api.verify = verify_fused;
    apis.push_back(api);
  }
  {
    // The shard API as one call's arguments see it: every key in one shard
    // whose partial state is the caller's `partial.accumulator` (max, sum
    // and best in scratch), merged with an empty later shard and finished in
    // place. Merging non-trivial shards is tests/test_fused.cc's.
    Api<T> api = pool_row("attention_pool_partial", "partial.accumulator");
    api.lengths_beyond_keys = true;
    api.run = [](const A& a) {
      const MatrixView<T> accumulator = a.views[3];
      // Hostile sizes (n = 2⁶²) must be rejected before anything is
      // written: the scratch is sized for every valid call of the tests.
      const size_t n = std::min<size_t>(accumulator.rows, 1 << 16);
      const size_t dv = std::min<size_t>(accumulator.cols, 1 << 12);
      std::vector<T> scratch(4 * n + 1);
      std::vector<size_t> best(2 * n + 1);
      const attnpool::PoolPartial<T> all{accumulator, scratch.data(),
                                         scratch.data() + n, best.data()};
      attnpool::attention_pool_partial(a.spec(), a.views[0], a.views[1],
                                       a.views[2], 0, all, a.mask, a.execution);
      // A later shard without keys, in the state pool.h documents for it:
      // max −inf, sum 0, accumulator 0.
      std::vector<T> empty_accumulator(n * dv + 1, T(0));
      std::fill(scratch.begin() + 2 * n, scratch.begin() + 3 * n,
                -std::numeric_limits<T>::infinity());
      const attnpool::PoolPartial<T> empty{{empty_accumulator.data(), n, dv},
                                           scratch.data() + 2 * n,
                                           scratch.data() + 3 * n,
                                           best.data() + n};
      attnpool::attention_pool_merge(a.spec(), all, empty);
      attnpool::attention_pool_finish(a.spec(), all, accumulator);
    };
    api.verify = verify_fused;
    apis.push_back(api);
  }
  return apis;
}

}  // namespace

template <typename T>
const std::vector<Api<T>>& Apis() {
  static const std::vector<Api<T>> apis = MakeApis<T>();
  return apis;
}

template const std::vector<Api<float>>& Apis<float>();
template const std::vector<Api<double>>& Apis<double>();

// ------------------------------------------------------------- workspace

template <typename T>
Workspace<T>::Workspace(const Api<T>& api, const Sizes& sizes,
                        const Layout& layout)
    : api_(api), sizes_(sizes), layout_(layout) {
  std::vector<std::pair<size_t, size_t>> shapes;
  for (const SlotSpec& slot : api.slots) {
    shapes.emplace_back(sizes[slot.rows], sizes[slot.cols]);
  }
  if (api.uses_mask) shapes.emplace_back(sizes[kN], sizes[kM]);  // bias
  const bool huge = layout.huge_stride != 0;
  size_t largest = 0;
  for (const auto& shape : shapes) {
    const size_t stride =
        huge ? layout.huge_stride : shape.second + layout.padding;
    largest = std::max(largest, (shape.first + 1) * (stride + 1));
  }
  // Guards: as large as any view plus one row, so that a view moved onto
  // another's storage (the overlap tests) stays inside the arena.
  const size_t guard = layout.guard != 0 ? layout.guard
                       : huge            ? 64
                                         : largest + 16;
  size_t next = guard;
  for (const auto& shape : shapes) {
    Region region;
    region.rows = shape.first;
    region.cols = shape.second;
    region.stride = huge ? layout.huge_stride : shape.second + layout.padding;
    region.begin = next + layout.offset;
    const size_t extent =
        region.rows == 0 ? 0 : (region.rows - 1) * region.stride + region.cols;
    next = region.begin + extent + guard;
    regions_.push_back(region);
  }
  arena_elements_ = next;
  arena_bytes_ = arena_elements_ * sizeof(T);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  if (huge) {
    void* memory = mmap(nullptr, arena_bytes_, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) throw std::bad_alloc();
    arena_ = static_cast<T*>(memory);
    mapped_ = true;
    for (const Region& region : regions_) {
      for (size_t r = 0; r < region.rows; ++r) {
        T* row = arena_ + region.begin + r * region.stride;
        std::fill(row, row + region.cols, nan);
      }
    }
  } else {
    arena_ = static_cast<T*>(
        ::operator new(arena_bytes_ + 64, std::align_val_t(64)));
    std::fill(arena_, arena_ + arena_elements_, nan);
  }
  for (size_t s = 0; s < api.slots.size(); ++s) {
    const Region& region = regions_[s];
    slots_.emplace_back(arena_ + region.begin, region.rows, region.cols,
                        region.stride);
  }
  const size_t n = sizes[kN], m = sizes[kM];
  visible_.assign(n * (m + 1) + 16, 1);
  valid_lengths_.assign(n + 1, m);
  args.views = slots_;
  api.setup(args, sizes);
}

template <typename T>
Workspace<T>::~Workspace() {
  if (mapped_) {
    munmap(arena_, arena_bytes_);
  } else {
    ::operator delete(arena_, std::align_val_t(64));
  }
}

template <typename T>
MatrixView<T> Workspace<T>::bias() {
  if (!api_.uses_mask) throw std::logic_error("no mask storage");
  const Region& region = regions_.back();
  return {arena_ + region.begin, region.rows, region.cols, region.stride};
}

template <typename T>
MatrixView<uint8_t> Workspace<T>::visible() {
  return {visible_.data(), sizes_[kN], sizes_[kM], sizes_[kM] + 1};
}

template <typename T>
size_t* Workspace<T>::valid_lengths() {
  return valid_lengths_.data();
}

template <typename T>
void Workspace<T>::FillRandom(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> exponent(-1, 1);
  const auto fill = [&](MatrixView<T> view, bool non_negative) {
    for (size_t r = 0; r < view.rows; ++r) {
      const double scale = std::pow(10.0, exponent(rng));
      for (size_t c = 0; c < view.cols; ++c) {
        const double x = normal(rng) * scale;
        view(r, c) = static_cast<T>(non_negative ? std::fabs(x) : x);
      }
    }
  };
  for (size_t s = 0; s < api_.slots.size(); ++s) {
    if (api_.slots[s].role != Role::output) {
      fill(slots_[s], api_.slots[s].role == Role::in_place);
    }
  }
  if (api_.uses_mask) {
    std::uniform_real_distribution<double> bias_value(-3, 3);
    const MatrixView<T> b = bias();
    for (size_t r = 0; r < b.rows; ++r) {
      for (size_t c = 0; c < b.cols; ++c) b(r, c) = T(bias_value(rng));
    }
    const MatrixView<uint8_t> v = visible();
    for (size_t r = 0; r < v.rows; ++r) {
      for (size_t c = 0; c < v.cols; ++c) v(r, c) = rng() % 4 != 0;
    }
    for (size_t i = 0; i < sizes_[kN]; ++i) {
      valid_lengths_[i] = rng() % (sizes_[kM] + 1);
    }
  }
}

template <typename T>
T* Workspace<T>::Rebase(const T* pointer, const Workspace& from) const {
  if (pointer >= from.arena_ && pointer < from.arena_ + from.arena_elements_) {
    return arena_ + (pointer - from.arena_);
  }
  return const_cast<T*>(pointer);
}

template <typename T>
std::unique_ptr<Workspace<T>> Workspace<T>::Clone() const {
  auto copy = std::make_unique<Workspace<T>>(api_, sizes_, layout_);
  if (mapped_) {
    for (const Region& region : regions_) {
      for (size_t r = 0; r < region.rows; ++r) {
        const size_t begin = region.begin + r * region.stride;
        std::copy(arena_ + begin, arena_ + begin + region.cols,
                  copy->arena_ + begin);
      }
    }
  } else {
    std::copy(arena_, arena_ + arena_elements_, copy->arena_);
  }
  copy->visible_ = visible_;
  copy->valid_lengths_ = valid_lengths_;
  copy->args = args;
  for (auto& view : copy->args.views)
    view.data = copy->Rebase(view.data, *this);
  auto& mask = copy->args.mask;
  mask.bias.data = copy->Rebase(mask.bias.data, *this);
  if (mask.visible.data >= visible_.data() &&
      mask.visible.data < visible_.data() + visible_.size()) {
    mask.visible.data =
        copy->visible_.data() + (mask.visible.data - visible_.data());
  }
  if (mask.valid_lengths >= valid_lengths_.data() &&
      mask.valid_lengths < valid_lengths_.data() + valid_lengths_.size()) {
    mask.valid_lengths = copy->valid_lengths_.data() +
                         (mask.valid_lengths - valid_lengths_.data());
  }
  return copy;
}

template <typename T>
std::vector<unsigned char> Workspace<T>::Snapshot() const {
  if (mapped_) throw std::logic_error("Snapshot of a huge layout");
  std::vector<unsigned char> bytes(arena_bytes_ + visible_.size() +
                                   valid_lengths_.size() * sizeof(size_t));
  unsigned char* next = bytes.data();
  std::memcpy(next, arena_, arena_bytes_);
  next += arena_bytes_;
  std::memcpy(next, visible_.data(), visible_.size());
  next += visible_.size();
  std::memcpy(next, valid_lengths_.data(),
              valid_lengths_.size() * sizeof(size_t));
  return bytes;
}

template <typename T>
bool Workspace<T>::Untouched(const std::vector<unsigned char>& snapshot) const {
  const std::vector<unsigned char> now = Snapshot();
  if (now.size() != snapshot.size()) return false;
  std::vector<char> written(arena_elements_, 0);
  for (size_t s = 0; s < api_.slots.size(); ++s) {
    if (api_.slots[s].role == Role::input) continue;
    const MatrixView<T>& view = args.views[s];
    if (view.data < arena_ || view.data >= arena_ + arena_elements_) continue;
    const size_t begin = static_cast<size_t>(view.data - arena_);
    for (size_t r = 0; r < view.rows; ++r) {
      for (size_t c = 0; c < view.cols; ++c) {
        written[begin + r * view.stride + c] = 1;
      }
    }
  }
  for (size_t e = 0; e < arena_elements_; ++e) {
    if (!written[e] && std::memcmp(&now[e * sizeof(T)],
                                   &snapshot[e * sizeof(T)], sizeof(T)) != 0) {
      return false;
    }
  }
  return std::memcmp(now.data() + arena_bytes_, snapshot.data() + arena_bytes_,
                     now.size() - arena_bytes_) == 0;
}

template class Workspace<float>;
template class Workspace<double>;

template <typename T>
bool SameBits(ConstMatrixView<T> a, ConstMatrixView<T> b) {
  if (a.rows != b.rows || a.cols != b.cols) return false;
  for (size_t r = 0; r < a.rows; ++r) {
    if (a.cols != 0 &&
        std::memcmp(a.row(r), b.row(r), a.cols * sizeof(T)) != 0) {
      return false;
    }
  }
  return true;
}

template bool SameBits<float>(ConstMatrixView<float>, ConstMatrixView<float>);
template bool SameBits<double>(ConstMatrixView<double>,
                               ConstMatrixView<double>);

template <typename T>
std::vector<unsigned char> OutputBytes(const Api<T>& api, const Args<T>& args) {
  std::vector<unsigned char> bytes;
  for (size_t s = 0; s < api.slots.size(); ++s) {
    if (api.slots[s].role == Role::input) continue;
    const MatrixView<T>& view = args.views[s];
    for (size_t r = 0; r < view.rows; ++r) {
      const auto* row = reinterpret_cast<const unsigned char*>(view.row(r));
      bytes.insert(bytes.end(), row, row + view.cols * sizeof(T));
    }
  }
  return bytes;
}

template std::vector<unsigned char> OutputBytes(const Api<float>&,
                                                const Args<float>&);
template std::vector<unsigned char> OutputBytes(const Api<double>&,
                                                const Args<double>&);

template struct Api<float>;
template struct Api<double>;

}  // namespace attnpool_test
