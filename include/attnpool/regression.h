// Nadaraya–Watson kernel regression with bandwidth selection (docs/design.md
// §1, "Layers"): a fitted regressor that predicts through the fused pooling
// kernel, normal-reference rules of thumb, and cross-validation that scores a
// whole grid of bandwidths in one streaming pass over the pairs.
//
//   ŷ(q) = Σⱼ K(‖q − xⱼ‖ / h) yⱼ / Σⱼ K(‖q − xⱼ‖ / h)
//
// with the kernels of distances of <attnpool/kernel.h> (needs_distance:
// gaussian and the compact kernels). A per-dimension bandwidth (h₁, …, h_d) is
// the same with coordinate k divided by h_k and h = 1.
#pragma once

#include <attnpool/execution.h>
#include <attnpool/kernel.h>
#include <attnpool/matrix.h>
#include <attnpool/normalize.h>
#include <attnpool/pool.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace attnpool {

// ------------------------------------------------------------------ fitting

// A Nadaraya–Watson regressor fitted on x (n×d) and y (n×dy), T = float or
// double.
//
// The constructor COPIES x and y (dense, n·(d + dy) elements): afterwards the
// caller's buffers may change or be freed, and the object is self-contained
// and safe to use from many threads at once (predict is const). With a
// per-dimension bandwidth the copy holds x(j, k) / h_k, rounded to T; with
// one h beyond 2^±40 (float; 2^±400 double), x(j, k)·2^-e and h·2^-e for the
// power of two that brings h into [1, 2) — exact, the same u = r/h — so that
// data of any magnitude (10^±30 float, 10^±300 double) fits as data near 1
// does, where squared distances would under- or overflow T.
//
// Requirements (attnpool::Error names the argument, nothing is kept):
//   x, y: well-formed views ("x", "y", their ".data" and ".stride"), n ≥ 1
//     ("x.rows"), y.rows = n ("y.rows"), every element finite ("x", "y");
//   kernel: a kernel of distances, needs_distance(kernel) ("kernel");
//   bandwidth: finite, > 0 and a normal number of T ("bandwidth"); a
//     per-dimension one has d entries ("bandwidth.size"), and every x(j, k) /
//     h_k (or, scaled as above, x(j, k)·2^-e) must be finite in T
//     ("bandwidth").
template <typename T>
class NadarayaWatson {
 public:
  // One bandwidth h for every dimension.
  NadarayaWatson(Kernel kernel, double bandwidth, ConstMatrixView<T> x,
                 ConstMatrixView<T> y);
  // One bandwidth per dimension (d entries).
  NadarayaWatson(Kernel kernel, const std::vector<double>& bandwidths,
                 ConstMatrixView<T> x, ConstMatrixView<T> y);

  // out(i, :) = ŷ(queries(i, :)); queries m×d, out m×dy. Runs the fused
  // attention_pool ({sqeuclidean, {kernel, h}, Normalization::sum}): the
  // Gaussian in the stable softmax form (a query far from every training
  // point gets the mean of its nearest points' y, while r/h to the nearest
  // stays within pool.h's range), and a query whose kernel
  // window holds no training point (a compact kernel) gets
  // the empty_rows() policy (NaN row by default). Bitwise the same result
  // for every thread count. Throws attnpool::Error naming the argument
  // ("queries", "queries.cols", "out", "out.rows", "out.cols", an overlap of
  // out with queries, "execution.threads") before writing anything.
  void predict(ConstMatrixView<T> queries, MatrixView<T> out,
               const Execution& execution = {}) const;
  // The same through the staged pipeline (attention_pool_staged), also
  // writing the m×n normalized weights (row i: the weight of each training
  // point for query i), for heatmaps. "weights", "weights.rows",
  // "weights.cols" and overlaps between weights, out and queries are errors.
  void predict(ConstMatrixView<T> queries, MatrixView<T> out,
               MatrixView<T> weights, const Execution& execution = {}) const;

