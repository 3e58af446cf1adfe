// Keys that contribute nothing (README "Non-finite data"): a key a mask
// hides from a query — past its valid length, after its causal limit,
// outside its sliding window, `visible` 0, bias −inf — and a key whose
// compact-kernel weight is exactly 0 leave that query's output bitwise as
// it is whatever their rows hold (NaN, ±inf: the padding of a KV cache).
// Every pooling API, on every target. And the fused kernel never reads the
// keys and values that a valid length, causal mask or sliding window hides
// from every query: they lie in pages that cannot be read.
#include <attnpool/attnpool.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "src/reference.h"
#include "tests/each_target.h"
#include "tests/fenced.h"
#include "tests/pool_specs.h"
#include "tests/test_data.h"

namespace attnpool_test {
namespace {

using attnpool::AttentionMask;
using attnpool::ConstMatrixView;
using attnpool::Distance;
using attnpool::Kernel;
using attnpool::Mask;
using attnpool::MatrixView;
using attnpool::Normalization;
using attnpool::PoolSpec;
using attnpool::TensorView;

// The k-th special value: NaN, +inf, −inf in turn.
template <typename T>
T Special(size_t k) {
  const T inf = std::numeric_limits<T>::infinity();
  const T specials[3] = {std::numeric_limits<T>::quiet_NaN(), inf, -inf};
  return specials[k % 3];
}

template <typename T>
bool SameRow(const TestMatrix<T>& a, const TestMatrix<T>& b, size_t row) {
  return std::memcmp(a.view().row(row), b.view().row(row),
                     a.cols() * sizeof(T)) == 0;
}

// Which masks a case applies.
enum class MaskKind { valid_lengths, causal, window, visible, bias, all };

struct Shape {
  const char* path;  // the fused path it exercises
  size_t n, m, d, dv;
};

// One pooling call: out (n×dv) from the inputs, under `mask`, and any other
// output (the normalizer) in `extra`.
template <typename T>
using Pool = std::function<void(
    const PoolSpec&, const TestMatrix<T>& queries, const TestMatrix<T>& keys,
    const TestMatrix<T>& values, const Mask<T>& mask, TestMatrix<T>& out,
    std::vector<T>& extra)>;

template <typename T>
std::vector<std::pair<const char*, Pool<T>>> Pools() {
  using attnpool::PoolPartial;
  return {
      {"attention_pool_staged",
       [](const PoolSpec& spec, const TestMatrix<T>& q, const TestMatrix<T>& k,
          const TestMatrix<T>& v, const Mask<T>& mask, TestMatrix<T>& out,
          std::vector<T>& extra) {
         attnpool::attention_pool_staged(spec, q.view(), k.view(), v.view(),
                                         out.view(), mask);
       }},
      {"attention_pool",
       [](const PoolSpec& spec, const TestMatrix<T>& q, const TestMatrix<T>& k,
          const TestMatrix<T>& v, const Mask<T>& mask, TestMatrix<T>& out,
          std::vector<T>& extra) {
         attnpool::attention_pool(spec, q.view(), k.view(), v.view(),
                                  out.view(), mask);
       }},
      {"attention_pool_with_normalizer",
       [](const PoolSpec& spec, const TestMatrix<T>& q, const TestMatrix<T>& k,
          const TestMatrix<T>& v, const Mask<T>& mask, TestMatrix<T>& out,
          std::vector<T>& extra) {
         extra.resize(q.rows());
         attnpool::attention_pool_with_normalizer(spec, q.view(), k.view(),
                                                  v.view(), out.view(),
                                                  extra.data(), mask);
       }},
      // Two shards (keys split at m/3: one shard's prefix masks count from
      // its offset), merged and finished.
      {"attention_pool_partial",
       [](const PoolSpec& spec, const TestMatrix<T>& q, const TestMatrix<T>& k,
          const TestMatrix<T>& v, const Mask<T>& mask, TestMatrix<T>& out,
          std::vector<T>& extra) {
         const size_t n = q.rows(), m = k.rows(), dv = v.cols();
         const size_t split = m / 3;
         std::vector<T> state(6 * n), later_acc(n * dv);
         std::vector<size_t> best(2 * n);
         const PoolPartial<T> first{out.view(), state.data(), state.data() + n,
                                    best.data()};
         const PoolPartial<T> second{{later_acc.data(), n, dv},
                                     state.data() + 2 * n,
                                     state.data() + 3 * n,
                                     best.data() + n};
         Mask<T> head = mask, tail = mask;
         if (mask.bias.data != nullptr) {
           head.bias.cols = split;
           tail.bias = {mask.bias.data + split, n, m - split, mask.bias.stride};
         }
         if (mask.visible.data != nullptr) {
           head.visible.cols = split;
           tail.visible = {mask.visible.data + split, n, m - split,
                           mask.visible.stride};
         }
         const ConstMatrixView<T> keys = k.view(), values = v.view();
         attnpool::attention_pool_partial(
             spec, q.view(), {keys.data, split, keys.cols, keys.stride},
             {values.data, split, values.cols, values.stride}, 0, first, head);
         attnpool::attention_pool_partial(
             spec, q.view(),
             {keys.row(split), m - split, keys.cols, keys.stride},
             {values.row(split), m - split, values.cols, values.stride}, split,
             second, tail);
         attnpool::attention_pool_merge(spec, first, second);
         attnpool::attention_pool_finish(spec, first, out.view());
       }},
  };
}

// The mask of a case over n queries and m keys, in storage it owns.
template <typename T>
struct CaseMask {
  std::vector<size_t> lengths;
  TestMatrix<T> bias;
  std::vector<uint8_t> visible;
  Mask<T> mask;

