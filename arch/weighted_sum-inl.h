// Per-ISA kernels of the weighted-sum stage (docs/design.md §1, stage 4):
// out(i, :) = Σⱼ weights(i, j) · values(j, :).
//
// A register-blocked GEMM micro-kernel: a tile of kTileRows rows of `out` ×
// one panel of up to kPanelVectors vectors of output columns lives in
// registers; each step j broadcasts weights(i, j) of the tile's rows and
// loads values(j, panel) once, then does kTileRows × vectors multiply-adds.
//
// Blocking: a pass covers `pass_depth` values of j, chosen so that the slice
// of `values` it reads (pass_depth × the columns of the call) is about
// kValueSliceBytes and stays in L2 while every tile of the row block sweeps
// it. Each pass starts its accumulators from what the previous pass stored in
// `out`, so every output element is one lane of one accumulator running one
// multiply-add chain over j = 0, 1, …, m−1 in order: its value depends only
// on the data and the target, never on blocking, tile position or thread
// count. Error: a chain of m multiply-adds, |err| ≤ (m+1)·u·Σⱼ|wᵢⱼ·vⱼc|.
//
// Values are read in place when their rows are dense and dv is a whole
// number of vectors; otherwise (or for a strided view) src/ packs them into
// contiguous panels (arch/weighted_sum.h) whose columns past dv are zero. A
// panel whose last vector reaches past dv goes through an aligned staging
// tile, so nothing outside the views is read or written.

#if defined(ATTNPOOL_ARCH_WEIGHTED_SUM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_WEIGHTED_SUM_INL_H_
#undef ATTNPOOL_ARCH_WEIGHTED_SUM_INL_H_
#else
#define ATTNPOOL_ARCH_WEIGHTED_SUM_INL_H_
#endif

#include <algorithm>
#include <cstring>

#include "arch/tile_rows.h"
#include "arch/weighted_sum.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace wsum {
namespace hn = hwy::HWY_NAMESPACE;

// Output rows per tile.
constexpr size_t kTileRows = 6;
// Vectors of output columns per panel. 32 vector registers (AVX-512, NEON,
// SVE) hold 6 × 4 accumulators + 4 value vectors + a broadcast; the 16 of
// x86 below AVX-512 hold 6 × 2 + 2 + 1. Two FMA pipes × 4-cycle latency need
// ≥ 8 independent accumulators: both shapes have 12 or more. The last panel
// of a dv that is not a multiple of the panel width takes only the vectors
// it needs (same rows).
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || \
                     HWY_TARGET == HWY_SSSE3)
constexpr size_t kPanelVectors = 2;
#elif HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
constexpr size_t kPanelVectors = 2;
#else
constexpr size_t kPanelVectors = 4;
#endif

// Bytes of `values` one pass reads: stays in a 1 MiB L2 next to the row
// block's weights and outputs.
constexpr size_t kValueSliceBytes = 256 * 1024;
// Fewest j per pass: keeps the per-pass reload and store of the accumulators
// below ~2% of the multiply-adds.
constexpr size_t kMinPassDepth = 64;
// Output rows below which a strided `values` is read in place: packing costs
// m × dv copies, as much as that many rows of multiply-adds.
constexpr size_t kMinRowsToPack = 2 * kTileRows;
// Largest vector of any target (SVE: 2048 bits).
constexpr size_t kMaxVectorBytes = HWY_MAX_BYTES;

#define ATTNPOOL_WSUM_FOR_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
// clang-format off
#define ATTNPOOL_WSUM_FOR_CELLS(X)                                     \
  X(0, 0) X(0, 1) X(0, 2) X(0, 3) X(1, 0) X(1, 1) X(1, 2) X(1, 3)      \
  X(2, 0) X(2, 1) X(2, 2) X(2, 3) X(3, 0) X(3, 1) X(3, 2) X(3, 3)      \
  X(4, 0) X(4, 1) X(4, 2) X(4, 3) X(5, 0) X(5, 1) X(5, 2) X(5, 3)