  // The state of predict for this fit's points taken as keys
  // [key_offset, key_offset + size()) of a larger training set (pool.h,
  // PoolPartial, with the queries' rows): merged in order with the states
  // of the other parts and finished with pool_spec(), it is the prediction
  // over all of them (attnpool/mpi.h splits a training set so). Errors as
  // predict's, and attention_pool_partial's for `partial`.
  void predict_partial(ConstMatrixView<T> queries, size_t key_offset,
                       const PoolPartial<T>& partial,
                       const Execution& execution = {}) const;
  // The pooling predict runs: {sqeuclidean, {kernel, h}, sum, empty_rows}
  // (h = 1 with per-dimension bandwidths, which scale the coordinates;
  // h·2^-e where h is scaled, above).
  PoolSpec pool_spec() const;

  Kernel kernel() const { return kernel_; }
  // One entry (a scalar bandwidth) or d entries (per dimension).
  const std::vector<double>& bandwidth() const { return bandwidth_; }
  size_t size() const { return size_; }        // n
  size_t depth() const { return depth_; }      // d
  size_t outputs() const { return outputs_; }  // dy

  // What predict writes for a query with no weight (see above).
  EmptyRows empty_rows() const { return empty_rows_; }
  void set_empty_rows(EmptyRows policy) { empty_rows_ = policy; }

 private:
  // queries, or their coordinates divided by the per-dimension bandwidths
  // (kept in `scaled`).
  ConstMatrixView<T> ScaledQueries(ConstMatrixView<T> queries,
                                   std::vector<T>& scaled) const;

  Kernel kernel_;
  std::vector<double> bandwidth_;
  bool per_dimension_ = false;
  double scale_ = 1;  // the power of two of a scalar h beyond T's range
  size_t size_ = 0, depth_ = 0, outputs_ = 0;
  EmptyRows empty_rows_ = EmptyRows::nan;
  std::vector<T> x_;  // n×d dense; divided by h_k, or times scale_
  std::vector<T> y_;  // n×dy dense
};

extern template class NadarayaWatson<float>;
extern template class NadarayaWatson<double>;

// ------------------------------------------------------------ rules of thumb

// Normal-reference bandwidths, one per column of x (n×d, n ≥ 2), computed in
// double. With σ̂_k = min(sd_k, IQR_k / 1.349) — sd with the n − 1
// denominator, IQR between the 25% and 75% quantiles interpolated linearly
// between order statistics (numpy's default, R's type 7) — or σ̂_k = sd_k
// when IQR_k = 0:
//   silverman: h_k = (4 / (d + 2))^(1/(d+4)) · σ̂_k · n^(−1/(d+4))
//              (Silverman's normal-reference rule, multivariate form;
//              d = 1: 1.0592 · σ̂ · n^(−1/5), the familiar 1.06 σ̂ n^(−1/5))
//   scott:     h_k = 1.059 · σ̂_k · n^(−1/(d+4))
//              (d = 1: statsmodels' bw_scott; for d > 1 Scott's rate)
// For d = 1 the two agree to 0.02%; for d > 1 Silverman's factor is
// smaller. Throws attnpool::Error: "x" (a view error, fewer than 2 rows, a
// non-finite element, or a constant column, whose σ̂ is 0).
std::vector<double> silverman_bandwidth(ConstMatrixView<float> x);
std::vector<double> silverman_bandwidth(ConstMatrixView<double> x);
std::vector<double> scott_bandwidth(ConstMatrixView<float> x);
std::vector<double> scott_bandwidth(ConstMatrixView<double> x);

// ---------------------------------------------------------- cross-validation

// `count` bandwidths, ascending from h_min to h_max, whose λ = 1/h² are
// evenly spaced: h_b = 1 / √(λ_max − b·(λ_max − λ_min)/(count − 1)) with
// λ_max = 1/h_min², λ_min = 1/h_max² (count = 1: {h_min}). On such a grid the
// Gaussian cross-validation needs two exps per pair for every bandwidth
// together (see cross_validate). Such a grid is dense at small h and sparse
// at large h (h_max/h_min = 100 leaves nothing between h_max and
// ~h_min·√count): take h_min near the smallest plausible width and h_max within
// ~10× of it, or refine with a second grid around the first minimizer. Throws
// attnpool::Error: "h_min", "h_max" (not finite and > 0, or h_max < h_min),
// "count" (0).
std::vector<double> gaussian_bandwidth_grid(double h_min, double h_max,
                                            size_t count);

