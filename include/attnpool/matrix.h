// Row-major strided matrix views: the only way data enters or leaves attnpool.
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

}  // namespace attnpool
