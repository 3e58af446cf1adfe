// The fused decode over narrow rows (bf16, f16, int8, float8; FusedPath
// decode): the keys' dots read in place and widened in registers (a score
// source) and the values' weighted sum likewise (a value sink), each key's
// and each output's order of sums that of the float call on the held values.
// Compiled in a TU of its own (arch/fused/narrow_decode.cc); the walker
// calls NarrowDots and NarrowWeightedSum (arch/fused/parts-inl.h).

#if defined(ATTNPOOL_ARCH_FUSED_NARROW_DECODE_INL_H_) == \
    defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_FUSED_NARROW_DECODE_INL_H_
#undef ATTNPOOL_ARCH_FUSED_NARROW_DECODE_INL_H_
#else
#define ATTNPOOL_ARCH_FUSED_NARROW_DECODE_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "arch/convert-inl.h"
#include "arch/fused/parts-inl.h"
#include "arch/fused/row_prefetch-inl.h"
#include "arch/prefetch_lines-inl.h"
#include "arch/prefix_io-inl.h"
#include "arch/transpose-inl.h"
#include "arch/weighted_sum-inl.h"
#include "core/element_traits.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace fused {
namespace hn = hwy::HWY_NAMESPACE;

// An int8 row's scale s is applied once, to the dot of its integers with a
// query or to its weight in a weighted sum, not to each of its elements
// (element.h; applied to each element, those multiplies took the FMA
// pipes: docs/benchmarks.md, "Design evidence": FoldsScale), where nothing
// can overflow either way: 2^-50 ≤ |s| ≤ 2^50 (FoldsScale); for a dot,
// fewer than 2^20 query elements, each 0 or of magnitude in [2^-50, 2^50]
// (FoldsQuery: its products with the integers normal, and the held
// products |q|·|s·k| ≤ 2^107, so that neither side's sum leaves the
// floats); for a weighted sum, weights in [0, 1] (a softmax's; a weight·s
// below 2^-126 loses at most 2^-150·127, as the held product w·(s·k) may
// in its rounding). Elsewhere (zero, extreme or non-finite scales and
// queries, other weights) each element is s·k as held, so that NaN and
// ±inf arise where they would on the held floats.
constexpr float kFoldLow = 0x1p-50f, kFoldHigh = 0x1p50f;

HWY_INLINE bool FoldsScale(float scale) {
  // In integer operations (the FP pipes are busy beside): the magnitude's
  // bits, between those of 2^-50 and 2^50 (NaN's above).
  uint32_t bits;
  std::memcpy(&bits, &scale, sizeof(bits));
  constexpr uint32_t kLow = uint32_t(127 - 50) << 23;
  constexpr uint32_t kHigh = uint32_t(127 + 50) << 23;
  return (bits & 0x7FFFFFFFu) - kLow <= kHigh - kLow;
}

// Lanes of `scales` for which FoldsScale holds.
template <class D>
HWY_INLINE hn::Mask<D> ScalesFoldIn(D d, hn::Vec<D> scales) {
  const auto magnitude = hn::Abs(scales);
  return hn::And(hn::Ge(magnitude, hn::Set(d, kFoldLow)),
                 hn::Le(magnitude, hn::Set(d, kFoldHigh)));
}

// Whether FoldsScale holds for scales[0, count) (aligned): in vectors.
HWY_INLINE bool ScalesFold(const float* HWY_RESTRICT scales, size_t count) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto inside = hn::FirstN(d, N);
  size_t j = 0;
  for (; j + N <= count; j += N) {
    inside = hn::And(inside, ScalesFoldIn(d, hn::Load(d, scales + j)));
  }
  bool fold = hn::AllTrue(d, inside);
  for (; j < count; ++j) fold &= FoldsScale(scales[j]);
  return fold;
}

HWY_INLINE bool FoldsQuery(const float* HWY_RESTRICT query, size_t depth) {
  if (depth >= (size_t{1} << 20)) return false;
  for (size_t p = 0; p < depth; ++p) {
    if (query[p] != 0.0f && !FoldsScale(query[p])) return false;
  }
  return true;
}

