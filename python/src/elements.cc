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

namespace attnpool_python {
namespace {

using ElementType = attnpool::ElementType;

// The dtype an element type's array must have.
nb::dlpack::dtype StorageDtype(ElementType type) {
  switch (type) {
    case ElementType::float32:
      return nb::dtype<float>();
    case ElementType::bfloat16:
      return nb::dtype<uint16_t>();
    case ElementType::float16:
      return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case ElementType::int8:
      return nb::dtype<int8_t>();
  }
  return {};
}

void RequireFloat32(const std::string& name, const InArray& array) {
  if (array.dtype() != nb::dtype<float>()) {
    ThrowType(name, "dtype " + DtypeName(array.dtype()) + " is not float32");
  }
}

// Keys or values of `Rank` dimensions stored as `type_name`, read in place
// (the Python side makes their rows contiguous), with int8's scales (Rank −
// 1 dimensions, one per row).
template <size_t Rank>
class ElementArray {
 public:
  ElementArray(const std::string& name, const InArray& array,
               const std::string& type_name,
               const std::optional<InArray>& scales)
      : type_(attnpool::element_type_from_name(type_name.c_str())) {
    if (array.dtype() != StorageDtype(type_)) {
      ThrowType(name, "dtype " + DtypeName(array.dtype()) + " does not hold " +
                          type_name);
    }
    RequireDimensions(name, array, Rank);
    const auto strides = InPlaceStrides(array);
    if (strides.size() + 1 != Rank) {
      ThrowValue(name, "its rows must be contiguous");
    }
    data_ = array.data();
    for (size_t k = 0; k < Rank; ++k) shape_[k] = array.shape(k);
    for (size_t k = 0; k + 1 < Rank; ++k) strides_[k] = strides[k];
    if (type_ == ElementType::int8) {
      if (!scales) ThrowValue(name + "_scales", "int8 rows need their scales");
      RequireFloat32(name + "_scales", *scales);
      scales_.emplace(name + "_scales", *scales);
      for (size_t k = 0; k + 1 < Rank; ++k) {
        if (scales_->shape(k) != shape_[k]) {
          ThrowValue(name + "_scales",
                     "axis " + std::to_string(k) + " has " +
                         std::to_string(scales_->shape(k)) + " entries but " +
                         name + " has " + std::to_string(shape_[k]) + " rows");
        }
      }
    }
  }

  attnpool::ElementRows rows() const {
    static_assert(Rank == 2);
    attnpool::ElementRows rows;
    rows.type = type_;
    rows.data = data_;
    rows.rows = shape_[0];
    rows.cols = shape_[1];
    rows.stride = strides_[0];
    if (scales_) rows.scales = scales_->data();
    return rows;
  }

  attnpool::ElementTensor tensor() const {
    static_assert(Rank == 4);
    attnpool::ElementTensor tensor;
    tensor.type = type_;
    tensor.data = data_;
    tensor.batch = shape_[0];
    tensor.heads = shape_[1];
    tensor.rows = shape_[2];
    tensor.cols = shape_[3];
    tensor.batch_stride = strides_[0];
    tensor.head_stride = strides_[1];
    tensor.row_stride = strides_[2];
    if (scales_) {  // (B, H, m): one scale per row
      tensor.scales = {scales_->data(),     tensor.batch,      tensor.heads,
                       tensor.rows,         1,                 scales_->stride(0),
                       scales_->stride(1),  1};
    }
    return tensor;
  }

 private:
  // int8's scales: a vector (Rank 2) or a (B, H, m) array (Rank 4).
  class Scales : public Input<float, Rank - 1> {
   public:
    using Input<float, Rank - 1>::Input;
    size_t stride(size_t k) const { return this->strides_[k]; }
  };

  ElementType type_;
  const void* data_ = nullptr;
  size_t shape_[Rank] = {}, strides_[Rank - 1] = {};
  std::optional<Scales> scales_;
};

void AttentionPoolElements(const SpecArguments& spec, const InArray& queries,
                           const InArray& keys, const std::string& key_type,
                           const std::optional<InArray>& key_scales,
                           const InArray& values, const std::string& value_type,
                           const std::optional<InArray>& value_scales,
                           const OutArray& out, const MaskTuple& mask_arguments,
                           int threads) {
  RequireFloat32("queries", queries);
  const Input<float, 2> q("queries", queries);
  const ElementArray<2> k("keys", keys, key_type, key_scales);
  const ElementArray<2> v("values", values, value_type, value_scales);
  const auto value_rows = v.rows();
  const Output<float, 2> o("out", out, {q.shape(0), value_rows.cols},
                           "queries");
  const MaskArguments<float, 2> masks(mask_arguments, "queries");
  const auto pool_spec = PoolSpecOf(spec);
  const auto execution = ExecutionOf(threads);
  nb::gil_scoped_release release;
  attnpool::attention_pool(pool_spec, q.matrix(), k.rows(), value_rows,
                           o.matrix(), masks.mask(), execution);
}

void ScaledDotProductAttentionElements(
    const InArray& queries, const InArray& keys, const std::string& key_type,
    const std::optional<InArray>& key_scales, const InArray& values,
    const std::string& value_type, const std::optional<InArray>& value_scales,
    const OutArray& out, const MaskTuple& mask_arguments,
    std::optional<double> scale, const std::string& empty_rows, int threads) {
  RequireFloat32("queries", queries);
  const Input<float, 4> q("queries", queries);
  const ElementArray<4> k("keys", keys, key_type, key_scales);
  const ElementArray<4> v("values", values, value_type, value_scales);
  const auto value_tensor = v.tensor();
  const Output<float, 4> o(
      "out", out, {q.shape(0), q.shape(1), q.shape(2), value_tensor.cols},
      "queries");
  const MaskArguments<float, 4> masks(mask_arguments, "queries");
  const auto empty = EmptyRowsOf(empty_rows);
  const auto execution = ExecutionOf(threads);
  nb::gil_scoped_release release;
  attnpool::scaled_dot_product_attention(q.tensor(), k.tensor(), value_tensor,
                                         o.tensor(), masks.mask(), scale,
                                         empty, execution);
}

}  // namespace

void DefineElements(nb::module_& m) {
  m.def("attention_pool_elements", &AttentionPoolElements);
  m.def("scaled_dot_product_attention_elements",
        &ScaledDotProductAttentionElements);
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
  m.def("quantize_rows", [](const InArray& in, const OutArray& out,
                            const OutArray& scales) {
    RequireFloat32("x", in);
    const Input<float, 2> x("x", in);
    const Output<int8_t, 2> o("out", out, {x.shape(0), x.shape(1)}, "x");
    const Output<float, 1> s("scales", scales, {x.shape(0)}, "x");
    attnpool::quantize_rows(x.matrix(), o.matrix(), s.data());
  });
}

}  // namespace attnpool_python