struct CrossValidationOptions {
  // 0: leave-one-out (each point predicted from all the others). k ≥ 2:
  // k-fold, point i in fold i mod k (deterministic; shuffle the rows first
  // for random folds), each fold predicted from the other k − 1.
  size_t folds = 0;
  // Per-dimension scales s_k (empty: all 1): the distance uses x_k / s_k, so
  // grid value h means the per-dimension bandwidth (h·s₁, …, h·s_d) — e.g.
  // the scales from a rule of thumb, searched along that ray.
  std::vector<double> scales;
  // Gaussian only: use the powers path when the grid is evenly spaced in
  // λ = 1/h² (false: always one exp per pair and bandwidth; for tests).
  bool allow_powers = true;
  // Skip the pairs that cannot matter, found by sorting the points along
  // their widest (scaled) coordinate, which bounds r² from below, so that a
  // query's kernel window is a run of points around it:
  //   Gaussian: pairs whose weight is below 2⁻³² / n (float; 2⁻⁶¹ / n for
  //     double) of the query's largest, i.e. some with r² − r²ₘᵢₙ >
  //     2·h²·ln(n·2³²). Their total weight is below 2⁻³² (2⁻⁶¹) of the
  //     held-out denominator Σⱼ wⱼ ≥ 1, so each held-out prediction moves
  //     by less than 2⁻³²·(max y − min y) (2⁻⁶¹ for double); the kept
  //     pairs are summed exactly as without skipping;
  //   the compact kernels: only pairs of weight exactly 0 (some with
  //     r ≥ support·h): the scores are bitwise those of skip_distant =
  //     false.
  // The saving grows as h shrinks against the spread of x: on the seed data
  // (n = 20000 on [0, 5], 32 bandwidths in [0.03, 0.6]) it forms ~5× fewer
  // weights (CrossValidationResult::weights_formed). false: every pair (for
  // tests, or to time the exhaustive pass).
  bool skip_distant = true;
};

struct CrossValidationResult {
  static constexpr size_t npos = static_cast<size_t>(-1);
  std::vector<double> bandwidths;  // the grid, in the caller's order
  // Per bandwidth: the mean over the predictable points of the held-out
  // squared error Σ_c (y(i, c) − ŷ₋ᵢ(c))²; NaN when no point is predictable.
  std::vector<double> scores;
  // Per bandwidth: the points whose held-out weights are all 0 (no other
  // training point in their kernel window; never for the Gaussian). They
  // are left out of the score and counted here.
  std::vector<size_t> unpredictable;
  // The minimizer: the index of the least score among the bandwidths with
  // no unpredictable point (the first on ties), and its bandwidth; npos and
  // NaN when every bandwidth leaves some point unpredictable.
  size_t best = npos;
  double best_bandwidth = 0;  // NaN when best is npos
  // Whether the Gaussian powers path ran.
  bool used_powers = false;
  // How many (query, training point, bandwidth) weights the pass formed,
  // counted in whole vectors (held-out and padding lanes included): about
  // n²·bandwidths with options.skip_distant = false; the ratio of the two
  // is what skipping saved.
  uint64_t weights_formed = 0;
};