// scores[k] = query · key (j + k) for k < count, the keys narrow rows of E
// read in place and widened in registers, kWidth keys at a time (Keys:
// NarrowDots; operator(): beside a weighted sum, NarrowWeightedSum).
// bf16 and f16 dots are those of the float keys they hold (DirectDot's order of
// sums). An int8 key's dot is its scale times the dot of its integers
// (FoldsScale; `query_folds` says whether the query allows it), the integers'
// products summed by TransposedLaneSums Lanes keys at a time on targets of
// fixed width (FoldedGroup; docs/benchmarks.md; each key's sum in one order
// however keys are grouped, so a paged cache's dots are the contiguous
// one's). With `ahead_limit` (rows one stride apart), the row
// kPrefetchRows ahead is prefetched beside each, below that row. Given
// `values` (the `value_bytes` of key j's value row, rows `value_stride`
// bytes apart; an int8 cache's only: bf16 and f16 values were slower so),
// a key's value row is prefetched beside it too, for the weighted sum after
// the stretch (an int8 cache's keys ahead pay only beside its values).
// Both faster: docs/benchmarks.md, "Design evidence": NarrowKeyDots.
template <typename E>
struct NarrowKeyDots {
  using D = hn::ScalableTag<float>;
  // Rows with a scale (applied to each element), and those whose scale
  // may instead fold into the dot (core/element_traits.h).
  static constexpr bool kScaled = detail::kScaledElement<E>;
  static constexpr bool kFolds =
      kScaled && detail::ElementTraits<E>::kFoldsScale;
#if HWY_HAVE_SCALABLE || HWY_TARGET == HWY_SCALAR
  static constexpr size_t kWidth = 1;
#else
  static constexpr size_t kWidth = kFolds ? hn::MaxLanes(D()) : 1;
#endif
  const detail::RowList<float>& keys;
  size_t j, count;
  const float* HWY_RESTRICT query;
  float* HWY_RESTRICT scores;
  size_t ahead_limit = 0;
  const char* values = nullptr;
  size_t value_stride = 0, value_bytes = 0;
  bool query_folds = false;  // kFolds: FoldsQuery(query, keys.cols)
  // Given (NarrowDots), key j's row, the rows [j, j + count) one stride
  // apart; and (kFolds) key j's scale, their scales run_scale_stride apart.
  const E* HWY_RESTRICT run_rows = nullptr;
  const float* HWY_RESTRICT run_scales = nullptr;
  size_t run_scale_stride = 1;

  // `left` ≤ Lanes elements from `key`, widened (times `scale` if
  // kScaleElements).
  template <bool kScaleElements>
  static HWY_INLINE hn::Vec<D> Widened(const E* HWY_RESTRICT key, size_t left,
                                       float scale) {
    const D d;
    if (left == hn::Lanes(d)) {
      const auto widened = LoadWide(d, key);
      return kScaleElements ? hn::Mul(hn::Set(d, scale), widened) : widened;
    }
    const auto widened = LoadWidePrefix(d, key, left);
    // (The padding lanes stay 0: 0·s is NaN for a scale of ±inf.)
    return kScaleElements
               ? hn::IfThenElseZero(hn::FirstN(d, left),
                                    hn::Mul(hn::Set(d, scale), widened))
               : widened;
  }

  // `key`'s elements (times `scale` if kScaleElements) times the query's,
  // in lanes whose sum is the dot.
  template <bool kScaleElements>
  static HWY_INLINE hn::Vec<D> RowProducts(const E* HWY_RESTRICT key,
                                           const float* HWY_RESTRICT query,
                                           size_t depth, float scale) {
    const D d;
    const size_t N = hn::Lanes(d);
    const auto load = [&](size_t p, size_t left) HWY_ATTR {
      return Widened<kScaleElements>(key + p, left, scale);
    };
    if (depth == 4 * N) {  // (the loop below written out, faster, the
                           // same sums: docs/benchmarks.md, "Design
                           // evidence": RowProducts)
      return hn::Add(hn::MulAdd(hn::LoadU(d, query + 2 * N), load(2 * N, N),
                                hn::Mul(hn::LoadU(d, query), load(0, N))),
                     hn::MulAdd(hn::LoadU(d, query + 3 * N), load(3 * N, N),
                                hn::Mul(hn::LoadU(d, query + N), load(N, N))));
    }
    auto sum0 = hn::Zero(d), sum1 = hn::Zero(d);
    size_t p = 0;
    for (; p + 2 * N <= depth; p += 2 * N) {
      sum0 = hn::MulAdd(hn::LoadU(d, query + p), load(p, N), sum0);
      sum1 = hn::MulAdd(hn::LoadU(d, query + p + N), load(p + N, N), sum1);
    }
    for (; p < depth; p += N) {
      const size_t left = std::min(N, depth - p);
      sum0 = hn::MulAdd(LoadPrefix(d, query + p, left), load(p, left), sum0);
    }
    return hn::Add(sum0, sum1);
  }

