// Scaled dot-product attention over (batch, heads) tensors, the linear
// projection, and multi-head attention (attention.h). Every query head is
// one call of the fused kernel on strided views (a decode's heads that
// share a key head, a few to a call: HeadsInCall); nothing is copied.
#include <attnpool/attention.h>
#include <attnpool/error.h>
#include <attnpool/pool.h>
#include <attnpool/weighted_sum.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <string>
#include <vector>

#include "arch/convert.h"
#include "arch/fused.h"
#include "src/aligned_buffer.h"
#include "src/attention_checks.h"
#include "src/dispatch.h"
#include "src/fused_batch.h"
#include "src/kept_outputs.h"
#include "core/validate.h"
#include "core/visible_run.h"

namespace attnpool {
namespace {

// Scaled dot-product attention as attention pooling.
PoolSpec SdpaSpec(std::optional<double> scale, EmptyRows empty_rows) {
  return {Distance::dot,
          {Kernel::exp, 1.0, scale},
          Normalization::softmax,
          empty_rows};
}

// The default scale 1/√d needs d ≥ 1.
void CheckDefaultScale(const std::optional<double>& scale, size_t depth) {
  if (!scale && depth == 0) {
    throw Error("queries.cols",
                "is 0: the default scale 1/√d needs d ≥ 1 (give a scale)");
  }
}

// Rows [begin, end) of a matrix.
template <typename U>
MatrixView<U> RowRange(MatrixView<U> view, size_t begin, size_t end) {
  return {view.data + begin * view.stride, end - begin, view.cols, view.stride};
}

// A decode's query heads that share a key head, up to kDecodeRows of them,
// are one call whose rows lie a head apart: the keys and values are read
// once for them, not once per head. A row's result does not depend on the
// rows beside it in a call (arch/fused-inl.h), so the outputs are those of
// a call per head where the rows' masks are the heads'.
//
// How many heads from h on (h's key head's, `group` a key head) the call of
// head h takes, `call` its mask: 1 unless it has one query (n = 1), its
// heads' masks are alike (no ALiBi slopes, sinks, bias or visibility per
// head) and no mask that depends on a query's position binds (row r sits
// at position causal_offset + r), the queries are not bf16, and their heads
// lie at least a row apart (a head stride of 0 broadcasts one query row to
// every head: valid for the heads, not as the rows of one call).
template <typename T>
size_t HeadsInCall(const AttentionMask<T>& mask, const Mask<T>& call, size_t n,
                   size_t m, size_t h, size_t group, bool bf16_queries,
                   const TensorView<const T>& queries) {
  const bool alike =
      n == 1 && !bf16_queries && queries.head_stride >= queries.cols &&
      mask.alibi_slopes == nullptr && mask.sinks == nullptr &&
      call.bias.data == nullptr && call.visible.data == nullptr &&
      detail::PositionsSeeAll(call, 0, detail::kDecodeRows - 1, m);
  return alike ? std::min(detail::kDecodeRows, (h / group + 1) * group - h) : 1;
}

// Head h's call (one query) made the call of heads [h, h + count): its
// query and output rows a head apart, its valid length each row's (in
// `lengths`).
template <typename T>
void TakeHeads(detail::PoolCall<T>& call, size_t count,
               size_t query_head_stride, size_t out_head_stride,
               std::vector<size_t>& lengths) {
  if (count == 1) return;
  call.queries.rows = call.out.rows = count;
  call.queries.stride = query_head_stride;
  call.out.stride = out_head_stride;
  if (call.mask.valid_lengths != nullptr) {
    lengths.assign(count, call.mask.valid_lengths[0]);
    call.mask.valid_lengths = lengths.data();
  }
}

// The heads of a checked call, a fused pooling each (a decode's, a few
// heads to one: HeadsInCall); KV: a tensor of T, or ElementTensor
// (T = float).
template <typename T, typename KV>
void RunSdpa(const detail::SdpaShape& shape, TensorView<const T> queries,
             const KV& keys, const KV& values, TensorView<T> out,
             const AttentionMask<T>& mask, std::optional<double> scale,
             EmptyRows empty_rows, const Execution& execution,
             const ElementTensor* bf16_queries = nullptr) {
  const PoolSpec spec = SdpaSpec(scale, empty_rows);
  const size_t group = shape.kv_heads == 0 ? 1 : shape.heads / shape.kv_heads;
  // Valid lengths as per-query arrays, one per call.
  std::vector<std::vector<size_t>> lengths(shape.batch * shape.heads);
  std::vector<detail::PoolCall<T>> calls;
  calls.reserve(shape.batch * shape.heads);
  for (size_t b = 0; b < shape.batch; ++b) {
    for (size_t h = 0; h < shape.heads;) {
      std::vector<size_t>& call_lengths = lengths[calls.size()];
      calls.push_back({queries.matrix(b, h),
                       detail::RowList<T>(keys.matrix(b, h / group)),
                       detail::RowList<T>(values.matrix(b, h / group)),
                       out.matrix(b, h),
                       detail::HeadMask(mask, b, h, shape.n, call_lengths),
                       {}});
      if (bf16_queries != nullptr) {
        calls.back().bf16_queries = {
            static_cast<const uint16_t*>(bf16_queries->matrix(b, h).data),
            bf16_queries->row_stride};
      }
      const size_t count =
          HeadsInCall(mask, calls.back().mask, shape.n, shape.m, h, group,
                      bf16_queries != nullptr, queries);
      TakeHeads(calls.back(), count, queries.head_stride, out.head_stride,
                call_lengths);
      h += count;
    }
  }
  // The heads' query blocks in one parallel loop.
  detail::AttentionPoolBatch(spec, calls, execution);
}

template <typename T, typename KV>
void ScaledDotProductAttention(TensorView<const T> queries, const KV& keys,
                               const KV& values, TensorView<T> out,
                               const AttentionMask<T>& mask,
                               std::optional<double> scale,
                               EmptyRows empty_rows,
                               const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::CheckScale<T>(scale);
  detail::CheckEmptyRows(empty_rows);
  const detail::SdpaShape shape =
      detail::CheckSdpa<T, KV>(queries, keys, values, out, mask, execution);
  CheckDefaultScale(scale, queries.cols);
  RunSdpa(shape, queries, keys, values, out, mask, scale, empty_rows,
          execution);
}

// Checks `offsets` (count + 1 ascending entries from 0 to `rows`), `count`
// named `count_name` first: a count whose count + 1 entries would overflow
// the address space is refused before any entry is read.
void CheckOffsets(const std::string& name, const size_t* offsets, size_t count,
                  const std::string& count_name, size_t rows,
                  const std::string& rows_name) {
  size_t bytes = 0;
  if (count == std::numeric_limits<size_t>::max() ||
      __builtin_mul_overflow(count + 1, sizeof(size_t), &bytes) ||
      reinterpret_cast<uintptr_t>(offsets) + bytes <
          reinterpret_cast<uintptr_t>(offsets)) {
    throw Error(count_name, "is " + std::to_string(count) + ": its count + 1 " +
                                "entries of " + name +
                                " would overflow the address space");
  }
  if (offsets == nullptr) throw Error(name, "is null");
  if (offsets[0] != 0) {
    throw Error(name, "entry 0 is " + std::to_string(offsets[0]) + ", not 0");
  }
  for (size_t b = 0; b < count; ++b) {
    if (offsets[b + 1] < offsets[b]) {
      throw Error(name, "entry " + std::to_string(b + 1) + " (" +
                            std::to_string(offsets[b + 1]) +
                            ") is less than entry " + std::to_string(b) + " (" +
                            std::to_string(offsets[b]) + ")");
    }
  }
  if (offsets[count] != rows) {
    throw Error(name, "entry " + std::to_string(count) + " is " +
                          std::to_string(offsets[count]) + " but " + rows_name +
                          " is " + std::to_string(rows));
  }
}

// The masks packed sequences cannot take: their lengths are their offsets,
// and their n×m matrices would be ragged.
template <typename T>
void CheckPackedMask(const AttentionMask<T>& mask) {
  if (mask.valid_lengths != nullptr) {
    throw Error("mask.valid_lengths",
                "does not apply to packed sequences (their offsets give "
                "their lengths)");
  }
  if (mask.bias.data != nullptr || mask.visible.data != nullptr) {
    throw Error(mask.bias.data != nullptr ? "mask.bias" : "mask.visible",
                "does not apply to packed sequences");
  }
}

// One call per (sequence, query head) of `count` sequences (a decode's, a
// few heads to a call: HeadsInCall) whose queries are rows
// [query_offsets[b], query_offsets[b + 1]) of each head and whose keys and
// values (key head g) are sources(b, g), a pair of RowLists; positions
// aligned at the sequences' ends.
template <typename T, class Sources>
std::vector<detail::PoolCall<T>> SequenceCalls(TensorView<const T> queries,
                                               TensorView<T> out,
                                               size_t kv_heads, size_t count,
                                               const size_t* query_offsets,
                                               const AttentionMask<T>& mask,
                                               const Sources& sources) {
  const size_t heads = queries.heads;
  const size_t group = kv_heads == 0 ? 1 : heads / kv_heads;
  std::vector<size_t> unused;
  std::vector<detail::PoolCall<T>> calls;
  calls.reserve(count * heads);
  for (size_t b = 0; b < count; ++b) {
    const size_t q0 = query_offsets[b], q1 = query_offsets[b + 1];
    for (size_t h = 0; h < heads;) {
      const auto [keys, values] = sources(b, h / group);
      detail::PoolCall<T> call{RowRange(queries.matrix(0, h), q0, q1),
                               keys,
                               values,
                               RowRange(out.matrix(0, h), q0, q1),
                               detail::HeadMask(mask, 0, h, q1 - q0, unused),
                               {}};
      // The sequences' ends aligned: query i at key i + (m − n) + offset.
      call.mask = detail::ShiftPositions(
          call.mask, static_cast<__int128>(keys.rows) - (q1 - q0));
      // (Packed sequences take no valid lengths: `unused` stays empty.)
      const size_t together = HeadsInCall(mask, call.mask, q1 - q0, keys.rows,
                                          h, group, false, queries);
      TakeHeads(call, together, queries.head_stride, out.head_stride, unused);
      calls.push_back(call);
      h += together;
    }
  }
  return calls;
}

// KV: a tensor of T, or ElementTensor (T = float).
template <typename T, typename KV>
void ScaledDotProductAttentionVarlen(
    TensorView<const T> queries, const KV& keys, const KV& values,
    TensorView<T> out, const PackedSequences& sequences,
    const AttentionMask<T>& mask, std::optional<double> scale,
    EmptyRows empty_rows, const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::CheckScale<T>(scale);
  detail::CheckEmptyRows(empty_rows);
  CheckPackedMask(mask);
  const detail::SdpaShape shape =
      detail::CheckSdpa<T, KV>(queries, keys, values, out, mask, execution);
  detail::CheckSize("queries.batch", shape.batch, 1,
                    "1 (sequences are packed along the rows)");
  const size_t count = sequences.count;
  CheckOffsets("sequences.query_offsets", sequences.query_offsets, count,
               "sequences.count", shape.n, "queries.rows");
  CheckOffsets("sequences.key_offsets", sequences.key_offsets, count,
               "sequences.count", shape.m, "keys.rows");
  const auto o = detail::CheckTensor("out", out, true);
  detail::CheckNoOverlap("out", o, "sequences.query_offsets",
                         detail::BiasRange(sequences.query_offsets, count + 1));
  detail::CheckNoOverlap("out", o, "sequences.key_offsets",
                         detail::BiasRange(sequences.key_offsets, count + 1));
  CheckDefaultScale(scale, queries.cols);
  const auto calls = SequenceCalls(
      queries, out, shape.kv_heads, count, sequences.query_offsets, mask,
      [&](size_t b, size_t g) {
        const size_t k0 = sequences.key_offsets[b],
                     k1 = sequences.key_offsets[b + 1];
        return std::pair<detail::RowList<T>, detail::RowList<T>>(
            detail::RowList<T>(keys.matrix(0, g)).Slice(k0, k1),
            detail::RowList<T>(values.matrix(0, g)).Slice(k0, k1));
      });
  detail::AttentionPoolBatch(SdpaSpec(scale, empty_rows), calls, execution);
}

// Sequence b's rows of head g of a paged pool, through its row of the
// block table, in place.
template <typename T, typename Cache>
detail::RowList<T> PagedRows(const TensorView<const T>& pool,
                             const Cache& cache, size_t b, size_t g) {
  return detail::RowList<T>::Paged(
      pool.data + g * pool.head_stride,
      cache.block_table + b * cache.block_table_stride, pool.rows,
      pool.batch_stride, pool.row_stride, cache.lengths[b], pool.cols);
}
inline detail::RowList<float> PagedRows(const ElementTensor& pool,
                                        const PagedElementCache& cache,
                                        size_t b, size_t g) {
  const bool scaled = element_properties(pool.type).scaled;
  return detail::RowList<float>::PagedElements(
      pool.type,
      static_cast<const char*>(pool.data) +
          g * pool.head_stride * element_properties(pool.type).bytes,
      cache.block_table + b * cache.block_table_stride, pool.rows,
      pool.batch_stride, pool.row_stride, cache.lengths[b], pool.cols,
      scaled ? pool.scales.data + g * pool.scales.head_stride : nullptr,
      pool.scales.batch_stride, pool.scales.row_stride);
}

// Cache: PagedKVCache<T>, or PagedElementCache (T = float).
template <typename T, typename Cache>
void ScaledDotProductAttentionPaged(TensorView<const T> queries,
                                    const Cache& cache, TensorView<T> out,
                                    size_t count, const size_t* query_offsets,
                                    const AttentionMask<T>& mask,
                                    std::optional<double> scale,
                                    EmptyRows empty_rows,
                                    const Execution& execution) {
  using detail::CheckNoOverlap;
  using detail::CheckSize;
  detail::EnsureDispatchReady();
  detail::CheckScale<T>(scale);
  detail::CheckEmptyRows(empty_rows);
  CheckPackedMask(mask);
  detail::ByteRange key_scales, value_scales;
  const auto q = detail::CheckTensor("queries", queries);
  const auto k =
      detail::CheckInputTensor("cache.keys", cache.keys, &key_scales);
  const auto v =
      detail::CheckInputTensor("cache.values", cache.values, &value_scales);
  const auto o = detail::CheckTensor("out", out, true);
  const size_t heads = queries.heads, kv_heads = cache.keys.heads;
  const size_t block_size = cache.keys.rows, blocks = cache.keys.batch;
  CheckSize("queries.batch", queries.batch, 1,
            "1 (sequences are packed along the rows)");
  CheckSize("out.batch", out.batch, 1, "queries.batch");
  CheckSize("out.heads", out.heads, heads, "queries.heads");
  CheckSize("out.rows", out.rows, queries.rows, "queries.rows");
  CheckSize("out.cols", out.cols, cache.values.cols, "cache.values.cols");
  CheckSize("cache.keys.cols", cache.keys.cols, queries.cols, "queries.cols");
  CheckSize("cache.values.batch", cache.values.batch, blocks,
            "cache.keys.batch");
  CheckSize("cache.values.heads", cache.values.heads, kv_heads,
            "cache.keys.heads");
  CheckSize("cache.values.rows", cache.values.rows, block_size,
            "cache.keys.rows");
  if (kv_heads == 0 ? heads != 0 : heads % kv_heads != 0) {
    throw Error("cache.keys.heads", "is " + std::to_string(kv_heads) +
                                        " but must divide queries.heads (" +
                                        std::to_string(heads) + ")");
  }
  if (block_size == 0) throw Error("cache.keys.rows", "(the block size) is 0");
  CheckOffsets("query_offsets", query_offsets, count, "count", queries.rows,
               "queries.rows");
  if (count != 0 && cache.lengths == nullptr) {
    throw Error("cache.lengths", "is null");
  }
  if (count != 0 && cache.block_table == nullptr) {
    throw Error("cache.block_table", "is null");
  }
  size_t table_entries = 0;  // read: up to the last sequence's last block
  // (count < 2^61 here: its offsets fit.)
  if (count != 0 &&
      cache.block_table_stride >
          std::numeric_limits<size_t>::max() / (count * sizeof(int32_t))) {
    throw Error("cache.block_table_stride",
                "times the sequences overflows the address space");
  }
  for (size_t b = 0; b < count; ++b) {
    const size_t used =
        cache.lengths[b] / block_size + (cache.lengths[b] % block_size != 0);
    if (used > cache.block_table_stride) {
      throw Error("cache.lengths",
                  "entry " + std::to_string(b) + " (" +
                      std::to_string(cache.lengths[b]) + " keys) needs " +
                      std::to_string(used) + " blocks, more than the " +
                      std::to_string(cache.block_table_stride) +
                      " of cache.block_table_stride");
    }
    for (size_t p = 0; p < used; ++p) {
      const int32_t block = cache.block_table[b * cache.block_table_stride + p];
      if (block < 0 || static_cast<size_t>(block) >= blocks) {
        throw Error("cache.block_table",
                    "entry (" + std::to_string(b) + ", " + std::to_string(p) +
                        ") is " + std::to_string(block) + ", outside [0, " +
                        std::to_string(blocks) + ")");
      }
    }
    if (used != 0) table_entries = b * cache.block_table_stride + used;
  }
  const auto ranges =
      detail::CheckAttentionMask(mask, 1, heads, queries.rows, 0);
  const std::pair<const char*, detail::ByteRange> inputs[] = {
      {"queries", q},
      {"cache.keys", k},
      {"cache.values", v},
      {"cache.keys.scales", key_scales},
      {"cache.values.scales", value_scales},
      {"cache.block_table",
       detail::BiasRange(cache.block_table, table_entries)},
      {"cache.lengths", detail::BiasRange(cache.lengths, count)},
      {"query_offsets", detail::BiasRange(query_offsets, count + 1)}};
  for (const auto& [name, range] : inputs)
    CheckNoOverlap("out", o, name, range);
  detail::CheckApartFromMask("out", o, ranges);
  detail::CheckExecution(execution);
  CheckDefaultScale(scale, queries.cols);
  const auto calls =
      SequenceCalls(queries, out, kv_heads, count, query_offsets, mask,
                    [&](size_t b, size_t g) {
                      return std::pair<detail::RowList<T>, detail::RowList<T>>(
                          PagedRows(cache.keys, cache, b, g),
                          PagedRows(cache.values, cache, b, g));
                    });
  detail::AttentionPoolBatch(SdpaSpec(scale, empty_rows), calls, execution);
}

// ---------------------------------------------------------------- linear

template <typename T>
void CheckLinear(const std::string& x_name, ConstMatrixView<T> x,
                 const std::string& w_name, ConstMatrixView<T> w,
                 const std::string& bias_name, const T* bias,
                 const std::string& out_name, MatrixView<T> out) {
  const auto o = detail::CheckBinaryRowOp(x_name, x, w_name, w, out_name, out,
                                          detail::Pairing::product);
  detail::CheckNoOverlap(out_name, o, bias_name,
                         detail::BiasRange(bias, w.cols));
}

// out = x·w (+ bias), checked.
template <typename T>
void RunLinear(ConstMatrixView<T> x, ConstMatrixView<T> w, const T* bias,
               MatrixView<T> out, const Execution& execution) {
  weighted_sum(x, w, out, execution);
  if (bias == nullptr) return;
  for (size_t r = 0; r < out.rows; ++r) {
    T* row = out.row(r);
    for (size_t c = 0; c < out.cols; ++c) row[c] += bias[c];
  }
}

template <typename T>
void Linear(ConstMatrixView<T> x, ConstMatrixView<T> w, const T* bias,
            MatrixView<T> out, const Execution& execution) {
  detail::EnsureDispatchReady();
  CheckLinear("x", x, "w", w, "bias", bias, "out", out);
  detail::CheckExecution(execution);
  RunLinear(x, w, bias, out, execution);
}

// ------------------------------------------------------------ multi-head

template <typename T>
void MultiHeadAttention(const MultiHeadWeights<T>& weights,
                        TensorView<const T> queries, TensorView<const T> keys,
                        TensorView<const T> values, TensorView<T> out,
                        const AttentionMask<T>& mask, EmptyRows empty_rows,
                        const Execution& execution) {
  using detail::CheckSize;
  detail::EnsureDispatchReady();
  detail::CheckEmptyRows(empty_rows);
  const size_t heads = weights.heads;
  if (heads == 0) throw Error("weights.heads", "must be at least 1");
  const auto q = detail::CheckTensor("queries", queries);
  const auto k = detail::CheckTensor("keys", keys);
  const auto v = detail::CheckTensor("values", values);
  const auto o = detail::CheckTensor("out", out, true);
  for (const auto& [name, view] :
       {std::pair<const char*, TensorView<const T>>{"queries", queries},
        {"keys", keys},
        {"values", values},
        {"out", TensorView<const T>(out)}}) {
    CheckSize(std::string(name) + ".heads", view.heads, 1,
              "one sequence per batch entry");
    CheckSize(std::string(name) + ".batch", view.batch, queries.batch,
              "queries.batch");
  }
  CheckSize("values.rows", values.rows, keys.rows, "keys.rows");
  CheckSize("out.rows", out.rows, queries.rows, "queries.rows");
  const size_t batch = queries.batch, n = queries.rows, m = keys.rows;
  const ConstMatrixView<T> w_q = weights.w_q, w_k = weights.w_k,
                           w_v = weights.w_v, w_o = weights.w_o;
  if (w_q.cols % heads != 0) {
    throw Error("weights.w_q.cols", "is " + std::to_string(w_q.cols) +
                                        ", not a multiple of the " +
                                        std::to_string(heads) + " heads");
  }
  if (w_v.cols % heads != 0) {
    throw Error("weights.w_v.cols", "is " + std::to_string(w_v.cols) +
                                        ", not a multiple of the " +
                                        std::to_string(heads) + " heads");
  }
  if (w_q.cols == 0) {
    throw Error("weights.w_q.cols",
                "is 0: each head needs at least one query/key column");
  }
  const size_t dh = w_q.cols / heads, dv = w_v.cols / heads;
  CheckSize("weights.w_q.rows", w_q.rows, queries.cols, "queries.cols");
  CheckSize("weights.w_k.rows", w_k.rows, keys.cols, "keys.cols");
  CheckSize("weights.w_k.cols", w_k.cols, w_q.cols, "weights.w_q.cols");
  CheckSize("weights.w_v.rows", w_v.rows, values.cols, "values.cols");
  CheckSize("weights.w_o.rows", w_o.rows, w_v.cols, "weights.w_v.cols");
  CheckSize("out.cols", out.cols, w_o.cols, "weights.w_o.cols");
  const std::pair<const char*, detail::ByteRange> inputs[] = {
      {"queries", q},
      {"keys", k},
      {"values", v},
      {"weights.w_q", detail::CheckView("weights.w_q", w_q)},
      {"weights.w_k", detail::CheckView("weights.w_k", w_k)},
      {"weights.w_v", detail::CheckView("weights.w_v", w_v)},
      {"weights.w_o", detail::CheckView("weights.w_o", w_o)},
      {"weights.b_q", detail::BiasRange(weights.b_q, w_q.cols)},
      {"weights.b_k", detail::BiasRange(weights.b_k, w_k.cols)},
      {"weights.b_v", detail::BiasRange(weights.b_v, w_v.cols)},
      {"weights.b_o", detail::BiasRange(weights.b_o, w_o.cols)}};
  for (const auto& [name, range] : inputs) {
    detail::CheckNoOverlap("out", o, name, range);
  }
  const auto ranges = detail::CheckAttentionMask(mask, batch, heads, n, m);
  detail::CheckApartFromMask("out", o, ranges);
  detail::CheckExecution(execution);

  // Projections, row-major (batch·rows) × (heads·columns): head h of entry
  // b is a strided view of them.
  size_t batch_n = 0, batch_m = 0, kv_cols = 0, q_elements = 0, kv_elements = 0,
         c_elements = 0, elements = 0;
  if (__builtin_mul_overflow(batch, n, &batch_n) ||
      __builtin_mul_overflow(batch, m, &batch_m) ||
      __builtin_add_overflow(w_q.cols, w_v.cols, &kv_cols) ||
      __builtin_mul_overflow(batch_n, w_q.cols, &q_elements) ||
      __builtin_mul_overflow(batch_m, kv_cols, &kv_elements) ||
      __builtin_mul_overflow(batch_n, w_v.cols, &c_elements) ||
      __builtin_add_overflow(q_elements, kv_elements, &elements) ||
      __builtin_add_overflow(elements, c_elements, &elements) ||
      elements > std::numeric_limits<size_t>::max() / sizeof(T)) {
    throw Error("queries", "the projections overflow the address space");
  }
  auto storage = detail::AllocateBuffer<T>(elements);
  detail::KeptOutputs kept(execution);
  kept.Keep(out);
  T* const projected_q = storage.get();
  T* const projected_k = projected_q + q_elements;
  T* const projected_v = projected_k + batch * m * w_q.cols;
  T* const concat = projected_v + batch * m * w_v.cols;
  for (size_t b = 0; b < batch; ++b) {
    RunLinear(queries.matrix(b, 0), w_q, weights.b_q,
              MatrixView<T>(projected_q + b * n * w_q.cols, n, w_q.cols),
              execution);
    RunLinear(keys.matrix(b, 0), w_k, weights.b_k,
              MatrixView<T>(projected_k + b * m * w_k.cols, m, w_k.cols),
              execution);
    RunLinear(values.matrix(b, 0), w_v, weights.b_v,
              MatrixView<T>(projected_v + b * m * w_v.cols, m, w_v.cols),
              execution);
  }
  const TensorView<const T> head_q{projected_q, batch,        heads, n,
                                   dh,          n * w_q.cols, dh,    w_q.cols};
  const TensorView<const T> head_k{projected_k, batch,        heads, m,
                                   dh,          m * w_k.cols, dh,    w_k.cols};
  const TensorView<const T> head_v{projected_v, batch,        heads, m,
                                   dv,          m * w_v.cols, dv,    w_v.cols};
  const TensorView<T> head_out{concat, batch,        heads, n,
                               dv,     n * w_v.cols, dv,    w_v.cols};
  RunSdpa(detail::SdpaShape{batch, heads, heads, n, m}, head_q, head_k, head_v,
          head_out, mask, std::nullopt, empty_rows, execution);
  for (size_t b = 0; b < batch; ++b) {
    RunLinear(ConstMatrixView<T>(concat + b * n * w_v.cols, n, w_v.cols), w_o,
              weights.b_o, out.matrix(b, 0), execution);
  }
}

}  // namespace

template <typename T>
std::vector<T> alibi_slopes(size_t heads) {
  detail::EnsureDispatchReady();
  // 2^(−8(h+1)/H) for h < H, H a power of two.
  const auto power_of_two_slopes = [](size_t count, size_t take_every,
                                      size_t take, std::vector<T>& out) {
    for (size_t h = 0; h < count && out.size() < take; h += take_every) {
      out.push_back(
          static_cast<T>(std::exp2(-8.0 * double(h + 1) / double(count))));
    }
  };
  std::vector<T> slopes;
  if (heads == 0) return slopes;
  size_t below = 1;
  while (below <= heads / 2) below *= 2;
  power_of_two_slopes(below, 1, heads, slopes);
  power_of_two_slopes(2 * below, 2, heads, slopes);
  return slopes;
}
template std::vector<float> alibi_slopes<float>(size_t);
template std::vector<double> alibi_slopes<double>(size_t);

#define ATTNPOOL_ATTENTION_OVERLOADS(T)                                        \
  void scaled_dot_product_attention(                                           \
      TensorView<const T> queries, TensorView<const T> keys,                   \
      TensorView<const T> values, TensorView<T> out,                           \
      const AttentionMask<T>& mask, std::optional<double> scale,               \
      EmptyRows empty_rows, const Execution& execution) {                      \
    ScaledDotProductAttention<T, TensorView<const T>>(                         \
        queries, keys, values, out, mask, scale, empty_rows, execution);       \
  }                                                                            \
  void scaled_dot_product_attention_varlen(                                    \
      TensorView<const T> queries, TensorView<const T> keys,                   \
      TensorView<const T> values, TensorView<T> out,                           \
      const PackedSequences& sequences, const AttentionMask<T>& mask,          \
      std::optional<double> scale, EmptyRows empty_rows,                       \
      const Execution& execution) {                                            \
    ScaledDotProductAttentionVarlen<T, TensorView<const T>>(                   \
        queries, keys, values, out, sequences, mask, scale, empty_rows,        \
        execution);                                                            \
  }                                                                            \
  void scaled_dot_product_attention_paged(                                     \
      TensorView<const T> queries, const PagedKVCache<T>& cache,               \
      TensorView<T> out, size_t count, const size_t* query_offsets,            \
      const AttentionMask<T>& mask, std::optional<double> scale,               \
      EmptyRows empty_rows, const Execution& execution) {                      \
    ScaledDotProductAttentionPaged<T, PagedKVCache<T>>(                        \
        queries, cache, out, count, query_offsets, mask, scale, empty_rows,    \
        execution);                                                            \
  }                                                                            \
  void multi_head_attention(                                                   \
      const MultiHeadWeights<T>& weights, TensorView<const T> queries,         \
      TensorView<const T> keys, TensorView<const T> values, TensorView<T> out, \
      const AttentionMask<T>& mask, EmptyRows empty_rows,                      \
      const Execution& execution) {                                            \
    MultiHeadAttention(weights, queries, keys, values, out, mask, empty_rows,  \
                       execution);                                             \
  }                                                                            \
  void linear(ConstMatrixView<T> x, ConstMatrixView<T> w, const T* bias,       \
              MatrixView<T> out, const Execution& execution) {                 \
    Linear(x, w, bias, out, execution);                                        \
  }
ATTNPOOL_ATTENTION_OVERLOADS(float)
ATTNPOOL_ATTENTION_OVERLOADS(double)
#undef ATTNPOOL_ATTENTION_OVERLOADS

void scaled_dot_product_attention(
    TensorView<const float> queries, const ElementTensor& keys,
    const ElementTensor& values, TensorView<float> out,
    const AttentionMask<float>& mask, std::optional<double> scale,
    EmptyRows empty_rows, const Execution& execution) {
  ScaledDotProductAttention<float, ElementTensor>(
      queries, keys, values, out, mask, scale, empty_rows, execution);
}

void scaled_dot_product_attention_varlen(
    TensorView<const float> queries, const ElementTensor& keys,
    const ElementTensor& values, TensorView<float> out,
    const PackedSequences& sequences, const AttentionMask<float>& mask,
    std::optional<double> scale, EmptyRows empty_rows,
    const Execution& execution) {
  ScaledDotProductAttentionVarlen<float, ElementTensor>(
      queries, keys, values, out, sequences, mask, scale, empty_rows,
      execution);
}

void scaled_dot_product_attention_paged(
    TensorView<const float> queries, const PagedElementCache& cache,
    TensorView<float> out, size_t count, const size_t* query_offsets,
    const AttentionMask<float>& mask, std::optional<double> scale,
    EmptyRows empty_rows, const Execution& execution) {
  ScaledDotProductAttentionPaged<float, PagedElementCache>(
      queries, cache, out, count, query_offsets, mask, scale, empty_rows,
      execution);
}

void scaled_dot_product_attention(
    const ElementTensor& queries, const ElementTensor& keys,
    const ElementTensor& values, TensorView<float> out,
    const AttentionMask<float>& mask, std::optional<double> scale,
    EmptyRows empty_rows, const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::ByteRange query_scales;
  const auto query_bytes =
      detail::CheckTensor("queries", queries, &query_scales);
  const TensorView<const float> as_float{
      static_cast<const float*>(queries.data),
      queries.batch,
      queries.heads,
      queries.rows,
      queries.cols,
      queries.batch_stride,
      queries.head_stride,
      queries.row_stride};
  if (queries.type == ElementType::float32) {
    return scaled_dot_product_attention(as_float, keys, values, out, mask,
                                        scale, empty_rows, execution);
  }
  const auto out_bytes = detail::CheckTensor("out", out, true);
  detail::CheckNoOverlap("out", out_bytes, "queries", query_bytes);
  detail::CheckNoOverlap("out", out_bytes, "queries.scales", query_scales);
  // The queries widened once, dense (B, H, n, d): the size of an output.
  const size_t batch = queries.batch, heads = queries.heads,
               rows = queries.rows, cols = queries.cols;
  auto widened = detail::AllocateBuffer<float>(
      std::max<size_t>(1, batch * heads * rows * cols));
  const auto wide =
      dense_tensor<float>(widened.get(), batch, heads, rows, cols);
  for (size_t b = 0; b < batch; ++b) {
    for (size_t h = 0; h < heads; ++h) {
      detail::WidenRows(queries.matrix(b, h), wide.matrix(b, h));
    }
  }
  detail::CheckScale<float>(scale);
  detail::CheckEmptyRows(empty_rows);
  const TensorView<const float> wide_queries = wide;
  const detail::SdpaShape shape = detail::CheckSdpa<float, ElementTensor>(
      wide_queries, keys, values, out, mask, execution);
  CheckDefaultScale(scale, cols);
  RunSdpa(shape, wide_queries, keys, values, out, mask, scale, empty_rows,
          execution,
          queries.type == ElementType::bfloat16 ? &queries : nullptr);
}

}  // namespace attnpool
