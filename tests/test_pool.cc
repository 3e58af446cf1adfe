// The staged pipeline on every supported target: against the reference
// stages composed in double, and the far-query stability case.
#include <attnpool/attnpool.h>
#include <attnpool/pool.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "src/reference.h"
#include "tests/accuracy.h"
#include "tests/each_target.h"
#include "tests/pool_specs.h"
#include "tests/test_data.h"

namespace attnpool_test {
namespace {

using attnpool::Distance;
using attnpool::EmptyRows;
using attnpool::Kernel;
using attnpool::Mask;
using attnpool::Normalization;
using attnpool::PoolSpec;

// Compares attention_pool_staged with: this target's stage-1 distances (tested
// on their own in test_distance.cc), then the reference kernel,
// normalization and weighted sum in double.
template <typename T>
void CheckPipeline(const PoolSpec& spec, const Mask<T>& mask,
                   const TestMatrix<T>& queries, const TestMatrix<T>& keys,
                   const TestMatrix<T>& values) {
  const size_t n = queries.rows(), m = keys.rows(), dv = values.cols();
  TestMatrix<T> out(n, dv, 1, 1), weights(n, m, 2);
  attnpool::attention_pool_staged(spec, queries.view(), keys.view(),
                                  values.view(), out.view(), weights.view(),
                                  mask);
  if (m != 0) RequireRanOnTarget();  // m = 0 computes nothing

  TestMatrix<T> distances(n, m);
  attnpool::pairwise_distances(spec.distance, queries.view(), keys.view(),
                               distances.view());
  const bool logits = attnpool::is_exponential(spec.kernel.kernel);
  std::vector<double> want(n * m);
  double largest_logit = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < m; ++j) {
      want[i * m + j] = attnpool::reference::kernel(
          spec.kernel, spec.distance, distances(i, j), queries.cols(), logits);
      largest_logit = std::max(largest_logit, std::fabs(want[i * m + j]));
    }
  }
  // The absolute error bound of each weight of a non-exponential kernel
  // (kernel.h: its error_units, not relative), through `none` or `sum`
  // (w/S: (e + w·E)/S, E the row's sum of e); the other normalizations
  // take the kernel values as logits (the relative bound's logit term).
  std::vector<double> absolute(n * m, 0.0);
  if (!logits && (spec.normalization == Normalization::none ||
                  spec.normalization == Normalization::sum)) {
    for (size_t i = 0; i < n; ++i) {
      double sum = 0, error_sum = 0;
      for (size_t j = 0; j < m; ++j) {
        const double w = want[i * m + j];
        const double e =
            std::isfinite(w)
                ? KernelErrorBound<T>(spec.kernel, spec.distance,
                                      distances(i, j), queries.cols(), w)
                : 0;
        absolute[i * m + j] = e;
        if (!attnpool::reference::hidden(mask, i, j)) {
          sum += w;
          error_sum += e;
        }
      }
      if (spec.normalization == Normalization::none) continue;
      for (size_t j = 0; j < m; ++j) {
        absolute[i * m + j] =
            sum > 0
                ? (absolute[i * m + j] + want[i * m + j] / sum * error_sum) /
                      sum
                : 0;
      }
    }
  }
  attnpool::reference::normalize(spec.normalization, logits, spec.empty_rows,
                                 mask, want, n, m);
  // Kernel and normalization bounds of kernel.h and normalize.h, with the
  // logit gap bounded by twice the largest logit (+ |bias| ≤ 3).
  const double u = kUnitRoundoff<T>;
  const double relative =
      spec.normalization == Normalization::argmax
          ? 0
          : (m + 8) * u + 3 * kExpError<T> + u * (8 * largest_logit + 6);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < m; ++j) {
      const double got = weights(i, j), expected = want[i * m + j];
      INFO("weight (" << i << ", " << j << ") got " << got << " want "
                      << expected);
      REQUIRE(std::isnan(got) == std::isnan(expected));
      if (!std::isnan(expected)) {
        REQUIRE(std::fabs(got - expected) <= relative * expected +
                                                 absolute[i * m + j] +
                                                 std::numeric_limits<T>::min());
      }
    }
    for (size_t c = 0; c < dv; ++c) {
      double expected = 0, scale = 0;
      double weight_error = 0;
      for (size_t j = 0; j < m; ++j) {
        expected += want[i * m + j] * values(j, c);
        scale += std::fabs(want[i * m + j] * values(j, c));
        weight_error += absolute[i * m + j] * std::fabs(values(j, c));
      }
      if (m == 0) {
        expected = spec.empty_rows == EmptyRows::nan
                       ? std::numeric_limits<double>::quiet_NaN()
                       : 0;
      }
      const double got = out(i, c);
      INFO("out (" << i << ", " << c << ") got " << got << " want "
                   << expected);
      REQUIRE(std::isnan(got) == std::isnan(expected));
      if (!std::isnan(expected)) {
        REQUIRE(std::fabs(got - expected) <= (relative + (m + 2) * u) * scale +
                                                 weight_error +
                                                 std::numeric_limits<T>::min());
      }
    }
  }
}

