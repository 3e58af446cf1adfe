// Keys and values of reduced-precision element types (element.h) as the
// library's views: a narrow array arrives with its element type's name
// (element.h's table; bit patterns as unsigned integers, as bfloat16's
// uint16) and, for a scaled type, its float32 scales, one per row.
#pragma once

#include <attnpool/attnpool.h>

#include <optional>
#include <string>

#include "python/src/arguments.h"

namespace attnpool_python {

using ElementType = attnpool::ElementType;

// The dtype an element type's array must have: its .npy type's kind and
// width (element.h's table; bit patterns as unsigned integers).
inline nb::dlpack::dtype StorageDtype(ElementType type) {
  const auto& entry = attnpool::element_properties(type);
  const char kind = entry.npy_descr[1];
  const auto code = kind == 'f'   ? nb::dlpack::dtype_code::Float
                    : kind == 'i' ? nb::dlpack::dtype_code::Int
                                  : nb::dlpack::dtype_code::UInt;
  return {static_cast<uint8_t>(code), static_cast<uint8_t>(8 * entry.bytes), 1};
}

inline void RequireFloat32(const std::string& name, const InArray& array) {
  if (array.dtype() != nb::dtype<float>()) {
    ThrowType(name, "dtype " + DtypeName(array.dtype()) + " is not float32");
  }
}

// Keys or values of `Rank` dimensions stored as `type_name`, read in place
// where their rows are contiguous and copied once otherwise (as Input), with
// a scaled type's scales (Rank − 1 dimensions, one per row).
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
    // The storage read as integers of the element's width: copying moves
    // bits, never values.
    switch (attnpool::kElementTypes[int(type_)].bytes) {
      case 1:
        Take(bytes_.emplace(name, array));
        break;
      case 2:
        Take(halves_.emplace(name, array));
        break;
      default:
        Take(words_.emplace(name, array));
        break;
    }
    if (attnpool::element_properties(type_).scaled) {
      if (!scales) {
        ThrowValue(name + "_scales", type_name + " rows need their scales");
      }
      RequireFloat32(name + "_scales", *scales);
      scales_.emplace(name + "_scales", *scales);
      for (size_t k = 0; k + 1 < Rank; ++k) {
        if (scales_->shape(k) != shape_[k]) {
          ThrowValue(name + "_scales", "axis " + std::to_string(k) + " has " +
                                           std::to_string(scales_->shape(k)) +
                                           " entries but " + name + " has " +
                                           std::to_string(shape_[k]) + " rows");
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
    if (scales_) {
      rows.scales = scales_->data();
      rows.scale_stride = scales_->stride(0);
    }
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
      tensor.scales = {scales_->data(),
                       tensor.batch,
                       tensor.heads,
                       tensor.rows,
                       1,
                       scales_->stride(0),
                       scales_->stride(1),
                       scales_->stride(2)};
    }
    return tensor;
  }

 private:
  // A scaled type's scales: a vector (Rank 2) or a (B, H, m) array (Rank 4),
  // read in place at any positive strides (a scale is one float: a paged
  // cache's, kept (blocks, block_size, H), is read heads first as it is),
  // else (a broadcast or reversed axis) copied once.
  class Scales {
   public:
    static constexpr size_t kRank = Rank - 1;
    Scales(const std::string& name, const InArray& array) {
      RequireDimensions(name, array, kRank);
      bool in_place = true;
      for (size_t k = 0; k < kRank; ++k) {
        shape_[k] = array.shape(k);
        // (Along an axis of one entry any stride serves.)
        strides_[k] =
            shape_[k] <= 1 ? 1 : size_t(std::max<int64_t>(array.stride(k), 0));
        in_place &= strides_[k] != 0;
      }
      if (in_place) {
        data_ = static_cast<const float*>(array.data());
        return;
      }
      data_ = copy_.emplace(name, array).data();
      for (size_t k = 0; k + 1 < kRank; ++k) strides_[k] = copy_->stride(k);
      strides_[kRank - 1] = 1;
    }
    const float* data() const { return data_; }
    size_t shape(size_t k) const { return shape_[k]; }
    size_t stride(size_t k) const { return strides_[k]; }

   private:
    std::optional<Input<float, kRank>> copy_;
    const float* data_ = nullptr;
    size_t shape_[kRank] = {}, strides_[kRank] = {};
  };

  // The shape and strides (elements) of `stored`, in place or its copy.
  template <typename S>
  void Take(const Input<S, Rank>& stored) {
    data_ = stored.data();
    for (size_t k = 0; k < Rank; ++k) shape_[k] = stored.shape(k);
    for (size_t k = 0; k + 1 < Rank; ++k) strides_[k] = stored.stride(k);
  }

  ElementType type_;
  std::optional<Input<int8_t, Rank>> bytes_;
  std::optional<Input<uint16_t, Rank>> halves_;
  std::optional<Input<uint32_t, Rank>> words_;
  const void* data_ = nullptr;
  size_t shape_[Rank] = {}, strides_[Rank - 1] = {};
  std::optional<Scales> scales_;
};

}  // namespace attnpool_python