  // Rows from `rows`, one stride apart: row i's RowProducts, and its
  // prefetches beside: for i < ahead_rows the row kPrefetchRows ahead (a
  // line per 64 bytes from the row's start, written out here: the same
  // loop as a helper function was slower), and value row i's value_bytes.
  // With kDepth (not 0), the rows' depth and value_bytes (where values are
  // given) are kDepth elements of E, so that the loops unroll and no branch
  // is left between keys. Copies of what NarrowKeyDots holds: read through
  // `this`, each was loaded again for every key (docs/benchmarks.md,
  // "Design evidence": RowsAt).
  template <bool kScaleElements, size_t kDepth = 0>
  struct RowsAt {
    const E* HWY_RESTRICT rows;
    size_t stride, depth;
    const float* HWY_RESTRICT query;
    float scale;
    size_t ahead_rows;
    const char* HWY_RESTRICT values;
    size_t value_stride, value_bytes;

    HWY_INLINE hn::Vec<D> operator()(size_t i) const {
      const size_t elements = kDepth != 0 ? kDepth : depth;
      const size_t bytes = kDepth != 0 ? kDepth * sizeof(E) : value_bytes;
      const E* HWY_RESTRICT key = rows + i * stride;
      if (i < ahead_rows) {
        const char* row =
            reinterpret_cast<const char*>(key + kPrefetchRows * stride);
        for (size_t byte = 0; byte < elements * sizeof(E); byte += 64) {
          hwy::Prefetch(row + byte);
        }
      }
      if (values != nullptr) {
        for (size_t byte = 0; byte < bytes; byte += 64) {
          hwy::Prefetch(values + i * value_stride + byte);
        }
      }
      return RowProducts<kScaleElements>(key, query, elements, scale);
    }
  };

  // Key k's row and those after it (one stride apart where run_rows), the
  // rows kPrefetchRows ahead prefetched below ahead_limit.
  template <bool kScaleElements, size_t kDepth = 0>
  HWY_INLINE RowsAt<kScaleElements, kDepth> RowsFrom(size_t k,
                                                     float scale) const {
    const size_t ahead = j + k + kPrefetchRows;
    return {run_rows != nullptr ? run_rows + k * keys.stride
                                : keys.template narrow_row<E>(j + k),
            keys.stride,
            keys.cols,
            query,
            scale,
            ahead < ahead_limit ? ahead_limit - ahead : 0,
            values != nullptr ? values + k * value_stride : nullptr,
            value_stride,
            value_bytes};
  }

  // Key k's RowProducts, its prefetches beside.
  template <bool kScaleElements>
  HWY_INLINE hn::Vec<D> Products(size_t k, float scale) const {
    return RowsFrom<kScaleElements>(k, scale)(0);
  }

  // Key k's products: a scaled type's elements unscaled where the key's
  // scale folds (`after` the scale), else scaled (`after` 1).
  HWY_INLINE hn::Vec<D> KeyProducts(size_t k, float& after) const {
    after = 1.0f;
    if constexpr (kScaled) {
      const float scale = keys.scale(j + k);
      if (!(query_folds && FoldsScale(scale))) {
        return Products<true>(k, scale);
      }
      after = scale;
    }
    return Products<false>(k, 1.0f);
  }

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
  // The lane sums of rows(0), …, rows(Lanes − 1) (TransposedLaneSums), the
  // products all computed first (in registers: an array the caller holds
  // went through memory).
  template <class Rows, size_t... kRow>
  static HWY_INLINE hn::Vec<D> SumsOfEach(const Rows& rows,
                                          std::index_sequence<kRow...>) {
    const hn::Vec<D> lanes[] = {rows(kRow)...};  // (in order)
    return TransposedLaneSums(D(), lanes);
  }
  template <class Rows>
  static HWY_INLINE hn::Vec<D> SumsOfEach(const Rows& rows) {
    return SumsOfEach(rows, std::make_index_sequence<hn::MaxLanes(D())>());
  }
#endif

