// The attention layers (attention.h) on every supported target against a
// double-precision reference composed of the reference stages.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "src/reference.h"
#include "tests/accuracy.h"
#include "tests/each_target.h"
#include "tests/mask_oracle.h"
#include "tests/require_rejected.h"
#include "tests/test_data.h"

namespace attnpool_test {
namespace {

using attnpool::AttentionMask;
using attnpool::EmptyRows;
using attnpool::Mask;
using attnpool::Normalization;
using attnpool::TensorView;

// A (batch, heads, rows, cols) tensor in NaN-filled storage: dense
// (B, H, N, D), or "interleaved" (B, N, H, D) with padding after each row of
// heads, as a strided view.
template <typename T>
class Tensor {
 public:
  Tensor(size_t batch, size_t heads, size_t rows, size_t cols,
         bool interleaved = false)
      : batch_(batch), heads_(heads), rows_(rows), cols_(cols) {
    if (interleaved) {
      head_stride_ = cols;
      row_stride_ = heads * cols + 3;
      batch_stride_ = rows * row_stride_ + 1;
    } else {
      row_stride_ = cols;
      head_stride_ = rows * cols;
      batch_stride_ = heads * head_stride_;
    }
    storage_.assign(batch * batch_stride_ + 8,
                    std::numeric_limits<T>::quiet_NaN());
    inside_.assign(storage_.size(), false);
    for (size_t b = 0; b < batch; ++b)
      for (size_t h = 0; h < heads; ++h)
        for (size_t r = 0; r < rows; ++r)
          for (size_t c = 0; c < cols; ++c) {
            (*this)(b, h, r, c) = T(0);
            inside_[b * batch_stride_ + h * head_stride_ + r * row_stride_ +
                    c] = true;
          }
  }
  // Whether every element outside the view is still NaN (nothing written
  // there).
  bool CanariesIntact() const {
    for (size_t k = 0; k < storage_.size(); ++k) {
      if (!inside_[k] && !std::isnan(double(storage_[k]))) return false;
    }
    return true;
  }
  T& operator()(size_t b, size_t h, size_t r, size_t c) {
    return storage_[b * batch_stride_ + h * head_stride_ + r * row_stride_ + c];
  }
  T operator()(size_t b, size_t h, size_t r, size_t c) const {
    return storage_[b * batch_stride_ + h * head_stride_ + r * row_stride_ + c];
  }
  TensorView<T> view() {
    return {storage_.data(), batch_,        heads_,       rows_,
            cols_,           batch_stride_, head_stride_, row_stride_};
  }
  TensorView<const T> view() const {
    return {storage_.data(), batch_,        heads_,       rows_,
            cols_,           batch_stride_, head_stride_, row_stride_};
  }
  void FillNormal(std::mt19937_64& rng, double sigma) {
    std::normal_distribution<double> normal(0, sigma);
    for (size_t b = 0; b < batch_; ++b)
      for (size_t h = 0; h < heads_; ++h)
        for (size_t r = 0; r < rows_; ++r)
          for (size_t c = 0; c < cols_; ++c)
            (*this)(b, h, r, c) = static_cast<T>(normal(rng));
  }
  // The (b, h) matrix in double, row-major.
  std::vector<double> Matrix(size_t b, size_t h) const {
    std::vector<double> m(rows_ * cols_);
    for (size_t r = 0; r < rows_; ++r)
      for (size_t c = 0; c < cols_; ++c) m[r * cols_ + c] = (*this)(b, h, r, c);
    return m;
  }
  const AlignedVector<T>& storage() const { return storage_; }

 private:
  size_t batch_, heads_, rows_, cols_;
  size_t batch_stride_ = 0, head_stride_ = 0, row_stride_ = 0;
  AlignedVector<T> storage_;
  std::vector<bool> inside_;
};

// The reference output of one head from its scores (n×m, double, before the
// mask's bias): masked softmax, then the weighted sum of `values` (m×dv).
// Returns the output and, per element, Σⱼ wⱼ·|vⱼc| (the error scale).
struct HeadResult {
  std::vector<double> out, scale;
};

template <typename T>
HeadResult ReferenceHead(std::vector<double> scores, size_t n, size_t m,
                         const std::vector<double>& values, size_t dv,
                         const Mask<T>& mask, EmptyRows empty_rows) {
  attnpool::reference::normalize(Normalization::softmax, false, empty_rows,
                                 mask, scores, n, m);
  HeadResult result{std::vector<double>(n * dv, 0.0),
                    std::vector<double>(n * dv, 0.0)};
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < dv; ++c) {
      double sum = 0, scale = 0;
      for (size_t j = 0; j < m; ++j) {
        sum += scores[i * m + j] * values[j * dv + c];
        scale += std::fabs(scores[i * m + j] * values[j * dv + c]);
      }
      // An empty row is the policy's fill, whatever the values.
      // (A sink takes all of it: 0.)
      if (m == 0 && !mask.sink) sum = empty_rows == EmptyRows::nan ? NAN : 0.0;
      result.out[i * dv + c] = sum;
      result.scale[i * dv + c] = scale;
    }
  }
  return result;
}

// got (b, h, ·, ·) against a reference head: NaN where it is NaN, else
// within relative·scale.
template <typename T>
void RequireHead(const Tensor<T>& got, size_t b, size_t h,
                 const HeadResult& want, size_t n, size_t dv, double relative) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < dv; ++c) {
      const double g = got(b, h, i, c), w = want.out[i * dv + c];
      INFO("(b " << b << ", h " << h << ", i " << i << ", c " << c << ") got "
                 << g << " want " << w);
      REQUIRE(std::isnan(g) == std::isnan(w));
      if (std::isnan(w)) continue;
      REQUIRE(std::fabs(g - w) <= relative * want.scale[i * dv + c] +
                                      4 * std::numeric_limits<T>::min());
    }
  }
}

template <typename T>
Mask<T> HeadMask(const AttentionMask<T>& mask, size_t b, size_t h, size_t n,
                 std::vector<size_t>& lengths) {
  return OracleHeadMask(mask, b, h, n, &lengths);
}

// Masks to sweep for (B, H, n, m): none; per-batch lengths with causal and
// an offset; per-query lengths with a bias broadcast over heads and a
// visibility broadcast over the batch.
template <typename T>
struct MaskCase {
  const char* name;
  AttentionMask<T> mask;
};

template <typename T>
struct MaskStorage {
  std::vector<size_t> batch_lengths, query_lengths;
  std::vector<T> slopes, sinks;
  Tensor<T> bias;
  Tensor<uint8_t> visible;
  MaskStorage(size_t batch, size_t heads, size_t n, size_t m,
              std::mt19937_64& rng)
      : bias(batch, 1, n, m), visible(1, heads, n, m) {
    for (size_t b = 0; b < batch; ++b) batch_lengths.push_back(rng() % (m + 1));
    batch_lengths[0] = m;
    for (size_t k = 0; k < batch * n; ++k)
      query_lengths.push_back(rng() % (m + 1));
    bias.FillNormal(rng, 2.0);
    for (double slope : attnpool::alibi_slopes(heads))
      slopes.push_back(T(slope));
    for (size_t h = 0; h < heads; ++h) sinks.push_back(T(h % 3) - T(1.5));
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < m; ++j) visible(0, h, i, j) = rng() % 4 != 0;
  }
  std::vector<MaskCase<T>> Cases() const {
    std::vector<MaskCase<T>> cases;
    cases.push_back({"no mask", {}});
    AttentionMask<T> lengths;
    lengths.valid_lengths = batch_lengths.data();
    lengths.causal = true;
    lengths.causal_offset = 3;
    cases.push_back({"batch lengths + causal", lengths});
    AttentionMask<T> elementwise;
    elementwise.valid_lengths = query_lengths.data();
    elementwise.lengths_per_query = true;
    elementwise.bias = bias.view();
    elementwise.visible = visible.view();
    cases.push_back({"query lengths + bias + visible", elementwise});
    AttentionMask<T> window;  // Mistral's: the last 9 keys up to the query
    window.causal = true;
    window.causal_offset = 4;
    window.window_left = 8;
    cases.push_back({"sliding window + causal", window});
    AttentionMask<T> band = elementwise;  // both sides, the element-wise masks
    band.causal_offset = -2;
    band.window_left = 3;
    band.window_right = 20;
    cases.push_back({"window band + query lengths + bias + visible", band});
    AttentionMask<T> adjusted = lengths;  // Gemma 2's soft-cap, BLOOM's ALiBi
    adjusted.softcap = T(1.5);
    adjusted.alibi_slopes = slopes.data();
    adjusted.sinks = sinks.data();
    cases.push_back(
        {"batch lengths + causal + soft-cap + ALiBi + sinks", adjusted});
    AttentionMask<T> sinks_window = window;  // StreamingLLM
    sinks_window.sinks = sinks.data();
    sinks_window.window_right = 1;
    cases.push_back({"sliding window + sinks", sinks_window});
    AttentionMask<T> chunked = lengths;  // Llama 4's local layers
    chunked.chunk = 5;
    cases.push_back({"batch lengths + causal + chunks", chunked});
    AttentionMask<T> encoder;  // symmetric ALiBi over both sides
    encoder.alibi_slopes = slopes.data();
    encoder.alibi_symmetric = true;
    encoder.window_left = 6;
    encoder.window_right = 6;
    cases.push_back({"window band + symmetric ALiBi", encoder});
    return cases;
  }
};

// Σ |scale·q·k|-driven relative bound of a softmax attention output.
template <typename T>
double SoftmaxRelative(size_t m, double largest_logit) {
  const double u = kUnitRoundoff<T>;
  return (m + 16 + 8 * (1 + m / 128.0)) * u + 6 * kExpError<T> +
         u * (16 * largest_logit + 12);
}

// ------------------------------------------------- scaled dot-product

struct SdpaShape {
  size_t batch, heads, kv_heads, n, m, dk, dv;
};

// A shape's queries, keys and values, normal(0, 1), in either layout.
template <typename T>
struct SdpaInputs {
  SdpaInputs(const SdpaShape& s, bool interleaved, std::mt19937_64& rng)
      : queries(s.batch, s.heads, s.n, s.dk, interleaved),
        keys(s.batch, s.kv_heads, s.m, s.dk, interleaved),
        values(s.batch, s.kv_heads, s.m, s.dv, interleaved) {
    for (Tensor<T>* tensor : {&queries, &keys, &values}) {
      tensor->FillNormal(rng, 1.0);
    }
  }
  Tensor<T> queries, keys, values;
};

