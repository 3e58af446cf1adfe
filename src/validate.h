// Argument checks shared by every public entry point (DESIGN.md §5). Each
// throws attnpool::Error naming the argument; none writes anything.
#pragma once

#include <attnpool/error.h>
#include <attnpool/execution.h>
#include <attnpool/matrix.h>

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
