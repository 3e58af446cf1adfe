// The rows of a matrix that the fused kernel reads keys and values from:
// strided (a ConstMatrixView), or in the pages of a paged KV cache, listed
// in order by a block table and read in place.
// Target-independent: src/ and the per-ISA code share it.
#pragma once

#include <attnpool/matrix.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace attnpool {
namespace detail {

template <typename T>
struct RowList {
  // Strided: row j at data + j·stride. Paged: row j is row k = first + j
  // of the sequence, at data + pages[k / page_rows]·page_stride +
  // (k % page_rows)·stride.
  const T* data = nullptr;
  size_t rows = 0, cols = 0, stride = 0;
  const int32_t* pages = nullptr;
  size_t page_rows = 0, page_stride = 0, first = 0;

  RowList() = default;
  RowList(ConstMatrixView<T> view)  // NOLINT(google-explicit-constructor)
      : data(view.data),
        rows(view.rows),
        cols(view.cols),
        stride(view.stride) {}
  static RowList Paged(const T* base, const int32_t* pages, size_t page_rows,
                       size_t page_stride, size_t row_stride, size_t rows,
                       size_t cols) {
    RowList list;
    list.data = base;
    list.rows = rows;
    list.cols = cols;
    list.stride = row_stride;
    list.pages = pages;
    list.page_rows = page_rows;
    list.page_stride = page_stride;
    return list;
  }

  bool strided() const { return pages == nullptr; }
  const T* row(size_t j) const {
    if (pages == nullptr) return data + j * stride;
    const size_t k = first + j;
    return data + static_cast<size_t>(pages[k / page_rows]) * page_stride +
           (k % page_rows) * stride;
  }
  T operator()(size_t r, size_t c) const { return row(r)[c]; }
  // How many of the `count` rows from row j lie one stride apart (all when
  // strided; when paged, to the end of row j's page and of the pages that
  // follow it in memory).
  size_t Run(size_t j, size_t count) const {
    if (pages == nullptr) return count;
    const size_t k = first + j;
    size_t run = page_rows - k % page_rows;
    const bool pages_abut = page_stride == page_rows * stride;
    for (size_t page = k / page_rows;
         run < count && pages_abut && pages[page + 1] == pages[page] + 1;
         ++page) {
      run += page_rows;
    }
    return std::min(count, run);
  }
  // Rows [j, j + count), count ≤ Run(j, count), as a matrix.
  ConstMatrixView<T> Matrix(size_t j, size_t count) const {
    return {count == 0 ? data : row(j), count, cols, stride};
  }
  // Rows [begin, end).
  RowList Slice(size_t begin, size_t end) const {
    RowList slice = *this;
    if (pages != nullptr) {
      slice.first += begin;
    } else {
      slice.data += begin * stride;
    }
    slice.rows = end - begin;
    return slice;
  }
};

}  // namespace detail
}  // namespace attnpool
