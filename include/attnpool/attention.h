// Attention layers (forward passes; the caller supplies every weight):
// scaled dot-product attention over (batch, heads, n, d) tensors with masks
// and grouped-query attention, additive (Bahdanau) attention, and multi-head
// attention with its projections.
#pragma once

#include <attnpool/element.h>
#include <attnpool/execution.h>
#include <attnpool/mask.h>
#include <attnpool/matrix.h>
#include <attnpool/normalize.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace attnpool {

// A (batch, heads, rows, cols) tensor of a scaled element type (element.h)
// with one scale per row: row (b, h, r)'s scale is scales(b, h, r, 0), a
// (batch, heads, rows, 1) tensor.
template <typename S>
struct ScaledTensor {
  TensorView<const S> data;
  TensorView<const float> scales;
};
using Int8Tensor = ScaledTensor<int8_t>;

#define ATTNPOOL_ELEMENT_TENSOR_VIEW_false(storage) TensorView<const storage>
#define ATTNPOOL_ELEMENT_TENSOR_VIEW_true(storage) const ScaledTensor<storage>&

// Keys or values of any element type (element.h) as a (batch, heads, rows,
// cols) tensor, strides in elements. Converts implicitly from each type's
// view: a TensorView of its storage, or ScaledTensor where it is scaled.
struct ElementTensor {
  ElementType type = ElementType::float32;
  const void* data = nullptr;
  size_t batch = 0, heads = 0, rows = 0, cols = 0;
  size_t batch_stride = 0, head_stride = 0, row_stride = 0;
  TensorView<const float> scales;  // scaled types only

