// Argument checks shared by every public entry point (docs/design.md §5). Each
// throws attnpool::Error naming the argument; none writes anything.
#pragma once

#include <attnpool/error.h>
#include <attnpool/execution.h>
#include <attnpool/attention.h>
#include <attnpool/element.h>
#include <attnpool/matrix.h>

#include <algorithm>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace attnpool {
namespace detail {

// A soft-cap (normalize.h) the vector code can divide by: finite, > 0,
// with a finite reciprocal (not subnormal).
template <typename T>
bool ValidSoftcap(T cap) {
  return cap > T(0) && std::isfinite(cap) && std::isfinite(T(1) / cap);
}

// A number as given, for messages: the shortest text that reads back as
// the same value (1e-300, not 0.000000).
inline std::string ValueText(double value) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value || value != value) break;
  }
  return text;
}

// Bytes spanned by a view: [begin, end), empty when it has no element.
struct ByteRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
};

// A view of `rows` × `cols` elements of `element_bytes` bytes, row r at
// data + r·stride elements, is well-formed: stride ≥ cols, its extent and
// rows × cols fit in size_t, and data is non-null when it has elements.
inline ByteRange CheckViewBytes(const std::string& name, const void* data,
                                size_t rows, size_t cols, size_t stride,
                                size_t element_bytes) {
  if (stride < cols) {
    throw Error(name + ".stride", "stride " + std::to_string(stride) +
                                      " is less than cols " +
                                      std::to_string(cols));
  }
  size_t elements = 0, extent = 0, bytes = 0;
  if (__builtin_mul_overflow(rows, cols, &elements) ||
      (rows > 0 && (__builtin_mul_overflow(rows - 1, stride, &extent) ||
                    __builtin_add_overflow(extent, cols, &extent) ||
                    __builtin_mul_overflow(extent, element_bytes, &bytes) ||
                    reinterpret_cast<uintptr_t>(data) + bytes <
                        reinterpret_cast<uintptr_t>(data)))) {
    throw Error(name, "rows " + std::to_string(rows) + " × stride " +
                          std::to_string(stride) +
                          " overflows the address space");
  }
  if (elements == 0) return {};
  if (data == nullptr) {
    throw Error(name + ".data", "is null but the view has " +
                                    std::to_string(elements) + " elements");
  }
  const auto begin = reinterpret_cast<uintptr_t>(data);
  return {begin, begin + bytes};
}

template <typename T>
ByteRange CheckView(const std::string& name, const MatrixView<T>& view) {
  return CheckViewBytes(name, view.data, view.rows, view.cols, view.stride,
                        sizeof(T));
}

// The scales of `rows` rows of a scaled type of `name`, row r's at
// scales[r · stride] (a stride of 0: one scale for all), an extent that
// fits.
inline ByteRange CheckScales(const std::string& name, const float* scales,
                             size_t rows, size_t stride) {
  return CheckViewBytes(name + ".scales", scales, stride == 0 ? 1 : rows, 1,
                        stride == 0 ? 1 : stride, sizeof(float));
}

// Keys or values in any element type (element.h): the type one of the
// table's, the view well-formed, a scaled type's rows with their scales
// (checked for overlap with outputs too: `scale_bytes`).
inline ByteRange CheckView(const std::string& name, const ElementRows& rows,
                           ByteRange* scale_bytes = nullptr) {
  if (!in_table(kElementTypes, rows.type)) {
    throw Error(name + ".type",
                "invalid value " + std::to_string(static_cast<int>(rows.type)));
  }
  const auto bytes =
      CheckViewBytes(name, rows.data, rows.rows, rows.cols, rows.stride,
                     kElementTypes[static_cast<int>(rows.type)].bytes);
  if (element_properties(rows.type).scaled && rows.rows > 0) {
    if (rows.scales == nullptr) {
      throw Error(name + ".scales", std::string("is null but ") +
                                        element_type_name(rows.type) +
                                        " rows need their scales");
    }
    const auto scale_range =
        CheckScales(name, rows.scales, rows.rows, rows.scale_stride);
    if (scale_bytes != nullptr) *scale_bytes = scale_range;
  }
  return bytes;
}