// Every (mask, scale) variant of each shape and layout, or with `every` > 1
// one in `every` of them (a different one per layout).
template <typename T>
void SdpaSweep(const std::vector<SdpaShape>& shapes, uint64_t seed,
               size_t every = 1) {
  std::mt19937_64 rng(seed);
  INFO("seed " << seed);
  for (const SdpaShape& s : shapes) {
    for (bool interleaved : {false, true}) {
      const SdpaInputs<T> inputs(s, interleaved, rng);
      const Tensor<T>& queries = inputs.queries;
      const Tensor<T>& keys = inputs.keys;
      const Tensor<T>& values = inputs.values;
      MaskStorage<T> storage(s.batch, s.heads, s.n, s.m, rng);
      size_t variant = 0;
      for (const auto& mask_case : storage.Cases()) {
        for (const std::optional<double>& scale :
             {std::optional<double>{}, std::optional<double>{0.3}}) {
          const size_t index = variant++;
          if (index % every != (interleaved ? 1 : 0) % every ||
              !InSweep(index / every, interleaved, 2)) {
            continue;
          }
          INFO("B " << s.batch << " Hq " << s.heads << " Hkv " << s.kv_heads
                    << " n " << s.n << " m " << s.m << " dk " << s.dk << " dv "
                    << s.dv << (interleaved ? " interleaved " : " dense ")
                    << mask_case.name << " scale " << (scale ? *scale : -1.0));
          Tensor<T> out(s.batch, s.heads, s.n, s.dv, interleaved);
          const auto empty_rows = scale ? EmptyRows::zero : EmptyRows::nan;
          attnpool::scaled_dot_product_attention(
              queries.view(), keys.view(), values.view(), out.view(),
              mask_case.mask, scale, empty_rows);
          if (s.n != 0 && s.m != 0) RequireRanOnTarget();
          const double factor = scale ? *scale : 1 / std::sqrt(double(s.dk));
          const size_t group = s.heads / s.kv_heads;
          std::vector<size_t> lengths;
          for (size_t b = 0; b < s.batch; ++b) {
            for (size_t h = 0; h < s.heads; ++h) {
              const auto q = queries.Matrix(b, h),
                         k = keys.Matrix(b, h / group),
                         v = values.Matrix(b, h / group);
              std::vector<double> scores(s.n * s.m);
              double largest = 0;
              for (size_t i = 0; i < s.n; ++i) {
                for (size_t j = 0; j < s.m; ++j) {
                  double dot = 0;
                  for (size_t p = 0; p < s.dk; ++p)
                    dot += q[i * s.dk + p] * k[j * s.dk + p];
                  scores[i * s.m + j] = factor * dot;
                  largest = std::max(largest, std::fabs(factor * dot));
                }
              }
              if (mask_case.mask.alibi_slopes) {  // its offsets' reach
                largest += std::fabs(double(mask_case.mask.alibi_slopes[h])) *
                           double(s.m + s.n + 4);
              }
              const auto want = ReferenceHead<T>(
                  scores, s.n, s.m, v, s.dv,
                  HeadMask(mask_case.mask, b, h, s.n, lengths), empty_rows);
              RequireHead(out, b, h, want, s.n, s.dv,
                          SoftmaxRelative<T>(s.m, largest + 8));
            }
          }
          REQUIRE(out.CanariesIntact());
        }
      }
    }
  }
}

const std::vector<SdpaShape> kSdpaShapes = {{2, 4, 2, 37, 53, 24, 12},
                                            {1, 3, 1, 1, 300, 64, 64},
                                            {2, 2, 2, 100, 17, 5, 33},
                                            {1, 1, 1, 0, 5, 4, 4},
                                            {2, 2, 1, 6, 0, 4, 3}};

ATTNPOOL_TEST_EACH_TARGET(SdpaFloat, "attention.sdpa.float", "[attention]") {
  SdpaSweep<float>(kSdpaShapes, kSeed + 60);
}
ATTNPOOL_TEST_EACH_TARGET(SdpaDouble, "attention.sdpa.double", "[attention]") {
  SdpaSweep<double>(kSdpaShapes, kSeed + 60);
}

// `profile` forced with random values of its parameters (targets.h
// force_tuning): the block sizes too where `blocks`, else only what decodes
// the same bits (stretch, prefetch distance, load width, interleaving).
// Block sizes include ones that are not whole panels and blocks of a few
// keys.
std::string RandomTuning(const std::string& profile, bool blocks,
                         std::mt19937_64& rng) {
  const auto pick = [&](std::initializer_list<size_t> values) {
    return std::to_string(values.begin()[rng() % values.size()]);
  };
  std::string text = profile;
  if (blocks) {
    text += " query_rows=" + pick({24, 48, 72, 120, 192});
    text += " key_block_bytes=" + pick({4, 200, 1000, 2048, 3000, 8192});
  }
  text += " decode_stretch=" + pick({1, 2, 3, 5, 8});
  text += " decode_key_prefetch_rows=" + pick({0, 1, 7, 64, 300});
  text += " decode_load_bytes=" + pick({0, 32});
  text += " decode_interleave=" + pick({0, 1});
  return text;
}

// Every tuning profile (targets.h), and random parameters forced beside
// them, on keys that span several of its key blocks and decode stretches:
// decode (one query per head, grouped), a few queries, and the tile path
// over more queries than one block of rows.
template <typename T>
void TuningSweep() {
  const std::vector<SdpaShape> shapes = {{1, 4, 2, 1, 2600, 64, 48},
                                         {1, 2, 1, 3, 1100, 16, 8},
                                         {1, 1, 1, 110, 700, 20, 12}};
  struct Reset {
    ~Reset() { attnpool::force_tuning(""); }
  } reset;
  attnpool::force_tuning("");  // this CPU's choice, over ATTNPOOL_TUNING
  std::vector<std::string> profiles = attnpool::tunings();
  REQUIRE(profiles.front() == attnpool::tuning());
  std::mt19937_64 rng(kSeed + 60);
  INFO("seed " << kSeed + 60);
  // (Thinned: one random set.)
  for (size_t i = 0, listed = profiles.size(); i < SweepCount(3, 1); ++i) {
    profiles.push_back(RandomTuning(profiles[i % listed], true, rng));
  }
  for (const std::string& profile : profiles) {
    INFO("tuning " << profile);
    attnpool::force_tuning(profile);
    REQUIRE(attnpool::tuning() == profile);
    SdpaSweep<T>(shapes, kSeed + 61, 3);
  }
}
ATTNPOOL_TEST_EACH_TARGET(TuningFloat, "attention.tuning.float",
                          "[attention]") {
  TuningSweep<float>();
}
ATTNPOOL_TEST_EACH_TARGET(TuningDouble, "attention.tuning.double",
                          "[attention]") {
  TuningSweep<double>();
}

// The active profile's `name` parameter ("name=value ..." of
// tuning_parameters()).
size_t TuningParameter(const std::string& name) {
  const std::string parameters = " " + attnpool::tuning_parameters();
  const size_t at = parameters.find(" " + name + "=");
  REQUIRE(at != std::string::npos);
  return std::stoul(parameters.substr(at + name.size() + 2));
}

// What profiles change beside their block sizes (decode stretch, prefetch,
// load width, interleaving) changes no bit: profiles with the same
// query_rows and key_block_bytes decode to the same outputs — depths that
// end inside a vector, values read in place (dv whole vectors, in one pass
// of the weighted sum or several) or copied, grouped heads; and with a
// valid length that ends inside a key block and an infinite value in the
// first head's values (its weighted sum repaired: arch/contributions.h).
template <typename T>
void TuningBitsSweep() {
  const std::vector<SdpaShape> shapes = {
      {1, 2, 2, 1, 2600, 64, 64}, {1, 1, 1, 1, 1500, 64, 128},
      {1, 2, 1, 1, 2100, 20, 48}, {1, 1, 1, 1, 2300, 100, 80},
      {1, 4, 2, 1, 900, 5, 16},   {1, 1, 1, 1, 700, 40, 12}};
  struct Reset {
    ~Reset() { attnpool::force_tuning(""); }
  } reset;
  // Profiles by (query_rows, key_block_bytes), each listed one with two
  // random settings of the rest forced beside it.
  std::mt19937_64 rng(kSeed + 62);
  INFO("seed " << kSeed + 62);
  std::vector<std::string> profiles;
  for (const std::string& profile : attnpool::tunings()) {
    profiles.push_back(profile);
    for (int i = 0; i < 2; ++i) {
      profiles.push_back(RandomTuning(profile, false, rng));
    }
  }
  std::vector<std::vector<std::string>> groups;
  std::vector<std::pair<size_t, size_t>> blocks;
  for (const std::string& profile : profiles) {
    attnpool::force_tuning(profile);
    const std::pair<size_t, size_t> sizes{TuningParameter("query_rows"),
                                          TuningParameter("key_block_bytes")};
    const size_t group =
        std::find(blocks.begin(), blocks.end(), sizes) - blocks.begin();
    if (group == blocks.size()) {
      blocks.push_back(sizes);
      groups.emplace_back();
    }
    groups[group].push_back(profile);
  }
  size_t compared = 0;
  for (const SdpaShape& s : shapes) {
    for (const auto& [interleaved, adjusted] :
         {std::pair{false, false}, {true, false}, {false, true}}) {
      INFO("Hq " << s.heads << " Hkv " << s.kv_heads << " m " << s.m << " dk "
                 << s.dk << " dv " << s.dv
                 << (interleaved ? " interleaved" : " dense")
                 << (adjusted ? ", valid length and an infinite value" : ""));
      SdpaInputs<T> inputs(s, interleaved, rng);
      const size_t length = s.m - 300;
      AttentionMask<T> mask;
      if (adjusted) {
        mask.valid_lengths = &length;
        inputs.values(0, 0, s.m / 2, s.dv - 1) =
            std::numeric_limits<T>::infinity();
      }
      for (const auto& group : groups) {
        std::vector<T> first;
        for (const std::string& profile : group) {
          INFO("tuning " << profile << " against " << group.front());
          attnpool::force_tuning(profile);
          Tensor<T> out(s.batch, s.heads, s.n, s.dv, interleaved);
          attnpool::scaled_dot_product_attention(
              inputs.queries.view(), inputs.keys.view(), inputs.values.view(),
              out.view(), mask);
          RequireRanOnTarget();
          const auto& bits = out.storage();
          if (first.empty()) {
            first.assign(bits.begin(), bits.end());
            continue;
          }
          REQUIRE(std::memcmp(first.data(), bits.data(),
                              first.size() * sizeof(T)) == 0);
          ++compared;
        }
      }
    }
  }
  REQUIRE(compared > 0);  // every profile beside its random decode settings
}
ATTNPOOL_TEST_EACH_TARGET(TuningBitsFloat, "attention.tuning_bits.float",
                          "[attention]") {
  TuningBitsSweep<float>();
}
ATTNPOOL_TEST_EACH_TARGET(TuningBitsDouble, "attention.tuning_bits.double",
                          "[attention]") {
  TuningBitsSweep<double>();
}

// ------------------------------------------------- grouped decode