  CaseMask(MaskKind kind, bool scores, size_t n, size_t m, std::mt19937_64& rng)
      : bias(n, m, 1), visible(n * m, 1) {
    const bool all = kind == MaskKind::all;
    if (kind == MaskKind::valid_lengths || all) {
      // Every query's length ≤ m/2 (the keys past it hidden from all, whole
      // key blocks among them), one query sees nothing.
      lengths.resize(n);
      for (size_t i = 0; i < n; ++i) lengths[i] = rng() % (m / 2 + 1);
      lengths[n / 2] = 0;
      mask.valid_lengths = lengths.data();
    }
    if (kind == MaskKind::causal || all) {
      mask.causal = true;
      mask.causal_offset = static_cast<std::ptrdiff_t>(m / 2) - 3;
    }
    if (kind == MaskKind::window || all) {
      // A band of m/4 keys before each query's position m/2 + i − 3 and 2
      // after it: a quarter of the keys before every window, the rest of
      // the second half after every one (whole key blocks among both).
      mask.causal_offset = static_cast<std::ptrdiff_t>(m / 2) - 3;
      mask.window_left = m / 4;
      mask.window_right = 2;
    }
    if (kind == MaskKind::visible || all) {
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < m; ++j) {
          visible[i * m + j] = j % 7 != 3 && rng() % 5 != 0;
        }
      }
      mask.visible = {visible.data(), n, m, m};
    }
    if ((kind == MaskKind::bias || all) && scores) {
      std::uniform_real_distribution<double> value(-2, 2);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < m; ++j) {
          const bool hide = j % 5 == 1 || rng() % 6 == 0;
          bias(i, j) =
              hide ? -std::numeric_limits<T>::infinity() : T(value(rng));
        }
      }
      mask.bias = bias.view();
    }
  }
};