  // Keys [k, k + kWidth), all below count, of one run with scales one
  // stride apart (run_scales), the query folding: their scales loaded (or
  // gathered) and checked as a vector, their products computed in turn
  // and then summed (in registers), their scores stored as one. False,
  // nothing written, where a scale does not fold. (In registers, not
  // through Keys' arrays in memory; scales gathered where they lie apart,
  // as in a cache kept (m, heads). The products all before the sums, not
  // summed as they came, so that the keys' loads issue earlier. Each was
  // faster: docs/benchmarks.md, "Design evidence": FoldedGroup.)
  HWY_INLINE bool FoldedGroup(size_t k) const {
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
    const D d;
    const hn::RebindToSigned<D> di;
    const float* HWY_RESTRICT first = run_scales + k * run_scale_stride;
    const auto group_scales =
        run_scale_stride == 1
            ? hn::LoadU(d, first)
            : hn::GatherIndex(
                  d, first,
                  hn::Mul(hn::Iota(di, 0),
                          hn::Set(di, static_cast<int32_t>(run_scale_stride))));
    if (!hn::AllTrue(d, ScalesFoldIn(d, group_scales))) return false;
    // Rows of four or eight vectors (d 64 or 128 on AVX-512, 32 or 64 on
    // AVX2), their values as wide or not prefetched: kDepth (RowsAt).
    constexpr size_t N = hn::MaxLanes(d);
    const bool values_as_wide =
        values == nullptr || value_bytes == keys.cols * sizeof(E);
    hn::Vec<D> sums;
    if (values_as_wide && keys.cols == 4 * N) {
      sums = SumsOfEach(RowsFrom<false, 4 * N>(k, 1.0f));
    } else if (values_as_wide && keys.cols == 8 * N) {
      sums = SumsOfEach(RowsFrom<false, 8 * N>(k, 1.0f));
    } else {
      sums = SumsOfEach(RowsFrom<false>(k, 1.0f));
    }
    hn::StoreU(hn::Mul(group_scales, sums), d, scores + k);
    return true;
#else
    (void)k;
    return false;
#endif
  }

  // scores of keys [k, k + kWidth) below count: each key's products
  // summed, times its scale where that folds (int8; else its elements were
  // scaled).
  HWY_INLINE void Keys(size_t k) const {
    if (k >= count) return;
    const D d;
    HWY_ALIGN float after[kWidth];  // the factor of each key's sum
    if constexpr (kWidth == 1) {
      const auto sum = hn::SumOfLanes(d, KeyProducts(k, after[0]));
      scores[k] = after[0] * hn::GetLane(sum);
    } else {
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
      const size_t n = std::min(kWidth, count - k);
      // Every key's scale taken to fold, then checked (and the query's):
      // where one does not, the keys again one by one.
      if (n == kWidth && run_scales != nullptr && query_folds &&
          FoldedGroup(k)) {
        return;
      }
      hn::Vec<D> lanes[kWidth];
      for (size_t i = 0; i < kWidth; ++i) {
        if (i < n) {
          lanes[i] = Products<false>(k + i, 1.0f);
          after[i] = keys.scale(j + k + i);
        } else {
          lanes[i] = hn::Zero(d);
          after[i] = 1.0f;
        }
      }
      if (!query_folds || !ScalesFold(after, kWidth)) {
        for (size_t i = 0; i < n; ++i) {
          lanes[i] = KeyProducts(k + i, after[i]);
        }
      }
      HWY_ALIGN float sums[kWidth];
      hn::Store(TransposedLaneSums(d, lanes), d, sums);
      for (size_t i = 0; i < n; ++i) scores[k + i] = after[i] * sums[i];
#endif
    }
  }