inline void CheckSize(const std::string& name, size_t actual, size_t expected,
                      const std::string& expected_from) {
  if (actual != expected) {
    throw Error(name, "is " + std::to_string(actual) + " but must equal " +
                          expected_from + " (" + std::to_string(expected) +
                          ")");
  }
}

// A (batch, heads, rows, cols) view is well-formed: row_stride ≥ cols, its
// extent fits in size_t and the address space, data non-null when it has
// elements. With `output`, no two elements share an address: sorted by
// stride, each dimension's stride reaches past the span of the smaller ones.
template <typename T>
ByteRange CheckTensorBytes(const std::string& name, const TensorView<T>& view,
                           size_t element_bytes, bool output) {
  if (view.row_stride < view.cols) {
    throw Error(name + ".row_stride",
                "row_stride " + std::to_string(view.row_stride) +
                    " is less than cols " + std::to_string(view.cols));
  }
  const size_t counts[3] = {view.batch, view.heads, view.rows};
  const size_t strides[3] = {view.batch_stride, view.head_stride,
                             view.row_stride};
  // No element: nothing is read or written, whatever the other sizes.
  if (view.cols == 0 || counts[0] == 0 || counts[1] == 0 || counts[2] == 0) {
    return {};
  }
  size_t elements = view.cols, extent = view.cols, bytes = 0;
  bool overflow = false;
  for (int k = 0; k < 3; ++k) {
    size_t step = 0;
    overflow |= __builtin_mul_overflow(elements, counts[k], &elements);
    if (counts[k] > 0) {
      overflow |= __builtin_mul_overflow(counts[k] - 1, strides[k], &step) ||
                  __builtin_add_overflow(extent, step, &extent);
    }
  }
  overflow |= __builtin_mul_overflow(extent, element_bytes, &bytes) ||
              reinterpret_cast<uintptr_t>(view.data) + bytes <
                  reinterpret_cast<uintptr_t>(view.data);
  if (overflow) {
    throw Error(name, "its extent overflows the address space");
  }
  if (elements == 0) return {};
  if (view.data == nullptr) {
    throw Error(name + ".data", "is null but the tensor has " +
                                    std::to_string(elements) + " elements");
  }
  if (output) {
    // Dimensions of more than one entry, by stride; columns span cols.
    size_t order[3] = {0, 1, 2};
    std::sort(order, order + 3,
              [&](size_t a, size_t b) { return strides[a] < strides[b]; });
    size_t span = view.cols;
    for (size_t k : order) {
      if (counts[k] <= 1) continue;
      if (strides[k] < span) {
        static const char* const kNames[3] = {"batch_stride", "head_stride",
                                              "row_stride"};
        throw Error(name + "." + kNames[k],
                    "makes elements of the output share addresses");
      }
      span = (counts[k] - 1) * strides[k] + span;
    }
  }
  const auto begin = reinterpret_cast<uintptr_t>(view.data);
  return {begin, begin + bytes};
}

template <typename T>
ByteRange CheckTensor(const std::string& name, const TensorView<T>& view,
                      bool output = false) {
  return CheckTensorBytes(name, view, sizeof(T), output);
}

