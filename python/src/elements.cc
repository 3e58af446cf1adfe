// Keys and values in reduced-precision element types (element.h): the
// pooling and scaled dot-product attention over them, and the conversions.
// A narrow array arrives with its element type's name ("bfloat16" data is
// uint16 bit patterns, "float16" NumPy's float16, "int8" int8 with float32
// scales, one per row); queries and outputs are float32.
#include <attnpool/attnpool.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "python/src/arguments.h"
#include "python/src/element_arrays.h"

namespace attnpool_python {
namespace {

void AttentionPoolElements(const SpecArguments& spec, const InArray& queries,
                           const std::string& query_type,
                           const std::optional<InArray>& query_scales,
                           const InArray& keys, const std::string& key_type,
                           const std::optional<InArray>& key_scales,
                           const InArray& values, const std::string& value_type,
                           const std::optional<InArray>& value_scales,
                           const OutArray& out,
                           const MaskKeywords& mask_arguments, int threads) {
  const ElementArray<2> q("queries", queries, query_type, query_scales);
  const ElementArray<2> k("keys", keys, key_type, key_scales);
  const ElementArray<2> v("values", values, value_type, value_scales);
  const auto query_rows = q.rows();
  const auto value_rows = v.rows();
  const Output<float, 2> o("out", out, {query_rows.rows, value_rows.cols},
                           "queries");
  const MaskArguments<float, 2> masks(mask_arguments, "queries");
  const auto pool_spec = PoolSpecOf(spec);
  const auto execution = ExecutionOf(threads);
  nb::gil_scoped_release release;
  attnpool::attention_pool(pool_spec, query_rows, k.rows(), value_rows,
                           o.matrix(), masks.mask(), execution);
}

void ScaledDotProductAttentionElements(
    const InArray& queries, const std::string& query_type,
    const std::optional<InArray>& query_scales, const InArray& keys,
    const std::string& key_type, const std::optional<InArray>& key_scales,
    const InArray& values, const std::string& value_type,
    const std::optional<InArray>& value_scales, const OutArray& out,
    const MaskKeywords& mask_arguments, std::optional<double> scale,
    const std::string& empty_rows, int threads) {
  const ElementArray<4> q("queries", queries, query_type, query_scales);
  const ElementArray<4> k("keys", keys, key_type, key_scales);
  const ElementArray<4> v("values", values, value_type, value_scales);
  const auto query_tensor = q.tensor();
  const auto value_tensor = v.tensor();
  const Output<float, 4> o("out", out,
                           {query_tensor.batch, query_tensor.heads,
                            query_tensor.rows, value_tensor.cols},
                           "queries");
  const MaskArguments<float, 4> masks(mask_arguments, "queries");
  const auto empty = EmptyRowsOf(empty_rows);
  const auto execution = ExecutionOf(threads);
  nb::gil_scoped_release release;
  attnpool::scaled_dot_product_attention(q.tensor(), k.tensor(), value_tensor,
                                         o.tensor(), masks.mask(), scale, empty,
                                         execution);
}

// Float32 queries, keys and values of any element type (named
// `key_name`, `value_name`) and the float32 output of an attention call
// over packed or paged rows: (1, Hq, Σn, d) queries and out.
struct ElementLayer {
  ElementLayer(const InArray& queries, const char* key_name,
               const InArray& keys, const std::string& key_type,
               const std::optional<InArray>& key_scales, const char* value_name,
               const InArray& values, const std::string& value_type,
               const std::optional<InArray>& value_scales, const OutArray& out)
      : q("queries", Float32("queries", queries)),
        k(key_name, keys, key_type, key_scales),
        v(value_name, values, value_type, value_scales),
        o("out", out,
          {q.tensor().batch, q.tensor().heads, q.tensor().rows,
           v.tensor().cols},
          "queries") {}
  static const InArray& Float32(const char* name, const InArray& array) {
    RequireFloat32(name, array);
    return array;
  }
  const Input<float, 4> q;
  const ElementArray<4> k, v;
  const Output<float, 4> o;
};

// Packed sequences over narrow keys and values: (1, H, Σm, d) views of
// (Σm, H, d) arrays (int8 scales (1, H, Σm)).
void ScaledDotProductAttentionVarlenElements(
    const InArray& queries, const InArray& keys, const std::string& key_type,
    const std::optional<InArray>& key_scales, const InArray& values,
    const std::string& value_type, const std::optional<InArray>& value_scales,
    const OutArray& out, const Lengths& query_offsets,
    const Lengths& key_offsets, const MaskKeywords& mask_arguments,
    std::optional<double> scale, const std::string& empty_rows, int threads) {
  const attnpool::PackedSequences sequences =
      PackedSequencesOf(query_offsets, key_offsets);
  const ElementLayer t(queries, "keys", keys, key_type, key_scales, "values",
                       values, value_type, value_scales, out);
  const MaskArguments<float, 4> masks(mask_arguments, "queries");
  const auto empty = EmptyRowsOf(empty_rows);
  const auto execution = ExecutionOf(threads);
  nb::gil_scoped_release release;
  attnpool::scaled_dot_product_attention_varlen(
      t.q.tensor(), t.k.tensor(), t.v.tensor(), t.o.tensor(), sequences,
      masks.mask(), scale, empty, execution);
}

// A paged cache of narrow keys and values: (blocks, Hkv, block_size, d)
// views of (blocks, block_size, Hkv, d) pools (int8 scales (blocks, Hkv,
// block_size)).
void ScaledDotProductAttentionPagedElements(
    const InArray& queries, const InArray& key_cache,
    const std::string& key_type, const std::optional<InArray>& key_scales,
    const InArray& value_cache, const std::string& value_type,
    const std::optional<InArray>& value_scales, const BlockTable& block_table,
    const Lengths& lengths, const OutArray& out, const Lengths& query_offsets,
    const MaskKeywords& mask_arguments, std::optional<double> scale,
    const std::string& empty_rows, int threads) {
  const size_t count = PagedCount(block_table, lengths, query_offsets);
  const ElementLayer t(queries, "key_cache", key_cache, key_type, key_scales,
                       "value_cache", value_cache, value_type, value_scales,
                       out);
  const MaskArguments<float, 4> masks(mask_arguments, "queries");
  const auto empty = EmptyRowsOf(empty_rows);
  const auto execution = ExecutionOf(threads);
  const auto cache = PagedCacheOf<attnpool::PagedElementCache>(
      t.k.tensor(), t.v.tensor(), block_table, lengths);
  nb::gil_scoped_release release;
  attnpool::scaled_dot_product_attention_paged(
      t.q.tensor(), cache, t.o.tensor(), count, query_offsets.data(),
      masks.mask(), scale, empty, execution);
}

void PairwiseDistancesElements(const std::string& distance,
                               const InArray& queries, const InArray& keys,
                               const std::string& key_type,
                               const std::optional<InArray>& key_scales,
                               const OutArray& out, int threads) {
  RequireFloat32("queries", queries);
  const Input<float, 2> q("queries", queries);
  const ElementArray<2> k("keys", keys, key_type, key_scales);
  const auto key_rows = k.rows();
  const Output<float, 2> o("out", out, {q.shape(0), key_rows.rows}, "queries");
  const auto which = attnpool::distance_from_name(distance.c_str());
  const auto execution = ExecutionOf(threads);
  nb::gil_scoped_release release;
  attnpool::pairwise_distances(which, q.matrix(), key_rows, o.matrix(),
                               execution);
}

// Rows (n x d) of any element type back in float32 (element.h widen_rows).
void WidenRows(const InArray& rows, const std::string& type,
               const std::optional<InArray>& scales, const OutArray& out) {
  const ElementArray<2> in("rows", rows, type, scales);
  const auto stored = in.rows();
  const Output<float, 2> o("out", out, {stored.rows, stored.cols}, "rows");
  nb::gil_scoped_release release;
  attnpool::widen_rows(stored, o.matrix());
}

}  // namespace

void DefineElements(nb::module_& m) {
  m.def("widen_rows", &WidenRows);
  // element.h's table: (name, .npy type string, scaled) per type.
  m.def("element_types", [] {
    nb::list types;
    for (const auto& entry : attnpool::kElementTypes) {
      types.append(nb::make_tuple(entry.name, entry.npy_descr, entry.scaled));
    }
    return types;
  });
  m.def("pairwise_distances_elements", &PairwiseDistancesElements);
  m.def("attention_pool_elements", &AttentionPoolElements);
  m.def("scaled_dot_product_attention_elements",
        &ScaledDotProductAttentionElements);
  m.def("scaled_dot_product_attention_varlen_elements",
        &ScaledDotProductAttentionVarlenElements);
  m.def("scaled_dot_product_attention_paged_elements",
        &ScaledDotProductAttentionPagedElements);
  m.def("to_bfloat16", [](const InArray& in, const OutArray& out) {
    RequireFloat32("x", in);
    const Input<float, 1> x("x", in);
    const Output<uint16_t, 1> o("out", out, {x.shape(0)}, "x");
    attnpool::to_bfloat16(x.data(), x.shape(0),
                          reinterpret_cast<attnpool::bf16*>(o.data()));
  });
  m.def("bfloat16_to_float", [](const InArray& in, const OutArray& out) {
    if (in.dtype() != nb::dtype<uint16_t>()) {
      ThrowType("bits", "dtype " + DtypeName(in.dtype()) + " is not uint16");
    }
    const Input<uint16_t, 1> x("bits", in);
    const Output<float, 1> o("out", out, {x.shape(0)}, "bits");
    attnpool::to_float(reinterpret_cast<const attnpool::bf16*>(x.data()),
                       x.shape(0), o.data());
  });
  m.def("quantize_rows",
        [](const InArray& in, const OutArray& out, const OutArray& scales) {
          RequireFloat32("x", in);
          const Input<float, 2> x("x", in);
          const Output<int8_t, 2> o("out", out, {x.shape(0), x.shape(1)}, "x");
          const Output<float, 1> s("scales", scales, {x.shape(0)}, "x");
          attnpool::quantize_rows(x.matrix(), o.matrix(), s.data());
        });
}

}  // namespace attnpool_python