  // Beside value row j of a weighted sum (NarrowWeightedSumOf): the scores
  // of the group of kWidth keys that ends at key j (key j's alone where
  // kWidth is 1), so that the groups are Keys' from 0 as in NarrowDots.
  HWY_INLINE void operator()(size_t j) const {
    if constexpr (kWidth == 1) {
      Keys(j);
    } else if ((j + 1) % kWidth == 0) {
      GroupApart(*this, j + 1 - kWidth);
    }
  }

  // Keys(k), not inlined: inlined in the weighted sum's loops, the group's
  // vectors beside its accumulators, int8 decode ran far slower
  // (docs/benchmarks.md, "Design evidence": GroupApart), and each loop
  // compiled it again.
  static HWY_NOINLINE void GroupApart(const NarrowKeyDots& dots, size_t k) {
    dots.Keys(k);
  }

  // Keys [j, j + count) of `keys`, rows one stride apart (a run:
  // keys.Run(j, count) == count), for `query`: run_rows, and (int8)
  // run_scales where the scales lie one stride apart (RowList::ScalesRun),
  // query_folds.
  static NarrowKeyDots OfRun(const detail::RowList<float>& keys, size_t j,
                             size_t count, const float* HWY_RESTRICT query,
                             float* HWY_RESTRICT scores) {
    NarrowKeyDots dots{keys, j, count, query, scores};
    if (count == 0) return dots;
    dots.run_rows = keys.template narrow_row<E>(j);
    // (Gathered scales' offsets, (kWidth − 1)·stride, are int32.)
    if (kFolds && keys.scale_stride <= (size_t{1} << 26)) {
      dots.run_scales = keys.ScalesRun(j, count);
      dots.run_scale_stride = keys.scale_stride;
    }
    dots.query_folds = kFolds && FoldsQuery(query, keys.cols);
    return dots;
  }
};

// NarrowKeyDots over keys [j, j + count), rows one stride apart (a run:
// keys.Run(j, count) == count), for `rows` queries (at most
// kDecodeRows) `query_stride` apart, their scores `score_stride` apart:
// each key row read once for all of them (the prefetches beside the
// first's). Not inlined, nor is NarrowWeightedSum: in FusedAccumulate's
// body they slowed the float decode (docs/benchmarks.md, "Design
// evidence": NarrowDots).
template <typename T>
HWY_NOINLINE void NarrowDots(const detail::RowList<T>& keys, size_t j,
                             size_t count, size_t rows,
                             const T* HWY_RESTRICT query, size_t query_stride,
                             T* HWY_RESTRICT scores, size_t score_stride,
                             size_t ahead_limit, const char* values,
                             size_t value_stride, size_t value_bytes) {
  if constexpr (std::is_same<T, float>::value) {
    VisitNarrow(keys.element, [&](auto tag) {
      using Dots = NarrowKeyDots<decltype(tag)>;
      const Dots run = Dots::OfRun(keys, j, count, query, scores);
      const auto row = [&](size_t r) {
        if (r >= rows) return Dots{keys, j, 0, query, scores};  // none
        Dots dots = run;
        dots.query = query + r * query_stride;
        dots.scores = scores + r * score_stride;
        if (r == 0) {
          dots.ahead_limit = ahead_limit;
          dots.values = values;
          dots.value_stride = value_stride;
          dots.value_bytes = value_bytes;
        } else {
          dots.query_folds = Dots::kFolds && FoldsQuery(dots.query, keys.cols);
        }
        return dots;
      };
      const Dots first = row(0);
      if (rows == 1) {
        for (size_t k = 0; k < count; k += Dots::kWidth) first.Keys(k);
        return;
      }
      // Each group of keys for every row in turn, while it is in L1: one
      // Keys in the loop's body, not one per row (the rows written out cost
      // the sanitized build minutes of compiling, and a group's work
      // dwarfs the loop's).
      const Dots others[detail::kDecodeRows - 1] = {row(1), row(2), row(3)};
      static_assert(detail::kDecodeRows == 4, "the rows listed here");
      for (size_t k = 0; k < count; k += Dots::kWidth) {
        first.Keys(k);
        for (size_t r = 1; r < rows; ++r) others[r - 1].Keys(k);
      }
    });
  }
}