// Keys or values of any element type as a tensor (attention.h): the type
// one of the table's, the tensor well-formed, a scaled type's scales a (batch,
// heads, rows, 1) tensor (its bytes in `scale_bytes`).
inline ByteRange CheckTensor(const std::string& name,
                             const ElementTensor& tensor,
                             ByteRange* scale_bytes = nullptr) {
  if (!in_table(kElementTypes, tensor.type)) {
    throw Error(
        name + ".type",
        "invalid value " + std::to_string(static_cast<int>(tensor.type)));
  }
  const TensorView<const void> shape{
      tensor.data, tensor.batch,        tensor.heads,       tensor.rows,
      tensor.cols, tensor.batch_stride, tensor.head_stride, tensor.row_stride};
  const auto bytes = CheckTensorBytes(
      name, shape, kElementTypes[static_cast<int>(tensor.type)].bytes, false);
  if (element_properties(tensor.type).scaled) {
    const auto& scales = tensor.scales;
    const std::string scales_name = name + ".scales";
    CheckSize(scales_name + ".batch", scales.batch, tensor.batch,
              name + ".batch");
    CheckSize(scales_name + ".heads", scales.heads, tensor.heads,
              name + ".heads");
    CheckSize(scales_name + ".rows", scales.rows, tensor.rows, name + ".rows");
    CheckSize(scales_name + ".cols", scales.cols, 1, "1");
    // Strides of 0 share a scale: a row_stride of 0 is one scale for every
    // row of a head (zero batch and head strides too: a per-tensor scale).
    TensorView<const float> held = scales;
    if (held.row_stride == 0 && held.rows > 0) held.rows = held.row_stride = 1;
    const auto range = CheckTensor(scales_name, held);
    if (scale_bytes != nullptr) *scale_bytes = range;
  }
  return bytes;
}

inline void CheckNoOverlap(const std::string& output, ByteRange out,
                           const std::string& input, ByteRange in) {
  if (out.begin < in.end && in.begin < out.end) {
    throw Error(output, "overlaps input " + input);
  }
}

// The views of a call whose out(i, j) pairs row i of `left` with row j of
// `right` (Pairing::rows: out is left.rows × right.rows, left.cols ==
// right.cols) or is the matrix product (Pairing::product: out is left.rows ×
// right.cols, left.cols == right.rows): each view well-formed, the sizes
// agreeing, out overlapping neither input. Errors name the argument, e.g.
// "keys.cols" or "out.rows". Returns out's bytes, for further overlap checks.
enum class Pairing { rows, product };
template <typename T>
ByteRange CheckBinaryRowOp(const std::string& left_name,
                           ConstMatrixView<T> left,
                           const std::string& right_name,
                           ConstMatrixView<T> right,
                           const std::string& out_name, MatrixView<T> out,
                           Pairing pairing) {
  const auto left_bytes = CheckView(left_name, left);
  const auto right_bytes = CheckView(right_name, right);
  const auto out_bytes = CheckView(out_name, out);
  const bool by_rows = pairing == Pairing::rows;
  CheckSize(right_name + (by_rows ? ".cols" : ".rows"),
            by_rows ? right.cols : right.rows, left.cols, left_name + ".cols");
  CheckSize(out_name + ".rows", out.rows, left.rows, left_name + ".rows");
  CheckSize(out_name + ".cols", out.cols, by_rows ? right.rows : right.cols,
            right_name + (by_rows ? ".rows" : ".cols"));
  CheckNoOverlap(out_name, out_bytes, left_name, left_bytes);
  CheckNoOverlap(out_name, out_bytes, right_name, right_bytes);
  return out_bytes;
}

// Each of the `count` entries of mask.valid_lengths is at most `limit`
// (the `keys` of the message, or more where a shard sees a window of them).
inline void CheckValidLengths(const size_t* valid_lengths, size_t count,
                              size_t limit, size_t keys) {
  for (size_t k = 0; k < count; ++k) {
    if (valid_lengths[k] > limit) {
      throw Error("mask.valid_lengths", "entry " + std::to_string(k) + " is " +
                                            std::to_string(valid_lengths[k]) +
                                            ", more than the " +
                                            std::to_string(keys) + " keys");
    }
  }
}

inline void CheckExecution(const Execution& execution) {
  if (execution.threads < 0) {
    throw Error("execution.threads",
                "is " + std::to_string(execution.threads) +
                    "; use 0 for the OpenMP default or a positive count");
  }
}

}  // namespace detail
}  // namespace attnpool
