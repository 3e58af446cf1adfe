// The C API of element.h: keys and values of reduced-precision element
// types for the pooling and scaled dot-product attention, and the
// conversions.
#include <attnpool/attnpool_c.h>

#include <string>

#include "src/c_api_convert.h"
#include "core/validate.h"

using namespace attnpool_c_api;  // NOLINT: this file is its implementation

namespace {

// The C enum holds the C++ one's values (element.h's table).
#define ATTNPOOL_C_ELEMENT_MATCHES(name, c_name, ...)            \
  static_assert(static_cast<int>(attnpool::ElementType::name) == \
                    ATTNPOOL_ELEMENT_##c_name,                   \
                "attnpool_element: ATTNPOOL_ELEMENT_" #c_name " differs");
ATTNPOOL_ELEMENT_TABLE(ATTNPOOL_C_ELEMENT_MATCHES)
#undef ATTNPOOL_C_ELEMENT_MATCHES

// The C++ view of `t`'s data as the element type stored as S (and its
// scales where S is scaled).
template <typename S>
attnpool::ElementTensor StoredTensorOf(const attnpool_element_tensor& t,
                                       const std::string& name) {
  const auto data = TensorOf<const S>(name, t.data);
  if constexpr (attnpool::element_properties(attnpool::ElementTypeOf<S>::value)
                    .scaled) {
    return attnpool::ScaledTensor<S>{
        data, TensorOf<const float>(name + ".scales", t.scales)};
  } else {
    return data;
  }
}

// The C++ view of a required element tensor, its errors named `argument`.
attnpool::ElementTensor ElementTensorOf(const attnpool_element_tensor* tensor,
                                        const char* argument) {
  const auto& t = Required(tensor, argument);
  const std::string name = argument;
  const auto type = static_cast<attnpool::ElementType>(t.element);
  if (!attnpool::in_table(attnpool::kElementTypes, type)) {
    throw attnpool::Error(
        name + ".element",
        "invalid value " + std::to_string(static_cast<int>(t.element)));
  }
  return attnpool::visit_element_storage(type, [&](auto stored) {
    return StoredTensorOf<decltype(stored)>(t, name);
  });
}

// A matrix of any element type: a tensor of one batch entry and one head.
attnpool::ElementRows ElementRowsOf(const attnpool_element_tensor* tensor,
                                    const char* argument) {
  const attnpool::ElementTensor t = ElementTensorOf(tensor, argument);
  const std::string name = argument;
  attnpool::detail::CheckSize(name + ".batch", t.batch, 1, "1");
  attnpool::detail::CheckSize(name + ".heads", t.heads, 1, "1");
  if (attnpool::element_properties(t.type).scaled) {
    attnpool::detail::CheckTensor(name, t);  // the scales' shape
  }
  return t.matrix(0, 0);
}

// attnpool_pool_elements and _element_queries: queries already viewed.
template <class Queries>
void PoolElements(const attnpool_pool_spec* spec, const Queries& queries,
                  const attnpool_element_tensor* keys,
                  const attnpool_element_tensor* values,
                  const attnpool_matrix* out, const attnpool_mask* mask,
                  const attnpool_execution* execution) {
  const attnpool::PoolSpec pool_spec = PoolSpecOf(Required(spec, "spec"));
  const auto k = ElementRowsOf(keys, "keys");
  const auto v = ElementRowsOf(values, "values");
  attnpool::attention_pool(pool_spec, queries, k, v, ViewOf<float>(out, "out"),
                           MaskOf<float>(mask), ExecutionOf(execution));
}

// attnpool_scaled_dot_product_attention_elements and _element_queries.
template <class Queries>
void SdpaElements(const Queries& queries, const attnpool_element_tensor* keys,
                  const attnpool_element_tensor* values,
                  const attnpool_tensor* out,
                  const attnpool_attention_mask* mask, const double* scale,
                  attnpool_empty_rows empty_rows,
                  const attnpool_execution* execution) {
  const auto k = ElementTensorOf(keys, "keys");
  const auto v = ElementTensorOf(values, "values");
  const auto o = Tensor<float>(out, "out");
  attnpool::scaled_dot_product_attention(
      queries, k, v, o, AttentionMaskOf<float>(mask), ScaleOf(scale),
      static_cast<attnpool::EmptyRows>(empty_rows), ExecutionOf(execution));
}

}  // namespace

extern "C" {

attnpool_status attnpool_pool_elements(const attnpool_pool_spec* spec,
                                       const attnpool_const_matrix* queries,
                                       const attnpool_element_tensor* keys,
                                       const attnpool_element_tensor* values,
                                       const attnpool_matrix* out,
                                       const attnpool_mask* mask,
                                       const attnpool_execution* execution) {
  return Guard([&] {
    PoolElements(spec, ViewOf<float>(queries, "queries"), keys, values, out,
                 mask, execution);
  });
}

attnpool_status attnpool_pool_element_queries(
    const attnpool_pool_spec* spec, const attnpool_element_tensor* queries,
    const attnpool_element_tensor* keys, const attnpool_element_tensor* values,
    const attnpool_matrix* out, const attnpool_mask* mask,
    const attnpool_execution* execution) {
  return Guard([&] {
    PoolElements(spec, ElementRowsOf(queries, "queries"), keys, values, out,
                 mask, execution);
  });
}

attnpool_status attnpool_pool_partial_elements(
    const attnpool_pool_spec* spec, const attnpool_const_matrix* queries,
    const attnpool_element_tensor* keys, const attnpool_element_tensor* values,
    size_t key_offset, const attnpool_partial_state* partial,
    const attnpool_mask* mask, const attnpool_execution* execution) {
  return Guard([&] {
    const attnpool::PoolSpec pool_spec = PoolSpecOf(Required(spec, "spec"));
    const auto q = ViewOf<float>(queries, "queries");
    const auto k = ElementRowsOf(keys, "keys");
    const auto v = ElementRowsOf(values, "values");
    attnpool::attention_pool_partial(
        pool_spec, q, k, v, key_offset,
        PartialOf<float>(Required(partial, "partial")), MaskOf<float>(mask),
        ExecutionOf(execution));
  });
}

attnpool_status attnpool_pairwise_distances_elements(
    attnpool_distance distance, const attnpool_const_matrix* queries,
    const attnpool_element_tensor* keys, const attnpool_matrix* out,
    const attnpool_execution* execution) {
  return Guard([&] {
    const auto q = ViewOf<float>(queries, "queries");
    const auto k = ElementRowsOf(keys, "keys");
    attnpool::pairwise_distances(static_cast<attnpool::Distance>(distance), q,
                                 k, ViewOf<float>(out, "out"),
                                 ExecutionOf(execution));
  });
}

attnpool_status attnpool_scaled_dot_product_attention_elements(
    const attnpool_const_tensor* queries, const attnpool_element_tensor* keys,
    const attnpool_element_tensor* values, const attnpool_tensor* out,
    const attnpool_attention_mask* mask, const double* scale,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution) {
  return Guard([&] {
    SdpaElements(Tensor<float>(queries, "queries"), keys, values, out, mask,
                 scale, empty_rows, execution);
  });
}

attnpool_status attnpool_scaled_dot_product_attention_element_queries(
    const attnpool_element_tensor* queries, const attnpool_element_tensor* keys,
    const attnpool_element_tensor* values, const attnpool_tensor* out,
    const attnpool_attention_mask* mask, const double* scale,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution) {
  return Guard([&] {
    SdpaElements(ElementTensorOf(queries, "queries"), keys, values, out, mask,
                 scale, empty_rows, execution);
  });
}

attnpool_status attnpool_scaled_dot_product_attention_varlen_elements(
    const attnpool_const_tensor* queries, const attnpool_element_tensor* keys,
    const attnpool_element_tensor* values, const attnpool_tensor* out,
    size_t count, const size_t* query_offsets, const size_t* key_offsets,
    const attnpool_attention_mask* mask, const double* scale,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution) {
  return Guard([&] {
    const auto q = Tensor<float>(queries, "queries");
    const auto k = ElementTensorOf(keys, "keys");
    const auto v = ElementTensorOf(values, "values");
    const auto o = Tensor<float>(out, "out");
    attnpool::scaled_dot_product_attention_varlen(
        q, k, v, o, {count, query_offsets, key_offsets},
        AttentionMaskOf<float>(mask), ScaleOf(scale),
        static_cast<attnpool::EmptyRows>(empty_rows), ExecutionOf(execution));
  });
}

attnpool_status attnpool_scaled_dot_product_attention_paged_elements(
    const attnpool_const_tensor* queries,
    const attnpool_paged_element_cache* cache, const attnpool_tensor* out,
    size_t count, const size_t* query_offsets,
    const attnpool_attention_mask* mask, const double* scale,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution) {
  return Guard([&] {
    const auto q = Tensor<float>(queries, "queries");
    const auto& c_cache = Required(cache, "cache");
    attnpool::PagedElementCache paged;
    paged.keys = ElementTensorOf(&c_cache.keys, "cache.keys");
    paged.values = ElementTensorOf(&c_cache.values, "cache.values");
    paged.block_table = c_cache.block_table;
    paged.block_table_stride = c_cache.block_table_stride;
    paged.lengths = c_cache.lengths;
    const auto o = Tensor<float>(out, "out");
    attnpool::scaled_dot_product_attention_paged(
        q, paged, o, count, query_offsets, AttentionMaskOf<float>(mask),
        ScaleOf(scale), static_cast<attnpool::EmptyRows>(empty_rows),
        ExecutionOf(execution));
  });
}

attnpool_status attnpool_to_bfloat16(const float* in, size_t count,
                                     uint16_t* out) {
  return Guard([&] {
    attnpool::to_bfloat16(in, count, reinterpret_cast<attnpool::bf16*>(out));
  });
}

attnpool_status attnpool_to_float16(const float* in, size_t count,
                                    uint16_t* out) {
  return Guard([&] {
    attnpool::to_float16(in, count, reinterpret_cast<attnpool::f16*>(out));
  });
}

attnpool_status attnpool_bfloat16_to_float(const uint16_t* in, size_t count,
                                           float* out) {
  return Guard([&] {
    attnpool::to_float(reinterpret_cast<const attnpool::bf16*>(in), count, out);
  });
}

attnpool_status attnpool_float16_to_float(const uint16_t* in, size_t count,
                                          float* out) {
  return Guard([&] {
    attnpool::to_float(reinterpret_cast<const attnpool::f16*>(in), count, out);
  });
}

attnpool_status attnpool_quantize_rows(const attnpool_const_matrix* in,
                                       const attnpool_matrix* out,
                                       float* scales) {
  return Guard([&] {
    attnpool::quantize_rows(ViewOf<float>(in, "in"), ViewOf<int8_t>(out, "out"),
                            scales);
  });
}

attnpool_status attnpool_dequantize_rows(const attnpool_const_matrix* in,
                                         const float* scales,
                                         const attnpool_matrix* out) {
  return Guard([&] {
    try {
      attnpool::dequantize_rows({ViewOf<int8_t>(in, "in"), scales},
                                ViewOf<float>(out, "out"));
    } catch (const attnpool::Error& error) {
      // (The C++ call's Int8Rows is the C call's in and scales.)
      throw Renamed(Renamed(error, "in.scales", "scales"), "in.data", "in");
    }
  });
}

attnpool_status attnpool_widen_rows(const attnpool_element_tensor* in,
                                    const attnpool_matrix* out) {
  return Guard([&] {
    attnpool::widen_rows(ElementRowsOf(in, "in"), ViewOf<float>(out, "out"));
  });
}

}  // extern "C"
