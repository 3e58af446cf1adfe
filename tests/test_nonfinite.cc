// The non-finite data policy (README "Non-finite data", the headers), on
// every supported target: NaN and ±inf inputs affect exactly the outputs
// the formulas say under IEEE arithmetic, and no target differs from the
// scalar reference in which outputs are NaN.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/api_table.h"
#include "tests/each_target.h"
#include "tests/layer_table.h"
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

template <typename T>
constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
template <typename T>
constexpr T kInf = std::numeric_limits<T>::infinity();

// ------------------------------------------------- every function, table

// Every combination of the row's enum values that is a valid call (others
// are skipped), on random inputs with NaN, +inf and −inf planted in inputs
// (and the bias): the row's reference check includes the NaN pattern.
template <typename T>
void PlantedSpecials(const Api<T>& api, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Sizes sizes;
  sizes[kN] = 7;
  sizes[kM] = 19;
  sizes[kD] = 20;  // ≥ 16: the Gram form of the Euclidean distances
  sizes[kDv] = 5;
  std::vector<int> counts;
  for (const auto& argument : api.enums) counts.push_back(argument.count);
  std::vector<int> values(counts.size(), 0);
  int combinations = 0;
  for (bool more = true; more;) {
    for (int pattern = 0; pattern < 3; ++pattern) {
      if (!InSweep(pattern, combinations)) continue;
      Workspace<T> ws(api, sizes);
      ws.FillRandom(seed + combinations * 3 + pattern);
      for (size_t e = 0; e < values.size(); ++e) {
        api.enums[e].set(ws.args, values[e]);
      }
      if (api.uses_kernel && TakesScore(ws.args.kernel.kernel)) {
        ws.args.kernel.scale = 0.25;
      }
      if (api.uses_mask && pattern == 2) {
        ws.UseValidLengths();
        ws.args.mask.causal = true;
        ws.args.mask.causal_offset = 9;
      }
      const bool scores =
          attnpool::normalizes_scores(ws.args.normalization) ||
          (api.uses_kernel && attnpool::is_exponential(ws.args.kernel.kernel));
      if (api.uses_mask && scores) ws.UseBias();
      // Plant a few specials in every input; in-place ones (distances,
      // weights) get only what they can hold: NaN, +inf, and −inf where
      // they are scores.
      const bool in_place_scores =
          api.uses_mask ? scores
                        : !attnpool::needs_distance(ws.args.kernel.kernel);
      for (size_t s = 0; s < api.slots.size(); ++s) {
        const Role role = api.slots[s].role;
        if (role == Role::output) continue;
        auto view = ws.args.views[s];
        if (view.rows * view.cols == 0) continue;
        const int plants = 1 + pattern;
        for (int k = 0; k < plants; ++k) {
          const size_t r = rng() % view.rows, c = rng() % view.cols;
          const int kind = (k + pattern) % 3;
          T special = kind == 0 ? kNaN<T> : kind == 1 ? kInf<T> : -kInf<T>;
          if (role == Role::in_place && !in_place_scores && kind == 2) {
            special = kInf<T>;
          }
          view(r, c) = special;
        }
      }
      if (ws.args.mask.bias.data != nullptr && pattern != 0) {
        auto bias = ws.bias();
        bias(rng() % bias.rows, rng() % bias.cols) =
            pattern == 1 ? kNaN<T> : kInf<T>;
      }
      const auto before = ws.Clone();
      try {
        api.run(ws.args);
      } catch (const attnpool::Error&) {
        continue;  // not a valid combination (e.g. a distance kernel on dot)
      }
      std::string spec;
      for (size_t e = 0; e < values.size(); ++e) {
        spec += std::string(" ") + api.enums[e].name + "=" +
                std::to_string(values[e]);
      }
      INFO(api.name << spec << " pattern " << pattern);
      RequireRanOnTarget();
      REQUIRE(api.verify(before->args, ws.args) == "");
    }
    ++combinations;
    // Next combination (odometer).
    more = false;
    for (size_t e = 0; e < values.size() && !more; ++e) {
      if (++values[e] < counts[e]) {
        more = true;
      } else {
        values[e] = 0;
      }
    }
  }
}

