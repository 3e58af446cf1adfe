// The rows of a matrix that the fused kernel reads keys and values from:
// strided (a ConstMatrixView), or in the pages of a paged KV cache, listed
// in order by a block table and read in place; float lists may also hold
// rows of any element type (element.h), strided or paged, widened as they are
// read.
// Target-independent: src/ and the per-ISA code share it.
#pragma once

#include <attnpool/element.h>
#include <attnpool/matrix.h>

#include "core/element_traits.h"

#include <type_traits>

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
  // Narrow rows (T = float only): row j's elements of `element` at narrow +
  // Offset(j) elements, a scaled type's row j scaled by scale(j); data is
  // null. Paged
  // ones as above, in elements of `element`; their scales likewise, pages
  // scale_page_stride apart.
  ElementType element = ElementType::float32;
  const void* narrow = nullptr;
  const float* scales = nullptr;
  size_t scale_stride = 1, scale_page_stride = 0;

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

  // The same pages of narrow rows (T = float only; float32 ones as Paged):
  // `scales` and `scale_page_stride`, `scale_row_stride` for scaled types.
  static RowList PagedElements(ElementType element, const void* base,
                               const int32_t* pages, size_t page_rows,
                               size_t page_stride, size_t row_stride,
                               size_t rows, size_t cols, const float* scales,
                               size_t scale_page_stride,
                               size_t scale_row_stride) {
    if (element == ElementType::float32) {
      return Paged(static_cast<const T*>(base), pages, page_rows, page_stride,
                   row_stride, rows, cols);
    }
    RowList list =
        Paged(nullptr, pages, page_rows, page_stride, row_stride, rows, cols);
    list.element = element;
    list.narrow = base;
    list.scales = scales;
    list.scale_stride = scale_row_stride;
    list.scale_page_stride = scale_page_stride;
    return list;
  }

  // Rows of any element type (float lists only): narrow ones as strided
  // narrow lists.
  template <typename U = T,
            typename = std::enable_if_t<std::is_same<U, float>::value>>
  RowList(const ElementRows& stored)  // NOLINT(google-explicit-constructor)
      : rows(stored.rows), cols(stored.cols), stride(stored.stride) {
    if (stored.type == ElementType::float32) {
      data = static_cast<const float*>(stored.data);
      return;
    }
    element = stored.type;
    narrow = stored.data;
    scales = stored.scales;
    scale_stride = stored.scale_stride;
  }

  bool strided() const { return pages == nullptr; }
  bool is_narrow() const { return narrow != nullptr; }
  float scale(size_t j) const { return *scale_address(j); }
  const float* scale_address(size_t j) const {
    if (pages == nullptr) return scales + j * scale_stride;
    const size_t k = first + j;
    return scales +
           static_cast<size_t>(pages[k / page_rows]) * scale_page_stride +
           (k % page_rows) * scale_stride;
  }
  // Row j's scale where the scales of rows [j, j + count), count ≥ 1, lie
  // one scale_stride apart (every strided list's; a paged list's where the
  // scales' pages abut as the rows' do), else null.
  const float* ScalesRun(size_t j, size_t count) const {
    const float* first = scale_address(j);
    return scale_address(j + count - 1) - first ==
                   static_cast<ptrdiff_t>((count - 1) * scale_stride)
               ? first
               : nullptr;
  }
  // Where row j starts, in elements from the base (data or narrow).
  size_t Offset(size_t j) const {
    if (pages == nullptr) return j * stride;
    const size_t k = first + j;
    return static_cast<size_t>(pages[k / page_rows]) * page_stride +
           (k % page_rows) * stride;
  }
  // Row j's first element, of the narrow type E.
  template <typename E>
  const E* narrow_row(size_t j) const {
    return static_cast<const E*>(narrow) + Offset(j);
  }
  const T* row(size_t j) const { return data + Offset(j); }
  // Element (r, c) as T (narrow ones widened: exact but for the scaling of
  // scaled types).
  T operator()(size_t r, size_t c) const {
    if (narrow == nullptr) return row(r)[c];
    return static_cast<T>(WidenElement(r, c));
  }
  // How many of the `count` rows from row j lie one stride apart (all when
  // strided; when paged, to the end of row j's page and of the pages that
  // follow it in memory).
  size_t Run(size_t j, size_t count) const {
    if (pages == nullptr) return count;
    const size_t k = first + j;
    size_t run = page_rows - k % page_rows;
    const bool pages_abut = page_stride == page_rows * stride;
    for (size_t page = k / page_rows;
         run < count && pages_abut &&
         pages[page + 1] == int64_t{pages[page]} + 1;
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
    } else if (narrow != nullptr) {
      slice.narrow = static_cast<const char*>(narrow) +
                     begin * stride * element_properties(element).bytes;
      if (scales != nullptr) slice.scales += begin * scale_stride;
    } else {
      slice.data += begin * stride;
    }
    slice.rows = end - begin;
    return slice;
  }

 private:
  float WidenElement(size_t r, size_t c) const {
    const size_t at = Offset(r) + c;
    return visit_element_storage(element, [&](auto tag) {
      using S = decltype(tag);
      const float value =
          ElementTraits<S>::Widen(static_cast<const S*>(narrow)[at]);
      return kScaledElement<S> ? scale(r) * value : value;
    });
  }
};

}  // namespace detail
}  // namespace attnpool