// NarrowWeightedSum for values of E, beside(j) run with value row j's
// first multiply-adds; int8 scales folded into softmax weights
// (`softmax_weights`: in [0, 1]) where FoldsScale.
template <typename E, class Beside>
HWY_INLINE void NarrowWeightedSumOf(const ConstMatrixView<float>& weights,
                                    const detail::RowList<float>& values,
                                    size_t at, const MatrixView<float>& sums,
                                    size_t ahead_limit, bool softmax_weights,
                                    const Beside& beside) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d), columns = values.cols;
  constexpr bool kScaled = detail::kScaledElement<E>;
  constexpr bool kFolds = kScaled && detail::ElementTraits<E>::kFoldsScale;
  // Rows one stride apart of 2-byte values: the row kPrefetchRows ahead,
  // below `ahead_limit`, prefetched beside each (faster: docs/benchmarks.md,
  // "Design evidence": NarrowWeightedSumOf; an int8 cache's values are
  // prefetched beside their keys where a decode does not interleave).
  const bool prefetch = values.strided() && sizeof(E) == 2;
  const auto prefetch_ahead = [&](size_t r, size_t j) {
    if (!prefetch || r != 0 || at + j + kPrefetchRows >= ahead_limit) {
      return;
    }
    PrefetchLines(reinterpret_cast<const char*>(
                      values.template narrow_row<E>(at + j + kPrefetchRows)),
                  columns * sizeof(E));
  };
  // body(j, row, scale) for value rows j < weights.cols in order: row j's
  // first element, and (int8) its scale; a run of rows one stride apart at
  // a time, and their scales likewise where they lie one scale_stride apart
  // (RowList::ScalesRun), so that a row costs a pointer's step, not
  // Offset's arithmetic (faster: docs/benchmarks.md, "Design evidence":
  // NarrowWeightedSumOf's each_row).
  const auto each_row = [&](auto&& body) HWY_ATTR {
    for (size_t j = 0; j < weights.cols;) {
      const size_t run = values.Run(at + j, weights.cols - j);
      const E* HWY_RESTRICT row = values.template narrow_row<E>(at + j);
      const size_t stride = values.stride, scale_stride = values.scale_stride;
      const float* HWY_RESTRICT scale =
          kScaled ? values.ScalesRun(at + j, run) : nullptr;
      for (size_t i = 0; i < run; ++i, ++j, row += stride) {
        if constexpr (kScaled) {
          body(j, row,
               scale != nullptr ? scale[i * scale_stride]
                                : values.scale(at + j));
        } else {
          body(j, row, 1.0f);
        }
      }
    }
  };
  // Every int8 scale folded into its weight, false returned if one did not
  // FoldsScale; or (`by_key`) those that do, the others applied to their
  // elements (the folded ones' times 1: the same bits).
  const auto all_sums = [&](auto by_key) HWY_ATTR {
    constexpr bool kByKey = decltype(by_key)::value;
    bool folded = true;
    // `beside` in the first pass only (a sum by key after one whose scales
    // did not all fold; the only pass of a type that does not fold).
    const bool beside_here = !kByKey || !softmax_weights || !kFolds;
    // A row's factor of its weight (its scale where folded) and of its
    // elements.
    const auto factors = [&](float weight, float scale,
                             float& element_scale) HWY_ATTR {
      element_scale = 1.0f;
      if constexpr (!kScaled) {
        return hn::Set(d, weight);
      } else {
        if (!kByKey) {
          folded &= FoldsScale(scale);
        } else if (!(kFolds && softmax_weights && FoldsScale(scale))) {
          element_scale = scale;
          return hn::Set(d, weight);
        }
        return hn::Set(d, weight * scale);
      }
    };
    // `left` ≤ N elements of a row from `at_column`, widened (and scaled).
    const auto value = [&](const E* HWY_RESTRICT at_column, size_t left,
                           float element_scale) HWY_ATTR {
      const auto widened = left == N   ? LoadWide(d, at_column)
                           : left == 0 ? hn::Zero(d)
                                       : LoadWidePrefix(d, at_column, left);
      return kByKey ? hn::Mul(hn::Set(d, element_scale), widened) : widened;
    };
    for (size_t r = 0; r < weights.rows; ++r) {
      const float* HWY_RESTRICT w = weights.row(r);
      float* HWY_RESTRICT out = sums.row(r);
      size_t c = 0;
      // Four whole vectors at a time, in registers.
      for (; c + 4 * N <= columns; c += 4 * N) {
        auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d),
             a3 = hn::Zero(d);
        each_row([&](size_t j, const E* HWY_RESTRICT row,
                     float scale) HWY_ATTR {
          if (c == 0) {
            prefetch_ahead(r, j);
            if (r == 0 && beside_here) beside(j);
          }
          float element_scale;
          const auto weight = factors(w[j], scale, element_scale);
          a0 = hn::MulAdd(weight, value(row + c, N, element_scale), a0);
          a1 = hn::MulAdd(weight, value(row + c + N, N, element_scale), a1);
          a2 = hn::MulAdd(weight, value(row + c + 2 * N, N, element_scale), a2);
          a3 = hn::MulAdd(weight, value(row + c + 3 * N, N, element_scale), a3);
        });
        hn::Store(a0, d, out + c);
        hn::Store(a1, d, out + c + N);
        hn::Store(a2, d, out + c + 2 * N);
        hn::Store(a3, d, out + c + 3 * N);
      }
      for (; c < sums.cols; c += N) {
        const size_t left = c < columns ? std::min(N, columns - c) : 0;
        auto acc = hn::Zero(d);
        each_row([&](size_t j, const E* HWY_RESTRICT row,
                     float scale) HWY_ATTR {
          if (c == 0) {  // (rows under 4 vectors)
            prefetch_ahead(r, j);
            if (r == 0 && beside_here) beside(j);
          }
          float element_scale;
          const auto weight = factors(w[j], scale, element_scale);
          acc = hn::MulAdd(weight, value(row + c, left, element_scale), acc);
        });
        hn::Store(acc, d, out + c);
      }
    }
    return folded;
  };
  if constexpr (!kScaled) {
    all_sums(std::false_type());
  } else if constexpr (!kFolds) {
    all_sums(std::true_type());
  } else if (!softmax_weights || !all_sums(std::false_type())) {
    all_sums(std::true_type());
  }
}

