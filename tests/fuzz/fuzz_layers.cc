// The fuzz target's function "attention_layers": an input decodes into
// sequences of different lengths packed along one axis, grouped query
// heads, a mask (causal, sliding window, soft-cap, ALiBi, sinks), a scale,
// a paged layout of the same keys and values, their element types, a thread
// count and a tuning. On every target this CPU supports:
//  - scaled_dot_product_attention_varlen's output is bitwise each
//    sequence's scaled_dot_product_attention alone (attention.h), and that
//    each head's attention_pool with the same mask (the layer's contract);
//  - those attention_pool calls agree with the scalar reference (the API
//    table's oracle, tests/api_oracles.h; one head of each sequence per
//    target, in turn);
//  - the paged cache (blocks scattered through a pool, NaN where no key
//    is) gives bitwise the packed call's output;
//  - the same sequences as a dense batch (valid lengths, a bias and a
//    visibility broadcast over batch and heads) give bitwise each head's
//    attention_pool, and that agrees with the reference;
//  - additive_attention over the dense batch (its padding keys NaN, hidden)
//    agrees with the reference within the bound of attention.h's score
//    error (tests/api_oracles.h, ExpectAdditive), and gives bitwise the
//    same output on one thread;
//  - multi_head_attention over the dense batch's first heads as its inputs,
//    with the same mask, gives bitwise its composition from the public
//    pieces (attention.h: linear projections, scaled_dot_product_attention
//    over strided head views, the output projection), and the same bits on
//    one thread;
//  - keys and values stored as bf16, f16 or int8 give bitwise the float
//    call's output on the values they hold (int8, whose scales fold on
//    the decode path, element.h: its checked heads agree with the
//    reference, their dots' roundings counted), and paged bitwise packed;
//  - inputs and the output's padding stay untouched, the call runs on the
//    target forced, and (on one target per input, in turn) the output is
//    bitwise that of one thread.
//
// Input layout, after [0] (the function) and [1] (flags: 1 double,
// 2 causal, 4 window left, 8 window right, 16 soft-cap, 32 ALiBi, 64
// sinks, 128 empty rows → zero); missing bytes read as 0:
//   [2] query heads Hq = 1 + b % 6   [3] key/value heads: divisor b % k of
//       Hq's k divisors   [4] sequences 1 + b % 5
//   [5] dk, [6] dv: 1 + b % 40 below 224, else 40 + 8·(b − 224); dv = 0
//       for b = 223
//   [7] threads b % 4 and the tuning (fuzz_common.h Tuning)
//   [8] causal offset (int8 % 8)   [9] window sides kSides[b % 8] left,
//       kSides[b / 8 % 8] right; chunks of {3, 8, 64}[b / 64 − 1] keys
//       for b ≥ 64
//   [10] adjustments: cap kCaps[b % 4], the standard ALiBi slopes times
//       kSlopeFactors[b / 4 % 4] (symmetric with bit 64), head h's sink
//       kSinks[(b / 16 + h) % 4]
//   [11] element types of keys (b % 4) and values (b / 4 % 4), float only
//   [12] the paged cache's block size 1 + b % 20
//   [13] scale: the default for b % 8 = 0, else kScales[b % 8 − 1]
//   [14] values: magnitude 2^(b % 9 − 4); with bit 128 about one element
//       in 32 is NaN, ±inf or ±0
//   [15..18] the values' seed
//   then per sequence its queries (b < 96: 1, b < 128: 0, else b % 33)
//   and keys (b < 248: b % 112, else 8192 + 1000·(b − 248)); then with
//   bit 1 of the next byte the same sequences as a dense batch (padded to
//   the most queries and keys), whose valid lengths are per batch entry
//   or (bit 32) per query, and whose bias and visibility (kBroadcasts[b / 2
//   % 4], [b / 8 % 4]; 0: none) broadcast over batch and heads; then with
//   bit 1 of the next byte additive attention over that batch, with h =
//   b / 2 % 40 hidden units (where no value is non-finite and N·M·count·
//   Hq·(h + 1) ≤ 2¹⁸); then with bit 1 of the next byte multi-head
//   attention over it, Hq heads of dh = 1 + b / 2 % 8 and dv = b / 16 % 8
//   columns, 1 + (b / 2 + dk) % 11 outputs, biases with bit 128 (where
//   N·M·count·Hq·(dh + dv + 1) ≤ 2¹⁸). The work Σ n·m·Hq·(dk + dv + 1) is
//   then halved (the most keys, else the most queries) until within 2¹⁴,
//   or 2²⁰ where a keys byte is ≥ 248: long decode contexts, whose keys are
//   split into chunks.
#include "tests/fuzz/fuzz_layers.h"

#include <attnpool/attnpool.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "tests/api_oracles.h"
#include "tests/api_table.h"
#include "tests/mask_oracle.h"