template <typename T>
void PipelineSweep() {
  std::mt19937_64 rng(kSeed + 30);
  INFO("seed " << kSeed + 30);
  for (const PoolSpec& spec : kPoolSpecs) {
    for (size_t m : {0, 1, 7, 17, 40}) {
      const size_t n = 1 + m % 9, depth = 1 + m % 5 * 4, dv = 1 + m % 3 * 8;
      INFO(attnpool::distance_name(spec.distance)
           << " " << attnpool::kernel_name(spec.kernel.kernel) << " "
           << attnpool::normalization_name(spec.normalization) << " n=" << n
           << " m=" << m << " d=" << depth << " dv=" << dv);
      TestMatrix<T> queries(n, depth, 1), keys(m, depth, 2, 1),
          values(m, dv, 1, 3);
      queries.FillRandom(rng, 0);
      keys.FillRandom(rng, 0);
      values.FillRandom(rng, 2);
      CheckPipeline<T>(spec, {}, queries, keys, values);
      // Masks: valid lengths and causal; the bias where it is allowed.
      std::vector<size_t> lengths(n);
      for (size_t& length : lengths) length = rng() % (m + 1);
      TestMatrix<T> bias(n, m);
      std::uniform_real_distribution<double> bias_value(-3, 3);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < m; ++j) bias(i, j) = T(bias_value(rng));
      }
      Mask<T> mask;
      mask.valid_lengths = lengths.data();
      mask.causal = true;
      mask.causal_offset = 2;
      if (TakesBias(spec)) {
        mask.bias = bias.view();
      }
      CheckPipeline<T>(spec, mask, queries, keys, values);
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(PipelineFloat, "pool.staged.float", "[pool]") {
  PipelineSweep<float>();
}

ATTNPOOL_TEST_EACH_TARGET(PipelineDouble, "pool.staged.double", "[pool]") {
  PipelineSweep<double>();
}

// Nadaraya–Watson with a query 10⁴ bandwidths from every key: every Gaussian
// weight underflows, yet the stable form returns the average of the nearest
// keys' values (two keys tie for nearest here), not NaN.
template <typename T>
void FarQueryCase() {
  const size_t m = 50;
  const double h = 0.3;
  TestMatrix<T> keys(m, 1), values(m, 1), queries(2, 1), out(2, 1);
  for (size_t j = 0; j < m; ++j) {
    keys(j, 0) =
        T(0.1 * static_cast<double>(j % 49));  // keys 0 and 49 tie at x = 0
    values(j, 0) = T(std::sin(0.1 * static_cast<double>(j)));
  }
  values(0, 0) = T(1);
  values(49, 0) = T(3);
  queries(0, 0) = T(-1e4 * h);  // far left: nearest are keys 0 and 49 (x = 0)
  queries(1, 0) = T(2.45);      // an ordinary query, for contrast
  const PoolSpec spec{
      Distance::sqeuclidean, {Kernel::gaussian, h}, Normalization::sum};
  attnpool::attention_pool_staged(spec, queries.view(), keys.view(),
                                  values.view(), out.view());
  RequireRanOnTarget();
  REQUIRE(out(0, 0) == Approx(2.0).epsilon(1e-6));
  REQUIRE(std::isfinite(static_cast<double>(out(1, 0))));
}

ATTNPOOL_TEST_EACH_TARGET(FarQueryFloat, "pool.far_query.float", "[pool]") {
  FarQueryCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(FarQueryDouble, "pool.far_query.double", "[pool]") {
  FarQueryCase<double>();
}

// Average pooling: constant kernel + sum is the mean of the values.
TEST_CASE("pool: constant + sum is average pooling", "[pool]") {
  std::vector<float> queries = {0, 1}, keys = {5, 6, 7}, values = {1, 2, 6};
  std::vector<float> out(2);
  attnpool::attention_pool_staged(
      {Distance::euclidean, {Kernel::constant}, Normalization::sum},
      {queries.data(), 2, 1}, {keys.data(), 3, 1}, {values.data(), 3, 1},
      {out.data(), 2, 1});
  REQUIRE(out[0] == Approx(3.0f));
  REQUIRE(out[1] == Approx(3.0f));
}

}  // namespace
}  // namespace attnpool_test