// Decode over grouped heads (one query a head; 2, 4, 6 and 8 query heads a
// key head, which scaled_dot_product_attention runs up to four heads a
// call): bitwise the same call with each key head repeated for its query
// heads (a call a head), under masks every head shares; values read in
// place (dv whole vectors) and copied.
template <typename T>
void GroupedDecode() {
  std::mt19937_64 rng(kSeed + 64);
  INFO("seed " << kSeed + 64);
  const size_t batch = 2, kv_heads = 2, m = 1300, dk = 40;
  const std::vector<size_t> per_batch = {m - 100, 700}, per_query = {900, m};
  size_t combination = 0;
  for (size_t group : {2, 4, 6, 8}) {
    for (size_t dv : {24, 64}) {
      for (bool interleaved : {false, true}) {
        // Thinned: a third of the combinations, each group, dv and
        // layout among them.
        if (!InSweep(combination++)) continue;
        const size_t heads = kv_heads * group;
        const SdpaInputs<T> inputs({batch, heads, kv_heads, 1, m, dk, dv},
                                   interleaved, rng);
        Tensor<T> keys(batch, heads, m, dk, interleaved),
            values(batch, heads, m, dv, interleaved);
        for (size_t b = 0; b < batch; ++b) {
          for (size_t h = 0; h < heads; ++h) {
            for (size_t j = 0; j < m; ++j) {
              for (size_t c = 0; c < dk; ++c) {
                keys(b, h, j, c) = inputs.keys(b, h / group, j, c);
              }
              for (size_t c = 0; c < dv; ++c) {
                values(b, h, j, c) = inputs.values(b, h / group, j, c);
              }
            }
          }
        }
        // Grouped under the first three (their windows bind no query);
        // with a window that binds, a call a head.
        AttentionMask<T> lengths, each_query, adjusted, window;
        lengths.valid_lengths = per_batch.data();
        each_query.valid_lengths = per_query.data();
        each_query.lengths_per_query = true;
        adjusted.causal = true;
        adjusted.causal_offset = std::ptrdiff_t(m - 1);
        adjusted.window_left = m + 8;
        adjusted.window_right = 0;
        adjusted.softcap = T(5);
        window = adjusted;
        window.window_left = 600;
        const std::pair<const AttentionMask<T>*, const char*> masks[] = {
            {&lengths, "valid lengths"},
            {&each_query, "lengths per query"},
            {&adjusted, "causal, wide window, soft cap"},
            {&window, "causal, window of 600, soft cap"}};
        for (const auto& [mask, name] : masks) {
          INFO("group " << group << " dv " << dv
                        << (interleaved ? " interleaved, " : " dense, ")
                        << name);
          Tensor<T> grouped(batch, heads, 1, dv, interleaved),
              repeated(batch, heads, 1, dv, interleaved);
          attnpool::scaled_dot_product_attention(
              inputs.queries.view(), inputs.keys.view(), inputs.values.view(),
              grouped.view(), *mask);
          RequireRanOnTarget();
          attnpool::scaled_dot_product_attention(inputs.queries.view(),
                                                 keys.view(), values.view(),
                                                 repeated.view(), *mask);
          REQUIRE(std::memcmp(grouped.storage().data(),
                              repeated.storage().data(),
                              grouped.storage().size() * sizeof(T)) == 0);
          REQUIRE(grouped.CanariesIntact());
        }
      }
    }
  }
}
ATTNPOOL_TEST_EACH_TARGET(GroupedDecodeFloat, "attention.grouped_decode.float",
                          "[attention]") {
  GroupedDecode<float>();
}
ATTNPOOL_TEST_EACH_TARGET(GroupedDecodeDouble,
                          "attention.grouped_decode.double", "[attention]") {
  GroupedDecode<double>();
}

// Grouped decode (query heads that share a key head, one pass over its
// keys) where masks hide the last keys: a causal limit, a window, valid
// lengths. Each head bitwise as alone; the hidden keys' values (100) never
// reach it.
ATTNPOOL_TEST_EACH_TARGET(GroupedDecodeLimits,
                          "attention.grouped_decode_limits", "[attention]") {
  std::mt19937_64 rng(kSeed + 63);
  INFO("seed " << kSeed + 63);
  const size_t heads = 4, m = 10;
  for (size_t d : {size_t{4}, size_t{64}}) {
    std::vector<float> q(heads * d), k(m * d), v(m * d);
    std::normal_distribution<float> normal;
    for (auto* a : {&q, &k, &v}) {
      for (float& x : *a) x = normal(rng);
    }
    for (size_t c = 0; c < d; ++c) v[(m - 1) * d + c] = 100.0f;
    const auto keys = attnpool::dense_tensor<const float>(k.data(), 1, 1, m, d);
    const auto values =
        attnpool::dense_tensor<const float>(v.data(), 1, 1, m, d);
    const size_t length = m - 3;
    AttentionMask<float> masks[3];
    masks[0].causal = true;
    masks[0].causal_offset = std::ptrdiff_t(m) - 2;
    masks[1].window_left = 4;
    masks[1].window_right = 0;
    masks[1].causal_offset = std::ptrdiff_t(m) - 3;
    masks[2].valid_lengths = &length;
    for (const AttentionMask<float>& mask : masks) {
      std::vector<float> grouped(heads * d), alone(d);
      attnpool::scaled_dot_product_attention(
          attnpool::dense_tensor<const float>(q.data(), 1, heads, 1, d), keys,
          values, attnpool::dense_tensor(grouped.data(), 1, heads, 1, d), mask);
      RequireRanOnTarget();
      for (size_t h = 0; h < heads; ++h) {
        INFO("d " << d << " head " << h << " on " << CurrentTarget());
        attnpool::scaled_dot_product_attention(
            attnpool::dense_tensor<const float>(q.data() + h * d, 1, 1, 1, d),
            keys, values, attnpool::dense_tensor(alone.data(), 1, 1, 1, d),
            mask);
        REQUIRE(std::memcmp(alone.data(), grouped.data() + h * d,
                            d * sizeof(float)) == 0);
        for (size_t c = 0; c < d; ++c) REQUIRE(std::fabs(alone[c]) < 50.0f);
      }
    }
  }
}

// A paged cache laid out (blocks, Hkv, block_size, d): a block's rows of
// one head are not followed by the next block's (the pages do not abut),
// even where the block table lists consecutive blocks. Bitwise the same
// keys and values in contiguous rows.
ATTNPOOL_TEST_EACH_TARGET(PagedHeadsApart, "attention.paged_heads_apart",
                          "[attention]") {
  std::mt19937_64 rng(kSeed + 64);
  INFO("seed " << kSeed + 64 << " on " << CurrentTarget());
  const size_t blocks = 4, kv_heads = 2, page = 4, m = blocks * page;
  for (size_t d : {size_t{8}, size_t{64}}) {
    std::vector<float> pool_k(blocks * kv_heads * page * d),
        pool_v(pool_k.size()), q(kv_heads * d), k(kv_heads * m * d),
        v(k.size());
    std::normal_distribution<float> normal;
    for (auto* a : {&pool_k, &pool_v, &q}) {
      for (float& x : *a) x = normal(rng);
    }
    for (size_t h = 0; h < kv_heads; ++h) {
      for (size_t j = 0; j < m; ++j) {
        const size_t from = ((j / page * kv_heads + h) * page + j % page) * d;
        std::copy_n(&pool_k[from], d, &k[(h * m + j) * d]);
        std::copy_n(&pool_v[from], d, &v[(h * m + j) * d]);
      }
    }
    const auto queries =
        attnpool::dense_tensor<const float>(q.data(), 1, kv_heads, 1, d);
    std::vector<float> paged(kv_heads * d), contiguous(kv_heads * d);
    attnpool::scaled_dot_product_attention(
        queries,
        attnpool::dense_tensor<const float>(k.data(), 1, kv_heads, m, d),
        attnpool::dense_tensor<const float>(v.data(), 1, kv_heads, m, d),
        attnpool::dense_tensor(contiguous.data(), 1, kv_heads, 1, d));
    const int32_t table[blocks] = {0, 1, 2, 3};
    const size_t length = m, query_offsets[2] = {0, 1};
    const attnpool::PagedKVCache<float> cache{
        attnpool::dense_tensor<const float>(pool_k.data(), blocks, kv_heads,
                                            page, d),
        attnpool::dense_tensor<const float>(pool_v.data(), blocks, kv_heads,
                                            page, d),
        table, blocks, &length};
    attnpool::scaled_dot_product_attention_paged(
        queries, cache, attnpool::dense_tensor(paged.data(), 1, kv_heads, 1, d),
        1, query_offsets);
    RequireRanOnTarget();
    INFO("d " << d);
    REQUIRE(std::memcmp(paged.data(), contiguous.data(),
                        paged.size() * sizeof(float)) == 0);
  }
}

// Adjusted logits far below 0 (query·key = −200): ALiBi and soft-capping
// over key counts that are no multiple of a vector, at depths of the small
// path and of the tiles, one query (decode) and many. The padding lanes of
// a block must not join its max (the weights then underflowed to 0: NaN
// rows). And a sink far above the scores (92 over 0): it must raise the
// row's max, or Σp overflows and the output falls to 0.
ATTNPOOL_TEST_EACH_TARGET(AdjustedFarFromZero,
                          "attention.adjusted_far_from_zero", "[attention]") {
  const float slope = 1e-6f;
  AttentionMask<float> alibi, softcap;
  alibi.alibi_slopes = &slope;
  softcap.softcap = 500.0f;
  for (size_t d : {size_t{1}, size_t{32}}) {
    for (size_t n : {size_t{1}, size_t{64}}) {
      for (size_t m : {size_t{5}, size_t{21}}) {
        Tensor<float> q(1, 1, n, d), k(1, 1, m, d), v(1, 1, m, 1);
        for (size_t i = 0; i < n; ++i) q(0, 0, i, 0) = -20.0f;
        for (size_t j = 0; j < m; ++j) {
          k(0, 0, j, 0) = 10.0f;
          v(0, 0, j, 0) = float(j + 1);
        }
        for (const AttentionMask<float>* mask : {&alibi, &softcap}) {
          INFO("d " << d << " n " << n << " m " << m
                    << (mask == &alibi ? " ALiBi" : " soft-cap") << " on "
                    << CurrentTarget());
          Tensor<float> out(1, 1, n, 1);
          attnpool::scaled_dot_product_attention(q.view(), k.view(), v.view(),
                                                 out.view(), *mask, 1.0);
          RequireRanOnTarget();
          for (size_t i = 0; i < n; ++i) {
            REQUIRE(out(0, 0, i, 0) == Approx((m + 1) / 2.0).epsilon(1e-4));
          }
        }
      }
    }
  }
  for (size_t n : {size_t{1}, size_t{64}}) {
    INFO("n " << n << " on " << CurrentTarget());
    Tensor<float> q(1, 1, n, 16), k(1, 1, 3, 16), v(1, 1, 3, 1),
        out(1, 1, n, 1);
    for (size_t j = 0; j < 3; ++j) v(0, 0, j, 0) = 1e37f;
    const float sink = 92.0f;
    AttentionMask<float> mask;
    mask.sinks = &sink;
    attnpool::scaled_dot_product_attention(q.view(), k.view(), v.view(),
                                           out.view(), mask, 1.0);
    RequireRanOnTarget();
    // 3·e^0 of weight beside e^92: out = 1e37·3/(3 + e^92), the weights
    // e^-92 ≈ 2^-133 subnormal floats (2^-149 apart: 1.5e-5 of them).
    for (size_t i = 0; i < n; ++i) {
      REQUIRE(out(0, 0, i, 0) ==
              Approx(1e37 * 3 / (3 + std::exp(92.0))).epsilon(1e-3));
    }
  }
}

