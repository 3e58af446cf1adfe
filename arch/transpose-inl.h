// A register transpose of Lanes(d) float rows into column vectors, for
// packing keys depth-major (PackKeys, arch/distance-inl.h): one vector load
// per row and one vector store per column in place of a scalar store per
// element (the scalar packing of a 16384 × 64 key matrix took 4% of a sliding
// window's time, W6 on Zen 5). And the lane sums of Lanes(d) vectors as one
// vector (TransposedLaneSums: an int8 decode's dots, arch/fused-inl.h).
//
// Defined (VectorTranspose<D>()) for float vectors of one, two or four 128-bit
// blocks (x86 SSE4, AVX2, AVX3; NEON; EMU128): within each block a 4 × 4
// transpose by interleaves, then the blocks exchanged. Elsewhere (SVE's
// sizeless vectors, SCALAR, double lanes) callers copy element by element.
// A copy: the bits moved are the bits read.

#if defined(ATTNPOOL_ARCH_TRANSPOSE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_TRANSPOSE_INL_H_
#undef ATTNPOOL_ARCH_TRANSPOSE_INL_H_
#else
#define ATTNPOOL_ARCH_TRANSPOSE_INL_H_
#endif

#include <stddef.h>

#include <type_traits>

#include "arch/prefix_io-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
constexpr bool VectorTranspose() {
#if HWY_HAVE_SCALABLE || HWY_TARGET == HWY_SCALAR
  return false;
#else
  return std::is_same<hn::TFromD<D>, float>::value &&
         (hn::MaxLanes(D()) == 4 || hn::MaxLanes(D()) == 8 ||
          hn::MaxLanes(D()) == 16);
#endif
}

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
// out[c · out_stride + i] = rows[i][first + c] for c < columns ≤ Lanes(d) and
// i < Lanes(d); rows i ≥ `valid` read as zeros (and are not read). Reads
// only rows[i][first, first + columns).
template <class D>
HWY_INLINE void TransposeColumns(D d, const float* const* rows, size_t valid,
                                 size_t first, size_t columns,
                                 float* HWY_RESTRICT out, size_t out_stride) {
  static_assert(VectorTranspose<D>(), "float vectors of 1, 2 or 4 blocks");
  constexpr size_t N = hn::MaxLanes(D());
  const hn::Repartition<uint64_t, D> d64;
  hn::Vec<D> v[N];
  for (size_t i = 0; i < N; ++i) {
    v[i] = i < valid ? LoadPrefix(d, rows[i] + first, columns) : hn::Zero(d);
  }
  // Within each block, rows g..g+3 (g a multiple of 4) × columns 4b..4b+3
  // transposed: block b of v[g + c] then holds column 4b + c of rows
  // g..g+3.
  for (size_t g = 0; g < N; g += 4) {
    const auto t0 = hn::InterleaveLower(d, v[g], v[g + 1]);  // a0 b0 a1 b1
    const auto t1 = hn::InterleaveUpper(d, v[g], v[g + 1]);  // a2 b2 a3 b3
    const auto t2 = hn::InterleaveLower(d, v[g + 2], v[g + 3]);
    const auto t3 = hn::InterleaveUpper(d, v[g + 2], v[g + 3]);
    const auto pairs = [&](auto a, auto b, bool upper) {
      const auto a64 = hn::BitCast(d64, a), b64 = hn::BitCast(d64, b);
      return hn::BitCast(d, upper ? hn::InterleaveUpper(d64, a64, b64)
                                  : hn::InterleaveLower(d64, a64, b64));
    };
    v[g] = pairs(t0, t2, false);      // a0 b0 c0 d0
    v[g + 1] = pairs(t0, t2, true);   // a1 b1 c1 d1
    v[g + 2] = pairs(t1, t3, false);  // a2 b2 c2 d2
    v[g + 3] = pairs(t1, t3, true);   // a3 b3 c3 d3
  }
  if constexpr (N == 4) {
    for (size_t c = 0; c < columns; ++c) {
      hn::StoreU(v[c], d, out + c * out_stride);
    }
  } else if constexpr (N == 8) {
    // v[c] = [col c | col 4+c] of rows 0-3, v[4 + c] the same of rows 4-7.
    for (size_t c = 0; c < 4; ++c) {
      const auto low = hn::ConcatLowerLower(d, v[4 + c], v[c]);
      const auto high = hn::ConcatUpperUpper(d, v[4 + c], v[c]);
      if (c < columns) hn::StoreU(low, d, out + c * out_stride);
      if (4 + c < columns) hn::StoreU(high, d, out + (4 + c) * out_stride);
    }
  } else {
    // v[g + c] = [col c, col 4+c, col 8+c, col 12+c] of rows g..g+3.
    for (size_t c = 0; c < 4; ++c) {
      hn::Vec<D> even[2], odd[2];  // of rows 0-7 and 8-15
      for (size_t h = 0; h < 2; ++h) {
        const auto x = v[8 * h + c], y = v[8 * h + 4 + c];
        // [col c of rows 0-3, of rows 4-7, col 8+c of 0-3, of 4-7] and the
        // same of columns 4+c and 12+c.
        even[h] = hn::OddEvenBlocks(hn::SwapAdjacentBlocks(y), x);
        odd[h] = hn::OddEvenBlocks(y, hn::SwapAdjacentBlocks(x));
      }
      const hn::Vec<D> column[4] = {
          hn::ConcatLowerLower(d, even[1], even[0]),  // c
          hn::ConcatLowerLower(d, odd[1], odd[0]),    // 4 + c
          hn::ConcatUpperUpper(d, even[1], even[0]),  // 8 + c
          hn::ConcatUpperUpper(d, odd[1], odd[0])};   // 12 + c
      for (size_t k = 0; k < 4; ++k) {
        if (4 * k + c < columns) {
          hn::StoreU(column[k], d, out + (4 * k + c) * out_stride);
        }
      }
    }
  }
}

// Lane i of the result: the sum of v[i]'s lanes, for i < Lanes(d) (float
// vectors of 1, 2 or 4 blocks; v overwritten). log2(Lanes) levels, each
// adding lanes 2l and 2l + 1 of two vectors (ConcatEven + ConcatOdd): lane
// i's sum depends on v[i] alone, in one fixed order, whatever the other
// vectors hold. Lanes(d) − 1 additions and twice as many permutes for
// Lanes(d) sums, against log2(Lanes) of each per SumOfLanes.
template <class D>
HWY_INLINE hn::Vec<D> TransposedLaneSums(D d, hn::Vec<D>* HWY_RESTRICT v) {
  static_assert(VectorTranspose<D>(), "float vectors of 1, 2 or 4 blocks");
  for (size_t count = hn::MaxLanes(d); count > 1; count /= 2) {
    for (size_t i = 0; i < count / 2; ++i) {
      v[i] = hn::Add(hn::ConcatEven(d, v[2 * i + 1], v[2 * i]),
                     hn::ConcatOdd(d, v[2 * i + 1], v[2 * i]));
    }
  }
  return v[0];
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_TRANSPOSE_INL_H_
