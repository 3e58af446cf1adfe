// The kernel and normalization stages on every supported target against the
// double reference.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "src/reference.h"
#include "tests/accuracy.h"
#include "tests/each_target.h"
#include "tests/test_data.h"

namespace attnpool_test {
namespace {

using attnpool::Distance;
using attnpool::EmptyRows;
using attnpool::Kernel;
using attnpool::KernelSpec;
using attnpool::Mask;
using attnpool::Normalization;

// Whether `got` is NaN exactly when `want` is.
bool SameNaN(double got, double want) {
  return std::isnan(got) == std::isnan(want);
}

// ------------------------------------------------------------------ kernels

// Values of the kind `input` makes, spanning u = 0 … 3 and far beyond.
template <typename T>
void FillKernelInputs(TestMatrix<T>& values, Distance input, double h,
                      std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 3), score(-6, 6);
  for (size_t i = 0; i < values.rows(); ++i) {
    for (size_t j = 0; j < values.cols(); ++j) {
      const double x = (j % 7 == 6) ? 1e3 * u(rng) : u(rng) * h;  // some far
      switch (attnpool::distance_properties(input).output) {
        case attnpool::DistanceOutput::squared_distance:
          values(i, j) = T(x * x);
          break;
        case attnpool::DistanceOutput::distance:
          values(i, j) = T(x);
          break;
        case attnpool::DistanceOutput::score:
          values(i, j) = T(score(rng));
          break;
      }
    }
  }
  if (values.rows() && values.cols() > 2) {
    values(0, 1) = std::numeric_limits<T>::quiet_NaN();
    values(0, 2) = T(0);
  }
}

template <typename T>
void CheckKernel(const KernelSpec& spec, Distance input, std::mt19937_64& rng) {
  const size_t depth = 64;
  for (size_t cols : {0, 1, 7, 16, 17, 33}) {
    TestMatrix<T> values(3, cols, 2, 1);
    FillKernelInputs(values, input, spec.bandwidth, rng);
    const TestMatrix<T> before = values;
    attnpool::apply_kernel(spec, input, values.view(), depth);
    if (cols) RequireRanOnTarget();
    for (size_t i = 0; i < values.rows(); ++i) {
      for (size_t j = 0; j < cols; ++j) {
        const double x = before(i, j);
        double want = attnpool::reference::kernel(spec, input, x, depth);
        // Weights are stored as T: beyond its range they are ±inf.
        if (std::fabs(want) > std::numeric_limits<T>::max()) {
          want = std::copysign(std::numeric_limits<double>::infinity(), want);
        }
        const double got = values(i, j);
        INFO(attnpool::kernel_name(spec.kernel)
             << " input " << attnpool::distance_name(input) << " h "
             << spec.bandwidth << " value " << x << " got " << got << " want "
             << want);
        REQUIRE(SameNaN(got, want));
        if (std::isnan(want) || got == want) continue;  // also ±inf, 0
        const double bound = KernelErrorBound<T>(spec, input, x, depth, want);
        AccuracyLog::Get().Record(std::string("kernel ") +
                                      attnpool::kernel_name(spec.kernel) + " " +
                                      kTypeName<T>,
                                  got - want, bound);
        REQUIRE(std::fabs(got - want) <= bound);
      }
    }
  }
}

// The tables' predicates are false for a value outside the table (one
// cast from an int), never a read past it.
static_assert(!attnpool::is_kernel(Kernel(attnpool::kKernelCount)) &&
              !attnpool::is_exponential(Kernel(attnpool::kKernelCount)) &&
              !attnpool::needs_distance(Kernel(-1)) &&
              !attnpool::is_compact(Kernel(attnpool::kKernelCount)) &&
              !attnpool::is_similarity(Distance(attnpool::kDistanceCount)) &&
              !attnpool::normalizes_scores(Normalization(-1)));

template <typename T>
void KernelSweep() {
  std::mt19937_64 rng(kSeed + 10);
  INFO("seed " << kSeed + 10);
  for (int k = 0; k < attnpool::kKernelCount; ++k) {
    const auto kernel = static_cast<Kernel>(k);
    for (const attnpool::DistanceProperties& distance : attnpool::kDistances) {
      const Distance input = distance.distance;
      if (attnpool::needs_distance(kernel) && attnpool::is_similarity(input)) {
        TestMatrix<T> values(2, 2);
        REQUIRE_THROWS_AS(
            attnpool::apply_kernel({kernel}, input, values.view(), 4),
            attnpool::Error);
        continue;
      }
      for (double h : {0.7, 1e-30, 1e30}) {
        KernelSpec spec{kernel, h, {}};
        CheckKernel<T>(spec, input, rng);
        if (attnpool::kernel_properties(kernel).argument ==
            attnpool::KernelArgument::score) {
          spec.scale = -1.3;
          CheckKernel<T>(spec, input, rng);
        }
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(KernelsFloat, "kernel.sweep.float", "[kernel]") {
  KernelSweep<float>();
}

ATTNPOOL_TEST_EACH_TARGET(KernelsDouble, "kernel.sweep.double", "[kernel]") {
  KernelSweep<double>();
}

// ------------------------------------------------------------ normalization

struct MaskCase {
  bool valid_lengths, causal, visible, bias;
  std::ptrdiff_t offset;
  std::optional<size_t> window_left = {}, window_right = {};
  // Score adjustments (scores only) and a sink (softmax only).
  std::optional<double> softcap = {};
  double alibi_slope = 0;
  std::optional<double> sink = {};
  std::optional<size_t> chunk = {};
  bool alibi_symmetric = false;
};

template <typename T>
void CheckNormalize(Normalization normalization, const MaskCase& mask_case,
                    EmptyRows empty_rows, size_t rows, size_t cols,
                    std::mt19937_64& rng) {
  const bool scores = normalization == Normalization::softmax ||
                      normalization == Normalization::argmax;
  std::uniform_real_distribution<double> score(-10, 10), weight(0, 1),
      bias_value(-3, 3);
  TestMatrix<T> values(rows, cols, 3, 2), bias(rows, cols, 1);
  std::vector<size_t> lengths(rows);
  std::vector<uint8_t> visible(rows * cols);
  for (size_t i = 0; i < rows; ++i) {
    lengths[i] = rng() % (cols + 1);
    for (size_t j = 0; j < cols; ++j) {
      values(i, j) = T(scores ? score(rng) : (j % 5 == 3 ? 0.0 : weight(rng)));
      bias(i, j) = T(bias_value(rng));
      visible[i * cols + j] = rng() % 5 != 0;
    }
  }
  Mask<T> mask;
  if (mask_case.valid_lengths) mask.valid_lengths = lengths.data();
  mask.causal = mask_case.causal;
  mask.causal_offset = mask_case.offset;
  mask.window_left = mask_case.window_left;
  mask.window_right = mask_case.window_right;
  if (mask_case.visible) mask.visible = {visible.data(), rows, cols};
  if (mask_case.bias) mask.bias = bias.view();
  if (mask_case.softcap) mask.softcap = T(*mask_case.softcap);
  if (mask_case.alibi_slope != 0) mask.alibi_slope = T(mask_case.alibi_slope);
  if (mask_case.sink) mask.sink = T(*mask_case.sink);
  mask.chunk = mask_case.chunk;
  mask.alibi_symmetric = mask_case.alibi_symmetric;

  std::vector<double> want(rows * cols);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) want[i * cols + j] = values(i, j);
  }
  const TestMatrix<T> input = values;
  attnpool::reference::normalize(normalization, false, empty_rows, mask, want,
                                 rows, cols);
  attnpool::normalize(normalization, values.view(), mask, empty_rows);
  // (Rows of no column: nothing to write, and nothing runs.)
  if (cols == 0) {
    REQUIRE(attnpool::last_run_target().empty());
  } else {
    RequireRanOnTarget();
  }
  for (size_t i = 0; i < rows; ++i) {
    double row_sum = 0, best = -INFINITY;
    for (size_t j = 0; j < cols; ++j)
      best = std::max(best, double(input(i, j)));
    for (size_t j = 0; j < cols; ++j) {
      const double got = values(i, j), expected = want[i * cols + j];
      INFO(attnpool::normalization_name(normalization)
           << " rows " << rows << " cols " << cols << " (" << i << ", " << j
           << ") got " << got << " want " << expected << " valid_lengths "
           << mask_case.valid_lengths << " causal " << mask_case.causal << "/"
           << mask_case.offset << " window "
           << mask_case.window_left.value_or(-1) << "/"
           << mask_case.window_right.value_or(-1) << " visible "
           << mask_case.visible << " bias " << mask_case.bias << " softcap "
           << mask_case.softcap.value_or(0) << " alibi "
           << mask_case.alibi_slope << " sink "
           << mask_case.sink.value_or(-INFINITY) << " chunk "
           << mask_case.chunk.value_or(0) << " symmetric "
           << mask_case.alibi_symmetric);
      REQUIRE(SameNaN(got, expected));
      if (std::isnan(expected)) continue;
      // + |bias| ≤ 3, ALiBi's offsets and the cap's rounding.
      const double gap = std::fabs(best - input(i, j)) + 6 +
                         2 * std::fabs(mask_case.alibi_slope) *
                             double(cols + 1 + std::labs(mask_case.offset)) +
                         4 * mask_case.softcap.value_or(0) +
                         std::fabs(mask_case.sink.value_or(0));
      const double bound =
          NormalizeErrorBound<T>(normalization, expected, cols, gap);
      AccuracyLog::Get().Record(
          std::string("normalize ") +
              attnpool::normalization_name(normalization) + " " + kTypeName<T>,
          got - expected, bound);
      REQUIRE(std::fabs(got - expected) <= bound);
      row_sum += got;
    }
    // Normalized rows sum to 1 (rows emptied to zeros: 0).
    if (cols && !std::isnan(want[i * cols]) &&
        normalization != Normalization::none) {
      double want_sum = 0;
      for (size_t j = 0; j < cols; ++j) want_sum += want[i * cols + j];
      // (A sink takes its share.)
      REQUIRE((want_sum == 0 || mask_case.sink ||
               want_sum == Approx(1).epsilon(1e-12)));
      REQUIRE(std::fabs(row_sum - want_sum) <=
              (cols + 8) * 4 * kUnitRoundoff<T> + 4 * kExpError<T>);
    }
  }
  REQUIRE(values.SamePadding(input));
}

template <typename T>
void NormalizeSweep() {
  std::mt19937_64 rng(kSeed + 20);
  INFO("seed " << kSeed + 20);
  const MaskCase cases[] = {
      {false, false, false, false, 0},
      {true, false, false, false, 0},
      {false, true, false, false, 0},
      {false, true, false, false, -2},
      {true, true, false, false, 3},
      {false, false, true, false, 0},
      {false, false, false, true, 0},
      {true, true, true, true, 1},
      // Sliding windows: left only, both sides about an
      // offset, right only with the element-wise masks.
      {false, false, false, false, 0, 2},
      {true, true, false, false, 4, 3, 1},
      {false, false, true, true, -1, {}, 5},
      // Score adjustments, then a sink (with empty
      // rows: lengths 0), then all of them.
      {false, false, false, false, 0, {}, {}, 4.0},
      {false, true, false, false, 3, {}, {}, {}, 0.25},
      {true, false, false, false, 0, {}, {}, {}, 0, 1.5},
      {true, true, true, true, 2, 6, 1, 3.0, -0.5, 0.0},
      // Chunks: causal, about negative positions, and
      // symmetric ALiBi with lengths, then everything.
      {false, true, false, false, 5, {}, {}, {}, 0, {}, 4},
      {false, false, false, false, -3, {}, {}, {}, 0, {}, 3},
      {true, false, false, false, 2, {}, {}, {}, 0.25, {}, {}, true},
      {true, true, true, true, 2, 6, 1, 3.0, -0.5, 0.0, 4, true}};
  for (int n = 0; n < attnpool::kNormalizationCount; ++n) {
    const auto normalization = static_cast<Normalization>(n);
    const bool scores = normalization == Normalization::softmax ||
                        normalization == Normalization::argmax;
    for (const MaskCase& mask_case : cases) {
      // Rejected: see the errors test.
      if ((mask_case.bias || mask_case.softcap || mask_case.alibi_slope != 0) &&
          !scores) {
        continue;
      }
      if (mask_case.sink && normalization != Normalization::softmax) continue;
      for (EmptyRows empty : {EmptyRows::nan, EmptyRows::zero}) {
        for (size_t cols : {0, 1, 3, 8, 15, 16, 17, 33, 100}) {
          CheckNormalize<T>(normalization, mask_case, empty, 1 + cols % 7, cols,
                            rng);
        }
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(NormalizeFloat, "normalize.sweep.float",
                          "[normalize]") {
  NormalizeSweep<float>();
}

ATTNPOOL_TEST_EACH_TARGET(NormalizeDouble, "normalize.sweep.double",
                          "[normalize]") {
  NormalizeSweep<double>();
}

// Extreme scores: ±1e30, rows of −inf, +inf, NaN; both empty-row policies.
ATTNPOOL_TEST_EACH_TARGET(NormalizeExtremes, "normalize.extremes",
                          "[normalize]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t cols = 19;
  for (EmptyRows empty : {EmptyRows::nan, EmptyRows::zero}) {
    TestMatrix<float> values(5, cols);
    for (size_t j = 0; j < cols; ++j) {
      values(0, j) = j % 2 ? 1e30f : -1e30f;              // huge spread
      values(1, j) = -inf;                                // nothing visible
      values(2, j) = j == 4 || j == 11 ? inf : float(j);  // two +inf
      values(3, j) = j == 7 ? nan : 0.0f;
      values(4, j) = -1e30f;  // equal, huge negative
    }
    attnpool::normalize(Normalization::softmax, values.view(), {}, empty);
    for (size_t j = 0; j < cols; ++j) {
      INFO("column " << j);
      // Max subtracted: the 1e30 entries share the weight, the others are 0.
      REQUIRE(values(0, j) == Approx(j % 2 ? 1.0 / 9 : 0.0).margin(1e-7));
      if (empty == EmptyRows::nan) {
        REQUIRE(std::isnan(values(1, j)));
      } else {
        REQUIRE(values(1, j) == 0);
      }
      REQUIRE(values(2, j) == (j == 4 || j == 11 ? 0.5f : 0.0f));
      REQUIRE(std::isnan(
          values(3, j)));  // NaN poisons its row, whatever the policy
      REQUIRE(values(4, j) == Approx(1.0 / cols).epsilon(1e-6));
    }
  }
}

// A sink of +inf beside one +inf score shares the weight with it, as two
// +inf scores share it (3 and 19 columns: a vector's tail too); compact
// kernels at u = 1 exactly are 0 (boxcar: 1 for u < 1 only; kernel.h).
ATTNPOOL_TEST_EACH_TARGET(InfiniteSinkAndSupportEdge, "normalize.infinite_sink",
                          "[normalize][kernel]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t cols : {size_t{3}, size_t{19}}) {
    for (size_t at : {size_t{0}, cols - 2}) {
      TestMatrix<float> values(1, cols);
      for (size_t j = 0; j < cols; ++j) values(0, j) = j == at ? inf : float(j);
      Mask<float> mask;
      mask.sink = inf;
      attnpool::normalize(Normalization::softmax, values.view(), mask);
      RequireRanOnTarget();
      for (size_t j = 0; j < cols; ++j) {
        INFO(cols << " columns, +inf at " << at << ", column " << j << " on "
                  << CurrentTarget());
        REQUIRE(values(0, j) == (j == at ? 0.5f : 0.0f));
      }
    }
  }
  for (const Kernel kernel :
       {Kernel::boxcar, Kernel::triangular, Kernel::epanechnikov}) {
    for (const Distance input : {Distance::euclidean, Distance::sqeuclidean}) {
      INFO(attnpool::kernel_name(kernel) << " on " << CurrentTarget());
      TestMatrix<float> at_one(1, 19);
      for (size_t j = 0; j < 19; ++j) at_one(0, j) = 1.0f;
      attnpool::apply_kernel({kernel, 1.0}, input, at_one.view(), 1);
      for (size_t j = 0; j < 19; ++j) REQUIRE(at_one(0, j) == 0.0f);
    }
  }
}

// `sum` of finite weights whose float sum overflows: the weights are shared
// as in exact arithmetic, not divided by +inf into a row of zeros.
ATTNPOOL_TEST_EACH_TARGET(NormalizeSumOverflow, "normalize.sum_overflow",
                          "[normalize]") {
  TestMatrix<float> values(1, 21);
  for (size_t j = 0; j < 21; ++j) values(0, j) = j < 4 ? 3e38f : 1.0f;
  attnpool::normalize(Normalization::sum, values.view());
  RequireRanOnTarget();
  for (size_t j = 0; j < 21; ++j) {
    INFO("column " << j);
    if (j < 4) {
      REQUIRE(values(0, j) == Approx(0.25).epsilon(1e-6));
    } else {
      REQUIRE(values(0, j) == Approx(1.0 / 1.2e39).epsilon(1e-3));
    }
  }
}

// The d2l masked_softmax example: 2 batches × 2 queries × 4 keys, with valid
// lengths per batch [2, 3] and per query [[1, 3], [2, 4]], against the
// formula written out by hand.
ATTNPOOL_TEST_EACH_TARGET(D2lMaskedSoftmax, "normalize.d2l_masked_softmax",
                          "[normalize]") {
  const float scores[4][4] = {{0.48f, 0.62f, 0.19f, 0.91f},
                              {0.33f, 0.07f, 0.85f, 0.56f},
                              {0.72f, 0.15f, 0.44f, 0.29f},
                              {0.05f, 0.97f, 0.38f, 0.61f}};
  const size_t per_batch[4] = {2, 2, 3, 3};  // [2, 3]
  const size_t per_query[4] = {1, 3, 2, 4};  // [[1, 3], [2, 4]]
  for (const size_t* lengths : {per_batch, per_query}) {
    std::vector<float> values(&scores[0][0], &scores[0][0] + 16);
    Mask<float> mask;
    mask.valid_lengths = lengths;
    attnpool::normalize(Normalization::softmax, {values.data(), 4, 4}, mask);
    RequireRanOnTarget();
    for (size_t i = 0; i < 4; ++i) {
      double denominator = 0;
      for (size_t j = 0; j < lengths[i]; ++j)
        denominator += std::exp(double(scores[i][j]));
      for (size_t j = 0; j < 4; ++j) {
        const double by_hand =
            j < lengths[i] ? std::exp(double(scores[i][j])) / denominator : 0.0;
        INFO("query " << i << " key " << j);
        REQUIRE(values[i * 4 + j] == Approx(by_hand).epsilon(1e-6).margin(0));
      }
    }
  }
}

TEST_CASE("stage enums: names round-trip", "[kernel][normalize]") {
  for (int k = 0; k < attnpool::kKernelCount; ++k) {
    const auto kernel = static_cast<Kernel>(k);
    REQUIRE(attnpool::kernel_from_name(attnpool::kernel_name(kernel)) ==
            kernel);
  }
  for (int n = 0; n < attnpool::kNormalizationCount; ++n) {
    const auto normalization = static_cast<Normalization>(n);
    REQUIRE(attnpool::normalization_from_name(
                attnpool::normalization_name(normalization)) == normalization);
  }
  REQUIRE_THROWS_AS(attnpool::kernel_from_name("cauchy"), attnpool::Error);
}

}  // namespace
}  // namespace attnpool_test