  ElementTensor() = default;
  // NOLINTBEGIN(google-explicit-constructor)
#define ATTNPOOL_ELEMENT_TENSOR_FROM(name, c_name, storage, npy, scaled) \
  ElementTensor(ATTNPOOL_ELEMENT_TENSOR_VIEW_##scaled(storage) view)     \
      : ElementTensor(ElementType::name, view) {}
  ATTNPOOL_ELEMENT_TABLE(ATTNPOOL_ELEMENT_TENSOR_FROM)
#undef ATTNPOOL_ELEMENT_TENSOR_FROM
  // NOLINTEND(google-explicit-constructor)

  // The rows × cols matrix of (b, h).
  ElementRows matrix(size_t b, size_t h) const {
    ElementRows rows_of;
    rows_of.type = type;
    rows_of.data =
        static_cast<const char*>(data) +
        (b * batch_stride + h * head_stride) * element_properties(type).bytes;
    rows_of.rows = rows;
    rows_of.cols = cols;
    rows_of.stride = row_stride;
    if (element_properties(type).scaled) {
      rows_of.scales =
          scales.data + b * scales.batch_stride + h * scales.head_stride;
      rows_of.scale_stride = scales.row_stride;
    }
    return rows_of;
  }

 private:
  template <typename U>
  ElementTensor(ElementType type_, TensorView<const U> view)
      : type(type_),
        data(view.data),
        batch(view.batch),
        heads(view.heads),
        rows(view.rows),
        cols(view.cols),
        batch_stride(view.batch_stride),
        head_stride(view.head_stride),
        row_stride(view.row_stride) {}
  template <typename U>
  ElementTensor(ElementType type_, const ScaledTensor<U>& view)
      : ElementTensor(type_, view.data) {
    scales = view.scales;
  }
};

// The standard ALiBi slopes of `heads` heads (Press et al.): 2^(−8(h+1)/H)
// for a power of two H; otherwise those of the power of two below H, then
// every other slope of twice that many. In T, for AttentionMask<T>
// (alibi_slopes<float>(H) for float calls), each rounded from double.
template <typename T = double>
std::vector<T> alibi_slopes(size_t heads);
extern template std::vector<float> alibi_slopes<float>(size_t);
extern template std::vector<double> alibi_slopes<double>(size_t);

// softmax(scale·Q·Kᵀ + bias, masked)·V per (batch, head), on the fused
// kernel (pool.h: never forms the n×m scores).
//   queries (B, Hq, n, dk), keys (B, Hkv, m, dk), values (B, Hkv, m, dv),
//   out (B, Hq, n, dv); Hkv divides Hq: query head h reads key/value head
//   h / (Hq / Hkv) in place (grouped-query; Hkv = 1: multi-query).
// scale: 1/√dk by default (dk = 0 needs one given: an error naming
// queries.cols). A query that sees no key follows empty_rows.
// Accuracy and non-finite data as attention_pool with {dot, {exp, scale},
// softmax}; results are bitwise identical for every thread count.
// Throws attnpool::Error naming the argument on invalid input, before
// writing anything.
void scaled_dot_product_attention(
    TensorView<const float> queries, TensorView<const float> keys,
    TensorView<const float> values, TensorView<float> out,
    const AttentionMask<float>& mask = {}, std::optional<double> scale = {},
    EmptyRows empty_rows = EmptyRows::nan, const Execution& execution = {});
void scaled_dot_product_attention(
    TensorView<const double> queries, TensorView<const double> keys,
    TensorView<const double> values, TensorView<double> out,
    const AttentionMask<double>& mask = {}, std::optional<double> scale = {},
    EmptyRows empty_rows = EmptyRows::nan, const Execution& execution = {});

// scaled_dot_product_attention over keys and values stored in any element
// type (element.h; each may differ): computed in float as on the float
// values they hold (the float call's bounds against them, int8 decodes'
// with element.h's two roundings more). Decoding reads the narrow rows in
// place, widened in registers: a bf16 or f16 cache is half the bytes of a
// float one, an int8 cache a quarter.
void scaled_dot_product_attention(
    TensorView<const float> queries, const ElementTensor& keys,
    const ElementTensor& values, TensorView<float> out,
    const AttentionMask<float>& mask = {}, std::optional<double> scale = {},
    EmptyRows empty_rows = EmptyRows::nan, const Execution& execution = {});

// The same with queries of any element type too (widened once, B·Hq·n·d
// floats): bfloat16 queries and keys take the bf16 dot-product tile where
// the CPU has one that pays (pool.h, "tile_bf16").
void scaled_dot_product_attention(
    const ElementTensor& queries, const ElementTensor& keys,
    const ElementTensor& values, TensorView<float> out,
    const AttentionMask<float>& mask = {}, std::optional<double> scale = {},
    EmptyRows empty_rows = EmptyRows::nan, const Execution& execution = {});

// Sequences of different lengths packed along the rows of one tensor
// (flash-attention's "varlen" layout, cu_seqlens): sequence b owns query
// rows [query_offsets[b], query_offsets[b + 1]) and key and value rows
// [key_offsets[b], key_offsets[b + 1]). Each array has count + 1 entries,
// ascending from 0 to the tensor's rows.
struct PackedSequences {
  size_t count = 0;
  const size_t* query_offsets = nullptr;
  const size_t* key_offsets = nullptr;
};

// scaled_dot_product_attention of each packed sequence over its own keys,
// all in one parallel loop: queries (1, Hq, Σn, dk), keys (1, Hkv, Σm, dk),
// values (1, Hkv, Σm, dv), out (1, Hq, Σn, dv) — (Σn, H, d) arrays are such
// views, with head_stride d and row_stride H·d —, grouped-query heads as
// there. Batched decode is the case of one query per sequence; a sequence
// with few queries has its keys split into chunks merged in a fixed order.
// Positions align the sequences' ends (a KV cache's last n queries): query
// i of a sequence of n queries and m keys sits at key position p = i +
// (m − n) + mask.causal_offset, for causal, the window, chunks and ALiBi. The
// mask's valid_lengths, bias and visible do not apply (rejected). Each
// sequence's output is bitwise what scaled_dot_product_attention gives it alone
// (with causal_offset m − n + mask.causal_offset).
// Throws attnpool::Error naming the argument on invalid input, before
// writing anything.
void scaled_dot_product_attention_varlen(
    TensorView<const float> queries, TensorView<const float> keys,
    TensorView<const float> values, TensorView<float> out,
    const PackedSequences& sequences, const AttentionMask<float>& mask = {},
    std::optional<double> scale = {}, EmptyRows empty_rows = EmptyRows::nan,
    const Execution& execution = {});
void scaled_dot_product_attention_varlen(
    TensorView<const double> queries, TensorView<const double> keys,
    TensorView<const double> values, TensorView<double> out,
    const PackedSequences& sequences, const AttentionMask<double>& mask = {},
    std::optional<double> scale = {}, EmptyRows empty_rows = EmptyRows::nan,
    const Execution& execution = {});

// The same with keys and values of any element type (element.h; queries
// float): each sequence's output is bitwise what the float call gives on
// the values the narrow elements hold (int8 decodes: within element.h's
// bound of it).
void scaled_dot_product_attention_varlen(
    TensorView<const float> queries, const ElementTensor& keys,
    const ElementTensor& values, TensorView<float> out,
    const PackedSequences& sequences, const AttentionMask<float>& mask = {},
    std::optional<double> scale = {}, EmptyRows empty_rows = EmptyRows::nan,
    const Execution& execution = {});

// A paged KV cache (vLLM's): keys and values in a pool of blocks of
// block_size rows, each sequence's keys listed in order by its row of the
// block table and read in place (no gather into a contiguous copy).
//   keys (blocks, Hkv, block_size, dk), values (blocks, Hkv, block_size,
//   dv): block p's rows of key head h are keys.matrix(p, h) — (blocks,
//   block_size, Hkv, d) caches are such views, with head_stride d and
//   row_stride Hkv·d;
//   block_table: row b (block_table_stride entries apart) lists sequence
//   b's blocks, its key j in block block_table[b·stride + j / block_size]
//   at row j % block_size; each listed entry in [0, blocks);
//   lengths: sequence b's keys (its first ⌈lengths[b] / block_size⌉
//   table entries are read, at most block_table_stride).
template <typename T>
struct PagedKVCache {
  TensorView<const T> keys, values;
  const int32_t* block_table = nullptr;
  size_t block_table_stride = 0;
  const size_t* lengths = nullptr;
};

// scaled_dot_product_attention_varlen with the keys and values of sequence
// b in a paged cache: queries (1, Hq, Σn, dk) packed by query_offsets
// (count + 1 entries, ascending from 0), out (1, Hq, Σn, dv); batched
// decode is one query per sequence. Positions, masks and grouped heads as
// there. Each sequence's output is bitwise what the same keys and values
// give in contiguous rows.
void scaled_dot_product_attention_paged(
    TensorView<const float> queries, const PagedKVCache<float>& cache,
    TensorView<float> out, size_t count, const size_t* query_offsets,
    const AttentionMask<float>& mask = {}, std::optional<double> scale = {},
    EmptyRows empty_rows = EmptyRows::nan, const Execution& execution = {});
void scaled_dot_product_attention_paged(
    TensorView<const double> queries, const PagedKVCache<double>& cache,
    TensorView<double> out, size_t count, const size_t* query_offsets,
    const AttentionMask<double>& mask = {}, std::optional<double> scale = {},
    EmptyRows empty_rows = EmptyRows::nan, const Execution& execution = {});

// A paged KV cache whose keys and values are of any element type (the
// reduced-precision caches of inference engines): pools laid out as
// PagedKVCache's, an int8 pool's scales a (blocks, Hkv, block_size, 1)
// tensor paged with it.
struct PagedElementCache {
  ElementTensor keys, values;
  const int32_t* block_table = nullptr;
  size_t block_table_stride = 0;
  const size_t* lengths = nullptr;
};

// scaled_dot_product_attention_paged over such a cache (float queries):
// each sequence's output is bitwise what the float call gives on the values
// the narrow elements hold (int8 decodes: within element.h's bound of it),
// read in place and widened as they are read.
void scaled_dot_product_attention_paged(
    TensorView<const float> queries, const PagedElementCache& cache,
    TensorView<float> out, size_t count, const size_t* query_offsets,
    const AttentionMask<float>& mask = {}, std::optional<double> scale = {},
    EmptyRows empty_rows = EmptyRows::nan, const Execution& execution = {});

// Additive (Bahdanau) attention: score(q, k) = w_vᵀ tanh(W_q q + W_k k),
// then masks, softmax and the weighted sum of values.
//   w_q (h × dq), w_k (h × dk), w_v (h values).
template <typename T>
struct AdditiveWeights {
  ConstMatrixView<T> w_q;
  ConstMatrixView<T> w_k;
  const T* w_v = nullptr;
};

// queries (B, Hq, n, dq), keys (B, Hkv, m, dk), values (B, Hkv, m, dv), out
// (B, Hq, n, dv), Hkv dividing Hq (grouped heads as in
// scaled_dot_product_attention); the same weights serve every head. Queries
// and keys are projected once per head (n·h and m·h); the n·m·h
// tanh-and-sum is the hot loop, one block of queries at a time. Extra
// memory: the transposed weights, the projections (n·h, and m·h twice: the
// keys' also transposed and padded to 128 keys), the packed values of one
// head, and a block of scores per thread (16 rows × m). Accuracy: with
// a = W_q q + W_k k, each score has absolute error
// ≤ Σᵤ |w_v[u]|·((dq + dk + 4)·u·(Σ|W_q q| + Σ|W_k k|)ᵤ + tanh's error
// + (h + 2)·u), then softmax's.
// Throws attnpool::Error naming the argument on invalid input, before
// writing anything.
void additive_attention(const AdditiveWeights<float>& weights,
                        TensorView<const float> queries,
                        TensorView<const float> keys,
                        TensorView<const float> values, TensorView<float> out,
                        const AttentionMask<float>& mask = {},
                        EmptyRows empty_rows = EmptyRows::nan,
                        const Execution& execution = {});
void additive_attention(const AdditiveWeights<double>& weights,
                        TensorView<const double> queries,
                        TensorView<const double> keys,
                        TensorView<const double> values, TensorView<double> out,
                        const AttentionMask<double>& mask = {},
                        EmptyRows empty_rows = EmptyRows::nan,
                        const Execution& execution = {});

// Multi-head attention's weights: with H heads of dh (queries, keys) and dv
// (values) columns,
//   w_q (d_q × H·dh), w_k (d_k × H·dh), w_v (d_v_in × H·dv),
//   w_o (H·dv × d_out); biases (optional, nullptr: none) of H·dh, H·dh,
//   H·dv and d_out entries. Head h owns columns [h·dh, (h+1)·dh) of the
//   query and key projections (PyTorch's nn.MultiheadAttention layout,
//   transposed: x·W, not W·x).
template <typename T>
struct MultiHeadWeights {
  size_t heads = 1;
  ConstMatrixView<T> w_q, w_k, w_v, w_o;
  const T* b_q = nullptr;
  const T* b_k = nullptr;
  const T* b_v = nullptr;
  const T* b_o = nullptr;
};

// out = concat_h(attention(X_q W_q^h, X_k W_k^h, X_v W_v^h)) · W_o + b_o,
// each head scaled dot-product attention with scale 1/√dh and `mask`
// (its heads dimension 1 or H). queries (B, 1, n, d_q), keys (B, 1, m, d_k),
// values (B, 1, m, d_v_in) — keys and values may be the same tensor —,
// out (B, 1, n, d_out). Projections run on the library's packed,
// register-blocked GEMM (weighted_sum.h); heads are strided views of the
// projections, never copied. Extra memory: the projections and the
// concatenated heads, B·n·H·dh + B·m·H·(dh + dv) + B·n·H·dv elements.
// Throws attnpool::Error naming the argument on invalid input, before
// writing anything.
void multi_head_attention(const MultiHeadWeights<float>& weights,
                          TensorView<const float> queries,
                          TensorView<const float> keys,
                          TensorView<const float> values, TensorView<float> out,
                          const AttentionMask<float>& mask = {},
                          EmptyRows empty_rows = EmptyRows::nan,
                          const Execution& execution = {});
void multi_head_attention(
    const MultiHeadWeights<double>& weights, TensorView<const double> queries,
    TensorView<const double> keys, TensorView<const double> values,
    TensorView<double> out, const AttentionMask<double>& mask = {},
    EmptyRows empty_rows = EmptyRows::nan, const Execution& execution = {});

// out = x · w (+ bias on every row): the GEMM the projections use, for
// callers' own layers. x n×k, w k×c, bias c entries or nullptr, out n×c.
// Error and determinism as weighted_sum (weighted_sum.h).
void linear(ConstMatrixView<float> x, ConstMatrixView<float> w,
            const float* bias, MatrixView<float> out,
            const Execution& execution = {});
void linear(ConstMatrixView<double> x, ConstMatrixView<double> w,
            const double* bias, MatrixView<double> out,
            const Execution& execution = {});

}  // namespace attnpool
