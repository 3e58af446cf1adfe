// The weighted-sum stage (out = weights · values) on every supported target
// against the double reference, its determinism, and its argument checks.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "src/reference.h"
#include "tests/accuracy.h"
#include "tests/each_target.h"
#include "tests/require_rejected.h"
#include "tests/test_data.h"

namespace attnpool_test {
namespace {

using attnpool::MatrixView;

// Random weights as a normalization stage produces them and worse: every
// row scaled by 10^U(−3, 6), about one in five weights exactly 0, and every
// seventh row all zeros.
template <typename T>
void FillWeights(TestMatrix<T>& weights, std::mt19937_64& rng) {
  weights.FillRandom(rng);
  std::uniform_int_distribution<int> fifth(0, 4);
  for (size_t i = 0; i < weights.rows(); ++i) {
    for (size_t j = 0; j < weights.cols(); ++j) {
      if (i % 7 == 3 || fifth(rng) == 0) weights(i, j) = T(0);
    }
  }
}

// Runs one shape through the forced target and checks every output against
// the reference within the documented bound (include/attnpool/weighted_sum.h)
// |err| ≤ (m+1)·u·Σⱼ|wᵢⱼ·vⱼc| — a chain of m roundings of the running sum plus
// at most one per product — and that nothing outside the output view changed.
template <typename T>
void CheckShape(const TestMatrix<T>& weights, const TestMatrix<T>& values,
                size_t out_padding, int threads) {
  // Outputs start as a canary, so an element left unwritten fails the check.
  constexpr T kCanary = T(-12345);
  const size_t rows = weights.rows(), depth = weights.cols(),
               columns = values.cols();
  TestMatrix<T> out(rows, columns, out_padding, 1);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t c = 0; c < columns; ++c) out(i, c) = kCanary;
  }
  const auto before = out.storage();
  attnpool::weighted_sum(weights.view(), values.view(), out.view(),
                         attnpool::Execution{threads});
  if (rows && columns) RequireRanOnTarget();
  const auto want =
      attnpool::reference::weighted_sum(weights.view(), values.view());
  size_t failures = 0;
  double worst = 0;  // largest error / bound
  for (size_t i = 0; i < rows; ++i) {
    for (size_t c = 0; c < columns; ++c) {
      double scale = 0;  // Σⱼ|wᵢⱼ·vⱼc|
      for (size_t j = 0; j < depth; ++j) {
        scale += std::fabs(double(weights(i, j)) * double(values(j, c)));
      }
      const double bound = WeightedSumErrorBound<T>(depth, scale);
      const double got = out(i, c), expected = want[i * columns + c];
      const double error = std::fabs(got - expected);
      if (bound > 0) worst = std::max(worst, error / bound);
      AccuracyLog::Get().Record(std::string("weighted_sum ") + kTypeName<T>,
                                got - expected, bound);
      if (!(error <= bound) && failures++ < 5) {
        FAIL_CHECK("element (" << i << ", " << c << "): got " << got
                               << ", reference " << expected << ", bound "
                               << bound);
      }
      out(i, c) = kCanary;  // restore, to compare the rest below
    }
  }
  REQUIRE(failures == 0);
  // Only the view's elements were written: padding and guards keep NaN.
  for (size_t k = 0; k < before.size(); ++k) {
    const T now = out.storage()[k];
    if (std::memcmp(&now, &before[k], sizeof(T)) != 0) {
      FAIL("element " << k
                      << " of the output storage outside the view changed");
    }
  }
}

// Output columns around every vector length (1–16 lanes) and panel width
// (2 or 4 vectors: 4 … 64 columns), plus primes; output rows around the tile
// height (6) and the row block (192); depths around a pass, which is at
// least 64 and reads about 256 KiB of values (e.g. 1100 × 130 floats is 3
// passes).
const size_t kColumnCounts[] = {0,  1,  2,  3,  4,  5,  7,  8,  9,  15,
                                16, 17, 31, 33, 47, 63, 64, 65, 80, 130};
const size_t kRowCounts[] = {0, 1, 5, 6, 7, 11, 12, 13, 23, 37};
const size_t kDepths[] = {0, 1, 2, 7, 16, 17, 63, 65, 131};