// Plants NaN and ±inf in the key and value rows of every key hidden from
// all queries, and in the value rows of a third of the other keys; then
// every pool must give, in each row that no planted value row contributes
// to, the bits of the same call with finite rows, and NaN or ±inf in the
// planted columns of the rows they do contribute to (argmax: where the
// winner is planted).
template <typename T>
void HiddenKeysCase(const Shape& shape, const PoolSpec& spec, MaskKind kind,
                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t n = shape.n, m = shape.m, d = shape.d, dv = shape.dv;
  TestMatrix<T> queries(n, d, 1), keys(m, d, 2, 1), values(m, dv, 1, 3);
  queries.FillRandom(rng, 0);
  keys.FillRandom(rng, 0);
  values.FillRandom(rng, 1);
  const bool scores = TakesBias(spec);
  CaseMask<T> mask(kind, scores, n, m, rng);
  // The weights decide which rows a planted value reaches.
  TestMatrix<T> weights(n, m), unused(n, dv);
  attnpool::attention_pool_staged(spec, queries.view(), keys.view(),
                                  values.view(), unused.view(), weights.view(),
                                  mask.mask);
  const bool zero_weights_count = ZeroWeightsCount(spec);
  const auto contributes = [&](size_t i, size_t j) {
    return !attnpool::reference::hidden(mask.mask, i, j) &&
           (zero_weights_count || weights(i, j) != T(0));
  };
  TestMatrix<T> planted_keys = keys, planted_values = values;
  std::vector<bool> planted(m, false);
  size_t hidden_from_all = 0;
  for (size_t j = 0; j < m; ++j) {
    bool seen = false;
    for (size_t i = 0; i < n; ++i) seen |= contributes(i, j);
    const bool key_hidden = [&] {
      for (size_t i = 0; i < n; ++i) {
        if (!attnpool::reference::hidden(mask.mask, i, j)) return false;
      }
      return true;
    }();
    if (key_hidden) {
      ++hidden_from_all;
      for (size_t c = 0; c < d; ++c) planted_keys(j, c) = Special<T>(j + c);
    }
    if (key_hidden || !seen || j % 3 == 0) {
      planted[j] = true;
      for (size_t c = 0; c < dv; ++c) planted_values(j, c) = Special<T>(j + c);
    }
  }
  if (kind == MaskKind::valid_lengths || kind == MaskKind::causal ||
      kind == MaskKind::window) {
    REQUIRE(hidden_from_all >= m / 3);
  }
  for (const auto& [name, pool] : Pools<T>()) {
    INFO(name);
    TestMatrix<T> clean(n, dv, 1), dirty(n, dv, 1);
    std::vector<T> clean_extra, dirty_extra;
    pool(spec, queries, keys, values, mask.mask, clean, clean_extra);
    RequireRanOnTarget();
    pool(spec, queries, planted_keys, planted_values, mask.mask, dirty,
         dirty_extra);
    RequireRanOnTarget();
    // The normalizer depends on no value, and on no hidden key.
    REQUIRE(clean_extra.size() == dirty_extra.size());
    REQUIRE((clean_extra.empty() ||
             std::memcmp(clean_extra.data(), dirty_extra.data(),
                         clean_extra.size() * sizeof(T)) == 0));
    for (size_t i = 0; i < n; ++i) {
      bool reached = false;
      for (size_t j = 0; j < m; ++j) reached |= planted[j] && contributes(i, j);
      INFO("row " << i);
      if (!reached) {
        REQUIRE(SameRow(clean, dirty, i));
      } else if (spec.normalization != Normalization::argmax) {
        // Every column has a planted special: NaN or ±inf there.
        for (size_t c = 0; c < dv; ++c) REQUIRE(!std::isfinite(dirty(i, c)));
      }
    }
  }
  // The staged weights themselves do not move.
  TestMatrix<T> dirty_weights(n, m);
  attnpool::attention_pool_staged(spec, queries.view(), planted_keys.view(),
                                  planted_values.view(), unused.view(),
                                  dirty_weights.view(), mask.mask);
  REQUIRE(std::memcmp(weights.data(), dirty_weights.data(),
                      weights.storage().size() * sizeof(T)) == 0);
}