// Scores every bandwidth of `bandwidths` (any order) by leave-one-out or
// k-fold cross-validation of the Nadaraya–Watson regressor of x (n×d) and y
// (n×dy), in one streaming pass over the (query, training point) pairs with
// the held-out pairs (the self-pair, or the query's fold) excluded, and the
// negligible ones skipped (options.skip_distant); never an n×n matrix (extra
// memory O(n·(d + dy + bandwidths)) plus a few KiB per thread). Per query,
// the partial sums of every bandwidth are accumulated in T, in vector lanes,
// over the training points in a fixed order (sorted along the widest
// coordinate, ties by index) and reduced in a fixed order, so the result is
// bitwise the same for every thread count.
//
// Gaussian: weights are computed relative to the query's nearest visible
// training point (its squared distance r²ₘᵢₙ, from an exact search
// outwards along the sorted points), exp(−(r² − r²ₘᵢₙ)·λ/2), which
// maximizes every bandwidth's logits at once: no weight exceeds 1, the
// nearest one is 1, and a point far from all others still gets the mean of
// its nearest neighbours' y, never 0/0. When the grid is
// evenly spaced in λ = 1/h² (gaussian_bandwidth_grid; any 2-point grid),
// λ_b = λ₀ + b·Δ and
//   exp(−t·λ_b/2) = exp(−t·λ₀/2) · exp(−t·Δ/2)^b,   t = r² − r²ₘᵢₙ ≥ 0,
// so two exps per pair serve every bandwidth (the "powers" path); the powers
// are formed as w ← w·q + ε with ε = 2⁻⁶⁴ (float) or 2⁻⁶⁰⁰ (double), which
// keeps every weight a normal number (no slow subnormal arithmetic) and
// moves each prediction by at most n·bandwidths·ε·max|y|, far below the
// rounding of T. Other grids take one exp per pair and bandwidth.
// Accuracy, with u the unit roundoff of T and ŷ* the exact prediction on the
// coordinates as scaled in T: each weight wⱼ lies in an interval [lowⱼ,
// highⱼ] around the exact w*ⱼ that follows from r² within (d + 3)·u
// relative (so t = r² − r²ₘᵢₙ within that of both), the Gaussian's exponent
// within 5·u relative plus exp's error (on the powers path one exp's error
// and one rounding per bandwidth of the grid, ε per step, and the exponent
// within 1e-9·λ_max·t/2 more: λ's spacing), a compact kernel's formula
// within kernel.h's accuracy at u within ((d + 3)/2 + 12)·u, and 0 for a
// pair skip_distant may drop;
// then |ŷ − ŷ*| ≤ δ = Σⱼ Δⱼ·|yⱼ − ŷ*| / Σⱼ lowⱼ + 2·(n + 8)·u·max|y|, Δⱼ
// the larger distance from w*ⱼ to its interval's ends, and each held-out
// squared error is within Σ_c (2·|y − ŷ*|·δ + δ²) of the exact one. The
// fuzz target holds every score to that (tests/fuzz/fuzz_regression.cc);
// the suite holds them to 2e-5 (float) and 1e-12 (double) relative to a
// double-precision evaluation and to brute-force refits; measured ≤ 5.3e-7
// and 1.5e-15.
//
// Throws attnpool::Error, before any work: "x", "y" (views, non-finite
// elements), "x.rows" (n < 2), "y.rows", "y.cols" (0), "kernel", "bandwidths"
// (empty, or an entry not finite and > 0, or whose λ = 1/h² is not a normal
// number of T once the grid is scaled into T's range — where any λ leaves
// it, coordinates and grid are multiplied by the power of two that brings
// the largest entry into [1, 2), the same u = r/h — or a coordinate that
// scaling overflows), "options.folds" (1, or more than n),
// "options.scales" (not d entries, or an entry not finite and > 0),
// "execution.threads"; with float, "options.folds" also above 2³² − 1.
CrossValidationResult cross_validate(Kernel kernel, ConstMatrixView<float> x,
                                     ConstMatrixView<float> y,
                                     const std::vector<double>& bandwidths,
                                     const CrossValidationOptions& options = {},
                                     const Execution& execution = {});
CrossValidationResult cross_validate(Kernel kernel, ConstMatrixView<double> x,
                                     ConstMatrixView<double> y,
                                     const std::vector<double>& bandwidths,
                                     const CrossValidationOptions& options = {},
                                     const Execution& execution = {});

}  // namespace attnpool