namespace attnpool_test {
namespace {

using attnpool::AttentionMask;
using attnpool::ElementTensor;
using attnpool::ElementType;
using attnpool::TensorView;

constexpr size_t kSides[8] = {0, 1, 2, 3, 5, 17, 64, 700};
constexpr double kCaps[4] = {0.25, 1, 3, 50};
constexpr double kSlopeFactors[4] = {1, -1, 1.0 / 32, 8};
constexpr double kSinks[4] = {-1, 0, 2.5, HUGE_VAL};
constexpr double kScales[7] = {1, 0.5, -1, 0.01, 3, 1e-3, 20};
// A dense batch's bias or visibility (index 1–3): whether its batch and
// its heads are whole (else 1, broadcast).
constexpr bool kBroadcasts[4][2] = {
    {}, {true, true}, {false, true}, {false, false}};

size_t DecodeDepth(uint8_t b) {
  if (b == 223) return 0;
  return b < 224 ? 1 + b % 40 : 40 + 8 * (b - 224);
}

// A (1, heads, rows, cols) view of rows packed as (rows, heads, cols), with
// `padding` elements after each packed row.
template <typename U>
TensorView<U> Packed(U* data, size_t heads, size_t rows, size_t cols,
                     size_t padding = 0) {
  const size_t row_stride = heads * cols + padding;
  return {data, 1, heads, rows, cols, rows * row_stride, cols, row_stride};
}

// Rows [begin, end) of every head of a (1, H, rows, cols) view.
template <typename U>
TensorView<U> Rows(TensorView<U> view, size_t begin, size_t end) {
  view.data += begin * view.row_stride;
  view.rows = end - begin;
  return view;
}

// Keys or values of `type` as a tensor: its elements at `half` (bf16,
// f16), `bytes` with `scales` (int8) or `floats`, `cols` a row, laid out by
// layout(data, cols) for data of any element type.
template <class Layout>
ElementTensor Elements(ElementType type, const uint16_t* half,
                       const int8_t* bytes, const float* scales,
                       const float* floats, size_t cols, const Layout& layout) {
  switch (type) {
    case ElementType::bfloat16:
      return layout(reinterpret_cast<const attnpool::bf16*>(half), cols);
    case ElementType::float16:
      return layout(reinterpret_cast<const attnpool::f16*>(half), cols);
    case ElementType::int8:
      return attnpool::Int8Tensor{layout(bytes, cols), layout(scales, 1)};
    case ElementType::float8_e4m3fn:
      return attnpool::ScaledTensor<attnpool::fp8_e4m3fn>{
          layout(reinterpret_cast<const attnpool::fp8_e4m3fn*>(bytes), cols),
          layout(scales, 1)};
    case ElementType::float8_e5m2:
      return attnpool::ScaledTensor<attnpool::fp8_e5m2>{
          layout(reinterpret_cast<const attnpool::fp8_e5m2*>(bytes), cols),
          layout(scales, 1)};
    case ElementType::float32:
      break;
  }
  return layout(floats, cols);
}

// A paged pool of one cache's rows: (blocks, block_size, heads, cols) of
// T and, given the cache stored narrow (packed as the float rows), of its
// element type's bits; `pool_row[r]` is the pool row of packed row r. Rows
// no sequence holds are NaN (int8: their scales).
template <typename T>
struct PagedPool {
  std::vector<T> rows;
  std::vector<uint16_t> half;
  std::vector<int8_t> bytes;
  std::vector<float> scales;

