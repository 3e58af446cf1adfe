// The row pointers of a register tile. Target-independent: every tiled
// kernel in arch/ shares it.
#pragma once

#include <attnpool/matrix.h>

#include <algorithm>
#include <cstddef>

namespace attnpool {
namespace detail {

// rows[r] = matrix.row(first + r) + column for the `valid` rows of a tile of
// kRows that exist; the rows past them repeat the last valid one, so the
// kernel reads only existing rows and computes results that are dropped.
// Requires valid ≥ 1.
template <size_t kRows, typename T>
void TileRowPointers(ConstMatrixView<T> matrix, size_t first, size_t valid,
                     size_t column, const T* (&rows)[kRows]) {
  for (size_t r = 0; r < kRows; ++r) {
    rows[r] = matrix.row(first + std::min(r, valid - 1)) + column;
  }
}

}  // namespace detail
}  // namespace attnpool