template <typename T>
void PlantedSpecialsAll() {
  uint64_t seed = kSeed + 900;
  for (const Api<T>& api : Apis<T>()) PlantedSpecials(api, seed += 1000);
}

ATTNPOOL_TEST_EACH_TARGET(PlantedFloat, "nonfinite.every_function.float",
                          "[nonfinite]") {
  PlantedSpecialsAll<float>();
}

ATTNPOOL_TEST_EACH_TARGET(PlantedDouble, "nonfinite.every_function.double",
                          "[nonfinite]") {
  PlantedSpecialsAll<double>();
}

// ------------------------------------------------- every layer, hidden keys

// Keys that no query sees (past the valid lengths, past every query's
// causal position, in a paged pool's unlisted rows) are never read: NaN or
// ±inf in them and in their values changes no bit of any layer's output.
template <typename T>
void HiddenKeysUnread() {
  uint64_t seed = kSeed + 950;
  for (const Layer& layer : Layers()) {
    for (int draw = 0; draw < 6; ++draw) {
      LayerOptions options;
      options.hide_keys = true;
      const auto call = MakeLayerCall<T>(layer, ++seed, options);
      INFO(layer.name << " seed " << seed);
      REQUIRE(!call->hidden_keys.empty());
      call->Run();
      RequireRanOnTarget();
      REQUIRE(call->OutputFinite());
      const auto clean = call->OutBytes();
      for (T planted : {kNaN<T>, kInf<T>, -kInf<T>}) {
        INFO("hidden keys and values hold " << planted);
        call->FillHidden(planted);
        REQUIRE(call->Fresh(call->execution.threads) == clean);
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(HiddenFloat, "nonfinite.layers.float",
                          "[nonfinite]") {
  HiddenKeysUnread<float>();
}

ATTNPOOL_TEST_EACH_TARGET(HiddenDouble, "nonfinite.layers.double",
                          "[nonfinite]") {
  HiddenKeysUnread<double>();
}

// ------------------------------------------------ the policy, spelled out

// Stage 1: a NaN coordinate of key j makes column j NaN, a NaN coordinate of
// query i row i, nothing else; an infinite coordinate gives +inf distances
// (NaN where ±inf meet, or for dot and cosine where the math says so).
template <typename T>
void DistancePolicy() {
  for (size_t depth : {3, 20}) {  // direct form; Gram form (d ≥ 16)
    for (int metric = 0; metric < attnpool::kDistanceCount; ++metric) {
      const auto distance = static_cast<Distance>(metric);
      INFO(attnpool::distance_name(distance) << " d=" << depth);
      TestMatrix<T> queries(4, depth, 1), keys(6, depth, 2), out(4, 6, 1);
      std::mt19937_64 rng(kSeed + metric);
      queries.FillRandom(rng, 1);
      keys.FillRandom(rng, 1);
      keys(2, depth - 1) = kNaN<T>;
      queries(3, 0) = kNaN<T>;
      attnpool::pairwise_distances(distance, queries.view(), keys.view(),
                                   out.view());
      RequireRanOnTarget();
      for (size_t i = 0; i < 4; ++i) {
        for (size_t j = 0; j < 6; ++j) {
          INFO("(" << i << ", " << j << ") " << out(i, j));
          REQUIRE(std::isnan(out(i, j)) == (i == 3 || j == 2));
        }
      }
      // +inf in key 4 (and no NaN): distances to it are +inf, dot ±inf.
      keys(2, depth - 1) = T(0.5);
      queries(3, 0) = T(0.25);
      keys(4, 1) = kInf<T>;
      attnpool::pairwise_distances(distance, queries.view(), keys.view(),
                                   out.view());
      for (size_t i = 0; i < 4; ++i) {
        for (size_t j = 0; j < 6; ++j) {
          INFO("(" << i << ", " << j << ") " << out(i, j));
          if (j != 4) {
            REQUIRE(std::isfinite(out(i, j)));
          } else if (distance == Distance::cosine) {
            REQUIRE(std::isnan(out(i, j)));  // inf / inf
          } else if (distance == Distance::dot) {
            REQUIRE(std::isinf(out(i, j)));  // q₁·inf, q₁ ≠ 0
          } else {
            REQUIRE(out(i, j) == kInf<T>);
          }
        }
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(DistanceFloat, "nonfinite.distance.float",
                          "[nonfinite]") {
  DistancePolicy<float>();
}

ATTNPOOL_TEST_EACH_TARGET(DistanceDouble, "nonfinite.distance.double",
                          "[nonfinite]") {
  DistancePolicy<double>();
}

// Stage 2: NaN stays NaN (constant: 1); +inf distances weigh 0; exp follows
// exp(±inf) = inf, 0.
template <typename T>
void KernelPolicy() {
  for (int k = 0; k < attnpool::kKernelCount; ++k) {
    const auto kernel = static_cast<Kernel>(k);
    const bool similarity = TakesScore(kernel);
    INFO(attnpool::kernel_name(kernel));
    std::vector<T> values = {kNaN<T>, kInf<T>, similarity ? -kInf<T> : T(0),
                             T(0.5)};
    attnpool::apply_kernel({kernel, 2.0, 1.0},
                           similarity ? Distance::dot : Distance::euclidean,
                           {values.data(), 1, 4}, 4);
    RequireRanOnTarget();
    if (TakesNothing(kernel)) {
      REQUIRE(values == std::vector<T>(4, T(1)));
      continue;
    }
    REQUIRE(std::isnan(values[0]));
    REQUIRE(values[1] == (similarity ? kInf<T> : T(0)));
    REQUIRE(values[2] == (similarity ? T(0) : T(1)));
    REQUIRE(std::isfinite(values[3]));
  }
}

ATTNPOOL_TEST_EACH_TARGET(KernelFloat, "nonfinite.kernel.float",
                          "[nonfinite]") {
  KernelPolicy<float>();
}

ATTNPOOL_TEST_EACH_TARGET(KernelDouble, "nonfinite.kernel.double",
                          "[nonfinite]") {
  KernelPolicy<double>();
}

// Stage 3: a +inf score takes all the weight (shared by the +inf entries);
// −inf scores weigh 0, and a row of them is empty (policy); a visible NaN
// makes its row NaN whatever the policy, a hidden one changes nothing. The
// same for `sum` of weights (±inf weights share the row) and `none`.
template <typename T>
void NormalizePolicy() {
  const size_t cols = 21;  // more than a vector of every target, not a multiple
  const T nan = kNaN<T>, inf = kInf<T>;
  for (EmptyRows empty : {EmptyRows::nan, EmptyRows::zero}) {
    const T fill = empty == EmptyRows::nan ? nan : T(0);
    const auto is_fill = [&](T x) {
      return empty == EmptyRows::nan ? std::isnan(x) : x == T(0);
    };
    for (Normalization normalization :
         {Normalization::softmax, Normalization::argmax}) {
      INFO(attnpool::normalization_name(normalization)
           << (empty == EmptyRows::nan ? " nan" : " zero"));
      TestMatrix<T> values(6, cols, 3);
      for (size_t j = 0; j < cols; ++j) {
        values(0, j) = j == 5 ? inf : T(j);             // one +inf
        values(1, j) = j == 3 || j == 17 ? inf : -inf;  // two +inf, rest −inf
        values(2, j) = -inf;                            // all −inf: empty
        values(3, j) = j == 9 ? nan : T(1);             // visible NaN
        values(4, j) = j == 20 ? nan : T(j % 4);        // NaN hidden below
        values(5, j) = j == 0 ? -inf : T(2);            // −inf weighs 0
      }
      std::vector<size_t> lengths = {cols, cols, cols, cols, 20, cols};
      Mask<T> mask;
      mask.valid_lengths = lengths.data();
      attnpool::normalize(normalization, values.view(), mask, empty);
      RequireRanOnTarget();
      const bool argmax = normalization == Normalization::argmax;
      for (size_t j = 0; j < cols; ++j) {
        INFO("column " << j);
        REQUIRE(values(0, j) == (j == 5 ? T(1) : T(0)));
        REQUIRE(values(1, j) == (j == 3    ? T(argmax ? 1 : 0.5)
                                 : j == 17 ? T(argmax ? 0 : 0.5)
                                           : T(0)));
        REQUIRE(is_fill(values(2, j)));
        REQUIRE(std::isnan(values(3, j)));
        REQUIRE(std::isfinite(values(4, j)));
        if (j == 0) REQUIRE(values(5, j) == T(0));
      }
      (void)fill;
    }
    // sum and none of weights.
    TestMatrix<T> weights(4, cols, 1);
    for (size_t j = 0; j < cols; ++j) {
      weights(0, j) = j == 4 || j == 8 ? inf : T(1);  // +inf weights share
      weights(1, j) = T(0);                           // all 0: empty
      weights(2, j) = j == 2 ? nan : T(1);            // NaN row
      weights(3, j) = j == 2 ? inf : j == 7 ? -inf : T(1);  // NaN sum
    }
    TestMatrix<T> copy = weights;
    attnpool::normalize(Normalization::sum, weights.view(), {}, empty);
    RequireRanOnTarget();
    attnpool::normalize(Normalization::none, copy.view(), {}, empty);
    for (size_t j = 0; j < cols; ++j) {
      INFO("sum/none column " << j);
      REQUIRE(weights(0, j) == (j == 4 || j == 8 ? T(0.5) : T(0)));
      REQUIRE(is_fill(weights(1, j)));
      REQUIRE(std::isnan(weights(2, j)));
      REQUIRE(std::isnan(weights(3, j)));
      REQUIRE(copy(0, j) == (j == 4 || j == 8 ? inf : T(1)));
      REQUIRE(is_fill(copy(1, j)));
      REQUIRE(std::isnan(copy(2, j)));  // none: a NaN makes its row NaN too
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(NormalizeFloat, "nonfinite.normalize.float",
                          "[nonfinite]") {
  NormalizePolicy<float>();
}

ATTNPOOL_TEST_EACH_TARGET(NormalizeDouble, "nonfinite.normalize.double",
                          "[nonfinite]") {
  NormalizePolicy<double>();
}

// Stage 4 (IEEE): a NaN value(j, c) makes column c NaN in every row — a zero
// weight does not hide it (0·NaN = NaN) — and a NaN weight(i, j) row i.
template <typename T>
void WeightedSumPolicy() {
  const size_t n = 9, m = 13, dv = 19;
  TestMatrix<T> weights(n, m, 1), values(m, dv, 2), out(n, dv, 1);
  std::mt19937_64 rng(kSeed + 5);
  weights.FillRandom(rng, 1);
  values.FillRandom(rng, 1);
  for (size_t i = 0; i < n; ++i) weights(i, 6) = T(0);
  values(6, 11) = kNaN<T>;  // weight 0 everywhere, still NaN
  weights(4, 2) = kNaN<T>;
  attnpool::weighted_sum(weights.view(), values.view(), out.view());
  RequireRanOnTarget();
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < dv; ++c) {
      INFO("(" << i << ", " << c << ")");
      REQUIRE(std::isnan(out(i, c)) == (c == 11 || i == 4));
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(WeightedSumFloat, "nonfinite.weighted_sum.float",
                          "[nonfinite]") {
  WeightedSumPolicy<float>();
}

ATTNPOOL_TEST_EACH_TARGET(WeightedSumDouble, "nonfinite.weighted_sum.double",
                          "[nonfinite]") {
  WeightedSumPolicy<double>();
}

// The pipelines, staged and fused alike: a NaN in key j poisons exactly the
// queries that see key j (a mask that hides it protects them); a NaN in
// values(j, c) reaches column c of the rows of the queries that see key j
// (even with weight 0 there: 0·NaN = NaN), and no other row (a hidden key
// contributes nothing), except under argmax, which copies the winner's
// value row; the constant kernel ignores distances, so a NaN key changes
// nothing there. (tests/test_hidden_keys.cc: every pool, bitwise.)
template <typename T>
void PipelinePolicy() {
  const size_t n = 8, m = 11, d = 3, dv = 4;
  using Pool = void (*)(const PoolSpec&, attnpool::ConstMatrixView<T>,
                        attnpool::ConstMatrixView<T>,
                        attnpool::ConstMatrixView<T>, attnpool::MatrixView<T>,
                        const Mask<T>&, const attnpool::Execution&);
  const std::pair<const char*, Pool> pools[] = {
      {"staged", attnpool::attention_pool_staged},
      {"fused", attnpool::attention_pool}};
  for (const auto& [pool_name, pool] : pools) {
    // Softmax again with score adjustments and a sink (the adjusted paths).
    for (bool adjusted : {false, true}) {
      for (const PoolSpec& spec :
           {PoolSpec{Distance::sqeuclidean,
                     {Kernel::gaussian, 1.0},
                     Normalization::sum},
            PoolSpec{Distance::dot, {Kernel::exp}, Normalization::softmax},
            PoolSpec{Distance::euclidean,
                     {Kernel::triangular, 9.0},
                     Normalization::sum,
                     EmptyRows::zero},
            PoolSpec{
                Distance::manhattan, {Kernel::constant}, Normalization::sum},
            PoolSpec{Distance::cosine,
                     {Kernel::exp, 1, 2.0},
                     Normalization::argmax}}) {
        if (adjusted && spec.normalization != Normalization::softmax) continue;
        INFO(pool_name << " " << attnpool::distance_name(spec.distance) << " "
                       << attnpool::kernel_name(spec.kernel.kernel) << " "
                       << attnpool::normalization_name(spec.normalization)
                       << (adjusted ? " soft-cap + ALiBi + sink" : ""));
        TestMatrix<T> queries(n, d), keys(m, d), values(m, dv), out(n, dv, 1);
        std::mt19937_64 rng(kSeed + 6);
        queries.FillRandom(rng, 0);
        keys.FillRandom(rng, 0);
        values.FillRandom(rng, 0);
        keys(7, 1) = kNaN<T>;
        // Queries 0-3 see keys j < 7 only; 4-7 see every key.
        std::vector<size_t> lengths = {7, 7, 7, 7, m, m, m, m};
        Mask<T> mask;
        mask.valid_lengths = lengths.data();
        if (adjusted) {
          mask.softcap = T(2);
          mask.alibi_slope = T(0.25);
          mask.sink = T(-1);
        }
        pool(spec, queries.view(), keys.view(), values.view(), out.view(), mask,
             {});
        RequireRanOnTarget();
        const bool constant = TakesNothing(spec.kernel.kernel);
        for (size_t i = 0; i < n; ++i) {
          for (size_t c = 0; c < dv; ++c) {
            INFO("key NaN: (" << i << ", " << c << ") " << out(i, c));
            REQUIRE(std::isnan(out(i, c)) == (i >= 4 && !constant));
          }
        }
        keys(7, 1) = T(0.5);
        // Argmax winners, to know which rows copy key 3's values.
        std::vector<T> weight_storage(n * m);
        TestMatrix<T> staged(n, dv);
        const attnpool::MatrixView<T> weights(weight_storage.data(), n, m);
        attnpool::attention_pool_staged(spec, queries.view(), keys.view(),
                                        values.view(), staged.view(), weights,
                                        mask);
        values(3, 2) = kNaN<T>;  // key 3: seen by every query
        values(9, 1) = kNaN<T>;  // key 9: hidden from queries 0-3
        pool(spec, queries.view(), keys.view(), values.view(), out.view(), mask,
             {});
        for (size_t i = 0; i < n; ++i) {
          const bool argmax = spec.normalization == Normalization::argmax;
          const bool copies_key_3 = weights(i, 3) == T(1);
          const bool copies_key_9 = weights(i, 9) == T(1);
          for (size_t c = 0; c < dv; ++c) {
            INFO("value NaN: (" << i << ", " << c << ") " << out(i, c));
            REQUIRE(std::isnan(out(i, c)) ==
                    ((c == 2 && (!argmax || copies_key_3)) ||
                     (c == 1 && i >= 4 && (!argmax || copies_key_9))));
          }
        }
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(PipelineFloat, "nonfinite.pipeline.float",
                          "[nonfinite]") {
  PipelinePolicy<float>();
}

ATTNPOOL_TEST_EACH_TARGET(PipelineDouble, "nonfinite.pipeline.double",
                          "[nonfinite]") {
  PipelinePolicy<double>();
}

}  // namespace
}  // namespace attnpool_test