// Query heads that overlap in memory (a head stride below the row, 0
// broadcasting one row to every head) are valid inputs: a decode's heads
// that share a key head then cannot be one call's rows, and each head
// gives the bits of its query copied out.
TEST_CASE("attention: grouped decode of query heads that overlap",
          "[attention]") {
  constexpr size_t heads = 4, d = 4, m = 37;
  std::mt19937_64 rng(kSeed + 77);
  std::normal_distribution<float> normal;
  std::vector<float> query(d + heads), keys(2 * m * d), values(2 * m * d);
  for (auto* v : {&query, &keys, &values}) {
    for (float& x : *v) x = normal(rng);
  }
  for (size_t kv_heads : {1, 2}) {
    for (size_t head_stride : {0, 1}) {
      INFO("kv heads " << kv_heads << ", query head stride " << head_stride);
      const TensorView<const float> overlapping{query.data(), 1, heads, 1, d, 0,
                                                head_stride,  d};
      std::vector<float> copied(heads * d);
      for (size_t h = 0; h < heads; ++h) {
        std::copy_n(query.data() + h * head_stride, d, copied.data() + h * d);
      }
      const TensorView<const float> apart{
          copied.data(), 1, heads, 1, d, 0, d, d};
      const TensorView<const float> k{keys.data(), 1, kv_heads, m,
                                      d,           0, m * d,    d};
      const TensorView<const float> v{values.data(), 1, kv_heads, m, d, 0,
                                      m * d,         d};
      std::vector<float> got(heads * d), want(heads * d);
      const TensorView<float> got_view{got.data(), 1, heads, 1, d, 0, d, d};
      const TensorView<float> want_view{want.data(), 1, heads, 1, d, 0, d, d};
      attnpool::scaled_dot_product_attention(overlapping, k, v, got_view);
      attnpool::scaled_dot_product_attention(apart, k, v, want_view);
      REQUIRE(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
      // One sequence, packed.
      const size_t query_offsets[] = {0, 1}, key_offsets[] = {0, m};
      const attnpool::PackedSequences one{1, query_offsets, key_offsets};
      std::fill(got.begin(), got.end(), 0.0f);
      attnpool::scaled_dot_product_attention_varlen(overlapping, k, v, got_view,
                                                    one);
      REQUIRE(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
    }
  }
}

// ------------------------------------------------- packed sequences

// Rows [begin, end) of every head of a (1, H, rows, cols) view.
template <typename U>
TensorView<U> PackedRows(TensorView<U> view, size_t begin, size_t end) {
  view.data += begin * view.row_stride;
  view.rows = end - begin;
  return view;
}

// Packed sequences in (Σn, H, d) arrays (an interleaved view of batch 1),
// with grouped heads: each sequence's output is bitwise what
// scaled_dot_product_attention gives it alone, its positions aligned at
// the ends (causal_offset m − n + the mask's). Empty sequences on either
// side; decode (one query each) over contexts long enough to be split into
// key chunks, for 1 and 2 threads.
template <typename T>
void Varlen() {
  std::mt19937_64 rng(kSeed + 63);
  INFO("seed " << kSeed + 63);
  const size_t heads = 4, kv_heads = 2, dk = 16, dv = 8;
  const std::vector<std::pair<size_t, size_t>> prefill = {
      {3, 40}, {0, 7}, {17, 17}, {1, 300}, {6, 0}, {30, 200}};
  // (Under emulation, one context long enough to be split.)
  const std::vector<std::pair<size_t, size_t>> decode =
      ThinSweep() ? std::vector<std::pair<size_t, size_t>>{{1, 8200}, {1, 5}}
                  : std::vector<std::pair<size_t, size_t>>{
                        {1, 9000}, {1, 20000}, {1, 5}};
  std::vector<T> slopes, sinks;
  for (double slope : attnpool::alibi_slopes(heads)) slopes.push_back(T(slope));
  for (size_t h = 0; h < heads; ++h) sinks.push_back(T(h) - T(1));
  AttentionMask<T> adjusted;
  adjusted.causal = true;
  adjusted.causal_offset = -1;
  adjusted.window_left = 5;
  adjusted.softcap = T(4);
  adjusted.alibi_slopes = slopes.data();
  adjusted.sinks = sinks.data();
  for (const auto* lengths : {&prefill, &decode}) {
    std::vector<size_t> query_offsets = {0}, key_offsets = {0};
    for (const auto& [n, m] : *lengths) {
      query_offsets.push_back(query_offsets.back() + n);
      key_offsets.push_back(key_offsets.back() + m);
    }
    const size_t count = lengths->size();
    const attnpool::PackedSequences sequences{count, query_offsets.data(),
                                              key_offsets.data()};
    Tensor<T> queries(1, heads, query_offsets.back(), dk, true),
        keys(1, kv_heads, key_offsets.back(), dk, true),
        values(1, kv_heads, key_offsets.back(), dv, true);
    queries.FillNormal(rng, 1.0);
    keys.FillNormal(rng, 1.0);
    values.FillNormal(rng, 1.0);
    for (const AttentionMask<T>& mask : {AttentionMask<T>{}, adjusted}) {
      for (int threads : {1, 2}) {
        INFO((lengths == &decode ? "decode" : "prefill")
             << (mask.causal ? " causal + window + adjusted" : " no mask")
             << " threads " << threads);
        Tensor<T> out(1, heads, query_offsets.back(), dv, true),
            alone(1, heads, query_offsets.back(), dv, true);
        attnpool::scaled_dot_product_attention_varlen(
            queries.view(), keys.view(), values.view(), out.view(), sequences,
            mask, {}, EmptyRows::zero, {threads});
        if (query_offsets.back() != 0) RequireRanOnTarget();
        for (size_t b = 0; b < count; ++b) {
          const size_t q0 = query_offsets[b], q1 = query_offsets[b + 1],
                       k0 = key_offsets[b], k1 = key_offsets[b + 1];
          AttentionMask<T> own = mask;
          own.causal_offset = static_cast<std::ptrdiff_t>(k1 - k0) -
                              static_cast<std::ptrdiff_t>(q1 - q0) +
                              mask.causal_offset;
          attnpool::scaled_dot_product_attention(
              PackedRows(queries.view(), q0, q1),
              PackedRows(keys.view(), k0, k1),
              PackedRows(values.view(), k0, k1),
              PackedRows(alone.view(), q0, q1), own, {}, EmptyRows::zero,
              {threads});
        }
        REQUIRE(std::memcmp(out.storage().data(), alone.storage().data(),
                            out.storage().size() * sizeof(T)) == 0);
        REQUIRE(out.CanariesIntact());
      }
    }
  }
}

// A paged KV cache, (blocks, block_size, Hkv, d) with the blocks of the
// sequences scattered through the pool in a random order: each sequence's
// output is bitwise that of the same keys and values packed contiguously
// (scaled_dot_product_attention_varlen). Decode (one query each, long
// contexts split into key chunks, the keys read in place) and prefill (the
// keys packed from their blocks); values of whole vectors and not; block
// sizes 16 and 5.
template <typename T>
void Paged() {
  std::mt19937_64 rng(kSeed + 64);
  INFO("seed " << kSeed + 64);
  const size_t heads = 4, kv_heads = 2, dk = 32;
  std::vector<T> sinks = {T(0), T(1), T(-1), T(2)};
  AttentionMask<T> causal_window;
  causal_window.causal = true;
  causal_window.window_left = 700;
  causal_window.sinks = sinks.data();
  const std::vector<std::pair<size_t, size_t>> decode = {
      {1, 9000}, {1, 37}, {1, 0}, {1, 3000}};
  const std::vector<std::pair<size_t, size_t>> prefill = {
      {40, 300}, {7, 7}, {0, 20}, {130, 130}};
  for (size_t block_size : {size_t{16}, size_t{5}}) {
    for (size_t dv : {size_t{64}, size_t{5}}) {
      for (const auto* lengths : {&decode, &prefill}) {
        if (block_size == 5 && lengths == &decode && dv == 5) continue;
        // Under emulation: every block size, dv and path once.
        if (ThinSweep() &&
            !InSweep(block_size + dv + (lengths == &decode), 0, 2)) {
          continue;
        }
        std::vector<size_t> query_offsets = {0}, key_offsets = {0}, key_lengths;
        size_t blocks = 0, widest = 0;
        for (const auto& [n, m] : *lengths) {
          query_offsets.push_back(query_offsets.back() + n);
          key_offsets.push_back(key_offsets.back() + m);
          key_lengths.push_back(m);
          const size_t used = (m + block_size - 1) / block_size;
          blocks += used;
          widest = std::max(widest, used);
        }
        const size_t count = lengths->size(), stride = widest + 1;
        blocks += 3;  // unused blocks in the pool
        std::vector<int32_t> order(blocks);
        for (size_t p = 0; p < blocks; ++p) order[p] = int32_t(p);
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<int32_t> table(count * stride, -1);
        // The pool: (blocks, block_size, Hkv, d); NaN where no key is.
        const T nan = std::numeric_limits<T>::quiet_NaN();
        std::vector<T> key_pool(blocks * block_size * kv_heads * dk, nan),
            value_pool(blocks * block_size * kv_heads * dv, nan);
        Tensor<T> queries(1, heads, query_offsets.back(), dk, true),
            keys(1, kv_heads, key_offsets.back(), dk, true),
            values(1, kv_heads, key_offsets.back(), dv, true);
        queries.FillNormal(rng, 1.0);
        keys.FillNormal(rng, 1.0);
        values.FillNormal(rng, 1.0);
        size_t next = 0;
        for (size_t b = 0; b < count; ++b) {
          for (size_t j = 0; j < key_lengths[b]; ++j) {
            if (j % block_size == 0)
              table[b * stride + j / block_size] = order[next++];
            const size_t block = size_t(table[b * stride + j / block_size]);
            const size_t row = block * block_size + j % block_size;
            for (size_t g = 0; g < kv_heads; ++g) {
              for (size_t c = 0; c < dk; ++c) {
                key_pool[(row * kv_heads + g) * dk + c] =
                    keys(0, g, key_offsets[b] + j, c);
              }
              for (size_t c = 0; c < dv; ++c) {
                value_pool[(row * kv_heads + g) * dv + c] =
                    values(0, g, key_offsets[b] + j, c);
              }
            }
          }
        }
        attnpool::PagedKVCache<T> cache;
        cache.keys = {key_pool.data(),
                      blocks,
                      kv_heads,
                      block_size,
                      dk,
                      block_size * kv_heads * dk,
                      dk,
                      kv_heads * dk};
        cache.values = {
            value_pool.data(),          blocks, kv_heads,     block_size, dv,
            block_size * kv_heads * dv, dv,     kv_heads * dv};
        cache.block_table = table.data();
        cache.block_table_stride = stride;
        cache.lengths = key_lengths.data();
        for (const AttentionMask<T>& mask :
             {AttentionMask<T>{}, causal_window}) {
          INFO("block " << block_size << " dv " << dv
                        << (lengths == &decode ? " decode" : " prefill")
                        << (mask.causal ? " causal + window + sinks" : ""));
          Tensor<T> paged(1, heads, query_offsets.back(), dv, true),
              contiguous(1, heads, query_offsets.back(), dv, true);
          attnpool::scaled_dot_product_attention_paged(
              queries.view(), cache, paged.view(), count, query_offsets.data(),
              mask, {}, EmptyRows::zero);
          RequireRanOnTarget();
          attnpool::scaled_dot_product_attention_varlen(
              queries.view(), keys.view(), values.view(), contiguous.view(),
              {count, query_offsets.data(), key_offsets.data()}, mask, {},
              EmptyRows::zero);
          REQUIRE(std::memcmp(paged.storage().data(),
                              contiguous.storage().data(),
                              paged.storage().size() * sizeof(T)) == 0);
          REQUIRE(paged.CanariesIntact());
        }
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(PagedFloat, "attention.paged.float", "[attention]") {
  Paged<float>();
}
ATTNPOOL_TEST_EACH_TARGET(PagedDouble, "attention.paged.double",
                          "[attention]") {
  Paged<double>();
}

ATTNPOOL_TEST_EACH_TARGET(VarlenFloat, "attention.varlen.float",
                          "[attention]") {
  Varlen<float>();
}
ATTNPOOL_TEST_EACH_TARGET(VarlenDouble, "attention.varlen.double",
                          "[attention]") {
  Varlen<double>();
}

// Grouped-query attention reads each key/value head for its group in place:
// the same bits as ordinary attention over key/value heads repeated.
template <typename T>
void GroupedQuery() {
  std::mt19937_64 rng(kSeed + 61);
  const size_t batch = 2, heads = 6, n = 21, m = 40, dk = 16, dv = 8;
  for (size_t kv_heads : {size_t{1}, size_t{2}, size_t{3}}) {
    INFO("kv heads " << kv_heads);
    Tensor<T> queries(batch, heads, n, dk), keys(batch, kv_heads, m, dk),
        values(batch, kv_heads, m, dv);
    queries.FillNormal(rng, 1);
    keys.FillNormal(rng, 1);
    values.FillNormal(rng, 1);
    Tensor<T> repeated_keys(batch, heads, m, dk),
        repeated_values(batch, heads, m, dv);
    const size_t group = heads / kv_heads;
    for (size_t b = 0; b < batch; ++b)
      for (size_t h = 0; h < heads; ++h)
        for (size_t j = 0; j < m; ++j) {
          for (size_t p = 0; p < dk; ++p)
            repeated_keys(b, h, j, p) = keys(b, h / group, j, p);
          for (size_t c = 0; c < dv; ++c)
            repeated_values(b, h, j, c) = values(b, h / group, j, c);
        }
    AttentionMask<T> mask;
    mask.causal = true;
    mask.causal_offset = 10;
    Tensor<T> grouped(batch, heads, n, dv), ordinary(batch, heads, n, dv);
    attnpool::scaled_dot_product_attention(queries.view(), keys.view(),
                                           values.view(), grouped.view(), mask);
    RequireRanOnTarget();
    REQUIRE_FALSE(attnpool::last_fused_path().empty());  // the layer's path
    attnpool::scaled_dot_product_attention(queries.view(), repeated_keys.view(),
                                           repeated_values.view(),
                                           ordinary.view(), mask);
    REQUIRE(std::memcmp(grouped.storage().data(), ordinary.storage().data(),
                        grouped.storage().size() * sizeof(T)) == 0);
  }
}

ATTNPOOL_TEST_EACH_TARGET(GroupedQueryFloat, "attention.grouped_query.float",
                          "[attention]") {
  GroupedQuery<float>();
}

// The heads run as one parallel loop (src/fused_batch.h): each head's output
// is bitwise what attention_pool gives for it alone.
ATTNPOOL_TEST_EACH_TARGET(SdpaHeadsAlone, "attention.heads_alone.float",
                          "[attention]") {
  std::mt19937_64 rng(kSeed + 65);
  const size_t batch = 2, heads = 3, n = 130, m = 260, d = 24, dv = 10;
  Tensor<float> queries(batch, heads, n, d, true), keys(batch, heads, m, d),
      values(batch, heads, m, dv), out(batch, heads, n, dv);
  queries.FillNormal(rng, 1);
  keys.FillNormal(rng, 1);
  values.FillNormal(rng, 1);
  std::vector<size_t> lengths = {m, m / 2};
  AttentionMask<float> mask;
  mask.valid_lengths = lengths.data();
  mask.causal = true;
  mask.causal_offset = 100;
  attnpool::scaled_dot_product_attention(queries.view(), keys.view(),
                                         values.view(), out.view(), mask);
  RequireRanOnTarget();
  const attnpool::PoolSpec spec{
      attnpool::Distance::dot, {attnpool::Kernel::exp}, Normalization::softmax};
  for (size_t b = 0; b < batch; ++b) {
    for (size_t h = 0; h < heads; ++h) {
      TestMatrix<float> alone(n, dv);
      std::vector<size_t> head_lengths(n, lengths[b]);
      Mask<float> head_mask;
      head_mask.valid_lengths = head_lengths.data();
      head_mask.causal = true;
      head_mask.causal_offset = 100;
      attnpool::attention_pool(
          spec, queries.view().matrix(b, h), keys.view().matrix(b, h),
          values.view().matrix(b, h), alone.view(), head_mask);
      for (size_t i = 0; i < n; ++i)
        for (size_t c = 0; c < dv; ++c) {
          INFO("(" << b << ", " << h << ", " << i << ", " << c << ")");
          const float got = out(b, h, i, c), want = alone(i, c);
          REQUIRE(std::memcmp(&got, &want, sizeof got) == 0);
        }
    }
  }
}

// -------------------------------------------------------------- additive

template <typename T>
void AdditiveSweep() {
  std::mt19937_64 rng(kSeed + 62);
  INFO("seed " << kSeed + 62);
  struct Shape {
    size_t batch, heads, n, m, dq, dk, hidden, dv;
    size_t kv_heads = 0;  // 0: heads
  };
  const Shape shapes[] = {{2, 2, 19, 45, 6, 9, 11, 3},
                          {1, 1, 40, 300, 16, 8, 32, 17},
                          {1, 1, 3, 0, 2, 2, 4, 2},
                          {1, 2, 5, 7, 3, 3, 0, 2},
                          {2, 4, 9, 30, 5, 7, 6, 4, 2}};
  for (const Shape& s : shapes) {
    const size_t kv_heads = s.kv_heads ? s.kv_heads : s.heads;
    const size_t group = s.heads / kv_heads;
    Tensor<T> queries(s.batch, s.heads, s.n, s.dq, true),
        keys(s.batch, kv_heads, s.m, s.dk),
        values(s.batch, kv_heads, s.m, s.dv);
    queries.FillNormal(rng, 1.0);
    keys.FillNormal(rng, 1.0);
    values.FillNormal(rng, 1.0);
    TestMatrix<T> w_q(s.hidden, s.dq, 1), w_k(s.hidden, s.dk, 2);
    std::vector<T> w_v(s.hidden + 1);
    std::normal_distribution<double> normal;
    for (size_t u = 0; u < s.hidden; ++u) {
      for (size_t p = 0; p < s.dq; ++p) w_q(u, p) = T(normal(rng) * 0.5);
      for (size_t p = 0; p < s.dk; ++p) w_k(u, p) = T(normal(rng) * 0.5);
      w_v[u] = T(normal(rng));
    }
    const attnpool::AdditiveWeights<T> weights{w_q.view(), w_k.view(),
                                               w_v.data()};
    MaskStorage<T> storage(s.batch, s.heads, s.n, s.m, rng);
    for (const auto& mask_case : storage.Cases()) {
      INFO("B " << s.batch << " H " << s.heads << " n " << s.n << " m " << s.m
                << " dq " << s.dq << " dk " << s.dk << " h " << s.hidden
                << " dv " << s.dv << " " << mask_case.name);
      Tensor<T> out(s.batch, s.heads, s.n, s.dv);
      attnpool::additive_attention(weights, queries.view(), keys.view(),
                                   values.view(), out.view(), mask_case.mask);
      if (s.n != 0 && s.m != 0) RequireRanOnTarget();
      std::vector<size_t> lengths;
      const double u = kUnitRoundoff<T>;
      for (size_t b = 0; b < s.batch; ++b) {
        for (size_t h = 0; h < s.heads; ++h) {
          const auto q = queries.Matrix(b, h), k = keys.Matrix(b, h / group),
                     v = values.Matrix(b, h / group);
          std::vector<double> scores(s.n * s.m);
          // Score error: per hidden unit the projections' rounding (d+1)·u
          // of Σ|w·x| through tanh (slope ≤ 1), tanh's own error, and the
          // sum's; as an absolute error of the logits.
          double score_error = 0, largest = 0;
          for (size_t i = 0; i < s.n; ++i) {
            for (size_t j = 0; j < s.m; ++j) {
              double score = 0, error = 0;
              for (size_t unit = 0; unit < s.hidden; ++unit) {
                double pq = 0, pk = 0, mag = 0;
                for (size_t p = 0; p < s.dq; ++p) {
                  pq += double(w_q(unit, p)) * q[i * s.dq + p];
                  mag += std::fabs(double(w_q(unit, p)) * q[i * s.dq + p]);
                }
                for (size_t p = 0; p < s.dk; ++p) {
                  pk += double(w_k(unit, p)) * k[j * s.dk + p];
                  mag += std::fabs(double(w_k(unit, p)) * k[j * s.dk + p]);
                }
                const double t = std::tanh(pq + pk);
                score += double(w_v[unit]) * t;
                error += std::fabs(double(w_v[unit])) *
                         ((s.dq + s.dk + 4) * u * mag + 4 * kExpError<T> +
                          (s.hidden + 2) * u);
              }
              scores[i * s.m + j] = score;
              score_error = std::max(score_error, error);
              largest = std::max(largest, std::fabs(score));
            }
          }
          const auto want = ReferenceHead<T>(
              scores, s.n, s.m, v, s.dv,
              HeadMask(mask_case.mask, b, h, s.n, lengths), EmptyRows::nan);
          RequireHead(out, b, h, want, s.n, s.dv,
                      SoftmaxRelative<T>(s.m, largest) + 2 * score_error);
        }
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(AdditiveFloat, "attention.additive.float",
                          "[attention]") {
  AdditiveSweep<float>();
}
ATTNPOOL_TEST_EACH_TARGET(AdditiveDouble, "attention.additive.double",
                          "[attention]") {
  AdditiveSweep<double>();
}

// ------------------------------------------------------------ multi-head

// x·w + bias in double (row-major n×k times k×c).
std::vector<double> Project(const std::vector<double>& x, size_t n, size_t k,
                            const TestMatrix<float>& w, const float* bias) {
  std::vector<double> out(n * w.cols());
  for (size_t i = 0; i < n; ++i)
    for (size_t c = 0; c < w.cols(); ++c) {
      double sum = bias ? bias[c] : 0.0;
      for (size_t p = 0; p < k; ++p) sum += x[i * k + p] * double(w(p, c));
      out[i * w.cols() + c] = sum;
    }
  return out;
}

ATTNPOOL_TEST_EACH_TARGET(MultiHead, "attention.multi_head.float",
                          "[attention]") {
  std::mt19937_64 rng(kSeed + 63);
  const size_t batch = 2, n = 23, m = 31, d_model = 20, d_kv = 12, heads = 4,
               dh = 6, dv = 5, d_out = 9;
  Tensor<float> queries(batch, 1, n, d_model), keys(batch, 1, m, d_kv),
      values(batch, 1, m, d_kv);
  queries.FillNormal(rng, 1);
  keys.FillNormal(rng, 1);
  values.FillNormal(rng, 1);
  TestMatrix<float> w_q(d_model, heads * dh, 1), w_k(d_kv, heads * dh),
      w_v(d_kv, heads * dv, 2), w_o(heads * dv, d_out);
  std::normal_distribution<double> normal;
  for (auto* w : {&w_q, &w_k, &w_v, &w_o})
    for (size_t r = 0; r < w->rows(); ++r)
      for (size_t c = 0; c < w->cols(); ++c)
        (*w)(r, c) = float(normal(rng) / std::sqrt(double(w->rows())));
  std::vector<float> b_q(heads * dh), b_k(heads * dh), b_v(heads * dv),
      b_o(d_out);
  for (auto* b : {&b_q, &b_k, &b_v, &b_o})
    for (float& x : *b) x = float(normal(rng) * 0.1);
  attnpool::MultiHeadWeights<float> weights;
  weights.heads = heads;
  weights.w_q = w_q.view();
  weights.w_k = w_k.view();
  weights.w_v = w_v.view();
  weights.w_o = w_o.view();
  weights.b_q = b_q.data();
  weights.b_k = b_k.data();
  weights.b_v = b_v.data();
  weights.b_o = b_o.data();
  std::vector<size_t> lengths = {m, 17};
  AttentionMask<float> mask;
  mask.valid_lengths = lengths.data();
  mask.causal = true;
  mask.causal_offset = 12;
  Tensor<float> out(batch, 1, n, d_out);
  attnpool::multi_head_attention(weights, queries.view(), keys.view(),
                                 values.view(), out.view(), mask);
  RequireRanOnTarget();

  // Assembled by hand from the public pieces: linear projections, one
  // scaled dot-product attention over strided head views, concatenation,
  // output projection. The same arithmetic: the same bits.
  std::vector<float> q(batch * n * heads * dh), k(batch * m * heads * dh),
      v(batch * m * heads * dv), concat(batch * n * heads * dv),
      by_hand(batch * n * d_out);
  for (size_t b = 0; b < batch; ++b) {
    attnpool::linear(queries.view().matrix(b, 0), w_q.view(), b_q.data(),
                     {q.data() + b * n * heads * dh, n, heads * dh});
    attnpool::linear(keys.view().matrix(b, 0), w_k.view(), b_k.data(),
                     {k.data() + b * m * heads * dh, m, heads * dh});
    attnpool::linear(values.view().matrix(b, 0), w_v.view(), b_v.data(),
                     {v.data() + b * m * heads * dv, m, heads * dv});
  }
  const TensorView<const float> head_q{q.data(),       batch, heads,     n, dh,
                                       n * heads * dh, dh,    heads * dh};
  const TensorView<const float> head_k{k.data(),       batch, heads,     m, dh,
                                       m * heads * dh, dh,    heads * dh};
  const TensorView<const float> head_v{v.data(),       batch, heads,     m, dv,
                                       m * heads * dv, dv,    heads * dv};
  const TensorView<float> head_out{concat.data(),  batch, heads,     n, dv,
                                   n * heads * dv, dv,    heads * dv};
  attnpool::scaled_dot_product_attention(head_q, head_k, head_v, head_out,
                                         mask);
  for (size_t b = 0; b < batch; ++b) {
    attnpool::linear({concat.data() + b * n * heads * dv, n, heads * dv},
                     w_o.view(), b_o.data(),
                     {by_hand.data() + b * n * d_out, n, d_out});
  }
  for (size_t b = 0; b < batch; ++b)
    for (size_t i = 0; i < n; ++i)
      for (size_t c = 0; c < d_out; ++c) {
        INFO("(" << b << ", " << i << ", " << c << ")");
        REQUIRE(out(b, 0, i, c) == by_hand[(b * n + i) * d_out + c]);
      }

  // And against the reference in double.
  std::vector<size_t> head_lengths;
  for (size_t b = 0; b < batch; ++b) {
    const auto pq = Project(queries.Matrix(b, 0), n, d_model, w_q, b_q.data());
    const auto pk = Project(keys.Matrix(b, 0), m, d_kv, w_k, b_k.data());
    const auto pv = Project(values.Matrix(b, 0), m, d_kv, w_v, b_v.data());
    std::vector<double> heads_out(n * heads * dv), heads_scale(n * heads * dv);
    for (size_t h = 0; h < heads; ++h) {
      std::vector<double> scores(n * m), head_v(m * dv);
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < m; ++j) {
          double dot = 0;
          for (size_t p = 0; p < dh; ++p)
            dot += pq[i * heads * dh + h * dh + p] *
                   pk[j * heads * dh + h * dh + p];
          scores[i * m + j] = dot / std::sqrt(double(dh));
        }
      for (size_t j = 0; j < m; ++j)
        for (size_t c = 0; c < dv; ++c)
          head_v[j * dv + c] = pv[j * heads * dv + h * dv + c];
      const auto head = ReferenceHead<float>(
          scores, n, m, head_v, dv, HeadMask(mask, b, h, n, head_lengths),
          EmptyRows::nan);
      for (size_t i = 0; i < n; ++i)
        for (size_t c = 0; c < dv; ++c)
          heads_out[i * heads * dv + h * dv + c] = head.out[i * dv + c];
    }
    for (size_t i = 0; i < n; ++i)
      for (size_t c = 0; c < d_out; ++c) {
        double want = b_o[c], scale = std::fabs(b_o[c]);
        for (size_t p = 0; p < heads * dv; ++p) {
          want += heads_out[i * heads * dv + p] * double(w_o(p, c));
          scale += std::fabs(heads_out[i * heads * dv + p] * w_o(p, c));
        }
        INFO("(" << b << ", " << i << ", " << c << ") got " << out(b, 0, i, c)
                 << " want " << want);
        // Projections, attention and output projection: a few hundred u
        // relative to the magnitudes involved.
        REQUIRE(std::fabs(out(b, 0, i, c) - want) <= 2e-5 * (scale + 1));
      }
  }
}

// n queries, m keys and values (d columns) and additive weights of `hidden`
// units, normal from `seed`: one batch entry, one head.
struct AdditiveProblem {
  AdditiveProblem(size_t n_, size_t m_, size_t d_, size_t hidden, uint64_t seed)
      : n(n_),
        m(m_),
        d(d_),
        q(n * d),
        k(m * d),
        v(m * d),
        w(2 * hidden * d + hidden) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    for (auto* x : {&q, &k, &v, &w}) {
      for (double& e : *x) e = normal(rng);
    }
    queries = {q.data(), 1, 1, n, d, 0, 0, d};
    keys = {k.data(), 1, 1, m, d, 0, 0, d};
    values = {v.data(), 1, 1, m, d, 0, 0, d};
    weights = {{w.data(), hidden, d},
               {w.data() + hidden * d, hidden, d},
               w.data() + 2 * hidden * d};
  }
  // An output of the problem's shape over `out` (n·d entries).
  TensorView<double> Out(std::vector<double>& out) const {
    return {out.data(), 1, 1, n, d, 0, 0, d};
  }
  size_t n, m, d;
  std::vector<double> q, k, v, w;
  TensorView<const double> queries, keys, values;
  attnpool::AdditiveWeights<double> weights;
};

// Additive attention keeps a block of scores per slot of its blocks of
// queries, not per thread asked for: a million threads over one block of
// queries cost one block's scores, and give the bits of one thread.
TEST_CASE("attention: additive scratch follows the blocks, not the threads",
          "[attention]") {
  const AdditiveProblem p(16, 1000, 3, 4, kSeed + 79);
  std::vector<double> one(p.n * p.d), many(p.n * p.d);
  attnpool::additive_attention(p.weights, p.queries, p.keys, p.values,
                               p.Out(one), {}, attnpool::EmptyRows::nan, {1});
  attnpool::additive_attention(p.weights, p.queries, p.keys, p.values,
                               p.Out(many), {}, attnpool::EmptyRows::nan,
                               {1 << 20});
  REQUIRE(std::memcmp(one.data(), many.data(), one.size() * 8) == 0);
}

// Positions near the ends of ptrdiff_t: calls that move them (additive
// attention's blocks of queries, packed sequences' m − n) give the bits of
// the same windows stated at small positions.
TEST_CASE("attention: window positions at the ends of ptrdiff_t",
          "[attention]") {
  constexpr std::ptrdiff_t kMax = std::numeric_limits<std::ptrdiff_t>::max();
  constexpr std::ptrdiff_t kMin = std::numeric_limits<std::ptrdiff_t>::min();
  const AdditiveProblem p(40, 50, 3, 4, kSeed + 78);
  const size_t n = p.n, m = p.m, d = p.d;
  const auto &queries = p.queries, &keys = p.keys, &values = p.values;
  const auto& weights = p.weights;
  std::vector<double> want(n * d), got(n * d);
  const TensorView<double> want_view = p.Out(want), got_view = p.Out(got);
  const auto same = [&] {
    return std::memcmp(want.data(), got.data(), want.size() * 8) == 0;
  };
  // Left side near the top: p = i + kMax − 3, first key p − (kMax − 3) = i,
  // as at p = i + 3 with 3 keys to the left.
  AttentionMask<double> top, near_top;
  top.causal_offset = kMax - 3;
  top.window_left = size_t(kMax) - 3;
  top.window_right = 2;
  near_top.causal_offset = 3;
  near_top.window_left = 3;
  near_top.window_right = 1000;  // (sides that bind no key, but are given)
  // Right side near the bottom: p = i + kMin + 4, last key p + 2^63 − 2 =
  // i + 2, as at p = i with 2 keys to the right.
  AttentionMask<double> bottom, near_bottom;
  bottom.causal_offset = kMin + 4;
  bottom.window_left = 3;
  bottom.window_right = (size_t(1) << 63) - 2;
  near_bottom.window_left = 1000;
  near_bottom.window_right = 2;
  SECTION("additive attention, blocks of queries") {
    for (const auto& [exact, far] :
         {std::pair{near_top, top}, std::pair{near_bottom, bottom}}) {
      attnpool::additive_attention(weights, queries, keys, values, want_view,
                                   exact);
      attnpool::additive_attention(weights, queries, keys, values, got_view,
                                   far);
      CHECK(same());
    }
  }
  SECTION("packed sequences, positions moved by m - n = 10 and -10") {
    for (const size_t keys_in_sequence : {m, n - 10}) {
      const size_t query_offsets[] = {0, n},
                   key_offsets[] = {0, keys_in_sequence};
      const attnpool::PackedSequences one{1, query_offsets, key_offsets};
      TensorView<const double> sequence_keys = keys, sequence_values = values;
      sequence_keys.rows = sequence_values.rows = keys_in_sequence;
      for (const auto& [exact, far] :
           {std::pair{near_top, top}, std::pair{near_bottom, bottom}}) {
        attnpool::scaled_dot_product_attention_varlen(
            queries, sequence_keys, sequence_values, want_view, one, exact);
        attnpool::scaled_dot_product_attention_varlen(
            queries, sequence_keys, sequence_values, got_view, one, far);
        CHECK(same());
      }
    }
  }
}

// The standard ALiBi slopes (Press et al.'s get_slopes), and sinks at their
// limits: a sink of +inf takes all the weight, and a query that sees no key
// gets 0 beside a sink, under either empty-row policy.
TEST_CASE("attention: ALiBi slopes and sinks at their limits", "[attention]") {
  const std::vector<double> eight = attnpool::alibi_slopes(8);
  REQUIRE(eight.size() == 8);
  for (size_t h = 0; h < 8; ++h)
    REQUIRE(eight[h] == std::ldexp(1.0, -int(h) - 1));
  const std::vector<double> twelve = attnpool::alibi_slopes(12);
  REQUIRE(twelve.size() == 12);
  for (size_t h = 0; h < 8; ++h) REQUIRE(twelve[h] == eight[h]);
  for (size_t h = 8; h < 12; ++h) {
    REQUIRE(twelve[h] ==
            Approx(std::exp2(-0.5 - double(h - 8))).epsilon(1e-15));
  }
  REQUIRE(attnpool::alibi_slopes(1) == std::vector<double>{1.0 / 256});
  REQUIRE(attnpool::alibi_slopes(0).empty());
  // In float, for AttentionMask<float>: each double slope rounded.
  const std::vector<float> twelve_float = attnpool::alibi_slopes<float>(12);
  REQUIRE(twelve_float.size() == 12);
  for (size_t h = 0; h < 12; ++h) REQUIRE(twelve_float[h] == float(twelve[h]));

  const size_t n = 5, m = 40, d = 8;
  std::mt19937_64 rng(kSeed + 62);
  Tensor<float> queries(1, 2, n, d), keys(1, 2, m, d), values(1, 2, m, d);
  queries.FillNormal(rng, 1.0);
  keys.FillNormal(rng, 1.0);
  values.FillNormal(rng, 1.0);
  const size_t lengths[n] = {0, 3, 40, 0, 17};
  const float sinks[2] = {INFINITY, 0.5f};
  AttentionMask<float> mask;
  mask.valid_lengths = lengths;
  mask.lengths_per_query = true;
  mask.sinks = sinks;
  for (EmptyRows empty_rows : {EmptyRows::nan, EmptyRows::zero}) {
    Tensor<float> out(1, 2, n, d);
    attnpool::scaled_dot_product_attention(queries.view(), keys.view(),
                                           values.view(), out.view(), mask, {},
                                           empty_rows);
    for (size_t i = 0; i < n; ++i) {
      for (size_t c = 0; c < d; ++c) {
        INFO("i " << i << " c " << c);
        REQUIRE(out(0, 0, i, c) == 0.0f);  // the +inf sink's
        if (lengths[i] == 0) REQUIRE(out(0, 1, i, c) == 0.0f);
        if (lengths[i] != 0) REQUIRE(out(0, 1, i, c) != 0.0f);
      }
    }
  }
  // A sink of −inf is no sink: over no key, the empty-row policy.
  const float no_sinks[2] = {-INFINITY, -INFINITY};
  AttentionMask<float> none;
  none.sinks = no_sinks;
  Tensor<float> keyless(1, 2, n, d);
  attnpool::scaled_dot_product_attention(
      queries.view(), PackedRows(keys.view(), 0, 0),
      PackedRows(values.view(), 0, 0), keyless.view(), none);
  REQUIRE(std::isnan(keyless(0, 1, 2, 3)));
  // Beside a sink of +inf every weight is 0, yet a visible key's NaN value
  // still reaches its query (0·NaN), fused and staged alike.
  std::vector<float> q(2 * 4, 0.5f), k(3 * 4, 0.25f), v(3 * 2, 1.0f);
  v[1 * 2 + 0] = NAN;
  attnpool::Mask<float> infinite_sink;
  infinite_sink.sink = INFINITY;
  const attnpool::PoolSpec sdpa{attnpool::Distance::dot,
                                {attnpool::Kernel::exp},
                                attnpool::Normalization::softmax};
  std::vector<float> fused(2 * 2), staged(2 * 2), weights(2 * 3);
  attnpool::attention_pool(sdpa, {q.data(), 2, 4}, {k.data(), 3, 4},
                           {v.data(), 3, 2}, {fused.data(), 2, 2},
                           infinite_sink);
  attnpool::attention_pool_staged(sdpa, {q.data(), 2, 4}, {k.data(), 3, 4},
                                  {v.data(), 3, 2}, {staged.data(), 2, 2},
                                  {weights.data(), 2, 3}, infinite_sink);
  for (const auto& out : {fused, staged}) {
    REQUIRE((std::isnan(out[0]) && out[1] == 0.0f));
    REQUIRE((std::isnan(out[2]) && out[3] == 0.0f));
  }
  // The same for logits that are all −inf (a query at +inf, on the
  // small-depth Gaussian path): the sink takes the weight, 0·inf is NaN.
  const float far = INFINITY, near[3] = {-1.0f, 0.0f, 2.0f};
  std::vector<float> inf_values = {0.5f, 0.5f, INFINITY, 0.5f, 0.5f, 0.5f};
  const attnpool::PoolSpec nadaraya_watson{attnpool::Distance::sqeuclidean,
                                           {attnpool::Kernel::gaussian, 0.5},
                                           attnpool::Normalization::softmax};
  infinite_sink.sink = -1.0f;
  attnpool::attention_pool(nadaraya_watson, {&far, 1, 1}, {near, 3, 1},
                           {inf_values.data(), 3, 2}, {fused.data(), 1, 2},
                           infinite_sink);
  REQUIRE(attnpool::last_fused_path() == "gaussian_one_pass");
  attnpool::attention_pool_staged(
      nadaraya_watson, {&far, 1, 1}, {near, 3, 1}, {inf_values.data(), 3, 2},
      {staged.data(), 1, 2}, {weights.data(), 1, 3}, infinite_sink);
  for (const auto& out : {fused, staged}) {
    REQUIRE((std::isnan(out[0]) && out[1] == 0.0f));
  }
}

// ----------------------------------------------------------------- errors

// Every size symbol of each layer at 2^62, 2^63 and SIZE_MAX (the same in
// each tensor that has it, dense strides wrapping as a caller's products
// would), and sequence counts as large: each is refused before anything is
// read past the small arrays given or written, naming a tensor (any of its
// fields) or the count.
TEST_CASE("attention: sizes past the address space are refused",
          "[attention][errors]") {
  std::vector<float> data(4096, 0.5f);
  std::vector<float> outputs(256, -7.0f);
  const size_t huge_sizes[] = {size_t{1} << 62, size_t{1} << 63,
                               std::numeric_limits<size_t>::max()};
  size_t cases = 0;
  const auto require_refused = [&](const std::vector<std::string>& names,
                                   const std::function<void()>& call) {
    const std::vector<float> before = outputs;
    std::string argument;
    try {
      call();
    } catch (const attnpool::Error& error) {
      argument = error.argument();
    }
    INFO("refused naming '" << argument << "'");
    const std::string head = argument.substr(0, argument.find('.'));
    const std::string cache_head =
        argument.substr(0, argument.find('.', argument.find('.') + 1));
    REQUIRE((std::find(names.begin(), names.end(), argument) != names.end() ||
             std::find(names.begin(), names.end(), head) != names.end() ||
             std::find(names.begin(), names.end(), cache_head) != names.end()));
    REQUIRE(std::memcmp(before.data(), outputs.data(),
                        outputs.size() * sizeof(float)) == 0);
    ++cases;
  };
  const std::vector<std::string> tensors = {"queries", "keys", "values", "out"};
  // Each of a layer's six size symbols in turn at each huge size, the
  // others as in `base`.
  using Sizes = std::array<size_t, 6>;
  const auto each_huge = [&](const char* layer, const Sizes& base,
                             const std::function<void(const Sizes&)>& call) {
    for (size_t symbol = 0; symbol < base.size(); ++symbol) {
      for (const size_t huge : huge_sizes) {
        Sizes s = base;
        s[symbol] = huge;
        INFO(layer << ", size symbol " << symbol << " = " << huge);
        call(s);
      }
    }
  };
  // Dense: B, H, n, m, dk, dv.
  each_huge("dense", {2, 2, 3, 5, 4, 4}, [&](const Sizes& s) {
    const auto q = attnpool::dense_tensor<const float>(data.data(), s[0], s[1],
                                                       s[2], s[4]);
    const auto k = attnpool::dense_tensor<const float>(data.data() + 512, s[0],
                                                       s[1], s[3], s[4]);
    const auto v = attnpool::dense_tensor<const float>(data.data() + 1024, s[0],
                                                       s[1], s[3], s[5]);
    const auto out =
        attnpool::dense_tensor(outputs.data(), s[0], s[1], s[2], s[5]);
    require_refused(
        tensors, [&] { attnpool::scaled_dot_product_attention(q, k, v, out); });
  });
  // Packed: H, Σn, Σm, dk, dv, the count.
  each_huge("packed", {2, 3, 5, 4, 4, 1}, [&](const Sizes& s) {
    const size_t query_offsets[2] = {0, s[1]}, key_offsets[2] = {0, s[2]};
    const auto q =
        attnpool::dense_tensor<const float>(data.data(), 1, s[0], s[1], s[3]);
    const auto k = attnpool::dense_tensor<const float>(data.data() + 512, 1,
                                                       s[0], s[2], s[3]);
    const auto v = attnpool::dense_tensor<const float>(data.data() + 1024, 1,
                                                       s[0], s[2], s[4]);
    const auto out =
        attnpool::dense_tensor(outputs.data(), 1, s[0], s[1], s[4]);
    std::vector<std::string> names = tensors;
    names.push_back("sequences.count");
    require_refused(names, [&] {
      attnpool::scaled_dot_product_attention_varlen(
          q, k, v, out, {s[5], query_offsets, key_offsets});
    });
  });
  // Paged: blocks, block size, dk, dv, the table's stride, the count.
  each_huge("paged", {2, 4, 4, 4, 2, 1}, [&](const Sizes& s) {
    const int32_t table[2] = {1, 0};
    const size_t lengths[1] = {6}, query_offsets[2] = {0, 1};
    attnpool::PagedKVCache<float> cache;
    cache.keys =
        attnpool::dense_tensor<const float>(data.data(), s[0], 2, s[1], s[2]);
    cache.values = attnpool::dense_tensor<const float>(data.data() + 1024, s[0],
                                                       2, s[1], s[3]);
    cache.block_table = table;
    cache.block_table_stride = s[4];
    cache.lengths = lengths;
    const auto q =
        attnpool::dense_tensor<const float>(data.data() + 2048, 1, 2, 1, s[2]);
    const auto out = attnpool::dense_tensor(outputs.data(), 1, 2, 1, s[3]);
    require_refused({"queries", "out", "cache.keys", "cache.values",
                     "cache.block_table_stride", "count"},
                    [&] {
                      attnpool::scaled_dot_product_attention_paged(
                          q, cache, out, s[5], query_offsets);
                    });
  });
  REQUIRE(cases == 3 * 3 * 6);
}

TEST_CASE("attention: bad input names the argument, writes nothing",
          "[attention][errors]") {
  std::vector<float> data(4096, 0.5f);
  std::vector<float> outputs(256, -7.0f);
  const auto q = attnpool::dense_tensor<const float>(data.data(), 2, 4, 3, 8);
  const auto k =
      attnpool::dense_tensor<const float>(data.data() + 512, 2, 2, 5, 8);
  const auto v =
      attnpool::dense_tensor<const float>(data.data() + 1024, 2, 2, 5, 4);
  const auto out = attnpool::dense_tensor(outputs.data(), 2, 4, 3, 4);
  RequireRejected("keys.heads", outputs, [&] {
    auto bad = k;
    bad.heads = 3;
    bad.batch_stride = 3 * 40;
    auto bad_v = v;
    bad_v.heads = 3;
    attnpool::scaled_dot_product_attention(q, bad, bad_v, out);
  });
  RequireRejected("keys.cols", outputs, [&] {
    auto bad = k;
    bad.cols = 7;
    attnpool::scaled_dot_product_attention(q, bad, v, out);
  });
  RequireRejected("out.head_stride", outputs, [&] {
    auto bad = out;
    bad.head_stride = 2;
    attnpool::scaled_dot_product_attention(q, k, v, bad);
  });
  // Heads, or batches, one element short of apart: they share one address.
  RequireRejected("out.head_stride", outputs, [&] {
    auto bad = out;
    bad.head_stride = 3 * 4 - 1;
    bad.batch_stride = 4 * 3 * 4;
    attnpool::scaled_dot_product_attention(q, k, v, bad);
  });
  RequireRejected("out.batch_stride", outputs, [&] {
    auto bad = out;
    bad.batch_stride = 4 * 3 * 4 - 1;
    attnpool::scaled_dot_product_attention(q, k, v, bad);
  });
  RequireRejected("scale", outputs, [&] {
    attnpool::scaled_dot_product_attention(q, k, v, out, {}, NAN);
  });
  RequireRejected("scale", outputs, [&] {  // inf as a float
    attnpool::scaled_dot_product_attention(q, k, v, out, {}, 1e39);
  });
  RequireRejected("mask.valid_lengths", outputs, [&] {
    const size_t lengths[2] = {5, 6};
    AttentionMask<float> mask;
    mask.valid_lengths = lengths;
    attnpool::scaled_dot_product_attention(q, k, v, out, mask);
  });
  RequireRejected("mask.bias.heads", outputs, [&] {
    AttentionMask<float> mask;
    mask.bias = attnpool::dense_tensor<const float>(data.data(), 1, 2, 3, 5);
    attnpool::scaled_dot_product_attention(q, k, v, out, mask);
  });
  // Score adjustments: per-head values named by their head.
  const float slopes[4] = {0.5f, 0.25f, NAN, 0.0625f};
  const float sinks[4] = {0.0f, 1.0f, 2.0f, NAN};
  RequireRejected("mask.alibi_slopes[2]", outputs, [&] {
    AttentionMask<float> mask;
    mask.alibi_slopes = slopes;
    attnpool::scaled_dot_product_attention(q, k, v, out, mask);
  });
  RequireRejected("mask.sinks[3]", outputs, [&] {
    AttentionMask<float> mask;
    mask.sinks = sinks;
    attnpool::scaled_dot_product_attention(q, k, v, out, mask);
  });
  for (float cap : {0.0f, -1.0f, INFINITY, NAN}) {
    RequireRejected("mask.softcap", outputs, [&] {
      AttentionMask<float> mask;
      mask.softcap = cap;
      attnpool::scaled_dot_product_attention(q, k, v, out, mask);
    });
  }
  RequireRejected("out", outputs, [&] {  // an output may not alias the sinks
    AttentionMask<float> mask;
    mask.sinks = outputs.data();
    attnpool::scaled_dot_product_attention(q, k, v, out, mask);
  });
  RequireRejected("out", outputs, [&] {
    const auto alias =
        attnpool::dense_tensor(const_cast<float*>(data.data()), 2, 4, 3, 4);
    attnpool::scaled_dot_product_attention(q, k, v, alias);
  });
  RequireRejected("queries.cols", outputs, [&] {
    auto empty_depth = q, empty_keys = k;
    empty_depth.cols = empty_keys.cols = 0;
    attnpool::scaled_dot_product_attention(empty_depth, empty_keys, v, out);
  });
  RequireRejected("queries.data", outputs, [&] {
    auto bad = q;
    bad.data = nullptr;
    attnpool::scaled_dot_product_attention(bad, k, v, out);
  });
  // Packed sequences: their offsets, and the masks that do not apply.
  std::vector<float> canary(64, -7.0f);
  const size_t bad_offsets[3] = {0, 5, 3};
  const size_t keys_offsets[3] = {0, 2, 4};
  RequireRejected("sequences.query_offsets", canary, [&] {
    std::vector<float> q(3 * 4, 1.0f), k(4 * 4, 1.0f);
    attnpool::scaled_dot_product_attention_varlen(
        attnpool::dense_tensor<const float>(q.data(), 1, 1, 3, 4),
        attnpool::dense_tensor<const float>(k.data(), 1, 1, 4, 4),
        attnpool::dense_tensor<const float>(k.data(), 1, 1, 4, 4),
        attnpool::dense_tensor(canary.data(), 1, 1, 3, 4),
        {2, bad_offsets, keys_offsets});
  });
  RequireRejected("mask.valid_lengths", canary, [&] {
    std::vector<float> q(3 * 4, 1.0f), k(4 * 4, 1.0f);
    const size_t query_offsets[3] = {0, 1, 3};
    AttentionMask<float> mask;
    mask.valid_lengths = keys_offsets;
    attnpool::scaled_dot_product_attention_varlen(
        attnpool::dense_tensor<const float>(q.data(), 1, 1, 3, 4),
        attnpool::dense_tensor<const float>(k.data(), 1, 1, 4, 4),
        attnpool::dense_tensor<const float>(k.data(), 1, 1, 4, 4),
        attnpool::dense_tensor(canary.data(), 1, 1, 3, 4),
        {2, query_offsets, keys_offsets}, mask);
  });
  // A paged cache: its block table and lengths, checked before anything
  // is read through them.
  {
    std::vector<float> pool(4 * 2 * 4, 1.0f), q(3 * 4, 1.0f);
    const size_t query_offsets[2] = {0, 3};
    const size_t long_sequence[1] = {9}, fits[1] = {6};
    const int32_t table[3] = {1, 7, 0};
    attnpool::PagedKVCache<float> cache;
    cache.keys = cache.values =
        attnpool::dense_tensor<const float>(pool.data(), 4, 1, 2, 4);
    cache.block_table = table;
    cache.block_table_stride = 3;
    cache.lengths = long_sequence;
    const auto run = [&] {
      attnpool::scaled_dot_product_attention_paged(
          attnpool::dense_tensor<const float>(q.data(), 1, 1, 3, 4), cache,
          attnpool::dense_tensor(outputs.data(), 1, 1, 3, 4), 1, query_offsets);
    };
    RequireRejected("cache.lengths", outputs, run);  // 5 blocks > 3
    cache.lengths = fits;
    RequireRejected("cache.block_table", outputs, run);  // block 7 of 4
    cache.block_table_stride = 1;
    RequireRejected("cache.lengths", outputs, run);
  }
  // Additive.
  std::vector<float> w(64, 0.1f);
  const attnpool::AdditiveWeights<float> additive{
      {w.data(), 4, 8}, {w.data(), 4, 8}, w.data()};
  RequireRejected("weights.w_k.cols", outputs, [&] {
    auto bad = additive;
    bad.w_k.cols = 7;
    bad.w_k.stride = 8;
    attnpool::additive_attention(bad, q, k, v, out);
  });
  RequireRejected("weights.w_v", outputs, [&] {
    auto bad = additive;
    bad.w_v = nullptr;
    attnpool::additive_attention(bad, q, k, v, out);
  });
  // Multi-head.
  attnpool::MultiHeadWeights<float> mh;
  mh.heads = 2;
  mh.w_q = {w.data(), 8, 4};
  mh.w_k = {w.data(), 8, 4};
  mh.w_v = {w.data(), 8, 4};
  mh.w_o = {w.data(), 4, 4};
  const auto x = attnpool::dense_tensor<const float>(data.data(), 2, 1, 3, 8);
  const auto mh_out = attnpool::dense_tensor(outputs.data(), 2, 1, 3, 4);
  RequireRejected("weights.w_q.cols", outputs, [&] {
    auto bad = mh;
    bad.heads = 3;
    attnpool::multi_head_attention(bad, x, x, x, mh_out);
  });
  RequireRejected("weights.w_q.cols", outputs, [&] {
    auto bad = mh;
    bad.w_q.cols = bad.w_k.cols = 0;
    attnpool::multi_head_attention(bad, x, x, x, mh_out);
  });
  RequireRejected("queries.heads", outputs,
                  [&] { attnpool::multi_head_attention(mh, q, x, x, mh_out); });
  RequireRejected("out", outputs, [&] {
    auto bad = mh;
    bad.b_o = outputs.data();
    attnpool::multi_head_attention(bad, x, x, x, mh_out);
  });
  RequireRejected("w.rows", outputs, [&] {
    attnpool::linear({data.data(), 3, 8}, {w.data(), 7, 4}, nullptr,
                     {outputs.data(), 3, 4});
  });
}

// Results do not depend on the thread count.
TEST_CASE("attention: bitwise identical for 1 and 2 threads",
          "[attention][determinism]") {
  std::mt19937_64 rng(kSeed + 64);
  const size_t batch = 1, heads = 2, n = 70, m = 90, d = 16, dv = 7;
  Tensor<float> queries(batch, heads, n, d), keys(batch, heads, m, d),
      values(batch, heads, m, dv);
  queries.FillNormal(rng, 1);
  keys.FillNormal(rng, 1);
  values.FillNormal(rng, 1);
  TestMatrix<float> w_q(8, d), w_k(8, d);
  std::vector<float> w_v(8, 0.3f);
  for (size_t u = 0; u < 8; ++u)
    for (size_t p = 0; p < d; ++p) {
      w_q(u, p) = float(rng() % 100) / 100 - 0.5f;
      w_k(u, p) = float(rng() % 100) / 100 - 0.5f;
    }
  Tensor<float> one(batch, heads, n, dv), two(batch, heads, n, dv);
  for (int layer = 0; layer < 2; ++layer) {
    for (int threads : {1, 2}) {
      Tensor<float>& out = threads == 1 ? one : two;
      if (layer == 0) {
        attnpool::scaled_dot_product_attention(queries.view(), keys.view(),
                                               values.view(), out.view(), {},
                                               {}, EmptyRows::nan, {threads});
      } else {
        attnpool::additive_attention({w_q.view(), w_k.view(), w_v.data()},
                                     queries.view(), keys.view(), values.view(),
                                     out.view(), {}, EmptyRows::nan, {threads});
      }
    }
    REQUIRE(std::memcmp(one.storage().data(), two.storage().data(),
                        one.storage().size() * sizeof(float)) == 0);
  }
}

}  // namespace
}  // namespace attnpool_test
