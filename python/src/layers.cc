// The attention layers on (batch, heads, rows, cols) arrays: scaled
// dot-product (masks, grouped-query heads), additive and multi-head.
#include <attnpool/attnpool.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "python/src/arguments.h"
#include "python/src/plain.h"

namespace attnpool_python {
namespace {

// The queries, keys and values of a layer call, each (B, heads, rows,
// cols), and its out: (B, Hq, n, dv), or with `out_shape` (B, heads, n,
// cols) = (B, out_shape[0], n, out_shape[1]).
template <typename T>
struct LayerTensors {
  LayerTensors(const InArray& queries, const InArray& keys,
               const InArray& values, const OutArray& out,
               std::optional<std::array<size_t, 2>> out_shape = {})
      : q("queries", queries, "queries"),
        k("keys", keys, "queries"),
        v("values", values, "queries"),
        o("out", out,
          {q.shape(0), out_shape ? (*out_shape)[0] : q.shape(1), q.shape(2),
           out_shape ? (*out_shape)[1] : v.shape(3)},
          "queries") {}

  Input<T, 4> q, k, v;
  Output<T, 4> o;
};

void ScaledDotProductAttention(const InArray& queries, const InArray& keys,
                               const InArray& values, const OutArray& out,
                               const MaskKeywords& mask_arguments,
                               std::optional<double> scale,
                               const std::string& empty_rows, int threads) {
  WithDtype("queries", queries, [&](auto zero) {
    using T = decltype(zero);
    const LayerTensors<T> t(queries, keys, values, out);
    const MaskArguments<T, 4> masks(mask_arguments, "queries");
    const auto empty = EmptyRowsOf(empty_rows);
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    attnpool::scaled_dot_product_attention(
        t.q.tensor(), t.k.tensor(), t.v.tensor(), t.o.tensor(), masks.mask(),
        scale, empty, execution);
  });
}

// scaled_dot_product_attention's plain path (plain.h): the result, or
// NotImplemented where the package must convert.
nb::object ScaledDotProductAttentionPlain(nb::handle queries, nb::handle keys,
                                          nb::handle values, nb::handle scale,
                                          nb::handle empty_rows, nb::handle out,
                                          nb::handle threads, nb::handle mask) {
  const nb::object converting = nb::borrow(Py_NotImplemented);
  HeldArray q, k, v, o;
  if (!q.Take<4>(queries.ptr(), false) || !k.Take<4>(keys.ptr(), false) ||
      !v.Take<4>(values.ptr(), false) || k.is_double() != q.is_double() ||
      v.is_double() != q.is_double()) {
    return converting;
  }
  std::optional<double> score_scale;
  if (!scale.is_none()) {
    score_scale = PlainDouble(scale.ptr());
    if (!score_scale) return converting;
  }
  const auto empty_name = PlainString(empty_rows.ptr());
  const auto thread_count = PlainThreads(threads.ptr());
  if (!empty_name || !thread_count ||
      (*empty_name != "nan" && *empty_name != "zero")) {
    return converting;
  }
  const bool is_double = q.is_double();
  const auto run = [&](auto zero) -> nb::object {
    using T = decltype(zero);
    attnpool::AttentionMask<T> plain_mask;
    if (!PlainMask(mask.ptr(), plain_mask)) return converting;
    const nb::object result = PlainOut<4>(
        out, {q.shape(0), q.shape(1), q.shape(2), v.shape(3)}, is_double, o);
    if (!result.is_valid()) return converting;
    const auto empty = EmptyRowsOf(std::string(*empty_name));
    const auto execution = ExecutionOf(*thread_count);
    {
      nb::gil_scoped_release release;
      attnpool::scaled_dot_product_attention(
          q.tensor<const T>(), k.tensor<const T>(), v.tensor<const T>(),
          o.tensor<T>(), plain_mask, score_scale, empty, execution);
    }
    ++g_plain_calls;
    return result;
  };
  return is_double ? run(double()) : run(float());
}

// Packed sequences: (1, H, Σn, d) views of (Σn, H, d) arrays, and the
// offsets (count + 1 entries each).
void ScaledDotProductAttentionVarlen(
    const InArray& queries, const InArray& keys, const InArray& values,
    const OutArray& out, const Lengths& query_offsets,
    const Lengths& key_offsets, const MaskKeywords& mask_arguments,
    std::optional<double> scale, const std::string& empty_rows, int threads) {
  const attnpool::PackedSequences sequences =
      PackedSequencesOf(query_offsets, key_offsets);
  WithDtype("queries", queries, [&](auto zero) {
    using T = decltype(zero);
    const LayerTensors<T> t(queries, keys, values, out);
    const MaskArguments<T, 4> masks(mask_arguments, "queries");
    const auto empty = EmptyRowsOf(empty_rows);
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    attnpool::scaled_dot_product_attention_varlen(
        t.q.tensor(), t.k.tensor(), t.v.tensor(), t.o.tensor(), sequences,
        masks.mask(), scale, empty, execution);
  });
}

// A paged cache: (blocks, Hkv, block_size, d) views of (blocks, block_size,
// Hkv, d) pools, the block table (count, blocks per sequence) and lengths.
void ScaledDotProductAttentionPaged(
    const InArray& queries, const InArray& key_cache,
    const InArray& value_cache, const BlockTable& block_table,
    const Lengths& lengths, const OutArray& out, const Lengths& query_offsets,
    const MaskKeywords& mask_arguments, std::optional<double> scale,
    const std::string& empty_rows, int threads) {
  const size_t count = PagedCount(block_table, lengths, query_offsets);
  WithDtype("queries", queries, [&](auto zero) {
    using T = decltype(zero);
    const LayerTensors<T> t(queries, key_cache, value_cache, out);
    const MaskArguments<T, 4> masks(mask_arguments, "queries");
    const auto empty = EmptyRowsOf(empty_rows);
    const auto execution = ExecutionOf(threads);
    const auto cache = PagedCacheOf<attnpool::PagedKVCache<T>>(
        t.k.tensor(), t.v.tensor(), block_table, lengths);
    nb::gil_scoped_release release;
    attnpool::scaled_dot_product_attention_paged(
        t.q.tensor(), cache, t.o.tensor(), count, query_offsets.data(),
        masks.mask(), scale, empty, execution);
  });
}

void AdditiveAttention(const InArray& w_q, const InArray& w_k,
                       const InArray& w_v, const InArray& queries,
                       const InArray& keys, const InArray& values,
                       const OutArray& out, const std::string& empty_rows,
                       int threads) {
  WithDtype("queries", queries, [&](auto zero) {
    using T = decltype(zero);
    const LayerTensors<T> t(queries, keys, values, out);
    const Input<T, 2> wq("w_q", w_q, "queries"), wk("w_k", w_k, "queries");
    const Input<T, 1> wv("w_v", w_v, "queries");
    if (wv.shape(0) != wq.shape(0)) {
      ThrowValue("w_v", "must have one entry per row of w_q");
    }
    const attnpool::AdditiveWeights<T> weights{wq.matrix(), wk.matrix(),
                                               wv.data()};
    const auto empty = EmptyRowsOf(empty_rows);
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    attnpool::additive_attention(weights, t.q.tensor(), t.k.tensor(),
                                 t.v.tensor(), t.o.tensor(), {}, empty,
                                 execution);
  });
}

// A bias vector of `count` entries, or none.
template <typename T>
struct OptionalBias {
  OptionalBias(const char* name, const std::optional<InArray>& array,
               size_t count) {
    if (!array) return;
    input.emplace(name, *array, "queries");
    if (input->shape(0) != count) {
      ThrowValue(name, "has " + std::to_string(input->shape(0)) +
                           " entries, expected " + std::to_string(count));
    }
  }
  const T* data() const { return input ? input->data() : nullptr; }
  std::optional<Input<T, 1>> input;
};

void MultiHeadAttention(size_t heads, const InArray& w_q, const InArray& w_k,
                        const InArray& w_v, const InArray& w_o,
                        const std::optional<InArray>& b_q,
                        const std::optional<InArray>& b_k,
                        const std::optional<InArray>& b_v,
                        const std::optional<InArray>& b_o,
                        const InArray& queries, const InArray& keys,
                        const InArray& values, const OutArray& out,
                        const MaskKeywords& mask_arguments,
                        const std::string& empty_rows, int threads) {
  WithDtype("queries", queries, [&](auto zero) {
    using T = decltype(zero);
    const Input<T, 2> wq("w_q", w_q, "queries"), wk("w_k", w_k, "queries"),
        wv("w_v", w_v, "queries"), wo("w_o", w_o, "queries");
    const LayerTensors<T> t(queries, keys, values, out,
                            std::array<size_t, 2>{1, wo.shape(1)});
    const OptionalBias<T> bq("b_q", b_q, wq.shape(1)),
        bk("b_k", b_k, wk.shape(1)), bv("b_v", b_v, wv.shape(1)),
        bo("b_o", b_o, wo.shape(1));
    const attnpool::MultiHeadWeights<T> weights{
        heads,     wq.matrix(), wk.matrix(), wv.matrix(), wo.matrix(),
        bq.data(), bk.data(),   bv.data(),   bo.data()};
    const MaskArguments<T, 4> masks(mask_arguments, "queries");
    const auto empty = EmptyRowsOf(empty_rows);
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    attnpool::multi_head_attention(weights, t.q.tensor(), t.k.tensor(),
                                   t.v.tensor(), t.o.tensor(), masks.mask(),
                                   empty, execution);
  });
}

}  // namespace

void DefineLayers(nb::module_& m) {
  m.def("scaled_dot_product_attention", &ScaledDotProductAttention);
  // (Every argument may be None: the function says what it takes.)
  m.def("scaled_dot_product_attention_plain", &ScaledDotProductAttentionPlain,
        nb::arg().none(), nb::arg().none(), nb::arg().none(), nb::arg().none(),
        nb::arg().none(), nb::arg().none(), nb::arg().none(), nb::arg().none());
  m.def("scaled_dot_product_attention_varlen",
        &ScaledDotProductAttentionVarlen);
  m.def("scaled_dot_product_attention_paged", &ScaledDotProductAttentionPaged);
  m.def("additive_attention", &AdditiveAttention);
  m.def("multi_head_attention", &MultiHeadAttention);
  m.def("alibi_slopes", &attnpool::alibi_slopes<double>);
}

}  // namespace attnpool_python
