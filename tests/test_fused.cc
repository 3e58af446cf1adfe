// The fused kernel on every supported target against the staged pipeline.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
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

// fused(i, c) against staged(i, c): both are Σⱼ wᵢⱼ vⱼc with weights that
// differ by the rounding of the online rescaling (a few u per key block) and
// of the exps; the bound is relative to Σⱼ |wᵢⱼ vⱼc| of the staged weights.
// `compute` (default: attention_pool) writes the fused result to its view.
template <typename T>
void CheckFused(const PoolSpec& spec, const Mask<T>& mask,
                const TestMatrix<T>& queries, const TestMatrix<T>& keys,
                const TestMatrix<T>& values,
                std::function<void(attnpool::MatrixView<T>)> compute = {}) {
  const size_t n = queries.rows(), m = keys.rows(), dv = values.cols();
  TestMatrix<T> fused(n, dv, 1, 2), staged(n, dv), weights(n, m);
  if (!compute) {
    compute = [&](attnpool::MatrixView<T> out) {
      attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                               out, mask);
    };
  }
  compute(fused.view());
  if (m != 0) RequireRanOnTarget();
  attnpool::attention_pool_staged(spec, queries.view(), keys.view(),
                                  values.view(), staged.view(), weights.view(),
                                  mask);
  double largest_logit = 0;
  {
    TestMatrix<T> scores(n, m);
    attnpool::pairwise_distances(spec.distance, queries.view(), keys.view(),
                                 scores.view());
    const bool logits = attnpool::is_exponential(spec.kernel.kernel);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < m; ++j) {
        const double s = scores(i, j);
        const double logit =
            logits ? (spec.kernel.kernel == Kernel::exp
                          ? s * (spec.kernel.scale
                                     ? *spec.kernel.scale
                                     : 1 / std::sqrt(double(queries.cols())))
                          : -s / (2 * spec.kernel.bandwidth *
                                  spec.kernel.bandwidth))
                   : s;
        largest_logit = std::max(largest_logit, std::fabs(logit));
      }
    }
  }
  // ALiBi's offsets, the cap and the sink bound the adjusted logits.
  largest_logit += std::fabs(double(mask.alibi_slope.value_or(T(0)))) *
                   double(m + n + std::labs(mask.causal_offset));
  if (mask.softcap)
    largest_logit = std::max(largest_logit, double(*mask.softcap));
  if (mask.sink) largest_logit += std::fabs(double(*mask.sink));
  const double u = kUnitRoundoff<T>;
  const double blocks = 1 + m / 128.0;
  const double relative = (m + 16 + 8 * blocks) * u + 6 * kExpError<T> +
                          u * (16 * largest_logit + 12);
  const bool zero_weights_count = ZeroWeightsCount(spec);
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < dv; ++c) {
      double scale = 0;  // over the finite terms of the contributing keys
      for (size_t j = 0; j < m; ++j) {
        if (attnpool::reference::hidden(mask, i, j) ||
            (!zero_weights_count && weights(i, j) == 0)) {
          continue;
        }
        const double term = double(weights(i, j)) * double(values(j, c));
        if (std::isfinite(term)) scale += std::fabs(term);
      }
      const double got = fused(i, c), want = staged(i, c);
      INFO("out (" << i << ", " << c << ") fused " << got << " staged " << want
                   << " scale " << scale);
      REQUIRE(std::isnan(got) == std::isnan(want));
      if (std::isnan(want)) continue;
      if (spec.normalization == Normalization::argmax) {
        REQUIRE(got == want);  // the same value row
      } else {
        const double bound =
            relative * scale + 4 * std::numeric_limits<T>::min();
        AccuracyLog::Get().Record(
            std::string("fused vs staged ") + kTypeName<T>, got - want, bound);
        REQUIRE(std::fabs(got - want) <= bound);
      }
    }
  }
  REQUIRE(fused.SamePadding(TestMatrix<T>(n, dv, 1, 2)));
}