  PagedPool(const std::vector<T>& packed, const NarrowRows* narrow,
            size_t pool_rows, const std::vector<size_t>& pool_row, size_t heads,
            size_t cols)
      : rows(pool_rows * heads * cols + 1, std::numeric_limits<T>::quiet_NaN()),
        half(narrow ? pool_rows * heads * cols + 1 : 0, 0x7fc0),  // NaN
        bytes(narrow ? pool_rows * heads * cols + 1 : 0, int8_t(-128)),
        scales(narrow ? pool_rows * heads + 1 : 0,
               std::numeric_limits<float>::quiet_NaN()) {
    const size_t width = heads * cols;
    for (size_t r = 0; r < pool_row.size(); ++r) {
      const size_t to = pool_row[r];
      std::copy_n(packed.data() + r * width, width, rows.data() + to * width);
      if (narrow == nullptr) continue;
      const NarrowRows& from = *narrow;
      if (!from.half.empty()) {
        std::copy_n(from.half.data() + r * width, width,
                    half.data() + to * width);
      }
      if (!from.bytes.empty()) {
        std::copy_n(from.bytes.data() + r * width, width,
                    bytes.data() + to * width);
        std::copy_n(from.scales.data() + r * heads, heads,
                    scales.data() + to * heads);
      }
    }
  }
};

// The (blocks, heads, block_size, cols) view of a pool's `data`.
template <typename U>
TensorView<U> PoolView(U* data, size_t blocks, size_t block_size, size_t heads,
                       size_t cols) {
  return {data, blocks,      heads, block_size, cols, block_size * heads * cols,
          cols, heads * cols};
}

// attention_pool's mask of query head h under a layer's mask `layer`
// (without its valid lengths; the bias and visibility of batch entry 0).
template <typename T>
attnpool::Mask<T> HeadMask(const AttentionMask<T>& layer, size_t h) {
  return OracleHeadMask(layer, 0, h, 0, nullptr);
}

template <typename T>
void FuzzLayersOf(Bytes& bytes, uint8_t flags) {
  constexpr bool kFloat = std::is_same<T, float>::value;
  const size_t heads = 1 + bytes.Next() % 6;
  std::vector<size_t> divisors;
  for (size_t k = 1; k <= heads; ++k) {
    if (heads % k == 0) divisors.push_back(k);
  }
  const size_t kv_heads = divisors[bytes.Next() % divisors.size()];
  const size_t group = heads / kv_heads;
  const size_t count = 1 + bytes.Next() % 5;
  const size_t dk = std::max<size_t>(1, DecodeDepth(bytes.Next()));
  const size_t dv = DecodeDepth(bytes.Next());
  const uint8_t threads_byte = bytes.Next();
  const int causal_offset = static_cast<int8_t>(bytes.Next()) % 8;
  const uint8_t sides = bytes.Next(), adjustments = bytes.Next(),
                elements = bytes.Next();
  const size_t block_size = 1 + bytes.Next() % 20;
  const uint8_t scale_byte = bytes.Next(), value_byte = bytes.Next();
  uint64_t seed = 0;
  for (int k = 0; k < 4; ++k) seed = seed << 8 | bytes.Next();
  std::vector<size_t> n(count), m(count);
  bool long_context = false;
  for (size_t b = 0; b < count; ++b) {
    const uint8_t nb = bytes.Next(), mb = bytes.Next();
    n[b] = nb < 96 ? 1 : nb < 128 ? 0 : nb % 33;
    m[b] = mb < 248 ? mb % 112 : 8192 + 1000 * (mb - 248);
    long_context |= mb >= 248;
  }
  const uint8_t dense_byte = bytes.Next(), additive_byte = bytes.Next(),
                multi_head_byte = bytes.Next();
  const size_t budget = long_context ? size_t{1} << 20 : size_t{1} << 14;
  const auto work = [&] {
    size_t total = 0;
    for (size_t b = 0; b < count; ++b) total += n[b] * m[b];
    return total * heads * (dk + dv + 1);
  };
  while (work() > budget) {
    const size_t most_keys = std::max_element(m.begin(), m.end()) - m.begin();
    const size_t most_queries =
        std::max_element(n.begin(), n.end()) - n.begin();
    if (m[most_keys] >= n[most_queries]) {
      m[most_keys] /= 2;
    } else {
      n[most_queries] /= 2;
    }
  }
  std::vector<size_t> query_offsets = {0}, key_offsets = {0};
  for (size_t b = 0; b < count; ++b) {
    query_offsets.push_back(query_offsets.back() + n[b]);
    key_offsets.push_back(key_offsets.back() + m[b]);
  }
  const size_t total_n = query_offsets.back(), total_m = key_offsets.back();

  // Values.
  const double magnitude = std::ldexp(1.0, value_byte % 9 - 4);
  const bool specials = value_byte & 128;
  std::vector<T> queries(total_n * heads * dk + 1),
      keys(total_m * kv_heads * dk + 1), values(total_m * kv_heads * dv + 1);
  // Uniform in [−scale, scale).
  const auto random = [&](double scale) {
    return T((double(SplitMix(seed) >> 11) * 0x1p-53 * 2 - 1) * scale);
  };
  for (std::vector<T>* data : {&queries, &keys, &values}) {
    for (T& x : *data) {
      x = random(magnitude);
      if (specials && SplitMix(seed) % 32 == 0) {
        const T table[5] = {std::numeric_limits<T>::quiet_NaN(),
                            std::numeric_limits<T>::infinity(),
                            -std::numeric_limits<T>::infinity(), T(0), -T(0)};
        x = table[SplitMix(seed) % 5];
      }
    }
  }
  // Narrow keys and values round the float ones to what they hold.
  NarrowRows narrow_keys, narrow_values;
  const bool narrow = kFloat && elements % 16 != 0;
  if constexpr (kFloat) {
    if (narrow) {
      constexpr int kTypes = attnpool::kElementTypeCount;
      narrow_keys.Store(static_cast<ElementType>(elements % kTypes),
                        {keys.data(), total_m * kv_heads, dk});
      narrow_values.Store(static_cast<ElementType>(elements / kTypes % kTypes),
                          {values.data(), total_m * kv_heads, dv});
    }
  }

  // The mask.
  AttentionMask<T> mask;
  mask.causal = flags & 2;
  mask.causal_offset = causal_offset;
  if (flags & 4) mask.window_left = kSides[sides % 8];
  if (flags & 8) mask.window_right = kSides[sides / 8 % 8];
  if (flags & 16) mask.softcap = T(kCaps[adjustments % 4]);
  static const size_t kChunks[3] = {3, 8, 64};
  if (sides >= 64) mask.chunk = kChunks[sides / 64 - 1];
  mask.alibi_symmetric = adjustments & 64;
  std::vector<T> slopes, sinks;
  if (flags & 32) {
    for (double slope : attnpool::alibi_slopes(heads)) {
      slopes.push_back(T(slope * kSlopeFactors[adjustments / 4 % 4]));
    }
    mask.alibi_slopes = slopes.data();
  }
  if (flags & 64) {
    for (size_t h = 0; h < heads; ++h) {
      sinks.push_back(T(kSinks[(adjustments / 16 + h) % 4]));
    }
    mask.sinks = sinks.data();
  }
  std::optional<double> scale;
  if (scale_byte % 8 != 0) scale = kScales[scale_byte % 8 - 1];
  const attnpool::EmptyRows empty_rows =
      flags & 128 ? attnpool::EmptyRows::zero : attnpool::EmptyRows::nan;
  const attnpool::Execution execution{static_cast<int>(threads_byte % 4)};
  const std::string tuning = Tuning(threads_byte);

  // The paged layout: blocks of every sequence in a shuffled pool, two more
  // than they need.
  std::vector<size_t> table_width(count);
  size_t blocks = 2, widest = 0;
  for (size_t b = 0; b < count; ++b) {
    table_width[b] = (m[b] + block_size - 1) / block_size;
    blocks += table_width[b];
    widest = std::max(widest, table_width[b]);
  }
  std::vector<int32_t> order(blocks);
  std::iota(order.begin(), order.end(), 0);
  for (size_t k = blocks; k > 1; --k) {
    std::swap(order[k - 1], order[SplitMix(seed) % k]);
  }
  const size_t table_stride = widest + 1;
  std::vector<int32_t> block_table(count * table_stride, -1);
  std::vector<size_t> pool_row(total_m);
  size_t next_block = 0;
  for (size_t b = 0; b < count; ++b) {
    for (size_t j = 0; j < m[b]; ++j) {
      if (j % block_size == 0) {
        block_table[b * table_stride + j / block_size] = order[next_block++];
      }
      pool_row[key_offsets[b] + j] =
          size_t(block_table[b * table_stride + j / block_size]) * block_size +
          j % block_size;
    }
  }
  // The same sequences as a dense batch (count, H, N, d), N and M their
  // most queries and keys: the rows past a sequence's keys NaN, hidden by
  // valid lengths (per batch entry, or per query at most its keys), its
  // extra queries random; a bias and a visibility broadcast as
  // kBroadcasts says.
  const size_t most_n = *std::max_element(n.begin(), n.end()),
               most_m = *std::max_element(m.begin(), m.end());
  const bool dense =
      dense_byte & 1 &&
      count * most_n * most_m * heads * (dk + dv + 1) <= 4 * budget;
  std::vector<T> dense_queries, dense_keys, dense_values, bias;
  std::vector<uint8_t> visible;
  std::vector<size_t> dense_lengths;
  AttentionMask<T> dense_mask = mask;
  if (dense) {
    const T nan = std::numeric_limits<T>::quiet_NaN();
    dense_queries.resize(count * heads * most_n * dk + 1);
    dense_keys.assign(count * kv_heads * most_m * dk + 1, nan);
    dense_values.assign(count * kv_heads * most_m * dv + 1, nan);
    for (size_t b = 0; b < count; ++b) {
      for (size_t h = 0; h < heads; ++h) {
        for (size_t i = 0; i < most_n; ++i) {
          for (size_t c = 0; c < dk; ++c) {
            dense_queries[((b * heads + h) * most_n + i) * dk + c] =
                i < n[b]
                    ? queries[((query_offsets[b] + i) * heads + h) * dk + c]
                    : random(magnitude);
          }
        }
      }
      for (size_t g = 0; g < kv_heads; ++g) {
        for (size_t j = 0; j < m[b]; ++j) {
          const size_t row = (key_offsets[b] + j) * kv_heads + g;
          std::copy_n(
              keys.data() + row * dk, dk,
              dense_keys.data() + ((b * kv_heads + g) * most_m + j) * dk);
          std::copy_n(
              values.data() + row * dv, dv,
              dense_values.data() + ((b * kv_heads + g) * most_m + j) * dv);
        }
      }
    }
    dense_mask.lengths_per_query = dense_byte & 32;
    if (dense_mask.lengths_per_query) {
      for (size_t b = 0; b < count; ++b) {
        for (size_t i = 0; i < most_n; ++i) {
          dense_lengths.push_back(SplitMix(seed) % (m[b] + 1));
        }
      }
    } else {
      dense_lengths = m;
    }
    dense_mask.valid_lengths = dense_lengths.data();
    const size_t bias_shape = dense_byte / 2 % 4,
                 visible_shape = dense_byte / 8 % 4;
    if (bias_shape != 0) {
      const size_t batch = kBroadcasts[bias_shape][0] ? count : 1,
                   bias_heads = kBroadcasts[bias_shape][1] ? heads : 1;
      bias.resize(batch * bias_heads * most_n * most_m + 1);
      for (T& x : bias) {
        x = SplitMix(seed) % 16 == 0 ? -std::numeric_limits<T>::infinity()
                                     : random(4);
      }
      dense_mask.bias = attnpool::dense_tensor<const T>(
          bias.data(), batch, bias_heads, most_n, most_m);
    }
    if (visible_shape != 0) {
      const size_t batch = kBroadcasts[visible_shape][0] ? count : 1,
                   visible_heads = kBroadcasts[visible_shape][1] ? heads : 1;
      visible.resize(batch * visible_heads * most_n * most_m + 1);
      for (uint8_t& x : visible) x = SplitMix(seed) % 4 != 0;
      dense_mask.visible = attnpool::dense_tensor<const uint8_t>(
          visible.data(), batch, visible_heads, most_n, most_m);
    }
  }

  // Additive attention over the dense batch, where its values are finite
  // and its oracle's work, count·H·N·M·(h + 1) tanh, is within 2¹⁸: h
  // hidden units, W_q and W_k uniform in ±2/√dk, w_v in ±1.
  const size_t additive_hidden = additive_byte / 2 % 40;
  const bool additive =
      dense && (additive_byte & 1) && !specials &&
      count * heads * most_n * most_m * (additive_hidden + 1) <=
          (size_t{1} << 18);
  std::vector<T> w_q, w_k, w_v;
  if (additive) {
    const double spread = 2 / std::sqrt(double(dk));
    w_q.resize(additive_hidden * dk + 1);
    w_k.resize(additive_hidden * dk + 1);
    w_v.resize(additive_hidden + 1);
    for (T& w : w_q) w = random(spread);
    for (T& w : w_k) w = random(spread);
    for (T& w : w_v) w = random(1);
  }
  const attnpool::AdditiveWeights<T> additive_weights{
      {w_q.data(), additive_hidden, dk},
      {w_k.data(), additive_hidden, dk},
      w_v.data()};

  // Multi-head attention over the dense batch's first query head and first
  // key/value head as its inputs (d_q = d_k = dk, d_v_in = dv) and its mask
  // (H = Hq heads), where count·H·N·M·(dh + dv_h + 1) is within 2¹⁸: dh =
  // 1 + b / 2 % 8, dv_h = b / 16 % 8 per head, d_out = 1 + (b / 2 + dk) %
  // 11, biases with bit 128; weights uniform in ±1/√(rows).
  const size_t mh_dh = 1 + multi_head_byte / 2 % 8,
               mh_dv = multi_head_byte / 16 % 8,
               mh_out = 1 + (multi_head_byte / 2 + dk) % 11;
  const bool multi_head =
      dense && (multi_head_byte & 1) &&
      count * heads * most_n * most_m * (mh_dh + mh_dv + 1) <=
          (size_t{1} << 18);
  const auto matrix_weights = [&](size_t rows, size_t cols) {
    std::vector<T> w(rows * cols + 1);
    for (T& x : w) x = random(1 / std::sqrt(double(std::max<size_t>(1, rows))));
    return w;
  };
  const bool mh_biases = multi_head_byte & 128;
  std::vector<T> mh_w_q, mh_w_k, mh_w_v, mh_w_o, mh_b_q, mh_b_k, mh_b_v, mh_b_o;
  attnpool::MultiHeadWeights<T> mh_weights;
  if (multi_head) {
    mh_w_q = matrix_weights(dk, heads * mh_dh);
    mh_w_k = matrix_weights(dk, heads * mh_dh);
    mh_w_v = matrix_weights(dv, heads * mh_dv);
    mh_w_o = matrix_weights(heads * mh_dv, mh_out);
    mh_weights.heads = heads;
    mh_weights.w_q = {mh_w_q.data(), dk, heads * mh_dh};
    mh_weights.w_k = {mh_w_k.data(), dk, heads * mh_dh};
    mh_weights.w_v = {mh_w_v.data(), dv, heads * mh_dv};
    mh_weights.w_o = {mh_w_o.data(), heads * mh_dv, mh_out};
    if (mh_biases) {
      mh_b_q = matrix_weights(1, heads * mh_dh);
      mh_b_k = matrix_weights(1, heads * mh_dh);
      mh_b_v = matrix_weights(1, heads * mh_dv);
      mh_b_o = matrix_weights(1, mh_out);
      mh_weights.b_q = mh_b_q.data();
      mh_weights.b_k = mh_b_k.data();
      mh_weights.b_v = mh_b_v.data();
      mh_weights.b_o = mh_b_o.data();
    }
  }

  const size_t pool_rows = blocks * block_size;
  const PagedPool<T> key_pool(keys, narrow ? &narrow_keys : nullptr, pool_rows,
                              pool_row, kv_heads, dk);
  const PagedPool<T> value_pool(values, narrow ? &narrow_values : nullptr,
                                pool_rows, pool_row, kv_heads, dv);

  const auto call = [&] {
    std::ostringstream text;
    text.precision(17);
    text << kLayersName << "<" << (kFloat ? "float" : "double")
         << "> heads=" << heads << "/" << kv_heads << " dk=" << dk
         << " dv=" << dv << " sequences (n, m):";
    for (size_t b = 0; b < count; ++b) text << " " << n[b] << "," << m[b];
    text << " block_size=" << block_size << " threads=" << execution.threads
         << " causal=" << mask.causal << "/" << mask.causal_offset
         << " window=" << (mask.window_left ? int(*mask.window_left) : -1)
         << "/" << (mask.window_right ? int(*mask.window_right) : -1)
         << " softcap=" << (mask.softcap ? double(*mask.softcap) : 0.0)
         << " chunk=" << mask.chunk.value_or(0)
         << " alibi=" << (slopes.empty() ? 0.0 : double(slopes[0]))
         << (mask.alibi_symmetric ? " symmetric" : "")
         << " sinks=" << (sinks.empty() ? -HUGE_VAL : double(sinks[0]))
         << " scale=" << (scale ? std::to_string(*scale) : "default")
         << " empty=" << (flags & 128 ? "zero" : "nan")
         << " magnitude=" << magnitude << " specials=" << specials
         << " keys=" << attnpool::element_type_name(narrow_keys.type)
         << " values=" << attnpool::element_type_name(narrow_values.type)
         << " tuning=" << (tuning.empty() ? "chosen" : "'" + tuning + "'")
         << " dense batch="
         << (dense ? "bias " + std::to_string(dense_byte / 2 % 4) +
                         " visible " + std::to_string(dense_byte / 8 % 4) +
                         (dense_mask.lengths_per_query ? " lengths per query"
                                                       : "")
                   : std::string("none"))
         << " additive="
         << (additive ? "h " + std::to_string(additive_hidden)
                      : std::string("none"))
         << " multi_head="
         << (multi_head
                 ? "dh " + std::to_string(mh_dh) + " dv " +
                       std::to_string(mh_dv) + " out " +
                       std::to_string(mh_out) + (mh_biases ? " biases" : "")
                 : std::string("none"));
    return text.str();
  };

  const TensorView<const T> q = Packed<const T>(queries.data(), heads, total_n,
                                                dk),
                            k = Packed<const T>(keys.data(), kv_heads, total_m,
                                                dk),
                            v = Packed<const T>(values.data(), kv_heads,
                                                total_m, dv);
  const attnpool::PackedSequences sequences{count, query_offsets.data(),
                                            key_offsets.data()};
  attnpool::PagedKVCache<T> cache;
  cache.keys =
      PoolView<const T>(key_pool.rows.data(), blocks, block_size, kv_heads, dk);
  cache.values = PoolView<const T>(value_pool.rows.data(), blocks, block_size,
                                   kv_heads, dv);
  cache.block_table = block_table.data();
  cache.block_table_stride = table_stride;
  cache.lengths = m.data();

  // Outputs: packed rows with 3 elements of padding each, all a canary.
  constexpr size_t kPadding = 3;
  const size_t out_stride = heads * dv + kPadding;
  const size_t out_elements = total_n * out_stride + 1;
  const T canary = T(-1234.5);
  const auto new_out = [&] { return std::vector<T>(out_elements, canary); };
  const auto out_view = [&](std::vector<T>& data) {
    return Packed(data.data(), heads, total_n, dv, kPadding);
  };
  // Whether `data` holds canaries exactly outside the output view.
  const auto padding_intact = [&](const std::vector<T>& data) {
    for (size_t e = 0; e < data.size(); ++e) {
      const bool inside =
          e < total_n * out_stride && e % out_stride < heads * dv;
      if (!inside && !SameBits(&data[e], &canary, 1)) return false;
    }
    return true;
  };
  // Head h of batch entry b of the dense batch: the layer's mask with that
  // entry's valid lengths (`entry_lengths`, each its keys, unless they are
  // per query) and its slices of the bias and visibility.
  const auto dense_head_mask = [&](size_t b, size_t h,
                                   const std::vector<size_t>& entry_lengths) {
    attnpool::Mask<T> head_mask =
        OracleHeadMask(dense_mask, b, h, most_n, nullptr);
    head_mask.valid_lengths = dense_mask.lengths_per_query
                                  ? dense_lengths.data() + b * most_n
                                  : entry_lengths.data();
    return head_mask;
  };
  // The additive reference per (batch entry, head): the same on every
  // target, formed once.
  std::vector<std::optional<oracles::ExpectedOutput>> additive_expected(count *
                                                                        heads);
  const std::vector<T> inputs_before[3] = {queries, keys, values};
  struct Reset {
    ~Reset() { attnpool::reset_target(); }  // the tuning too
  } reset;
  attnpool::force_tuning(tuning);
  const std::vector<std::string> targets = attnpool::supported_targets();
  const size_t rerun_target = (flags ^ threads_byte ^ seed) % targets.size();
  for (size_t t = 0; t < targets.size(); ++t) {
    const std::string& target = targets[t];
    attnpool::force_target(target);
    const auto where = [&] { return call() + " target=" + target; };
    const auto attempt = [&](const char* what, const auto& run) {
      try {
        run();
      } catch (const std::exception& error) {
        Fail(std::string(what) + ": unexpected exception: " + error.what(),
             where());
      }
    };
    // attention_pool of one head (`hq`, `hk`, `hv`, `head_mask`): bitwise
    // the layer's rows at `got`, `got_stride` apart, and with `verify`
    // within the reference's bound, as are the rows at `int8_got` (the
    // layer's on int8 keys or values, whose scales fold on the decode
    // path: element.h; its dots `int8_dot_units` more) if given.
    const auto check_head = [&](const std::string& which,
                                attnpool::MatrixView<T> hq,
                                attnpool::MatrixView<T> hk,
                                attnpool::MatrixView<T> hv,
                                const attnpool::Mask<T>& head_mask,
                                const T* got, size_t got_stride, bool verify,
                                const T* int8_got = nullptr,
                                double int8_dot_units = 0) {
      Args<T> args;
      args.views = {hq, hk, hv};
      args.distance = attnpool::Distance::dot;
      args.kernel.kernel = attnpool::Kernel::exp;
      args.kernel.scale = scale;
      args.normalization = attnpool::Normalization::softmax;
      args.empty_rows = empty_rows;
      args.mask = head_mask;
      args.execution = execution;
      std::vector<T> head(hq.rows * hv.cols + 1);
      const attnpool::MatrixView<T> head_out(head.data(), hq.rows, hv.cols);
      attempt("one head", [&] {
        attnpool::attention_pool(args.spec(), hq, hk, hv, head_out, head_mask,
                                 execution);
      });
      const std::string report =
          verify ? oracles::VerifyFused<T>(args, head_out) : std::string();
      if (!report.empty()) {
        Fail(which + " differs from the reference: " + report, where());
      }
      if (verify && int8_got != nullptr) {
        const std::string int8_report =
            oracles::VerifyFused<T>(args,
                                    attnpool::ConstMatrixView<T>(
                                        int8_got, hq.rows, hv.cols, got_stride),
                                    int8_dot_units);
        if (!int8_report.empty()) {
          Fail(which +
                   " on int8 rows differs from the reference: " + int8_report,
               where());
        }
      }
      for (size_t i = 0; i < hq.rows; ++i) {
        if (!SameBits(got + i * got_stride, head_out.row(i), hv.cols)) {
          Fail(which + " differs from its attention_pool call", where());
        }
      }
    };
    std::vector<T> packed = new_out();
    attempt("varlen", [&] {
      attnpool::scaled_dot_product_attention_varlen(q, k, v, out_view(packed),
                                                    sequences, mask, scale,
                                                    empty_rows, execution);
    });
    const std::string ran = attnpool::last_run_target();
    if (!ran.empty() && ran != target) Fail("varlen ran on " + ran, where());
    if (!padding_intact(packed)) Fail("varlen wrote outside out", where());
    for (int s = 0; s < 3; ++s) {
      const std::vector<T>& now = s == 0 ? queries : s == 1 ? keys : values;
      if (!SameBits(now.data(), inputs_before[s].data(), now.size())) {
        Fail("an input changed", where());
      }
    }

    // The keys and values stored narrow, packed (and below, their pool):
    // bitwise the float call on the values they hold, but int8 ones, whose
    // scales fold on the decode path (element.h): those checked head by
    // head against the reference below.
    std::vector<T> narrow_packed;
    bool int8 = false;
    double int8_dot_units = 0;  // (VerifyFused's: int8 keys' dots)
    if constexpr (kFloat) {
      if (narrow) {
        const auto packed_tensor = [&](const NarrowRows& rows, size_t cols) {
          return Elements(rows.type, rows.half.data(), rows.bytes.data(),
                          rows.scales.data(), rows.floats.data(), cols,
                          [&](const auto* data, size_t width) {
                            return Packed(data, kv_heads, total_m, width);
                          });
        };
        narrow_packed = new_out();
        int8 = narrow_keys.type == ElementType::int8 ||
               narrow_values.type == ElementType::int8;
        if (narrow_keys.type == ElementType::int8) {
          int8_dot_units = oracles::kFoldedInt8DotUnits;
        }
        attempt("varlen, narrow", [&] {
          attnpool::scaled_dot_product_attention_varlen(
              q, packed_tensor(narrow_keys, dk),
              packed_tensor(narrow_values, dv), out_view(narrow_packed),
              sequences, mask, scale, empty_rows, execution);
        });
        if (!int8 &&
            !SameBits(packed.data(), narrow_packed.data(), packed.size())) {
          Fail(
              "narrow keys/values differ from the float call on the values "
              "they hold",
              where());
        }
      }
    }

    // Each sequence alone, and each of its heads on attention_pool.
    std::vector<T> alone = new_out();
    for (size_t b = 0; b < count; ++b) {
      const size_t q0 = query_offsets[b], q1 = query_offsets[b + 1],
                   k0 = key_offsets[b], k1 = key_offsets[b + 1];
      AttentionMask<T> own = mask;
      own.causal_offset =
          std::ptrdiff_t(m[b]) - std::ptrdiff_t(n[b]) + mask.causal_offset;
      attempt("one sequence", [&] {
        attnpool::scaled_dot_product_attention(
            Rows(q, q0, q1), Rows(k, k0, k1), Rows(v, k0, k1),
            Rows(out_view(alone), q0, q1), own, scale, empty_rows, execution);
      });
      for (size_t h = 0; h < heads; ++h) {
        const size_t g = h / group;
        check_head(
            "head " + std::to_string(h) + " of sequence " + std::to_string(b),
            {queries.data() + q0 * heads * dk + h * dk, n[b], dk, heads * dk},
            {keys.data() + k0 * kv_heads * dk + g * dk, m[b], dk,
             kv_heads * dk},
            {values.data() + k0 * kv_heads * dv + g * dv, m[b], dv,
             kv_heads * dv},
            HeadMask(own, h), packed.data() + q0 * out_stride + h * dv,
            out_stride, h == (t + b) % heads,
            int8 ? narrow_packed.data() + q0 * out_stride + h * dv : nullptr,
            int8_dot_units);
      }
    }
    if (!SameBits(packed.data(), alone.data(), packed.size())) {
      Fail("varlen differs from its sequences called alone", where());
    }

    std::vector<T> paged = new_out();
    attempt("paged", [&] {
      attnpool::scaled_dot_product_attention_paged(
          q, cache, out_view(paged), count, query_offsets.data(), mask, scale,
          empty_rows, execution);
    });
    if (!SameBits(packed.data(), paged.data(), packed.size())) {
      Fail("the paged cache differs from the packed rows", where());
    }

    if constexpr (kFloat) {
      if (narrow) {
        const auto pool_tensor = [&](const PagedPool<T>& pool, ElementType type,
                                     size_t cols) {
          return Elements(
              type, pool.half.data(), pool.bytes.data(), pool.scales.data(),
              pool.rows.data(), cols, [&](const auto* data, size_t width) {
                return PoolView(data, blocks, block_size, kv_heads, width);
              });
        };
        attnpool::PagedElementCache narrow_cache;
        narrow_cache.keys = pool_tensor(key_pool, narrow_keys.type, dk);
        narrow_cache.values = pool_tensor(value_pool, narrow_values.type, dv);
        narrow_cache.block_table = block_table.data();
        narrow_cache.block_table_stride = table_stride;
        narrow_cache.lengths = m.data();
        std::vector<float> narrow_paged = new_out();
        attempt("paged, narrow", [&] {
          attnpool::scaled_dot_product_attention_paged(
              q, narrow_cache, out_view(narrow_paged), count,
              query_offsets.data(), mask, scale, empty_rows, execution);
        });
        if (!SameBits(narrow_packed.data(), narrow_paged.data(),
                      packed.size())) {
          Fail("a narrow paged cache differs from the narrow packed rows",
               where());
        }
      }
    }

    if (dense) {
      const auto q_dense = attnpool::dense_tensor<const T>(
          dense_queries.data(), count, heads, most_n, dk);
      const auto k_dense = attnpool::dense_tensor<const T>(
          dense_keys.data(), count, kv_heads, most_m, dk);
      const auto v_dense = attnpool::dense_tensor<const T>(
          dense_values.data(), count, kv_heads, most_m, dv);
      std::vector<T> dense_out(count * heads * most_n * dv + 1, canary);
      attempt("dense batch", [&] {
        attnpool::scaled_dot_product_attention(
            q_dense, k_dense, v_dense,
            attnpool::dense_tensor(dense_out.data(), count, heads, most_n, dv),
            dense_mask, scale, empty_rows, execution);
      });
      if (!SameBits(&dense_out.back(), &canary, 1)) {
        Fail("the dense batch wrote past out", where());
      }
      for (size_t b = 0; b < count; ++b) {
        const std::vector<size_t> entry_lengths(most_n, m[b]);
        for (size_t h = 0; h < heads; ++h) {
          const attnpool::Mask<T> head_mask =
              dense_head_mask(b, h, entry_lengths);
          const size_t g = h / group;
          check_head("head " + std::to_string(h) + " of batch entry " +
                         std::to_string(b) + " (dense)",
                     {dense_queries.data() + (b * heads + h) * most_n * dk,
                      most_n, dk},
                     {dense_keys.data() + (b * kv_heads + g) * most_m * dk,
                      most_m, dk},
                     {dense_values.data() + (b * kv_heads + g) * most_m * dv,
                      most_m, dv},
                     head_mask,
                     dense_out.data() + (b * heads + h) * most_n * dv, dv,
                     h == (t + b) % heads);
        }
      }

      if (additive) {
        const auto run_additive = [&](int threads) {
          std::vector<T> additive_out(count * heads * most_n * dv + 1, canary);
          attempt("additive attention", [&] {
            attnpool::additive_attention(
                additive_weights, q_dense, k_dense, v_dense,
                attnpool::dense_tensor(additive_out.data(), count, heads,
                                       most_n, dv),
                dense_mask, empty_rows, {threads});
          });
          if (!SameBits(&additive_out.back(), &canary, 1)) {
            Fail("additive attention wrote past out", where());
          }
          return additive_out;
        };
        const std::vector<T> additive_out = run_additive(execution.threads);
        if (most_n * most_m != 0 && attnpool::last_run_target() != target) {
          Fail("additive attention ran on " + attnpool::last_run_target(),
               where());
        }
        for (size_t b = 0; b < count; ++b) {
          const std::vector<size_t> entry_lengths(most_n, m[b]);
          for (size_t h = 0; h < heads; ++h) {
            const size_t g = h / group;
            auto& expected = additive_expected[b * heads + h];
            if (!expected) {
              expected = oracles::ExpectAdditive<T>(
                  additive_weights, q_dense.matrix(b, h), k_dense.matrix(b, g),
                  v_dense.matrix(b, g), dense_head_mask(b, h, entry_lengths),
                  empty_rows);
            }
            const std::string report = oracles::CompareOutput<T>(
                *expected, {additive_out.data() + (b * heads + h) * most_n * dv,
                            most_n, dv});
            if (!report.empty()) {
              Fail("additive attention, head " + std::to_string(h) +
                       " of batch entry " + std::to_string(b) +
                       ", differs from the reference: " + report,
                   where());
            }
          }
        }
        if (execution.threads != 1 && t == rerun_target &&
            !SameBits(run_additive(1), additive_out)) {
          Fail("additive attention differs on one thread", where());
        }
      }

      if (multi_head) {
        // Its inputs: the first query head, the first key/value head.
        const TensorView<const T> x_q{q_dense.data, count, 1,
                                      most_n,       dk,    q_dense.batch_stride,
                                      most_n * dk,  dk},
            x_k{k_dense.data,         count,       1, most_m, dk,
                k_dense.batch_stride, most_m * dk, dk},
            x_v{v_dense.data,         count,       1, most_m, dv,
                v_dense.batch_stride, most_m * dv, dv};
        const size_t width_q = heads * mh_dh, width_v = heads * mh_dv;
        const auto run_multi_head = [&](int threads) {
          std::vector<T> mh_out_rows(count * most_n * mh_out + 1, canary);
          attempt("multi-head attention", [&] {
            attnpool::multi_head_attention(
                mh_weights, x_q, x_k, x_v,
                attnpool::dense_tensor(mh_out_rows.data(), count, 1, most_n,
                                       mh_out),
                dense_mask, empty_rows, {threads});
          });
          if (!SameBits(&mh_out_rows.back(), &canary, 1)) {
            Fail("multi-head attention wrote past out", where());
          }
          return mh_out_rows;
        };
        const std::vector<T> mh_result = run_multi_head(execution.threads);
        // attention.h's composition from the public pieces: the linear
        // projections, scaled_dot_product_attention over strided head views
        // with the same mask, the output projection. The same bits.
        std::vector<T> pq(count * most_n * width_q + 1),
            pk(count * most_m * width_q + 1), pv(count * most_m * width_v + 1),
            concat(count * most_n * width_v + 1),
            by_hand(count * most_n * mh_out + 1, canary);
        attempt("multi-head attention by hand", [&] {
          for (size_t b = 0; b < count; ++b) {
            attnpool::linear(
                x_q.matrix(b, 0), mh_weights.w_q, mh_weights.b_q,
                {pq.data() + b * most_n * width_q, most_n, width_q}, execution);
            attnpool::linear(
                x_k.matrix(b, 0), mh_weights.w_k, mh_weights.b_k,
                {pk.data() + b * most_m * width_q, most_m, width_q}, execution);
            attnpool::linear(
                x_v.matrix(b, 0), mh_weights.w_v, mh_weights.b_v,
                {pv.data() + b * most_m * width_v, most_m, width_v}, execution);
          }
          // Head h: columns [h·dh, (h + 1)·dh) of each projected row.
          const auto heads_of = [&](auto* data, size_t rows, size_t cols,
                                    size_t width) {
            return TensorView<std::remove_pointer_t<decltype(data)>>{
                data, count, heads, rows, cols, rows * width, cols, width};
          };
          attnpool::scaled_dot_product_attention(
              heads_of(static_cast<const T*>(pq.data()), most_n, mh_dh,
                       width_q),
              heads_of(static_cast<const T*>(pk.data()), most_m, mh_dh,
                       width_q),
              heads_of(static_cast<const T*>(pv.data()), most_m, mh_dv,
                       width_v),
              heads_of(concat.data(), most_n, mh_dv, width_v), dense_mask, {},
              empty_rows, execution);
          for (size_t b = 0; b < count; ++b) {
            attnpool::linear(
                {concat.data() + b * most_n * width_v, most_n, width_v},
                mh_weights.w_o, mh_weights.b_o,
                {by_hand.data() + b * most_n * mh_out, most_n, mh_out},
                execution);
          }
        });
        if (!SameBits(mh_result, by_hand)) {
          Fail("multi-head attention differs from its composition", where());
        }
        if (execution.threads != 1 && t == rerun_target &&
            !SameBits(run_multi_head(1), mh_result)) {
          Fail("multi-head attention differs on one thread", where());
        }
      }
    }

    if (execution.threads != 1 && t == rerun_target) {
      std::vector<T> single = new_out();
      attempt("varlen, one thread", [&] {
        attnpool::scaled_dot_product_attention_varlen(
            q, k, v, out_view(single), sequences, mask, scale, empty_rows, {1});
      });
      if (!SameBits(packed.data(), single.data(), packed.size())) {
        Fail("differs from the same call on one thread", where());
      }
    }
  }
}

}  // namespace

void FuzzLayers(Bytes& bytes, uint8_t flags) {
  if (flags & 1) {
    FuzzLayersOf<double>(bytes, flags);
  } else {
    FuzzLayersOf<float>(bytes, flags);
  }
}

}  // namespace attnpool_test