// sums(r, :) = Σⱼ weights(r, j) · values(at + j, :) over the weights'
// columns, the narrow value rows read in place and widened in registers:
// per output one multiply-add chain in key order from 0, as
// wsum::WeightedSumRows runs it, so that bf16 and f16 sums are bitwise
// those of the widened rows (int8: each row's scale folded into its weight
// where the weights are a softmax's, `softmax_weights`, and FoldsScale;
// else applied to its elements first, as WidenRow does). Columns past
// values.cols (to sums.cols, whole vectors) get 0·weight. With `beside`,
// the dots of its keys are computed in the first pass over the values, a
// key row beside each value row (int8: a group of Lanes keys beside every
// Lanes-th value row; then any past the weights' columns).
template <typename T>
HWY_NOINLINE void NarrowWeightedSum(const ConstMatrixView<T>& weights,
                                    const detail::RowList<T>& values, size_t at,
                                    const MatrixView<T>& sums,
                                    size_t ahead_limit, bool softmax_weights,
                                    const KeysBeside<T>& beside) {
  if constexpr (std::is_same<T, float>::value) {
    VisitNarrow(values.element, [&](auto tag) {
      using E = decltype(tag);
      using Dots = NarrowKeyDots<E>;
      if (beside.keys == nullptr) {
        NarrowWeightedSumOf<E>(weights, values, at, sums, ahead_limit,
                               softmax_weights, wsum::NothingBeside());
        return;
      }
      Dots dots = Dots::OfRun(*beside.keys, beside.first, beside.count,
                              beside.query, beside.scores);
      dots.ahead_limit = beside.ahead_limit;
      NarrowWeightedSumOf<E>(weights, values, at, sums, ahead_limit,
                             softmax_weights, dots);
      // Groups that end past the weights' columns.
      for (size_t k = weights.cols / Dots::kWidth * Dots::kWidth;
           k < beside.count; k += Dots::kWidth) {
        dots.Keys(k);
      }
    });
  }
}

}  // namespace fused
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_FUSED_NARROW_DECODE_INL_H_
