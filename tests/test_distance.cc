// The distance stage on every supported target against the double reference.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
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

Distance AllDistances(int i) { return static_cast<Distance>(i); }

// The pair's magnitudes (tests/accuracy.h) from the data, in double.
template <typename T>
PairMagnitudes ScaleOf(const TestMatrix<T>& queries, size_t i,
                       const TestMatrix<T>& keys, size_t j) {
  return MagnitudesOf(queries.view().row(i), keys.view().row(j),
                      queries.cols());
}

// Runs one shape through the forced target and checks every output against
// the reference, and that nothing outside the output view changed.
template <typename T>
void CheckShape(Distance distance, const TestMatrix<T>& queries,
                const TestMatrix<T>& keys, size_t out_padding, int threads) {
  // Outputs start as a canary, so an element left unwritten fails the check.
  constexpr T kCanary = T(-12345);
  TestMatrix<T> out(queries.rows(), keys.rows(), out_padding, 1);
  for (size_t i = 0; i < out.rows(); ++i) {
    for (size_t j = 0; j < out.cols(); ++j) out(i, j) = kCanary;
  }
  const auto before = out.storage();
  attnpool::pairwise_distances(distance, queries.view(), keys.view(),
                               out.view(), attnpool::Execution{threads});
  if (queries.rows() && keys.rows()) RequireRanOnTarget();
  const auto want = attnpool::reference::pairwise_distances(
      distance, queries.view(), keys.view());
  size_t failures = 0;
  for (size_t i = 0; i < queries.rows(); ++i) {
    for (size_t j = 0; j < keys.rows(); ++j) {
      const double got = out(i, j), expected = want[i * keys.rows() + j];
      const double bound = DistanceErrorBound<T>(
          distance, expected, queries.cols(), ScaleOf(queries, i, keys, j));
      AccuracyLog::Get().Record(std::string("distance ") +
                                    attnpool::distance_name(distance) + " " +
                                    kTypeName<T>,
                                got - expected, bound);
      if (!(std::fabs(got - expected) <= bound) && failures++ < 5) {
        FAIL_CHECK("pair (" << i << ", " << j << "): got " << got
                            << ", reference " << expected << ", bound "
                            << bound);
      }
      out(i, j) = kCanary;  // restore, to compare the rest below
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

// Sizes around every vector length and tile height of the targets (4–16
// lanes, panels of 2 vectors, tiles of 6 or 8 rows), plus primes.
const size_t kRowCounts[] = {0, 1, 5, 7, 8, 9, 17, 23, 97, 101};
const size_t kKeyCounts[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 65, 131};
// Depths on both sides of the Gram cutoff (16) and of a pass (256 floats,
// 128 doubles).
const size_t kDepths[] = {0, 1, 3, 15, 16, 17, 64, 127, 129, 257, 300};

template <typename T>
void SweepShapes() {
  std::mt19937_64 rng(kSeed);
  INFO("seed " << kSeed);
  for (int metric = 0; metric < attnpool::kDistanceCount; ++metric) {
    const Distance distance = AllDistances(metric);
    for (size_t depth : kDepths) {
      // Rows and keys paired up so the sweep stays small under emulation.
      for (size_t s = 0; s < std::size(kKeyCounts); ++s) {
        if (!InSweep(s, depth + metric)) continue;
        const size_t rows = kRowCounts[(s + depth) % std::size(kRowCounts)];
        const size_t key_count = kKeyCounts[s];
        const size_t offset = (s % 3 == 0) ? 0 : (s % 3 == 1) ? 1 : 3;
        INFO(attnpool::distance_name(distance)
             << " n=" << rows << " m=" << key_count << " d=" << depth
             << " offset=" << offset);
        TestMatrix<T> queries(rows, depth, 1 + s % 4, offset);
        TestMatrix<T> keys(key_count, depth, s % 3, 3 - offset % 3);
        queries.FillRandom(rng);
        keys.FillRandom(rng);
        CheckShape(distance, queries, keys, s % 2, 0);
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(SweepFloat, "distance.sweep.float", "[distance]") {
  SweepShapes<float>();
}

ATTNPOOL_TEST_EACH_TARGET(SweepDouble, "distance.sweep.double", "[distance]") {
  SweepShapes<double>();
}

// Cosine of vectors whose squares would under- or overflow T: rows of
// 2^−100 and 2^100 (float; 2^±900 double), subnormal and near the largest
// finite value, rows that mix magnitudes, zeros. The distance stage against
// the reference (which scales such vectors too); and pooling (the fused
// tile and small-depth paths, and the staged pipeline) over rows at 2^±k
// bitwise equal to it over the same rows at 1, which the scaling gives back
// exactly.
template <typename T>
void CosineMagnitudesCase() {
  std::mt19937_64 rng(kSeed + 2);
  INFO("seed " << kSeed + 2);
  std::uniform_real_distribution<double> unit(0.25, 2);
  const int far = sizeof(T) == 4 ? 100 : 900;
  const T subnormal = std::numeric_limits<T>::denorm_min() * 3,
          largest = std::numeric_limits<T>::max() / 2;
  for (size_t depth : {3, 17, 64}) {
    const size_t rows = 13, key_count = 19;
    TestMatrix<T> queries(rows, depth), keys(key_count, depth);
    TestMatrix<T> near_queries(rows, depth), near_keys(key_count, depth);
    // Row r's entries at 1 and at 2^exponent(r), both ways; row 0 of each
    // is zero, and the distance stage sees three more kinds of row.
    const auto fill = [&](TestMatrix<T>& at_one, TestMatrix<T>& scaled,
                          size_t r) {
      const int exponents[] = {0, -far, far, -far / 2, far / 2};
      const int exponent = exponents[r % 5];
      for (size_t p = 0; p < depth; ++p) {
        const T x = r == 0 ? T(0) : T((p % 3 == 1 ? -1 : 1) * unit(rng));
        at_one(r, p) = x;
        scaled(r, p) = std::ldexp(x, exponent);
      }
    };
    for (size_t i = 0; i < rows; ++i) fill(near_queries, queries, i);
    for (size_t j = 0; j < key_count; ++j) fill(near_keys, keys, j);
    {
      TestMatrix<T> distance_queries = queries, distance_keys = keys;
      for (size_t p = 0; p < depth; ++p) {
        distance_queries(rows - 1, p) = subnormal * T(1 + p % 2);
        distance_keys(key_count - 1, p) = largest * T(p % 2 ? -1 : 1);
        // Magnitudes 2^far apart within one row.
        distance_keys(key_count - 2, p) = std::ldexp(T(1 + p % 3), p ? far : 0);
      }
      INFO("cosine d=" << depth);
      CheckShape(Distance::cosine, distance_queries, distance_keys, 0, 0);
    }
    TestMatrix<T> values(key_count, 2);
    values.FillRandom(rng);
    const attnpool::PoolSpec spec{Distance::cosine,
                                  {attnpool::Kernel::exp, 1.0, 4.0},
                                  attnpool::Normalization::sum};
    for (bool staged : {false, true}) {
      INFO((staged ? "staged" : "fused") << " d=" << depth);
      TestMatrix<T> got(rows, 2), want(rows, 2);
      const auto pool = [&](const TestMatrix<T>& q, const TestMatrix<T>& k,
                            TestMatrix<T>& out) {
        if (staged) {
          attnpool::attention_pool_staged(spec, q.view(), k.view(),
                                          values.view(), out.view());
        } else {
          attnpool::attention_pool(spec, q.view(), k.view(), values.view(),
                                   out.view());
        }
      };
      pool(queries, keys, got);
      pool(near_queries, near_keys, want);
      REQUIRE(std::memcmp(got.data(), want.data(), rows * 2 * sizeof(T)) == 0);
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(CosineMagnitudesFloat,
                          "distance.cosine_magnitudes.float", "[distance]") {
  CosineMagnitudesCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(CosineMagnitudesDouble,
                          "distance.cosine_magnitudes.double", "[distance]") {
  CosineMagnitudesCase<double>();
}

// Points far from the origin and close to each other: the Gram form cancels
// almost completely, so only the repair keeps relative accuracy; q = k must
// give exactly 0.
template <typename T>
void CancellationCase() {
  std::mt19937_64 rng(kSeed + 1);
  INFO("seed " << kSeed + 1);
  std::normal_distribution<double> normal;
  for (size_t depth : {16, 40, 300}) {
    const size_t rows = 19, key_count = 37;
    TestMatrix<T> queries(rows, depth), keys(key_count, depth);
    for (size_t i = 0; i < rows; ++i) {
      for (size_t p = 0; p < depth; ++p) queries(i, p) = T(1000 + normal(rng));
    }
    for (size_t j = 0; j < key_count; ++j) {
      const size_t source = j % rows;
      for (size_t p = 0; p < depth; ++p) {
        // Every third key is its query exactly; the others are 1e-3 away.
        keys(j, p) = j % 3 == 0 ? queries(source, p)
                                : T(queries(source, p) + 1e-3 * normal(rng));
      }
    }
    for (Distance distance : {Distance::sqeuclidean, Distance::euclidean}) {
      INFO(attnpool::distance_name(distance) << " d=" << depth);
      CheckShape(distance, queries, keys, 0, 0);
      TestMatrix<T> out(rows, key_count);
      attnpool::pairwise_distances(distance, queries.view(), keys.view(),
                                   out.view());
      for (size_t j = 0; j < key_count; j += 3) REQUIRE(out(j % rows, j) == 0);
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(CancellationFloat, "distance.cancellation.float",
                          "[distance]") {
  CancellationCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(CancellationDouble, "distance.cancellation.double",
                          "[distance]") {
  CancellationCase<double>();
}

// Results must not depend on the thread count: bitwise equal for 1 and 2.
template <typename T>
void ThreadCountCase() {
  std::mt19937_64 rng(kSeed + 2);
  INFO("seed " << kSeed + 2);
  for (size_t depth : {3, 70}) {
    TestMatrix<T> queries(300, depth, 1), keys(150, depth, 2);
    queries.FillRandom(rng);
    keys.FillRandom(rng);
    for (int metric = 0; metric < attnpool::kDistanceCount; ++metric) {
      INFO(attnpool::distance_name(AllDistances(metric)) << " d=" << depth);
      TestMatrix<T> one(300, 150), two(300, 150);
      attnpool::pairwise_distances(AllDistances(metric), queries.view(),
                                   keys.view(), one.view(), {1});
      attnpool::pairwise_distances(AllDistances(metric), queries.view(),
                                   keys.view(), two.view(), {2});
      RequireRanOnTarget();
      REQUIRE(std::memcmp(one.data(), two.data(), 300 * 150 * sizeof(T)) == 0);
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(ThreadsFloat, "distance.threads.float",
                          "[distance]") {
  ThreadCountCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(ThreadsDouble, "distance.threads.double",
                          "[distance]") {
  ThreadCountCase<double>();
}

TEST_CASE("distance names round-trip", "[distance]") {
  for (int metric = 0; metric < attnpool::kDistanceCount; ++metric) {
    const Distance distance = AllDistances(metric);
    REQUIRE(attnpool::distance_from_name(attnpool::distance_name(distance)) ==
            distance);
  }
}

}  // namespace
}  // namespace attnpool_test