// clang-format on
static_assert(kTileRows == 6, "ATTNPOOL_WSUM_FOR_ROWS covers 6 rows");
static_assert(kPanelVectors <= 4, "ATTNPOOL_WSUM_FOR_CELLS covers 4 vectors");

// out_rows[r][0, kVectors·N) (+)= Σ_{j < depth} weight_rows[r][j] ·
// values[j·value_stride + (0, kVectors·N)] for the first kRows ≤ kTileRows
// rows r; with `accumulate` the sums start from what out_rows holds, else
// from 0. Accumulators are named variables, not an array: SVE vectors are
// sizeless. Each output is its own chain: kRows changes no bit.
template <size_t kRows, size_t kVectors, class D, typename T = hn::TFromD<D>>
HWY_INLINE void MultiplyTile(D d, const T* const* weight_rows,
                             const T* HWY_RESTRICT values, size_t value_stride,
                             size_t depth, T* const* out_rows,
                             bool accumulate) {
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(d);
#define ATTNPOOL_WSUM_DECLARE_ROW(R) \
  const T* HWY_RESTRICT weights##R = weight_rows[R];
  ATTNPOOL_WSUM_FOR_ROWS(ATTNPOOL_WSUM_DECLARE_ROW)
#undef ATTNPOOL_WSUM_DECLARE_ROW
#define ATTNPOOL_WSUM_DECLARE_CELL(R, C)                \
  V acc##R##_##C = hn::Zero(d);                         \
  if constexpr (R < kRows && C < kVectors) {            \
    if (accumulate) {                                   \
      acc##R##_##C = hn::LoadU(d, out_rows[R] + C * N); \
    }                                                   \
  }
  ATTNPOOL_WSUM_FOR_CELLS(ATTNPOOL_WSUM_DECLARE_CELL)
#undef ATTNPOOL_WSUM_DECLARE_CELL
  for (size_t j = 0; j < depth; ++j) {
    const T* HWY_RESTRICT value_row = values + j * value_stride;
    // Vectors past kVectors reload vector 0 (always in bounds); unused, the
    // compiler drops them.
    const V value0 = hn::LoadU(d, value_row);
    const V value1 = hn::LoadU(d, value_row + (kVectors > 1 ? N : 0));
    const V value2 = hn::LoadU(d, value_row + (kVectors > 2 ? 2 * N : 0));
    const V value3 = hn::LoadU(d, value_row + (kVectors > 3 ? 3 * N : 0));
#define ATTNPOOL_WSUM_STEP_ROW(R)                          \
  if constexpr (R < kRows) {                               \
    const V weight = hn::Set(d, weights##R[j]);            \
    acc##R##_0 = hn::MulAdd(weight, value0, acc##R##_0);   \
    if constexpr (kVectors > 1) {                          \
      acc##R##_1 = hn::MulAdd(weight, value1, acc##R##_1); \
    }                                                      \
    if constexpr (kVectors > 2) {                          \
      acc##R##_2 = hn::MulAdd(weight, value2, acc##R##_2); \
    }                                                      \
    if constexpr (kVectors > 3) {                          \
      acc##R##_3 = hn::MulAdd(weight, value3, acc##R##_3); \
    }                                                      \
  }
    ATTNPOOL_WSUM_FOR_ROWS(ATTNPOOL_WSUM_STEP_ROW)
#undef ATTNPOOL_WSUM_STEP_ROW
    (void)value1;
    (void)value2;
    (void)value3;
  }
#define ATTNPOOL_WSUM_STORE_CELL(R, C)                \
  if constexpr (R < kRows && C < kVectors) {          \
    hn::StoreU(acc##R##_##C, d, out_rows[R] + C * N); \
  } else {                                            \
    (void)acc##R##_##C;                               \
  }
  ATTNPOOL_WSUM_FOR_CELLS(ATTNPOOL_WSUM_STORE_CELL)
#undef ATTNPOOL_WSUM_STORE_CELL
}

// Runs MultiplyTile with kVectors = `vectors` (1 ≤ vectors ≤ kPanelVectors).
template <size_t kRows, class D, typename T = hn::TFromD<D>>
HWY_INLINE void MultiplyTileOf(size_t vectors, D d, const T* const* weight_rows,
                               const T* HWY_RESTRICT values,
                               size_t value_stride, size_t depth,
                               T* const* out_rows, bool accumulate) {
  switch (vectors) {
    case 1:
      return MultiplyTile<kRows, 1>(d, weight_rows, values, value_stride, depth,
                                    out_rows, accumulate);
    case 2:
      if constexpr (kPanelVectors >= 2) {
        return MultiplyTile<kRows, 2>(d, weight_rows, values, value_stride,
                                      depth, out_rows, accumulate);
      }
      break;
    case 3:
      if constexpr (kPanelVectors >= 3) {
        return MultiplyTile<kRows, 3>(d, weight_rows, values, value_stride,
                                      depth, out_rows, accumulate);
      }
      break;
    case 4:
      if constexpr (kPanelVectors >= 4) {
        return MultiplyTile<kRows, 4>(d, weight_rows, values, value_stride,
                                      depth, out_rows, accumulate);
      }
      break;
  }
  HWY_ASSERT(false);
}

// A tile of `rows` ≤ kTileRows rows on the kernel of the fewest rows that
// covers them (1, 2, 4 or kTileRows): a decode's one query row (or a few
// sharing their keys) does not pay kTileRows rows' multiply-adds.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void MultiplyTileRows(size_t rows, size_t vectors, D d,
                                 const T* const* weight_rows,
                                 const T* HWY_RESTRICT values,
                                 size_t value_stride, size_t depth,
                                 T* const* out_rows, bool accumulate) {
  if (rows == 1) {
    return MultiplyTileOf<1>(vectors, d, weight_rows, values, value_stride,
                             depth, out_rows, accumulate);
  }
  if (rows == 2) {
    return MultiplyTileOf<2>(vectors, d, weight_rows, values, value_stride,
                             depth, out_rows, accumulate);
  }
  if (rows <= 4) {
    return MultiplyTileOf<4>(vectors, d, weight_rows, values, value_stride,
                             depth, out_rows, accumulate);
  }
  MultiplyTileOf<kTileRows>(vectors, d, weight_rows, values, value_stride,
                            depth, out_rows, accumulate);
}

// What MultiplyRow does beside each key by default: nothing.
struct NothingBeside {
  HWY_INLINE void operator()(size_t) const {}
};

// out[0, kVectors·N) (+)= Σ_{j < depth} weights[j] · values[j·value_stride +
// (0, kVectors·N)]: one output row, kVectors ≤ 8 accumulators. Each output
// is one multiply-add chain over j in order, as in MultiplyTile: the bits of
// WeightedSumRows whatever the vector width. `beside(j)` runs before key
// j's multiply-adds (a second stream of loads in the same loop).
template <size_t kVectors, class D, typename T = hn::TFromD<D>,
          class Beside = NothingBeside>
HWY_INLINE void MultiplyRow(D d, const T* HWY_RESTRICT weights,
                            const T* HWY_RESTRICT values, size_t value_stride,
                            size_t depth, T* HWY_RESTRICT out, bool accumulate,
                            const Beside& beside = Beside()) {
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(d);
  // Accumulators past kVectors are unused; the compiler drops them.
#define ATTNPOOL_WSUM_ROW_VECTORS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define ATTNPOOL_WSUM_DECLARE(C)                        \
  V acc##C = hn::Zero(d);                               \
  if constexpr (C < kVectors) {                         \
    if (accumulate) acc##C = hn::LoadU(d, out + C * N); \
  }
  ATTNPOOL_WSUM_ROW_VECTORS(ATTNPOOL_WSUM_DECLARE)
#undef ATTNPOOL_WSUM_DECLARE
  for (size_t j = 0; j < depth; ++j) {
    beside(j);
    const T* HWY_RESTRICT value_row = values + j * value_stride;
    const V weight = hn::Set(d, weights[j]);
#define ATTNPOOL_WSUM_STEP(C)                                             \
  if constexpr (C < kVectors) {                                           \
    acc##C = hn::MulAdd(weight, hn::LoadU(d, value_row + C * N), acc##C); \
  }
    ATTNPOOL_WSUM_ROW_VECTORS(ATTNPOOL_WSUM_STEP)
#undef ATTNPOOL_WSUM_STEP
  }
#define ATTNPOOL_WSUM_STORE(C) \
  if constexpr (C < kVectors) hn::StoreU(acc##C, d, out + C * N);
  ATTNPOOL_WSUM_ROW_VECTORS(ATTNPOOL_WSUM_STORE)
#undef ATTNPOOL_WSUM_STORE
#undef ATTNPOOL_WSUM_ROW_VECTORS
}

// WeightedSumRows for one output row and `columns` a whole number of
// vectors of d (any width: its bits do not depend on it), eight vectors of
// columns at a time, values read in place. `beside(j)` runs once per key,
// in the first pass over the keys (none where columns is 0).
template <class D, typename T = hn::TFromD<D>, class Beside = NothingBeside>
HWY_INLINE void WeightedSumRow(D d, const T* HWY_RESTRICT weights,
                               const T* HWY_RESTRICT values,
                               size_t value_stride, size_t depth,
                               size_t columns, T* HWY_RESTRICT out,
                               bool accumulate,
                               const Beside& beside = Beside()) {
  const size_t N = hn::Lanes(d);
  size_t c = 0;
  if (columns >= 8 * N) {
    MultiplyRow<8>(d, weights, values, value_stride, depth, out, accumulate,
                   beside);
    c = 8 * N;
  } else if (columns >= 4 * N) {
    MultiplyRow<4>(d, weights, values, value_stride, depth, out, accumulate,
                   beside);
    c = 4 * N;
  } else if (columns >= N) {
    MultiplyRow<1>(d, weights, values, value_stride, depth, out, accumulate,
                   beside);
    c = N;
  }
  for (; c + 8 * N <= columns; c += 8 * N) {
    MultiplyRow<8>(d, weights, values + c, value_stride, depth, out + c,
                   accumulate);
  }
  for (; c + 4 * N <= columns; c += 4 * N) {
    MultiplyRow<4>(d, weights, values + c, value_stride, depth, out + c,
                   accumulate);
  }
  for (; c < columns; c += N) {
    MultiplyRow<1>(d, weights, values + c, value_stride, depth, out + c,
                   accumulate);
  }
}

template <typename T>
size_t PanelWidth() {
  const hn::ScalableTag<T> d;
  return kPanelVectors * hn::Lanes(d);
}

template <typename T>
size_t PackedSize(ConstMatrixView<T> values, size_t out_rows) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const size_t columns = values.cols;
  const bool whole_vectors = columns % N == 0;
  const bool dense = values.stride == columns || values.rows <= 1;
  if (whole_vectors && (dense || out_rows < kMinRowsToPack)) return 0;
  return values.rows * ((columns + N - 1) / N * N);
}

template <typename T>
void PackValues(ConstMatrixView<T> values, size_t row_begin, size_t row_end,
                T* HWY_RESTRICT packed) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const size_t width = kPanelVectors * N;
  const size_t columns = values.cols, depth = values.rows;
  for (size_t panel_column = 0; panel_column < columns; panel_column += width) {
    const size_t panel_columns = std::min(width, columns - panel_column);
    const size_t panel_width = (panel_columns + N - 1) / N * N;
    T* HWY_RESTRICT panel = packed + panel_column * depth;
    for (size_t j = row_begin; j < row_end; ++j) {
      T* HWY_RESTRICT target = panel + j * panel_width;
      std::memcpy(target, values.row(j) + panel_column,
                  panel_columns * sizeof(T));
      for (size_t k = panel_columns; k < panel_width; ++k) target[k] = T(0);
    }
  }
}