template <typename T>
void FusedSweep() {
  std::mt19937_64 rng(kSeed + 40);
  INFO("seed " << kSeed + 40);
  struct Shape {
    size_t n, m, d, dv;
  };
  // Across query blocks (96 rows) and key blocks (512 floats, 256 doubles:
  // m ≥ 600) of the generic and zen4 tuning profiles (attention.tuning runs
  // each profile), small and large d, dv that are and are not whole
  // vectors.
  const Shape shapes[] = {{1, 1, 1, 1},
                          {5, 0, 3, 2},
                          {7, 300, 3, 1},
                          {100, 130, 16, 7},
                          {97, 260, 64, 16},
                          {13, 600, 20, 33},
                          // the small-depth path: d ≤ 8, dv ≤ 4
                          {150, 700, 2, 4},
                          {9, 333, 8, 3},
                          // decode (≤ 4 queries; dot reads keys in place)
                          {1, 2100, 64, 64},
                          {4, 700, 20, 33},
                          {3, 300, 9, 1}};
  size_t spec_index = 0;
  for (const PoolSpec& spec : kPoolSpecs) {
    ++spec_index;
    size_t shape_index = 0;
    for (const Shape& s : shapes) {
      if (!InSweep(shape_index++, spec_index)) continue;
      INFO(attnpool::distance_name(spec.distance)
           << " " << attnpool::kernel_name(spec.kernel.kernel) << " "
           << attnpool::normalization_name(spec.normalization) << " n=" << s.n
           << " m=" << s.m << " d=" << s.d << " dv=" << s.dv);
      TestMatrix<T> queries(s.n, s.d, 1), keys(s.m, s.d, 2, 1),
          values(s.m, s.dv, 1, 3);
      queries.FillRandom(rng, 0);
      keys.FillRandom(rng, 0);
      values.FillRandom(rng, 2);
      CheckFused<T>(spec, {}, queries, keys, values);
      // Valid lengths with causal (prefix masks that skip key blocks), then
      // the element-wise masks.
      std::vector<size_t> lengths(s.n);
      for (size_t& length : lengths) length = rng() % (s.m + 1);
      Mask<T> mask;
      mask.valid_lengths = lengths.data();
      mask.causal = true;
      mask.causal_offset = static_cast<std::ptrdiff_t>(s.m / 3);
      CheckFused<T>(spec, mask, queries, keys, values);
      // Sliding windows: a band about the diagonal (key blocks before and
      // after it skipped, the keys before every window cut off), then a
      // left side only over the element-wise masks below.
      Mask<T> window;
      window.causal_offset = static_cast<std::ptrdiff_t>(s.m / 2) -
                             static_cast<std::ptrdiff_t>(s.n / 2);
      window.window_left = rng() % (s.m / 4 + 2);
      window.window_right = rng() % 3;
      CheckFused<T>(spec, window, queries, keys, values);
      // Chunked attention (Llama 4's, causal): chunks both smaller and
      // larger than a key block, the positions starting mid-chunk.
      for (size_t chunk : {size_t{5}, size_t{70}}) {
        Mask<T> chunked;
        chunked.causal = true;
        chunked.chunk = chunk;
        chunked.causal_offset = static_cast<std::ptrdiff_t>(s.m / 3);
        CheckFused<T>(spec, chunked, queries, keys, values);
      }
      TestMatrix<T> bias(s.n, s.m);
      std::vector<uint8_t> visible(s.n * s.m);
      std::uniform_real_distribution<double> bias_value(-3, 3);
      for (size_t i = 0; i < s.n; ++i) {
        for (size_t j = 0; j < s.m; ++j) {
          bias(i, j) = T(bias_value(rng));
          visible[i * s.m + j] = rng() % 4 != 0;
        }
      }
      Mask<T> elementwise;
      elementwise.visible = {visible.data(), s.n, s.m};
      if (TakesBias(spec)) elementwise.bias = bias.view();
      CheckFused<T>(spec, elementwise, queries, keys, values);
      elementwise.window_left = s.m / 3;
      elementwise.causal_offset = static_cast<std::ptrdiff_t>(s.m / 2);
      CheckFused<T>(spec, elementwise, queries, keys, values);
      // Score adjustments in registers (with the window band), then a sink
      // over valid lengths (rows with no key get the sink's 0).
      if (TakesBias(spec)) {
        Mask<T> adjusted = window;
        adjusted.softcap = T(2.5);
        adjusted.alibi_slope = T(-0.0625);
        CheckFused<T>(spec, adjusted, queries, keys, values);
        adjusted.softcap.reset();
        adjusted.window_left.reset();
        adjusted.alibi_slope = T(0.03125);
        CheckFused<T>(spec, adjusted, queries, keys, values);
        adjusted.alibi_symmetric = true;  // an encoder's: both sides
        CheckFused<T>(spec, adjusted, queries, keys, values);
      }
      if (TakesSink(spec)) {
        Mask<T> sink;
        sink.valid_lengths = lengths.data();
        sink.sink = T(0.75);
        CheckFused<T>(spec, sink, queries, keys, values);
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(FusedFloat, "fused.vs_staged.float", "[fused]") {
  FusedSweep<float>();
}

ATTNPOOL_TEST_EACH_TARGET(FusedDouble, "fused.vs_staged.double", "[fused]") {
  FusedSweep<double>();
}

// A query's result does not depend on the queries it is computed with:
// rows [8, 30) alone (their mask moved with them) give the bits they get
// in the whole call — under a window's left side too, which cuts off
// different keys before the two calls' queries (each row's key blocks
// start at its own first key).
template <typename T>
void RowsGrouping() {
  std::mt19937_64 rng(kSeed + 70);
  INFO("seed " << kSeed + 70);
  // m and the causal offset put the whole call's last key past 768 (two key
  // blocks of floats) and the part's before it.
  const size_t n = 100, m = 900, d = 16, dv = 5, begin = 8, count = 22;
  TestMatrix<T> queries(n, d), keys(m, d), values(m, dv);
  queries.FillRandom(rng, 0);
  keys.FillRandom(rng, 0);
  values.FillRandom(rng, 1);
  std::vector<size_t> lengths(n);
  for (size_t& length : lengths) length = rng() % (m + 1);
  std::vector<Mask<T>> masks(5);
  masks[1].causal = true;
  masks[1].causal_offset = 700;
  masks[2].causal_offset = 300;
  masks[2].window_left = 150;
  masks[2].window_right = 20;
  masks[3].valid_lengths = lengths.data();
  // A window over more than one key block (of either type) per row.
  masks[4].causal = true;
  masks[4].causal_offset = 800;
  masks[4].window_left = 600;
  masks.emplace_back();  // chunks of 256 keys, positions mid-chunk
  masks[5].causal = true;
  masks[5].causal_offset = 100;
  masks[5].chunk = 256;
  const PoolSpec specs[] = {
      {Distance::dot, {Kernel::exp}, Normalization::softmax},
      {Distance::sqeuclidean, {Kernel::gaussian, 2.0}, Normalization::sum}};
  for (const PoolSpec& spec : specs) {
    for (size_t k = 0; k < masks.size(); ++k) {
      INFO("mask " << k << " " << attnpool::kernel_name(spec.kernel.kernel));
      const Mask<T>& mask = masks[k];
      TestMatrix<T> whole(n, dv), part(count, dv);
      attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                               whole.view(), mask);
      Mask<T> moved = mask;
      if (mask.valid_lengths) moved.valid_lengths = mask.valid_lengths + begin;
      moved.causal_offset += static_cast<std::ptrdiff_t>(begin);
      const attnpool::ConstMatrixView<T> q = queries.view();
      attnpool::attention_pool(spec, {q.row(begin), count, d}, keys.view(),
                               values.view(), part.view(), moved);
      for (size_t i = 0; i < count; ++i) {
        REQUIRE(std::memcmp(part.view().row(i), whole.view().row(begin + i),
                            dv * sizeof(T)) == 0);
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(RowsGroupingFloat, "fused.rows_grouping.float",
                          "[fused]") {
  RowsGrouping<float>();
}

ATTNPOOL_TEST_EACH_TARGET(RowsGroupingDouble, "fused.rows_grouping.double",
                          "[fused]") {
  RowsGrouping<double>();
}

// Bitwise identical for 1, 2 and 3 threads.
// Each fused path (arch/fused.h), chosen by the shape and spec, runs on
// every target and agrees with the staged pipeline.
template <typename T>
void PathCases() {
  std::mt19937_64 rng(kSeed + 61);
  INFO("seed " << kSeed + 61);
  struct Case {
    const char* path;
    size_t n, d, dv;
    PoolSpec spec;
    bool sorted_keys;
  };
  const Case cases[] = {
      {"tile",
       20,
       16,
       8,
       {Distance::dot, {Kernel::exp}, Normalization::softmax},
       false},
      {"tile",
       20,
       2,
       2,
       {Distance::dot, {Kernel::exp}, Normalization::argmax},
       false},
      {"decode",
       2,
       16,
       8,
       {Distance::dot, {Kernel::exp}, Normalization::softmax},
       false},
      {"small_depth",
       20,
       3,
       2,
       {Distance::euclidean,
        {Kernel::triangular, 2.0},
        Normalization::sum,
        EmptyRows::zero},
       false},
      {"gaussian_one_pass",
       20,
       1,
       1,
       {Distance::sqeuclidean, {Kernel::gaussian, 0.5}, Normalization::sum},
       false},
      {"sorted_window",
       20,
       1,
       2,
       {Distance::manhattan,
        {Kernel::epanechnikov, 0.3},
        Normalization::sum,
        EmptyRows::zero},
       true},
  };
  const size_t m = 300;
  for (const Case& c : cases) {
    INFO(c.path << " n=" << c.n << " d=" << c.d << " dv=" << c.dv);
    TestMatrix<T> queries(c.n, c.d), keys(m, c.d), values(m, c.dv);
    queries.FillRandom(rng, 0);
    keys.FillRandom(rng, 0);
    values.FillRandom(rng, 1);
    if (c.sorted_keys) {
      std::vector<T> column(m);
      for (size_t j = 0; j < m; ++j) column[j] = keys(j, 0);
      std::sort(column.begin(), column.end());
      for (size_t j = 0; j < m; ++j) keys(j, 0) = column[j];
    }
    CheckFused<T>(c.spec, {}, queries, keys, values);
    REQUIRE(attnpool::last_fused_path() == c.path);
    // No key visited (every key hidden, or none): no path.
    const std::vector<size_t> none(c.n, 0);
    Mask<T> hidden;
    hidden.valid_lengths = none.data();
    TestMatrix<T> out(c.n, c.dv);
    attnpool::attention_pool(c.spec, queries.view(), keys.view(), values.view(),
                             out.view(), hidden);
    REQUIRE(attnpool::last_fused_path().empty());
    attnpool::attention_pool(c.spec, queries.view(), keys.view(), values.view(),
                             out.view());
    REQUIRE(attnpool::last_fused_path() == c.path);
    attnpool::attention_pool(
        c.spec, queries.view(),
        attnpool::ConstMatrixView<T>(keys.data(), 0, c.d),
        attnpool::ConstMatrixView<T>(values.data(), 0, c.dv), out.view());
    REQUIRE(attnpool::last_fused_path().empty());
  }
}

// A quiet NaN whose low payload bits are set.
template <typename T>
T PayloadNaN() {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits bits;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::memcpy(&bits, &nan, sizeof bits);
  bits |= 0x1ff;
  T result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

// gaussian_one_pass over many chunks of panels (its logits are formed a
// chunk at a time): visible limits inside a chunk, at its edges and past
// the keys, every depth and value width it takes; a row with a NaN or an
// infinite coordinate, and keys with one, take the two-pass route (the
// one-pass loop tracks no NaN) with the same result as the staged pipeline.
template <typename T>
void GaussianOnePassChunks() {
  std::mt19937_64 rng(kSeed + 47);
  INFO("seed " << kSeed + 47);
  const size_t m = 1500;  // 47 panels of up to 32 keys: several chunks
  const PoolSpec spec{
      Distance::sqeuclidean, {Kernel::gaussian, 0.7}, Normalization::sum};
  for (size_t d : {1u, 2u, 5u}) {
    for (size_t dv : {1u, 3u, 4u}) {
      INFO("d=" << d << " dv=" << dv);
      const size_t n = 9;
      TestMatrix<T> queries(n, d), keys(m, d), values(m, dv);
      queries.FillRandom(rng, 0);
      keys.FillRandom(rng, 0);
      values.FillRandom(rng, 1);
      const std::vector<size_t> lengths = {m,    1,    511,   512, 513,
                                           1024, 1025, m - 1, 0};
      Mask<T> mask;
      mask.valid_lengths = lengths.data();
      CheckFused<T>(spec, mask, queries, keys, values);
      REQUIRE(attnpool::last_fused_path() == "gaussian_one_pass");
      queries(2, 0) = std::numeric_limits<T>::quiet_NaN();
      queries(5, d - 1) = std::numeric_limits<T>::infinity();
      CheckFused<T>(spec, mask, queries, keys, values);
      keys(700, 0) = -std::numeric_limits<T>::infinity();
      CheckFused<T>(spec, mask, queries, keys, values);
      // One lane's logit NaN, with payload bits that an exponent built from
      // the NaN's low bits would carry.
      TestMatrix<T> finite_keys = keys, before(n, dv), after(n, dv);
      finite_keys(700, 0) = 0;
      attnpool::attention_pool(spec, queries.view(), finite_keys.view(),
                               values.view(), before.view(), mask);
      keys(700, 0) = PayloadNaN<T>();
      CheckFused<T>(spec, mask, queries, keys, values);
      REQUIRE(attnpool::last_fused_path() == "gaussian_one_pass");
      // Rows that do not see key 700 keep their bits: which loop a row
      // takes depends on no key hidden from it.
      attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                               after.view(), mask);
      for (size_t i = 0; i < n; ++i) {
        if (lengths[i] > 700) continue;
        INFO("row " << i);
        REQUIRE(std::memcmp(&before(i, 0), &after(i, 0), dv * sizeof(T)) == 0);
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(OnePassChunksFloat, "fused.one_pass_chunks.float",
                          "[fused]") {
  GaussianOnePassChunks<float>();
}

ATTNPOOL_TEST_EACH_TARGET(OnePassChunksDouble, "fused.one_pass_chunks.double",
                          "[fused]") {
  GaussianOnePassChunks<double>();
}

ATTNPOOL_TEST_EACH_TARGET(PathsFloat, "fused.paths.float", "[fused]") {
  PathCases<float>();
}

ATTNPOOL_TEST_EACH_TARGET(PathsDouble, "fused.paths.double", "[fused]") {
  PathCases<double>();
}

ATTNPOOL_TEST_EACH_TARGET(FusedThreads, "fused.threads", "[fused]") {
  std::mt19937_64 rng(kSeed + 41);
  INFO("seed " << kSeed + 41);
  TestMatrix<float> queries(300, 24), keys(400, 24), values(400, 40);
  queries.FillRandom(rng, 0);
  keys.FillRandom(rng, 0);
  values.FillRandom(rng, 1);
  for (const PoolSpec& spec : kPoolSpecs) {
    TestMatrix<float> one(300, 40), other(300, 40);
    attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                             one.view(), {}, {1});
    for (int threads : {2, 3}) {
      attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                               other.view(), {}, {threads});
      RequireRanOnTarget();
      REQUIRE(std::memcmp(one.data(), other.data(), 300 * 40 * sizeof(float)) ==
              0);
    }
  }
}

// Few queries over many keys: the keys are split into chunks whose partial
// states are merged. Against the staged pipeline, and bitwise the same for
// any thread count.
template <typename T>
void SplitKeysCase() {
  std::mt19937_64 rng(kSeed + 42);
  INFO("seed " << kSeed + 42);
  TestMatrix<T> queries(3, 8), keys(8200, 8), values(8200, 5);
  queries.FillRandom(rng, 0);
  keys.FillRandom(rng, 0);
  values.FillRandom(rng, 1);
  for (const PoolSpec& spec : kPoolSpecs) {
    INFO(attnpool::distance_name(spec.distance)
         << " " << attnpool::kernel_name(spec.kernel.kernel) << " "
         << attnpool::normalization_name(spec.normalization));
    CheckFused<T>(spec, {}, queries, keys, values);
    std::vector<size_t> lengths = {0, 5000, 8200};
    Mask<T> mask;
    mask.valid_lengths = lengths.data();
    CheckFused<T>(spec, mask, queries, keys, values);
    TestMatrix<T> one(3, 5), other(3, 5);
    attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                             one.view(), mask, {1});
    for (int threads : {2, 3}) {
      attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                               other.view(), mask, {threads});
      REQUIRE(std::memcmp(one.data(), other.data(), 3 * 5 * sizeof(T)) == 0);
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(SplitFloat, "fused.split_keys.float", "[fused]") {
  SplitKeysCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(SplitDouble, "fused.split_keys.double", "[fused]") {
  SplitKeysCase<double>();
}

// attention_pool_with_normalizer: the same output, and per query the
// log-sum-exp (softmax family), Σw (none, sum of plain weights) or best
// score (argmax) of what the query sees, against double sums over this
// target's distances (the stages' own test covers those).
template <typename T>
void NormalizerCase() {
  std::mt19937_64 rng(kSeed + 44);
  INFO("seed " << kSeed + 44);
  const size_t n = 37, m = 300, d = 12, dv = 3;
  TestMatrix<T> queries(n, d), keys(m, d), values(m, dv), bias(n, m);
  queries.FillRandom(rng, 0);
  keys.FillRandom(rng, 0);
  values.FillRandom(rng, 1);
  std::uniform_real_distribution<double> bias_value(-2, 2);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < m; ++j) bias(i, j) = T(bias_value(rng));
  std::vector<size_t> lengths(n);
  for (size_t& length : lengths) length = rng() % (m + 1);
  TestMatrix<T> distances(n, m), out_for_errors(n, dv);
  const double u = kUnitRoundoff<T>;
  for (const PoolSpec& spec : kPoolSpecs) {
    INFO(attnpool::distance_name(spec.distance)
         << " " << attnpool::kernel_name(spec.kernel.kernel) << " "
         << attnpool::normalization_name(spec.normalization));
    Mask<T> mask;
    mask.valid_lengths = lengths.data();
    if (TakesBias(spec)) mask.bias = bias.view();
    const double sink = 1.25;  // in the log-sum-exp
    if (TakesSink(spec)) mask.sink = T(sink);
    TestMatrix<T> plain(n, dv), out(n, dv);
    std::vector<T> normalizer(n + 1, T(-7));
    attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                             plain.view(), mask);
    attnpool::attention_pool_with_normalizer(spec, queries.view(), keys.view(),
                                             values.view(), out.view(),
                                             normalizer.data(), mask);
    RequireRanOnTarget();
    REQUIRE(std::memcmp(plain.data(), out.data(),
                        plain.storage().size() * sizeof(T)) == 0);
    REQUIRE(normalizer[n] == T(-7));
    attnpool::pairwise_distances(spec.distance, queries.view(), keys.view(),
                                 distances.view());
    const bool logits = attnpool::is_exponential(spec.kernel.kernel);
    const bool argmax = spec.normalization == Normalization::argmax;
    const bool softmax = spec.normalization == Normalization::softmax ||
                         (logits && spec.normalization == Normalization::sum);
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> scores;
      double largest = -HUGE_VAL, magnitude = 0;
      for (size_t j = 0; j < lengths[i]; ++j) {
        double a = attnpool::reference::kernel(spec.kernel, spec.distance,
                                               distances(i, j), d, logits);
        if (mask.bias.data) a += bias(i, j);
        scores.push_back(a);
        largest = std::max(largest, a);
        magnitude = std::max(magnitude, std::fabs(a));
      }
      double want = 0;
      if (argmax) {
        want = largest;
      } else if (softmax) {
        largest = std::max(largest, sink);
        double sum = std::exp(sink - largest);
        for (double a : scores) sum += std::exp(a - largest);
        want = largest + std::log(sum);
      } else {
        for (double a : scores) want += logits ? std::exp(a) : a;
      }
      const double got = normalizer[i];
      INFO("row " << i << " got " << got << " want " << want);
      if (std::isinf(want)) {
        REQUIRE(got == want);
        continue;
      }
      const double relative =
          (m + 16) * u + 6 * kExpError<T> + 16 * u * (magnitude + 1);
      const double bound = argmax    ? 8 * u * (magnitude + 1)
                           : softmax ? relative
                                     : relative * std::fabs(want) + 1e-300;
      REQUIRE(std::fabs(got - want) <= bound);
    }
  }
  // The normalizer is required, and an output: it may not overlap an input.
  REQUIRE_THROWS_AS(attnpool::attention_pool_with_normalizer(
                        kPoolSpecs[0], queries.view(), keys.view(),
                        values.view(), out_for_errors.view(), nullptr),
                    attnpool::Error);
  std::vector<T> canary(n * dv, T(3));
  REQUIRE_THROWS_AS(
      attnpool::attention_pool_with_normalizer(
          kPoolSpecs[0], queries.view(), keys.view(), values.view(),
          {canary.data(), n, dv}, const_cast<T*>(keys.view().data)),
      attnpool::Error);
  REQUIRE(canary == std::vector<T>(n * dv, T(3)));
}

ATTNPOOL_TEST_EACH_TARGET(NormalizerFloat, "fused.normalizer.float",
                          "[fused]") {
  NormalizerCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(NormalizerDouble, "fused.normalizer.double",
                          "[fused]") {
  NormalizerCase<double>();
}

// Nadaraya–Watson queries far from every key (all Gaussian weights below
// the float range unless taken relative to the largest): the fused kernel's
// one-pass route hands such rows to the two-pass one; the result is the
// staged pipeline's (the nearest keys' values), never 0/0.
template <typename T>
void FarQueriesCase() {
  std::mt19937_64 rng(kSeed + 45);
  for (size_t depth : {size_t{1}, size_t{2}, size_t{5}}) {
    TestMatrix<T> queries(40, depth), keys(500, depth), values(500, 2);
    queries.FillRandom(rng, 0);
    keys.FillRandom(rng, 0);
    values.FillRandom(rng, 1);
    for (size_t i = 0; i < 40; i += 2) {
      for (size_t p = 0; p < depth; ++p) queries(i, p) += T(30 + i);
    }
    // Rows 1, 5, …: a few bandwidths from every key (largest weight between
    // 2^-100 and 2^-20), with tiny values: products p·v must stay normal.
    for (size_t i = 1; i < 40; i += 4) {
      for (size_t p = 0; p < depth; ++p) queries(i, p) += T(2.5);
    }
    if (depth == 2) {
      for (size_t j = 0; j < 500; ++j) {
        for (size_t c = 0; c < 2; ++c) values(j, c) *= T(1e-20);
      }
    }
    const PoolSpec spec{
        Distance::sqeuclidean, {Kernel::gaussian, 0.25}, Normalization::sum};
    INFO("d " << depth);
    CheckFused<T>(spec, {}, queries, keys, values);
    TestMatrix<T> out(40, 2);
    attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                             out.view());
    for (size_t i = 0; i < 40; ++i) {
      REQUIRE(std::isfinite(out(i, 0)));
      REQUIRE(std::isfinite(out(i, 1)));
    }
  }
}

// Compact kernels skip what they make all-zero: key blocks (any d) and, for
// sorted 1-D keys, every panel outside a query's window. Skipping changes
// no bit: the same keys with one far key appended out of order (which turns
// the window off) give the same outputs. A zero weight contributes nothing:
// a non-finite value of a key no query reaches changes no bit either.
template <typename T>
void CompactSkipCase() {
  std::mt19937_64 rng(kSeed + 47);
  const size_t n = 60, m = 3000;
  std::uniform_real_distribution<double> unit(0, 10);
  // Every compact kernel, the distances, bandwidths and normalizations in
  // turn.
  std::vector<PoolSpec> specs;
  const Distance distances[] = {Distance::sqeuclidean, Distance::euclidean,
                                Distance::manhattan};
  const double bandwidths[] = {0.3, 0.2, 0.5};
  for (const attnpool::KernelProperties& kernel : attnpool::kKernels) {
    if (!attnpool::is_compact(kernel.kernel)) continue;
    const size_t k = specs.size();
    specs.push_back({distances[k % 3],
                     {kernel.kernel, bandwidths[k % 3]},
                     k % 2 ? Normalization::none : Normalization::sum,
                     EmptyRows::zero});
  }
  for (const PoolSpec& spec : specs) {
    INFO(attnpool::kernel_name(spec.kernel.kernel));
    // 1-D, sorted keys.
    TestMatrix<T> queries(n, 1), keys(m, 1), values(m, 2);
    std::vector<double> sorted(m);
    for (double& k : sorted) k = unit(rng);
    std::sort(sorted.begin(), sorted.end());
    for (size_t j = 0; j < m; ++j) keys(j, 0) = T(sorted[j]);
    for (size_t i = 0; i < n; ++i) queries(i, 0) = T(unit(rng));
    values.FillRandom(rng, 1);
    CheckFused<T>(spec, {}, queries, keys, values);
    TestMatrix<T> windowed(n, 2), everything(n, 2);
    attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                             windowed.view());
    RequireRanOnTarget();
    REQUIRE(attnpool::last_fused_path() == "sorted_window");
    TestMatrix<T> keys_plus(m + 1, 1), values_plus(m + 1, 2);
    for (size_t j = 0; j < m; ++j) {
      keys_plus(j, 0) = keys(j, 0);
      values_plus(j, 0) = values(j, 0);
      values_plus(j, 1) = values(j, 1);
    }
    keys_plus(m, 0) = T(-1000);  // far from every query, out of order
    values_plus(m, 0) = values_plus(m, 1) = T(1);
    attnpool::attention_pool(spec, queries.view(), keys_plus.view(),
                             values_plus.view(), everything.view());
    REQUIRE(attnpool::last_fused_path() == "small_depth");
    REQUIRE(std::memcmp(windowed.data(), everything.data(),
                        windowed.storage().size() * sizeof(T)) == 0);
    // A NaN value of a key outside every query's window changes nothing
    // (the last key: the values range over [0, 10), the width is ≤ 0.5).
    REQUIRE(sorted[m - 1] > 9.5);
    TestMatrix<T> poisoned = values;
    poisoned(m - 1, 1) = std::numeric_limits<T>::quiet_NaN();
    poisoned(m - 1, 0) = std::numeric_limits<T>::infinity();
    for (size_t i = 0; i < n; ++i)
      queries(i, 0) = std::min(queries(i, 0), T(9));
    attnpool::attention_pool(spec, queries.view(), keys.view(), values.view(),
                             windowed.view());
    attnpool::attention_pool(spec, queries.view(), keys.view(), poisoned.view(),
                             everything.view());
    REQUIRE(std::memcmp(windowed.data(), everything.data(),
                        windowed.storage().size() * sizeof(T)) == 0);
    CheckFused<T>(spec, {}, queries, keys, poisoned);
    // d = 16 in clusters: whole key blocks have no weight for a query block.
    TestMatrix<T> wide_queries(n, 16), wide_keys(m, 16), wide_values(m, 5);
    wide_queries.FillRandom(rng, 0);
    wide_keys.FillRandom(rng, 0);
    wide_values.FillRandom(rng, 1);
    for (size_t j = 0; j < m; ++j) wide_keys(j, 0) += T(j % 300 < 150 ? 0 : 50);
    CheckFused<T>(spec, {}, wide_queries, wide_keys, wide_values);
    wide_values(m - 2, 3) = std::numeric_limits<T>::infinity();
    CheckFused<T>(spec, {}, wide_queries, wide_keys, wide_values);
  }
}

ATTNPOOL_TEST_EACH_TARGET(CompactSkipFloat, "fused.compact_skip.float",
                          "[fused]") {
  CompactSkipCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(CompactSkipDouble, "fused.compact_skip.double",
                          "[fused]") {
  CompactSkipCase<double>();
}

// Extremes of valid arguments: a causal offset at the end of its range
// (no limit, no overflow), and a bandwidth so small that 1/(2h²) overflows:
// exact matches keep weight 1, every other key 0.
ATTNPOOL_TEST_EACH_TARGET(FusedExtremes, "fused.extremes.float", "[fused]") {
  std::mt19937_64 rng(kSeed + 46);
  TestMatrix<float> queries(20, 1), keys(300, 1), values(300, 2);
  queries.FillRandom(rng, 0);
  keys.FillRandom(rng, 0);
  values.FillRandom(rng, 1);
  for (size_t i = 0; i < 20; ++i) keys(7 * i, 0) = queries(i, 0);
  const PoolSpec wide{
      Distance::sqeuclidean, {Kernel::gaussian, 0.5}, Normalization::sum};
  Mask<float> mask;
  mask.causal = true;
  mask.causal_offset = std::numeric_limits<std::ptrdiff_t>::max();
  TestMatrix<float> limited(20, 2), unlimited(20, 2);
  attnpool::attention_pool(wide, queries.view(), keys.view(), values.view(),
                           limited.view(), mask);
  attnpool::attention_pool(wide, queries.view(), keys.view(), values.view(),
                           unlimited.view());
  REQUIRE(std::memcmp(limited.data(), unlimited.data(),
                      limited.storage().size() * sizeof(float)) == 0);
  mask.causal_offset = std::numeric_limits<std::ptrdiff_t>::min();
  attnpool::attention_pool(wide, queries.view(), keys.view(), values.view(),
                           limited.view(), mask);
  REQUIRE(std::isnan(limited(0, 0)));  // no key visible: the NaN row
  // A +inf score in the first key block takes all the weight; later blocks
  // of finite scores must not disturb it (the two-pass softmax shortcut of
  // the large-d path: d > 8; 3 queries: the decode path, and 100: tiles).
  for (size_t rows : {size_t{3}, size_t{100}}) {
    TestMatrix<float> q(rows, 12), k(1500, 12), v(1500, 3);
    q.FillRandom(rng, 0);
    k.FillRandom(rng, 0);
    v.FillRandom(rng, 1);
    for (size_t i = 0; i < rows; ++i) q(i, 0) = 1.0f;
    k(5, 0) = std::numeric_limits<float>::infinity();
    const PoolSpec sdpa{Distance::dot, {Kernel::exp}, Normalization::softmax};
    CheckFused<float>(sdpa, {}, q, k, v);
    TestMatrix<float> o(rows, 3);
    attnpool::attention_pool(sdpa, q.view(), k.view(), v.view(), o.view());
    for (size_t i = 0; i < rows; ++i) {
      for (size_t c = 0; c < 3; ++c) REQUIRE(o(i, c) == v(5, c));
    }
  }
  const PoolSpec narrow{
      Distance::sqeuclidean, {Kernel::gaussian, 1e-30}, Normalization::sum};
  TestMatrix<float> exact(20, 2);
  attnpool::attention_pool(narrow, queries.view(), keys.view(), values.view(),
                           exact.view());
  RequireRanOnTarget();
  for (size_t i = 0; i < 20; ++i) {
    // Only the planted copy (and any exact duplicate) carries weight.
    float sum = 0, weighted = 0;
    for (size_t j = 0; j < 300; ++j) {
      if (keys(j, 0) == queries(i, 0)) sum += 1, weighted += values(j, 0);
    }
    INFO("row " << i);
    REQUIRE(exact(i, 0) == Approx(weighted / sum).epsilon(1e-6));
  }
}

ATTNPOOL_TEST_EACH_TARGET(FarQueriesFloat, "fused.far_queries.float",
                          "[fused]") {
  FarQueriesCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(FarQueriesDouble, "fused.far_queries.double",
                          "[fused]") {
  FarQueriesCase<double>();
}

// Keys in three shards (not multiples of any panel width): partial states
// merged in key order and finished equal the pooling over all keys.
template <typename T>
void ShardCase() {
  std::mt19937_64 rng(kSeed + 43);
  INFO("seed " << kSeed + 43);
  const size_t n = 9, m = 700, dv = 6;
  TestMatrix<T> queries(n, 12), keys(m, 12), values(m, dv);
  queries.FillRandom(rng, 0);
  keys.FillRandom(rng, 0);
  values.FillRandom(rng, 1);
  std::vector<size_t> lengths(n);
  for (size_t& length : lengths) length = rng() % (m + 1);
  const size_t shard_begin[] = {0, 250, 600, m};
  for (const PoolSpec& spec : kPoolSpecs) {
    for (bool masked : {false, true}) {
      INFO(attnpool::distance_name(spec.distance)
           << " " << attnpool::kernel_name(spec.kernel.kernel) << " "
           << attnpool::normalization_name(spec.normalization) << " masked "
           << masked);
      Mask<T> mask;
      if (masked) {  // with a sink (shard 0's) and ALiBi's key positions
        mask.valid_lengths = lengths.data();
        mask.causal = true;
        mask.causal_offset = 300;
        if (TakesSink(spec)) mask.sink = T(0.5);
        if (TakesBias(spec)) mask.alibi_slope = T(0.01);
      }
      CheckFused<T>(
          spec, mask, queries, keys, values, [&](attnpool::MatrixView<T> out) {
            std::vector<T> max(3 * n), sum(3 * n);
            std::vector<size_t> best(3 * n);
            std::vector<T> accumulators(3 * n * dv);
            std::vector<attnpool::PoolPartial<T>> parts(3);
            for (size_t s = 0; s < 3; ++s) {
              parts[s] = {{accumulators.data() + s * n * dv, n, dv},
                          max.data() + s * n,
                          sum.data() + s * n,
                          best.data() + s * n};
              const size_t begin = shard_begin[s],
                           count = shard_begin[s + 1] - begin;
              attnpool::attention_pool_partial(
                  spec, queries.view(),
                  {keys.data() + begin * keys.cols(), count, keys.cols()},
                  {values.data() + begin * dv, count, dv}, begin, parts[s],
                  mask);
            }
            attnpool::attention_pool_merge(spec, parts[0], parts[1]);
            attnpool::attention_pool_merge(spec, parts[0], parts[2]);
            attnpool::attention_pool_finish(spec, parts[0], out);
          });
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(ShardsFloat, "fused.shards.float", "[fused]") {
  ShardCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(ShardsDouble, "fused.shards.double", "[fused]") {
  ShardCase<double>();
}

// Exponential weights under none whose keys in one shard (or one chunk of
// a long call) all underflow to 0: that shard's Σ 0·v still carries a NaN
// value into the merged row, as the staged W·V does (pool.h "Non-finite
// data"); a row whose every weight is 0 is empty, whatever the values.
// Under sum (a softmax of the logits) the same keys' weights underflow
// against the row's largest logit, and equal logits share the weight.
template <typename T>
void UnderflowedShardCase() {
  const size_t m = 8200, split = 5000;  // beyond two chunks of a call
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (const size_t d : {1, 16}) {  // the small-depth paths, and the others
    TestMatrix<T> queries(1, d), keys(m, d), values(m, 2);
    queries(0, 0) = 1;
    for (size_t j = 0; j < m; ++j) {
      values(j, 0) = 2;
      values(j, 1) = 3;
    }
    values(7, 0) = nan;
    for (const Normalization normalization :
         {Normalization::none, Normalization::sum}) {
      for (const bool all_far : {false, true}) {
        INFO("d = " << d << ", " << attnpool::normalization_name(normalization)
                    << ", all keys far " << all_far);
        for (size_t j = 0; j < m; ++j) {  // e^-2000 = 0
          keys(j, 0) = j < split || all_far ? T(-2000) : T(0);
        }
        const PoolSpec spec{Distance::dot,
                            {Kernel::exp, 1.0, 1.0},
                            normalization,
                            EmptyRows::zero};
        TestMatrix<T> whole(1, 2), sharded(1, 2);
        attnpool::attention_pool(spec, queries.view(), keys.view(),
                                 values.view(), whole.view());
        std::vector<T> accumulators(4), max(2), sum(2);
        std::vector<size_t> best(2);
        attnpool::PoolPartial<T> parts[2];
        for (size_t s = 0; s < 2; ++s) {
          parts[s] = {{accumulators.data() + 2 * s, 1, 2},
                      max.data() + s,
                      sum.data() + s,
                      best.data() + s};
          const size_t begin = s == 0 ? 0 : split, end = s == 0 ? split : m;
          attnpool::attention_pool_partial(
              spec, queries.view(), {keys.data() + begin * d, end - begin, d},
              {values.data() + 2 * begin, end - begin, 2}, begin, parts[s]);
        }
        attnpool::attention_pool_merge(spec, parts[0], parts[1]);
        attnpool::attention_pool_finish(spec, parts[0], sharded.view());
        const bool empty = all_far && normalization == Normalization::none;
        const T column_1 = normalization == Normalization::sum ? T(3)
                           : empty                             ? T(0)
                                   : T(3 * (m - split));
        for (const TestMatrix<T>* out : {&whole, &sharded}) {
          if (empty) {
            CHECK((*out)(0, 0) == 0);
          } else {
            CHECK(std::isnan((*out)(0, 0)));
          }
          CHECK((*out)(0, 1) == Approx(column_1).epsilon(1e-5));
        }
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(UnderflowedShardFloat,
                          "fused.underflowed_shard.float", "[fused]") {
  UnderflowedShardCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(UnderflowedShardDouble,
                          "fused.underflowed_shard.double", "[fused]") {
  UnderflowedShardCase<double>();
}

// Argmax ties go to the first key: across key blocks (a tuning of 64-byte
// blocks), across the key chunks of a long sequence, and through the shard
// API, whose `best` counts from the shard's key_offset, merged too.
ATTNPOOL_TEST_EACH_TARGET(ArgmaxTies, "fused.argmax_ties", "[fused]") {
  struct Reset {
    ~Reset() { attnpool::force_tuning(""); }
  } reset;
  const PoolSpec argmax{
      Distance::dot, {Kernel::exp, 1.0, 1.0}, Normalization::argmax};
  for (size_t d : {size_t{1}, size_t{16}}) {
    for (const char* tuning : {"generic key_block_bytes=64", ""}) {
      attnpool::force_tuning(tuning);
      for (size_t m : {size_t{64}, size_t{10000}}) {
        INFO("d " << d << " m " << m << " tuning '" << tuning << "' on "
                  << CurrentTarget());
        TestMatrix<float> q(3, d), k(m, d), v(m, 1), out(3, 1);
        for (size_t i = 0; i < 3; ++i) q(i, 0) = 1.0f;
        for (size_t j = 0; j < m; ++j) {
          k(j, 0) = 1.0f;
          v(j, 0) = float(j);
        }
        attnpool::attention_pool(argmax, q.view(), k.view(), v.view(),
                                 out.view());
        RequireRanOnTarget();
        for (size_t i = 0; i < 3; ++i) REQUIRE(out(i, 0) == 0.0f);
      }
    }
  }
  attnpool::force_tuning("");
  // Two shards at key offsets 100 and 108, their best local keys 3 (a tie
  // with local key 5) and 2.
  TestMatrix<float> q(1, 4), k(16, 4), v(16, 1);
  q(0, 0) = 1.0f;
  k(3, 0) = k(5, 0) = 2.0f;
  k(8 + 2, 0) = 3.0f;
  float accumulators[2], max[2], sum[2];
  size_t best[2];
  attnpool::PoolPartial<float> parts[2];
  for (size_t s = 0; s < 2; ++s) {
    parts[s] = {{accumulators + s, 1, 1}, max + s, sum + s, best + s};
    attnpool::attention_pool_partial(
        argmax, q.view(), {k.data() + 8 * s * k.view().stride, 8, 4},
        {v.data() + 8 * s * v.view().stride, 8, 1, v.view().stride},
        100 + 8 * s, parts[s]);
  }
  REQUIRE(best[0] == 103);
  REQUIRE(best[1] == 110);
  attnpool::attention_pool_merge(argmax, parts[0], parts[1]);
  REQUIRE(best[0] == 110);
}

// Logits past 2^24 (query·key ≈ 2.7e8, scale 0.1): the softmax is that of
// the logits rounded to floats, as scale·s is everywhere (the shortcut of
// one multiply-add would skip that rounding: 4% off here).
ATTNPOOL_TEST_EACH_TARGET(HugeLogits, "fused.huge_logits", "[fused]") {
  const PoolSpec sdpa{
      Distance::dot, {Kernel::exp, 1.0, 0.1}, Normalization::softmax};
  TestMatrix<float> q(64, 32), k(3, 32), v(3, 1), out(64, 1);
  double logits[3], sum = 0, weighted = 0;
  for (size_t i = 0; i < 64; ++i) q(i, 0) = 1.0f;
  for (size_t j = 0; j < 3; ++j) {
    k(j, 0) = std::ldexp(1.0f, 28) + 32.0f * float(j);
    v(j, 0) = float(j);
    logits[j] = double(float(double(k(j, 0)) * double(float(0.1))));
  }
  for (size_t j = 0; j < 3; ++j) {
    const double w = std::exp(logits[j] - logits[2]);
    sum += w;
    weighted += w * double(j);
  }
  for (size_t n : {size_t{1}, size_t{64}}) {
    INFO("n " << n << " on " << CurrentTarget());
    attnpool::attention_pool(sdpa, {q.data(), n, 32}, k.view(), v.view(),
                             {out.data(), n, 1});
    RequireRanOnTarget();
    for (size_t i = 0; i < n; ++i) {
      REQUIRE(out(i, 0) == Approx(weighted / sum).epsilon(1e-6));
    }
  }
}

// Shards that see no key (every logit −inf) merged before one that does: a
// NaN value of theirs (0·NaN) reaches the result, as in one call.
ATTNPOOL_TEST_EACH_TARGET(EmptyShardsMerged, "fused.empty_shards_merged",
                          "[fused]") {
  const float inf = std::numeric_limits<float>::infinity();
  const PoolSpec sdpa{
      Distance::dot, {Kernel::exp, 1.0, 1.0}, Normalization::softmax};
  const float q = 1.0f, k[6] = {-inf, -inf, -inf, -inf, 0.0f, 1.0f};
  for (const float value : {std::numeric_limits<float>::quiet_NaN(), 3.0f}) {
    INFO("value " << value << " on " << CurrentTarget());
    const float v[6] = {1, 2, value, 4, 5, 6};
    float whole, merged, accumulators[3], max[3], sum[3];
    size_t best[3];
    attnpool::attention_pool(sdpa, {&q, 1, 1}, {k, 6, 1}, {v, 6, 1},
                             {&whole, 1, 1});
    attnpool::PoolPartial<float> parts[3];
    for (size_t s = 0; s < 3; ++s) {
      parts[s] = {{accumulators + s, 1, 1}, max + s, sum + s, best + s};
      attnpool::attention_pool_partial(sdpa, {&q, 1, 1}, {k + 2 * s, 2, 1},
                                       {v + 2 * s, 2, 1}, 2 * s, parts[s]);
    }
    attnpool::attention_pool_merge(sdpa, parts[0], parts[1]);
    attnpool::attention_pool_merge(sdpa, parts[0], parts[2]);
    attnpool::attention_pool_finish(sdpa, parts[0], {&merged, 1, 1});
    REQUIRE(std::isnan(whole) == std::isnan(value));
    REQUIRE(std::memcmp(&whole, &merged, sizeof(float)) == 0);
  }
}

// The far query of the stable form, through the fused path.
ATTNPOOL_TEST_EACH_TARGET(FusedFarQuery, "fused.far_query", "[fused]") {
  const size_t m = 500;
  TestMatrix<float> keys(m, 1), values(m, 1), queries(1, 1), out(1, 1);
  for (size_t j = 0; j < m; ++j) {
    keys(j, 0) = float(0.01 * double(j % 499));  // keys 0 and 499 tie at 0
    values(j, 0) = float(std::sin(0.1 * double(j)));
  }
  values(0, 0) = 1;
  values(499, 0) = 3;
  queries(0, 0) = -3000;
  attnpool::attention_pool(
      {Distance::sqeuclidean, {Kernel::gaussian, 0.3}, Normalization::sum},
      queries.view(), keys.view(), values.view(), out.view());
  REQUIRE(out(0, 0) == Approx(2.0).epsilon(1e-6));
}

}  // namespace
}  // namespace attnpool_test
