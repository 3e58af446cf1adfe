// A register transpose of Lanes(d) float rows into column vectors, for
// packing keys depth-major (PackKeys, arch/distance-inl.h): one vector load
// per row and one vector store per column in place of a scalar store per
// element (the scalar packing was a visible share of a sliding window's
// time: docs/benchmarks.md, "Design evidence": VectorTranspose). And the
// lane sums of Lanes(d) vectors as one vector (TransposedLaneSums: an int8
// decode's dots, arch/fused-inl.h).
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

// Lane sums of several vectors at once: TransposedLaneSumsOf(d, get) has in
// lane i the sum of get(i)'s lanes, for i < Lanes(d) (float vectors of 1, 2
// or 4 blocks). Lane i's sum depends on get(i) alone, in one fixed order,
// whatever the other vectors hold: within each block (x0 + x2) + (x1 + x3),
// then the blocks' sums, adjacent ones first. Lanes(d) − 1 additions and
// about twice as many permutes for Lanes(d) sums, against log2(Lanes) of
// each per SumOfLanes; the permutes within blocks (interleaves) come first,
// where there are most of them (in a plain loop of int8 keys' dots,
// faster than with ConcatEven/ConcatOdd at every level; within noise alone
// in the decode: docs/benchmarks.md, "Design evidence":
// TransposedLaneSumsOf). The vectors are
// asked for in order and combined as they come (about log2(Lanes) live at
// once); the int8 dots compute theirs all first, so that the keys' loads
// issue early (NarrowKeyDots::SumsOfEach).

// One level: `a` and `b` the sums of kVectors / 2 vectors each (kVectors
// from 2), in the lanes that level leaves them; the result those of all
// kVectors, a's first.
template <size_t kVectors, class D>
HWY_INLINE hn::Vec<D> LaneSumsLevel(D d, hn::Vec<D> a, hn::Vec<D> b) {
  constexpr size_t N = hn::MaxLanes(D());
  if constexpr (kVectors == 2) {
    // Lanes (a0 + a2, b0 + b2, a1 + a3, b1 + b3) of each block.
    return hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b));
  } else if constexpr (kVectors == 4) {
    // Lane c of each block: the block's sum of vector c.
    const hn::Repartition<uint64_t, D> d64;
    const auto a64 = hn::BitCast(d64, a), b64 = hn::BitCast(d64, b);
    return hn::Add(hn::BitCast(d, hn::InterleaveLower(d64, a64, b64)),
                   hn::BitCast(d, hn::InterleaveUpper(d64, a64, b64)));
  } else if constexpr (kVectors == N) {
    // The halves' sums: block b of the result, the sums of vectors 4b + c.
    return hn::Add(hn::ConcatLowerLower(d, b, a),
                   hn::ConcatUpperUpper(d, b, a));
  } else {
    static_assert(kVectors == 8 && N == 16, "four blocks");
    // Each vector's adjacent blocks added: the result's blocks a's blocks
    // 0 + 1, b's 0 + 1, a's 2 + 3, b's 2 + 3.
    return hn::Add(hn::OddEvenBlocks(b, a),
                   hn::SwapAdjacentBlocks(hn::OddEvenBlocks(a, b)));
  }
}

// Sums of get(first), …, get(first + kVectors − 1) (kVectors a power of
// two), in the lanes LaneSumsLevel<kVectors> leaves them.
template <size_t kVectors, class D, class Get>
HWY_INLINE hn::Vec<D> LaneSumsOf(D d, const Get& get, size_t first) {
  if constexpr (kVectors == 1) {
    return get(first);
  } else {
    const auto a = LaneSumsOf<kVectors / 2>(d, get, first);
    const auto b = LaneSumsOf<kVectors / 2>(d, get, first + kVectors / 2);
    return LaneSumsLevel<kVectors>(d, a, b);
  }
}

template <class D, class Get>
HWY_INLINE hn::Vec<D> TransposedLaneSumsOf(D d, const Get& get) {
  static_assert(VectorTranspose<D>(), "float vectors of 1, 2 or 4 blocks");
  return LaneSumsOf<hn::MaxLanes(D())>(d, get, 0);
}

// The same of the vectors v[0, Lanes(d)).
template <class D>
struct VectorsAt {
  const hn::Vec<D>* HWY_RESTRICT v;
  HWY_INLINE hn::Vec<D> operator()(size_t i) const { return v[i]; }
};
template <class D>
HWY_INLINE hn::Vec<D> TransposedLaneSums(D d, const hn::Vec<D>* v) {
  return TransposedLaneSumsOf(d, VectorsAt<D>{v});
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_TRANSPOSE_INL_H_