// Rows [row_begin, row_end) × columns [column_begin, column_end) of out;
// with `accumulate`, added to what out holds. Each output is one chain of
// multiply-adds over j in order, so summing keys [0, a) and then
// accumulating keys [a, m) gives the bits of one call over [0, m).
template <typename T>
void WeightedSumRows(ConstMatrixView<T> weights, ConstMatrixView<T> values,
                     const T* packed, MatrixView<T> out, size_t row_begin,
                     size_t row_end, size_t column_begin, size_t column_end,
                     bool accumulate = false) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const size_t width = kPanelVectors * N;
  const size_t depth = weights.cols;
  if (column_begin >= column_end) return;  // no output columns
  if (depth == 0 && !accumulate) {         // empty sums
    for (size_t i = row_begin; i < row_end; ++i) {
      std::fill(out.row(i) + column_begin, out.row(i) + column_end, T(0));
    }
    return;
  }
  const size_t call_columns = (column_end - column_begin + N - 1) / N * N;
  const size_t pass_depth =
      std::max(kMinPassDepth, kValueSliceBytes / (call_columns * sizeof(T)));
  // Outputs of a panel reaching past dv, zeroed when first used. Rows past
  // row_end repeat the last row (TileRowPointers): their sums are the last
  // row's, bit for bit, and are stored to its outputs again.
  constexpr size_t kTileElements =
      kTileRows * kPanelVectors * kMaxVectorBytes / sizeof(T);
  HWY_ALIGN T staging[kTileElements];
  bool staging_zeroed = false;

  for (size_t pass_begin = 0; pass_begin < depth; pass_begin += pass_depth) {
    const size_t pass = std::min(pass_depth, depth - pass_begin);
    const bool accumulate_pass = accumulate || pass_begin != 0;
    for (size_t tile_row = row_begin; tile_row < row_end;
         tile_row += kTileRows) {
      const size_t tile_rows = std::min(kTileRows, row_end - tile_row);
      const T* weight_rows[kTileRows];
      detail::TileRowPointers(weights, tile_row, tile_rows, pass_begin,
                              weight_rows);
      for (size_t panel_column = column_begin; panel_column < column_end;
           panel_column += width) {
        const size_t panel_columns = std::min(width, column_end - panel_column);
        const size_t vectors = (panel_columns + N - 1) / N;
        const size_t panel_width = vectors * N;
        const T* panel_values;
        size_t value_stride;
        if (packed != nullptr) {
          value_stride = panel_width;
          panel_values =
              packed + panel_column * depth + pass_begin * panel_width;
        } else {
          value_stride = values.stride;
          panel_values = values.row(pass_begin) + panel_column;
        }
        const bool whole = panel_columns == panel_width;
        if (!whole && !staging_zeroed) {
          std::fill(staging, staging + kTileElements, T(0));
          staging_zeroed = true;
        }
        T* out_rows[kTileRows];
        for (size_t r = 0; r < kTileRows; ++r) {
          if (r >= tile_rows) {
            out_rows[r] = out_rows[tile_rows - 1];
          } else if (whole) {
            out_rows[r] = out.row(tile_row + r) + panel_column;
          } else {
            out_rows[r] = staging + r * panel_width;
            if (accumulate_pass) {
              std::memcpy(out_rows[r], out.row(tile_row + r) + panel_column,
                          panel_columns * sizeof(T));
            }
          }
        }
        MultiplyTileRows(tile_rows, vectors, d, weight_rows, panel_values,
                         value_stride, pass, out_rows, accumulate_pass);
        if (!whole) {
          for (size_t r = 0; r < tile_rows; ++r) {
            std::memcpy(out.row(tile_row + r) + panel_column, out_rows[r],
                        panel_columns * sizeof(T));
          }
        }
      }
    }
  }
}

}  // namespace wsum
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_WEIGHTED_SUM_INL_H_
