// Argument checks shared by every public entry point (docs/design.md §5). Each
// throws attnpool::Error naming the argument; none writes anything.
#pragma once

#include <attnpool/error.h>
#include <attnpool/execution.h>
#include <attnpool/attention.h>
#include <attnpool/matrix.h>

#include <algorithm>

#include <cstddef>
#include <cstdint>
#include <string>

namespace attnpool {
namespace detail {

// Bytes spanned by a view: [begin, end), empty when it has no element.
struct ByteRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
};

// A view is well-formed: stride ≥ cols, its extent and rows × cols fit in
// size_t, and data is non-null when it has elements.
template <typename T>
ByteRange CheckView(const std::string& name, const MatrixView<T>& view) {
  if (view.stride < view.cols) {
    throw Error(name + ".stride", "stride " + std::to_string(view.stride) +
                                      " is less than cols " +
                                      std::to_string(view.cols));
  }
  size_t elements = 0, extent = 0, bytes = 0;
  if (__builtin_mul_overflow(view.rows, view.cols, &elements) ||
      (view.rows > 0 &&
       (__builtin_mul_overflow(view.rows - 1, view.stride, &extent) ||
        __builtin_add_overflow(extent, view.cols, &extent) ||
        __builtin_mul_overflow(extent, sizeof(T), &bytes) ||
        reinterpret_cast<uintptr_t>(view.data) + bytes <
            reinterpret_cast<uintptr_t>(view.data)))) {
    throw Error(name, "rows " + std::to_string(view.rows) + " × stride " +
                          std::to_string(view.stride) +
                          " overflows the address space");
  }
  if (elements == 0) return {};
  if (view.data == nullptr) {
    throw Error(name + ".data", "is null but the view has " +
                                    std::to_string(elements) + " elements");
  }
  const auto begin = reinterpret_cast<uintptr_t>(view.data);
  return {begin, begin + bytes};
}

// A (batch, heads, rows, cols) view is well-formed: row_stride ≥ cols, its
// extent fits in size_t and the address space, data non-null when it has
// elements. With `output`, no two elements share an address: sorted by
// stride, each dimension's stride reaches past the span of the smaller ones.
template <typename T>
ByteRange CheckTensor(const std::string& name, const TensorView<T>& view,
                      bool output = false) {
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
  overflow |= __builtin_mul_overflow(extent, sizeof(T), &bytes) ||
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

inline void CheckSize(const std::string& name, size_t actual, size_t expected,
                      const std::string& expected_from) {
  if (actual != expected) {
    throw Error(name, "is " + std::to_string(actual) + " but must equal " +
                          expected_from + " (" + std::to_string(expected) +
                          ")");
  }
}

inline void CheckNoOverlap(const std::string& output, ByteRange out,
                           const std::string& input, ByteRange in) {
  if (out.begin < in.end && in.begin < out.end) {
    throw Error(output, "overlaps input " + input);
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
