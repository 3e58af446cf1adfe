// Row-major strided matrix and tensor views: the only way data enters or
// leaves attnpool.
#pragma once

#include <cstddef>
#include <type_traits>

namespace attnpool {

// A non-owning view of `rows` × `cols` elements, row r starting at
// data + r * stride (stride in elements, stride >= cols). Elements between
// cols and stride ("padding") are never read nor written. T is `float`,
// `double`, or their const versions for inputs.
template <typename T>
struct MatrixView {
  T* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  size_t stride = 0;

  MatrixView() = default;
  // Dense rows: stride = cols.
  MatrixView(T* data_, size_t rows_, size_t cols_)
      : data(data_), rows(rows_), cols(cols_), stride(cols_) {}
  MatrixView(T* data_, size_t rows_, size_t cols_, size_t stride_)
      : data(data_), rows(rows_), cols(cols_), stride(stride_) {}

  // A mutable view converts to a read-only one.
  template <typename U, typename = std::enable_if_t<
                            std::is_same<T, std::add_const_t<U>>::value &&
                            !std::is_same<T, U>::value>>
  MatrixView(const MatrixView<U>& other)  // NOLINT(google-explicit-constructor)
      : data(other.data),
        rows(other.rows),
        cols(other.cols),
        stride(other.stride) {}

  T* row(size_t r) const { return data + r * stride; }
  T& operator()(size_t r, size_t c) const { return data[r * stride + c]; }
};

template <typename T>
using ConstMatrixView = MatrixView<const T>;

// A non-owning strided view of a (batch, heads, rows, cols) tensor: element
// (b, h, r, c) at data[b·batch_stride + h·head_stride + r·row_stride + c].
// Any strides (row_stride ≥ cols), so that heads are addressed in place:
// PyTorch's (B, H, N, D) and (B, N, H, D) layouts are both views. Inputs may
// repeat elements (a stride of 0 broadcasts); an output may not.
template <typename T>
struct TensorView {
  T* data = nullptr;
  size_t batch = 0, heads = 0, rows = 0, cols = 0;
  size_t batch_stride = 0, head_stride = 0, row_stride = 0;

  // The rows × cols matrix of (b, h).
  MatrixView<T> matrix(size_t b, size_t h) const {
    return {data + b * batch_stride + h * head_stride, rows, cols, row_stride};
  }
  // A mutable view converts to a read-only one.
  operator TensorView<const T>() const {  // NOLINT(google-explicit-constructor)
    return {data, batch,        heads,       rows,
            cols, batch_stride, head_stride, row_stride};
  }
};

// Dense (batch, heads, rows, cols), row-major: PyTorch's contiguous layout.
template <typename T>
TensorView<T> dense_tensor(T* data, size_t batch, size_t heads, size_t rows,
                           size_t cols) {
  return {data,        batch, heads, rows, cols, heads * rows * cols,
          rows * cols, cols};
}

}  // namespace attnpool