template <typename T>
void SweepShapes() {
  std::mt19937_64 rng(kSeed + 10);
  INFO("seed " << kSeed + 10);
  size_t s = 0;
  for (size_t depth : kDepths) {
    // Rows paired with columns so that the sweep stays small under emulation.
    for (size_t columns : kColumnCounts) {
      const size_t rows = kRowCounts[(s + depth) % std::size(kRowCounts)];
      const size_t offset = (s % 3 == 0) ? 0 : (s % 3 == 1) ? 1 : 3;
      // Values padding 0 (dense: read in place when dv is whole vectors), 1
      // or 2 (strided: packed, or read in place for few rows).
      const size_t value_padding = s % 3;
      INFO("n=" << rows << " m=" << depth << " dv=" << columns
                << " offset=" << offset << " values padding " << value_padding);
      TestMatrix<T> weights(rows, depth, s % 4 == 0 ? 0 : 1 + s % 4, offset);
      TestMatrix<T> values(depth, columns, value_padding, 3 - offset % 3);
      FillWeights(weights, rng);
      values.FillRandom(rng);
      CheckShape(weights, values, s % 2, 0);
      ++s;
    }
  }
  // Several passes over m (dv = 64 and 130), and a row block (192) plus a
  // partial one.
  for (size_t columns : {17, 64, 130}) {
    for (size_t value_padding : {0, 3}) {
      const size_t rows = columns == 17 ? 197 : 13;
      const size_t depth = columns == 17 ? 40 : 1100;
      INFO("n=" << rows << " m=" << depth << " dv=" << columns
                << " values padding " << value_padding);
      TestMatrix<T> weights(rows, depth, 2, 1);
      TestMatrix<T> values(depth, columns, value_padding, 2);
      FillWeights(weights, rng);
      values.FillRandom(rng);
      CheckShape(weights, values, 1, 0);
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(SweepFloat, "weighted_sum.sweep.float",
                          "[weighted_sum]") {
  SweepShapes<float>();
}

ATTNPOOL_TEST_EACH_TARGET(SweepDouble, "weighted_sum.sweep.double",
                          "[weighted_sum]") {
  SweepShapes<double>();
}

// Bitwise equality of two outputs' views.
template <typename T>
bool SameBits(const TestMatrix<T>& a, const TestMatrix<T>& b) {
  for (size_t i = 0; i < a.rows(); ++i) {
    if (std::memcmp(a.view().row(i), b.view().row(i), a.cols() * sizeof(T)) !=
        0) {
      return false;
    }
  }
  return true;
}

// Results must not depend on the thread count: bitwise equal for 1 and 2
// threads, whether the rows (many rows), the column panels (few rows, wide
// values) or the packing of values (m > 512) are split among threads (calls
// under 2^18 multiply-adds run on one thread).
template <typename T>
void ThreadCountCase() {
  std::mt19937_64 rng(kSeed + 11);
  INFO("seed " << kSeed + 11);
  struct Shape {
    size_t rows, depth, columns, value_padding;
  };
  for (const Shape& s : {Shape{300, 150, 37, 0}, Shape{5, 600, 130, 0},
                         Shape{50, 1100, 37, 1}, Shape{400, 70, 64, 0}}) {
    INFO("n=" << s.rows << " m=" << s.depth << " dv=" << s.columns);
    TestMatrix<T> weights(s.rows, s.depth, 1),
        values(s.depth, s.columns, s.value_padding);
    FillWeights(weights, rng);
    values.FillRandom(rng);
    TestMatrix<T> one(s.rows, s.columns), two(s.rows, s.columns);
    attnpool::weighted_sum(weights.view(), values.view(), one.view(), {1});
    attnpool::weighted_sum(weights.view(), values.view(), two.view(), {2});
    RequireRanOnTarget();
    REQUIRE(SameBits(one, two));
  }
}

ATTNPOOL_TEST_EACH_TARGET(ThreadsFloat, "weighted_sum.threads.float",
                          "[weighted_sum]") {
  ThreadCountCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(ThreadsDouble, "weighted_sum.threads.double",
                          "[weighted_sum]") {
  ThreadCountCase<double>();
}

// Each output element is one multiply-add chain over j in order, whatever
// the blocking: a block of rows and columns computed on its own (other tile
// rows, other panels, another pass depth, packed or not) has the same bits
// as the same elements of the whole product.
template <typename T>
void BlockingCase() {
  std::mt19937_64 rng(kSeed + 12);
  INFO("seed " << kSeed + 12);
  const size_t rows = 41, depth = 700, columns = 150;
  TestMatrix<T> weights(rows, depth, 3), values(depth, columns);
  FillWeights(weights, rng);
  values.FillRandom(rng);
  TestMatrix<T> whole(rows, columns);
  attnpool::weighted_sum(weights.view(), values.view(), whole.view(), {1});
  struct Block {
    size_t row, rows, column, columns;
  };
  for (const Block& b : {Block{7, 13, 0, 150}, Block{1, 40, 21, 17},
                         Block{35, 6, 64, 64}, Block{0, 41, 149, 1}}) {
    INFO("rows [" << b.row << ", +" << b.rows << "), columns [" << b.column
                  << ", +" << b.columns << ")");
    TestMatrix<T> part(b.rows, b.columns);
    const MatrixView<const T> weight_rows(&weights(b.row, 0), b.rows, depth,
                                          depth + 3);
    const MatrixView<const T> value_columns(&values(0, b.column), depth,
                                            b.columns, columns);
    attnpool::weighted_sum(weight_rows, value_columns, part.view(), {2});
    RequireRanOnTarget();
    for (size_t i = 0; i < b.rows; ++i) {
      REQUIRE(std::memcmp(&part(i, 0), &whole(b.row + i, b.column),
                          b.columns * sizeof(T)) == 0);
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(BlockingFloat, "weighted_sum.blocking.float",
                          "[weighted_sum]") {
  BlockingCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(BlockingDouble, "weighted_sum.blocking.double",
                          "[weighted_sum]") {
  BlockingCase<double>();
}

TEST_CASE("weighted_sum rejects bad arguments", "[weighted_sum][errors]") {
  // weights 4×5 · values 5×3 = out 4×3.
  std::vector<float> weights(4 * 5, 1.0f), values(5 * 3, 2.0f);
  std::vector<float> out(4 * 3, -777.0f);
  const MatrixView<const float> w(weights.data(), 4, 5), v(values.data(), 5, 3);
  const MatrixView<float> o(out.data(), 4, 3);
  const auto run = [](MatrixView<const float> weights_view,
                      MatrixView<const float> values_view,
                      MatrixView<float> out_view,
                      attnpool::Execution execution) {
    return [=] {
      attnpool::weighted_sum(weights_view, values_view, out_view, execution);
    };
  };
  const size_t huge = std::numeric_limits<size_t>::max() / 2;

  RequireRejected("weights.data", out, run({nullptr, 4, 5}, v, o, {}));
  RequireRejected("values.data", out, run(w, {nullptr, 5, 3}, o, {}));
  RequireRejected("out.data", out, run(w, v, {nullptr, 4, 3}, {}));
  RequireRejected("weights.stride", out,
                  run({weights.data(), 4, 5, 4}, v, o, {}));
  RequireRejected("values.stride", out,
                  run(w, {values.data(), 5, 3, 2}, o, {}));
  RequireRejected("out.stride", out, run(w, v, {out.data(), 4, 3, 2}, {}));
  RequireRejected("values.rows", out, run(w, {values.data(), 4, 3}, o, {}));
  RequireRejected("out.rows", out, run(w, v, {out.data(), 3, 3}, {}));
  RequireRejected("out.cols", out, run(w, v, {out.data(), 4, 2, 3}, {}));
  RequireRejected("weights", out,
                  run({weights.data(), huge, 5, huge}, v, o, {}));
  RequireRejected("values", out, run(w, {values.data(), 5, huge, huge}, o, {}));
  RequireRejected("out", out, run(w, v, {out.data(), huge, 3, huge}, {}));
  RequireRejected("execution.threads", out, run(w, v, o, {-1}));
  // The output aliasing an input.
  RequireRejected("out", out,
                  run({out.data(), 4, 3, 3}, {values.data(), 3, 3}, o, {}));
  RequireRejected("out", out,
                  run(w, {out.data() + 3, 5, 1, 1}, {out.data(), 4, 1, 3}, {}));
}

TEST_CASE("weighted_sum of empty shapes", "[weighted_sum][errors]") {
  std::vector<float> data(12, 1.0f), out(12, -777.0f);
  // n = 0 or dv = 0: no output element; null data is fine there.
  attnpool::weighted_sum({nullptr, 0, 3}, {data.data(), 3, 4}, {nullptr, 0, 4});
  attnpool::weighted_sum({data.data(), 2, 3}, {nullptr, 3, 0},
                         {out.data(), 2, 0});
  REQUIRE(out == std::vector<float>(12, -777.0f));
  REQUIRE(attnpool::last_run_target().empty());
  // m = 0: empty sums, a zero output (strided: the padding stays).
  attnpool::weighted_sum({nullptr, 3, 0}, {nullptr, 0, 3},
                         {out.data(), 3, 3, 4});
  for (size_t k = 0; k < out.size(); ++k) {
    REQUIRE(out[k] == (k % 4 == 3 ? -777.0f : 0.0f));
  }
  REQUIRE(!attnpool::last_run_target().empty());
}

}  // namespace
}  // namespace attnpool_test