template <typename T>
void HiddenKeysAll() {
  // Small-depth (kernel regression), tiles, and decode (≤ 4 dot queries);
  // m spans whole key blocks past every valid length.
  const Shape shapes[] = {{"small-depth", 9, 700, 2, 3},
                          {"tiles", 14, 700, 20, 5},
                          {"decode", 3, 1300, 16, 8}};
  uint64_t seed = kSeed + 3100;
  for (const Shape& shape : shapes) {
    size_t spec_index = 0;
    for (const PoolSpec& spec : kPoolSpecs) {
      ++spec_index;
      if (std::string(shape.path) == "decode" &&
          spec.distance != Distance::dot) {
        continue;
      }
      for (MaskKind kind :
           {MaskKind::valid_lengths, MaskKind::causal, MaskKind::window,
            MaskKind::visible, MaskKind::bias, MaskKind::all}) {
        if (!InSweep(size_t(kind), spec_index, 2)) continue;
        INFO(shape.path << " " << attnpool::distance_name(spec.distance) << " "
                        << attnpool::kernel_name(spec.kernel.kernel) << " "
                        << attnpool::normalization_name(spec.normalization)
                        << " mask " << int(kind) << " seed " << seed);
        HiddenKeysCase<T>(shape, spec, kind, seed++);
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(HiddenPoolsFloat, "hidden_keys.pools.float",
                          "[hidden]") {
  HiddenKeysAll<float>();
}

ATTNPOOL_TEST_EACH_TARGET(HiddenPoolsDouble, "hidden_keys.pools.double",
                          "[hidden]") {
  HiddenKeysAll<double>();
}

// ---------------------------------------------------------------- layers

// Dense (B, H, rows, cols) storage.
template <typename T>
struct Dense {
  size_t batch, heads, rows, cols;
  std::vector<T> data;
  Dense(size_t b, size_t h, size_t r, size_t c)
      : batch(b), heads(h), rows(r), cols(c), data(b * h * r * c) {}
  T& at(size_t b, size_t h, size_t r, size_t c) {
    return data[((b * heads + h) * rows + r) * cols + c];
  }
  TensorView<T> view() {
    return attnpool::dense_tensor(data.data(), batch, heads, rows, cols);
  }
  void Fill(std::mt19937_64& rng) {
    std::normal_distribution<double> normal;
    for (T& x : data) x = T(normal(rng));
  }
};

// Scaled dot-product (grouped heads), additive and multi-head attention:
// the key (input) rows and value rows past each batch entry's valid length,
// after the causal limit, or hidden by `visible` or a −inf bias from every
// query, planted with NaN and ±inf, change no bit of the output.
template <typename T>
void LayersCase(bool per_query_lengths, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t batch = 2, heads = 4, kv_heads = 2, n = 11, m = 600, d = 16,
               dv = 8;
  Dense<T> queries(batch, heads, n, d), keys(batch, kv_heads, m, d),
      values(batch, kv_heads, m, dv);
  queries.Fill(rng);
  keys.Fill(rng);
  values.Fill(rng);
  // Lengths ≤ 300 (per batch entry, or per query), causal at offset 250,
  // a visible matrix and a bias broadcast over heads that each hide some
  // columns from every query.
  std::vector<size_t> lengths(per_query_lengths ? batch * n : batch);
  for (size_t& length : lengths) length = 40 + rng() % 261;
  Dense<uint8_t> visible(batch, 1, n, m);
  Dense<T> bias(batch, 1, n, m);
  for (size_t b = 0; b < batch; ++b) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < m; ++j) {
        visible.at(b, 0, i, j) = j % 11 != 5;
        bias.at(b, 0, i, j) = j % 13 == 2 ? -std::numeric_limits<T>::infinity()
                                          : T(0.25 * double(rng() % 8));
      }
    }
  }
  AttentionMask<T> mask;
  mask.valid_lengths = lengths.data();
  mask.lengths_per_query = per_query_lengths;
  mask.causal = true;
  mask.causal_offset = 250;
  mask.visible = visible.view();
  mask.bias = bias.view();
  // Key j of batch entry b is hidden from all of its queries.
  const auto hidden = [&](size_t b, size_t j) {
    if (j % 11 == 5 || j % 13 == 2 || j > n - 1 + 250) return true;
    for (size_t i = 0; i < n; ++i) {
      const size_t length = lengths[per_query_lengths ? b * n + i : b];
      if (j < length && j <= i + 250) return false;
    }
    return true;
  };
  Dense<T> planted_keys = keys, planted_values = values;
  for (size_t b = 0; b < batch; ++b) {
    for (size_t h = 0; h < kv_heads; ++h) {
      for (size_t j = 0; j < m; ++j) {
        if (!hidden(b, j)) continue;
        for (size_t c = 0; c < d; ++c)
          planted_keys.at(b, h, j, c) = Special<T>(j + c);
        for (size_t c = 0; c < dv; ++c)
          planted_values.at(b, h, j, c) = Special<T>(j + c + 1);
      }
    }
  }
  const auto same = [](const Dense<T>& a, const Dense<T>& b) {
    return std::memcmp(a.data.data(), b.data.data(),
                       a.data.size() * sizeof(T)) == 0;
  };
  {
    INFO("scaled_dot_product_attention");
    Dense<T> clean(batch, heads, n, dv), dirty(batch, heads, n, dv);
    attnpool::scaled_dot_product_attention(queries.view(), keys.view(),
                                           values.view(), clean.view(), mask);
    RequireRanOnTarget();
    attnpool::scaled_dot_product_attention(queries.view(), planted_keys.view(),
                                           planted_values.view(), dirty.view(),
                                           mask);
    REQUIRE(same(clean, dirty));
    bool finite = true;
    for (T x : clean.data) finite &= std::isfinite(x);
    REQUIRE(finite);
  }
  {
    INFO("additive_attention");
    const size_t hidden_units = 24;
    TestMatrix<T> w_q(hidden_units, d), w_k(hidden_units, d);
    w_q.FillRandom(rng, 0);
    w_k.FillRandom(rng, 0);
    std::vector<T> w_v(hidden_units, T(0.3));
    const attnpool::AdditiveWeights<T> weights{w_q.view(), w_k.view(),
                                               w_v.data()};
    Dense<T> clean(batch, heads, n, dv), dirty(batch, heads, n, dv);
    attnpool::additive_attention(weights, queries.view(), keys.view(),
                                 values.view(), clean.view(), mask);
    RequireRanOnTarget();
    attnpool::additive_attention(weights, queries.view(), planted_keys.view(),
                                 planted_values.view(), dirty.view(), mask);
    REQUIRE(same(clean, dirty));
  }
  {
    INFO("multi_head_attention");
    // Inputs (B, 1, rows, d): the key and value inputs' hidden rows planted.
    const size_t dh = 8;
    Dense<T> x_q(batch, 1, n, d), x_k(batch, 1, m, d), x_v(batch, 1, m, dv);
    x_q.Fill(rng);
    x_k.Fill(rng);
    x_v.Fill(rng);
    TestMatrix<T> w_q(d, heads * dh), w_k(d, heads * dh), w_v(dv, heads * dv),
        w_o(heads * dv, dv);
    for (auto* w : {&w_q, &w_k, &w_v, &w_o}) w->FillRandom(rng, 0);
    const attnpool::MultiHeadWeights<T> weights{heads, w_q.view(), w_k.view(),
                                                w_v.view(), w_o.view()};
    Dense<T> planted_x_k = x_k, planted_x_v = x_v;
    for (size_t b = 0; b < batch; ++b) {
      for (size_t j = 0; j < m; ++j) {
        if (!hidden(b, j)) continue;
        for (size_t c = 0; c < d; ++c)
          planted_x_k.at(b, 0, j, c) = Special<T>(j + c);
        for (size_t c = 0; c < dv; ++c)
          planted_x_v.at(b, 0, j, c) = Special<T>(j + c + 2);
      }
    }
    Dense<T> clean(batch, 1, n, dv), dirty(batch, 1, n, dv);
    attnpool::multi_head_attention(weights, x_q.view(), x_k.view(), x_v.view(),
                                   clean.view(), mask);
    RequireRanOnTarget();
    attnpool::multi_head_attention(weights, x_q.view(), planted_x_k.view(),
                                   planted_x_v.view(), dirty.view(), mask);
    REQUIRE(same(clean, dirty));
  }
}

ATTNPOOL_TEST_EACH_TARGET(HiddenLayersFloat, "hidden_keys.layers.float",
                          "[hidden]") {
  LayersCase<float>(false, kSeed + 3200);
  LayersCase<float>(true, kSeed + 3201);
}

ATTNPOOL_TEST_EACH_TARGET(HiddenLayersDouble, "hidden_keys.layers.double",
                          "[hidden]") {
  LayersCase<double>(true, kSeed + 3202);
}

// ------------------------------------------------------- never read at all

// attention_pool over the fenced keys and values (`fenced_mask`) equals it
// over the readable ones alone (`readable_mask`), bit for bit; `out` keeps
// the fenced call's result.
template <typename T>
void RequireSamePool(const PoolSpec& spec, const TestMatrix<T>& queries,
                     MatrixView<T> keys, MatrixView<T> values,
                     const Mask<T>& fenced_mask,
                     const TestMatrix<T>& readable_keys,
                     const TestMatrix<T>& readable_values,
                     const Mask<T>& readable_mask, TestMatrix<T>& out) {
  TestMatrix<T> readable_out(out.rows(), out.cols());
  attnpool::attention_pool(spec, queries.view(), keys, values, out.view(),
                           fenced_mask);
  RequireRanOnTarget();
  attnpool::attention_pool(spec, queries.view(), readable_keys.view(),
                           readable_values.view(), readable_out.view(),
                           readable_mask);
  REQUIRE(std::memcmp(out.data(), readable_out.data(),
                      out.storage().size() * sizeof(T)) == 0);
}

// attention_pool on each fused path, a shard, and scaled dot-product
// attention, with keys and values past `readable` unreadable and hidden by
// valid lengths or a causal mask from every query; the result equals the
// same call on the readable keys alone.
template <typename T>
void NeverReadCase() {
  std::mt19937_64 rng(kSeed + 3300);
  const size_t m = 2000, readable = 700;
  const Shape shapes[] = {{"small-depth", 9, m, 2, 3},
                          {"tiles", 30, m, 24, 16},
                          {"decode", 2, m, 64, 64},
                          {"decode (one query)", 1, m, 64, 64}};
  for (const Shape& shape : shapes) {
    INFO(shape.path);
    const size_t n = shape.n, d = shape.d, dv = shape.dv;
    Fenced<T> keys(m, d, readable), values(m, dv, readable);
    TestMatrix<T> queries(n, d), readable_keys(readable, d),
        readable_values(readable, dv);
    queries.FillRandom(rng, 0);
    readable_keys.FillRandom(rng, 0);
    readable_values.FillRandom(rng, 1);
    for (size_t j = 0; j < readable; ++j) {
      std::memcpy(keys.view().row(j), readable_keys.view().row(j),
                  d * sizeof(T));
      std::memcpy(values.view().row(j), readable_values.view().row(j),
                  dv * sizeof(T));
    }
    const PoolSpec spec =
        shape.d <= 2
            ? PoolSpec{Distance::sqeuclidean,
                       {Kernel::gaussian, 0.7},
                       Normalization::sum}
            : PoolSpec{Distance::dot, {Kernel::exp}, Normalization::softmax};
    std::vector<size_t> lengths(n);
    for (size_t i = 0; i < n; ++i) lengths[i] = 1 + rng() % readable;
    lengths[0] = readable;
    for (int causal = 0; causal < 2; ++causal) {
      Mask<T> mask;
      if (causal) {
        mask.causal = true;
        mask.causal_offset = static_cast<std::ptrdiff_t>(readable - n);
      } else {
        mask.valid_lengths = lengths.data();
      }
      TestMatrix<T> fenced_out(n, dv);
      RequireSamePool(spec, queries, keys.view(), values.view(), mask,
                      readable_keys, readable_values, mask, fenced_out);
      // A shard of the fenced keys from `readable` on: no query sees any.
      std::vector<T> state(2 * n);
      std::vector<size_t> best(n);
      const ConstMatrixView<T> k = keys.view(), v = values.view();
      attnpool::attention_pool_partial(
          spec, queries.view(), {k.row(readable), m - readable, d},
          {v.row(readable), m - readable, dv}, readable,
          {fenced_out.view(), state.data(), state.data() + n, best.data()},
          mask);
      for (size_t i = 0; i < n; ++i) {
        REQUIRE(state[i] == -std::numeric_limits<T>::infinity());
        REQUIRE(state[n + i] == T(0));
      }
    }
    if (spec.distance == Distance::dot) {
      AttentionMask<T> mask;
      const size_t length = readable;
      mask.valid_lengths = &length;
      TestMatrix<T> fenced_out(n, dv), readable_out(n, dv);
      const auto tensor = [](auto view) {
        return attnpool::dense_tensor(view.data, 1, 1, view.rows, view.cols);
      };
      attnpool::scaled_dot_product_attention(
          tensor(queries.view()), tensor(keys.view()), tensor(values.view()),
          tensor(fenced_out.view()), mask);
      RequireRanOnTarget();
      attnpool::scaled_dot_product_attention(
          tensor(queries.view()), tensor(readable_keys.view()),
          tensor(readable_values.view()), tensor(readable_out.view()), mask);
      REQUIRE(std::memcmp(fenced_out.data(), readable_out.data(),
                          fenced_out.storage().size() * sizeof(T)) == 0);
    }
  }
}

// The keys before every query's sliding window lie in unreadable pages:
// attention_pool (tiles, decode) and scaled dot-product attention equal,
// bit for bit, the same calls on the readable keys with the window moved
// with them.
template <typename T>
void NeverReadBeforeWindowCase() {
  std::mt19937_64 rng(kSeed + 3400);
  const size_t m = 1500, unreadable = 600, left = 200;
  const Shape shapes[] = {{"tiles", 30, m, 24, 16}, {"decode", 2, m, 64, 64}};
  const PoolSpec spec{Distance::dot, {Kernel::exp}, Normalization::softmax};
  for (const Shape& shape : shapes) {
    INFO(shape.path);
    const size_t n = shape.n, d = shape.d, dv = shape.dv;
    Fenced<T> keys(m, d, unreadable, /*fence_head=*/true),
        values(m, dv, unreadable, /*fence_head=*/true);
    TestMatrix<T> queries(n, d), readable_keys(m - unreadable, d),
        readable_values(m - unreadable, dv);
    queries.FillRandom(rng, 0);
    readable_keys.FillRandom(rng, 0);
    readable_values.FillRandom(rng, 1);
    for (size_t j = unreadable; j < m; ++j) {
      std::memcpy(keys.view().row(j), readable_keys.view().row(j - unreadable),
                  d * sizeof(T));
      std::memcpy(values.view().row(j),
                  readable_values.view().row(j - unreadable), dv * sizeof(T));
    }
    // Query i at position unreadable + left + i: its window starts at or
    // after the first readable key.
    Mask<T> mask, moved;
    mask.causal_offset = static_cast<std::ptrdiff_t>(unreadable + left);
    mask.window_left = moved.window_left = left;
    mask.window_right = moved.window_right = 40;
    moved.causal_offset = static_cast<std::ptrdiff_t>(left);
    TestMatrix<T> fenced_out(n, dv), readable_out(n, dv);
    RequireSamePool(spec, queries, keys.view(), values.view(), mask,
                    readable_keys, readable_values, moved, fenced_out);
    AttentionMask<T> attention, attention_moved;
    attention.causal_offset = mask.causal_offset;
    attention_moved.causal_offset = moved.causal_offset;
    attention.window_left = attention_moved.window_left = left;
    attention.window_right = attention_moved.window_right = 40;
    const auto tensor = [](auto view) {
      return attnpool::dense_tensor(view.data, 1, 1, view.rows, view.cols);
    };
    attnpool::scaled_dot_product_attention(
        tensor(queries.view()), tensor(keys.view()), tensor(values.view()),
        tensor(fenced_out.view()), attention);
    attnpool::scaled_dot_product_attention(
        tensor(queries.view()), tensor(readable_keys.view()),
        tensor(readable_values.view()), tensor(readable_out.view()),
        attention_moved);
    REQUIRE(std::memcmp(fenced_out.data(), readable_out.data(),
                        fenced_out.storage().size() * sizeof(T)) == 0);
  }
}

ATTNPOOL_TEST_EACH_TARGET(NeverReadBeforeWindowFloat,
                          "hidden_keys.never_read_before_window.float",
                          "[hidden]") {
  NeverReadBeforeWindowCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(NeverReadBeforeWindowDouble,
                          "hidden_keys.never_read_before_window.double",
                          "[hidden]") {
  NeverReadBeforeWindowCase<double>();
}

ATTNPOOL_TEST_EACH_TARGET(NeverReadFloat, "hidden_keys.never_read.float",
                          "[hidden]") {
  NeverReadCase<float>();
}

ATTNPOOL_TEST_EACH_TARGET(NeverReadDouble, "hidden_keys.never_read.double",
                          "[hidden]") {
  NeverReadCase<double>();
}

}  // namespace
}  // namespace attnpool_test
