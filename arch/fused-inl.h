// Per-ISA fused attention pooling (docs/design.md §1, "Fused"): all four stages
// in one pass over key blocks, FlashAttention-2 style, never holding more
// than a block of scores.
//
// For a block of queries and each block of keys:
//   1. scores: the distance tile kernel (arch/distance-inl.h) into a
//      rows × kKeyBlock scratch;
//   2. per row: kernel weights or logits, the mask, then one of
//        softmax rows — logits of exponential kernels under sum/softmax, or
//          any kernel under softmax: running max m and sum l; the block's
//          p = exp(a − m_new), l ← l·exp(m_old − m_new) + Σp;
//        weight rows — none/sum of weights (exp(ℓ) for exponential
//          kernels under none): p = w, l ← l + Σw;
//        argmax rows — the running best value and its first index;
//   3. acc ← acc·exp(m_old − m_new) + p·V_block (the weighted-sum micro
//      kernel, arch/weighted_sum-inl.h).
// The result is a partial state per query (arch/fused.h) that src/ merges
// across key ranges and finishes: out = acc / l (sum, softmax), acc (none)
// or the best key's value row (argmax); empty and NaN rows as in the staged
// pipeline.
// Each row takes the keys it sees (valid lengths, causal, sliding windows)
// in key blocks from its first: keys no row of the query block sees are
// never visited, and each row's softmax covers its own keys alone.
// Every step is per row and in a fixed order over its key blocks, which
// start at the row's first visible key, so results do not depend on
// threads, on how a call's rows are grouped into work items, nor on how
// queries are grouped into calls (but for src/fused.cc's key chunks).

#if defined(ATTNPOOL_ARCH_FUSED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_FUSED_INL_H_
#undef ATTNPOOL_ARCH_FUSED_INL_H_
#else
#define ATTNPOOL_ARCH_FUSED_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "arch/bf16_dot.h"
#include "arch/contributions.h"
#include "arch/convert-inl.h"
#include "arch/distance-inl.h"
#include "arch/fused.h"
#include "arch/fused_small_depth-inl.h"
#include "arch/kernel-inl.h"
#include "arch/math-inl.h"
#include "arch/normalize-inl.h"
#include "arch/prefetch_lines-inl.h"
#include "arch/prefix_io-inl.h"
#include "core/visible_run.h"
#include "arch/weighted_sum-inl.h"
#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace fused {
namespace hn = hwy::HWY_NAMESPACE;

using RowMode = detail::FusedRowMode;

// Per-query running state.
template <typename T>
struct RowState {
  T max = -std::numeric_limits<T>::infinity();  // softmax: m; argmax: best
  T sum = 0;                                    // l, or Σw
  size_t best = 0;                              // argmax: first index
  bool nan = false;                             // a visible NaN was seen
};

// ProcessRow's softmax of exp(scale·s) scores without bias or visible
// matrix (scaled dot-product attention), scale > 0: two passes instead of
// four — the max of the raw scores (scale·max s = max scale·s), then
// p = exp(s·scale − m) by one multiply-add, stored and summed on the way.
// A NaN score makes the sum NaN (exp(NaN) = NaN), which marks the row. A
// block whose max logit is not finite returns false: the general path.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE bool ScaledSoftmaxRow(D d, T scale, T* HWY_RESTRICT row,
                                 size_t count, RowState<T>& state,
                                 T* rescale_out) {
  const size_t N = hn::Lanes(d);
  const T infinity = std::numeric_limits<T>::infinity();
  // Four chains of maxima, not one waiting on each step's latency: a max
  // is exact in any order (a NaN it drops makes the sum below NaN).
  auto maximum = hn::Set(d, -infinity), maximum1 = maximum, maximum2 = maximum,
       maximum3 = maximum;
  size_t j = 0;
  for (; j + 4 * N <= count; j += 4 * N) {
    maximum = hn::Max(maximum, hn::LoadU(d, row + j));
    maximum1 = hn::Max(maximum1, hn::LoadU(d, row + j + N));
    maximum2 = hn::Max(maximum2, hn::LoadU(d, row + j + 2 * N));
    maximum3 = hn::Max(maximum3, hn::LoadU(d, row + j + 3 * N));
  }
  for (; j < count; j += N) {
    maximum = hn::Max(maximum, LoadPadded(d, row, j, count, -infinity));
  }
  maximum = hn::Max(hn::Max(maximum, maximum1), hn::Max(maximum2, maximum3));
  // EMU128/SCALAR MaxOfLanes cannot return −inf (normalize-inl.h).
  if (hn::AllTrue(d, hn::Eq(maximum, hn::Set(d, -infinity)))) {
    return false;
  }
  const T block_max = hn::GetLane(hn::MaxOfLanes(d, maximum)) * scale;
  // scale·s − max in one fused multiply-add keeps scale·s exact: for the max
  // key, up to half a place of the rounded max logit from 0. From 2^digits
  // on that is more than ±1/2, and near 2³¹ its exp overflows or flushes to
  // 0 (a row of weight 0): the general path rounds the logits first.
  constexpr T kLargeLogit = T(uint64_t{1} << std::numeric_limits<T>::digits);
  if (!(std::abs(block_max) < kLargeLogit)) return false;  // and ±inf, NaN
  const T old_max = state.max;
  if (old_max == infinity) return false;  // earlier +inf scores take all
  const T new_max = std::max(old_max, block_max);
  const auto factor = hn::Set(d, scale), shift = hn::Set(d, -new_max);
  auto sum = hn::Zero(d);
  for (size_t j = 0; j < count; j += N) {
    auto p = attnpool::HWY_NAMESPACE::Exp(
        d, hn::MulAdd(LoadPadded(d, row, j, count, T(0)), factor, shift));
    if (count - j >= N) {
      sum = hn::Add(sum, p);
      hn::StoreU(p, d, row + j);
    } else {
      sum = hn::Add(sum, hn::IfThenElseZero(hn::FirstN(d, count - j), p));
      StorePrefix(d, p, row + j, count - j);
    }
  }
  const T block_sum = hn::GetLane(hn::SumOfLanes(d, sum));
  state.nan |= block_sum != block_sum;
  *rescale_out =
      detail::AdvanceSoftmax(&state.max, &state.sum, new_max, block_sum);
  return true;
}

// row[j] ← exp(row[j] − max) for j < count (logits ≤ max, −inf for hidden
// keys); returns their sum (NaN if a logit is NaN), in RowSum's order.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T ExpRow(D d, T* HWY_RESTRICT row, size_t count, T max) {
  const size_t N = hn::Lanes(d);
  const auto shift = hn::Set(d, max);
  auto sum = hn::Zero(d);
  for (size_t j = 0; j < count; j += N) {
    const auto p = attnpool::HWY_NAMESPACE::Exp(
        d, hn::Sub(LoadPadded(d, row, j, count,
                              -std::numeric_limits<T>::infinity()),
                   shift));
    sum = hn::Add(sum, p);  // padding: exp(−inf) = 0
    if (count - j >= N) {
      hn::StoreU(p, d, row + j);
    } else {
      StorePrefix(d, p, row + j, count - j);
    }
  }
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// Turns a block's row of `count` values in their final domain (logits or
// weights; hidden keys at the hidden value) into its weights p in place,
// updates the state and returns the factor the row's accumulator must be
// scaled by first.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T BlockWeights(D d, RowMode mode, T* HWY_RESTRICT row, size_t count,
                          size_t key, RowState<T>& state) {
  const T infinity = std::numeric_limits<T>::infinity();
  if (mode == RowMode::weights) {
    state.sum += RowSum(d, row, count);
    return T(1);
  }
  bool has_nan = false;
  const T block_max = RowMax(d, row, count, &has_nan);
  state.nan |= has_nan;
  if (mode == RowMode::argmax) {
    if (block_max > state.max) {
      state.max = block_max;
      state.best = key + static_cast<size_t>(
                             std::find(row, row + count, block_max) - row);
    }
    return T(1);
  }
  // Softmax rows.
  const T old_max = state.max;
  const T new_max = std::max(old_max, block_max);
  if (new_max == -infinity) {  // nothing visible yet
    std::fill(row, row + count, T(0));
    return T(1);
  }
  if (new_max == infinity) {
    // The limit of softmax: the +inf scores share all the weight.
    for (size_t j = 0; j < count; ++j) {
      row[j] = detail::SoftmaxWeight(row[j], new_max);
    }
    return detail::AdvanceSoftmax(&state.max, &state.sum, new_max,
                                  RowSum(d, row, count));
  }
  return detail::AdvanceSoftmax(&state.max, &state.sum, new_max,
                                ExpRow(d, row, count, new_max));
}

// ProcessRow's softmax of exp(scale·s) scores with soft-capping or ALiBi
// (and no bias or visible matrix): the adjusted logits stored with their
// max on the way, then p = exp(a − m) stored and summed. A block whose max
// is not finite, or a row whose earlier max is +inf, goes on as
// BlockWeights does.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T AdjustedSoftmaxRow(D d, const detail::FusedPlan<T>& plan,
                                const ScoreAdjuster<T>& adjust,
                                T* HWY_RESTRICT row, size_t count, size_t query,
                                size_t key, RowState<T>& state) {
  const size_t N = hn::Lanes(d);
  const T infinity = std::numeric_limits<T>::infinity();
  const Mask<T>& mask = plan.normalize.mask;
  const int64_t distance =
      detail::KeyDistance(mask, query, plan.key_offset + key);
  const auto scale = hn::Set(d, plan.kernel.scale);
  auto maximum = hn::Set(d, -infinity);
  for (size_t j = 0; j < count; j += N) {
    const auto a = adjust(d, hn::Mul(LoadPadded(d, row, j, count, T(0)), scale),
                          distance + static_cast<int64_t>(j));
    if (count - j >= N) {
      maximum = hn::Max(maximum, a);
      hn::StoreU(a, d, row + j);
    } else {  // the padding lanes' logits are not the row's
      maximum = hn::Max(maximum, hn::IfThenElse(hn::FirstN(d, count - j), a,
                                                hn::Set(d, -infinity)));
      StorePrefix(d, a, row + j, count - j);
    }
  }
  // EMU128/SCALAR MaxOfLanes cannot return −inf (normalize-inl.h).
  const bool none = hn::AllTrue(d, hn::Eq(maximum, hn::Set(d, -infinity)));
  const T block_max =
      none ? -infinity : hn::GetLane(hn::MaxOfLanes(d, maximum));
  if (!(std::abs(block_max) < infinity) || state.max == infinity) {
    return BlockWeights(d, RowMode::softmax, row, count, key, state);
  }
  const T new_max = std::max(state.max, block_max);
  const T block_sum = ExpRow(d, row, count, new_max);
  state.nan |= block_sum != block_sum;  // a NaN logit
  return detail::AdvanceSoftmax(&state.max, &state.sum, new_max, block_sum);
}

// Turns a row of `count` > 0 scores (keys [key, key + count) of query
// `query`, all passing the structural masks) into the block's weights p in
// place, updates the state and returns the factor the row's accumulator
// must be scaled by first.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T ProcessRow(D d, const detail::FusedPlan<T>& plan, RowMode mode,
                        T* HWY_RESTRICT row, size_t count, size_t query,
                        size_t key, RowState<T>& state) {
  const size_t N = hn::Lanes(d);
  const T infinity = std::numeric_limits<T>::infinity();
  const Mask<T>& mask = plan.normalize.mask;
  const T hidden = mode == RowMode::weights ? T(0) : -infinity;
  // Kernel, score adjustments, bias.
  const T* bias = mask.bias.data ? mask.bias.row(query) + key : nullptr;
  const ScoreAdjuster<T> adjust(mask);
  if (mode == RowMode::softmax && plan.kernel.kernel == Kernel::exp &&
      bias == nullptr && mask.visible.data == nullptr &&
      plan.kernel.scale > T(0)) {
    if (adjust.any()) {
      return AdjustedSoftmaxRow(d, plan, adjust, row, count, query, key, state);
    }
    T rescale;
    if (ScaledSoftmaxRow(d, plan.kernel.scale, row, count, state, &rescale)) {
      return rescale;
    }
  }
  const int64_t distance =
      adjust.any() ? detail::KeyDistance(mask, query, plan.key_offset + key)
                   : 0;
  for (size_t j = 0; j < count; j += N) {
    auto v = KernelWeights(d, plan.kernel, LoadPadded(d, row, j, count, T(0)));
    if (adjust.any()) v = adjust(d, v, distance + static_cast<int64_t>(j));
    if (bias != nullptr) v = AddBias(d, v, LoadPadded(d, bias, j, count, T(0)));
    if (mode == RowMode::weights && plan.normalize.logits) {
      v = attnpool::HWY_NAMESPACE::Exp(d, v);  // exp(ℓ + bias) under none
    }
    if (count - j >= N) {
      hn::StoreU(v, d, row + j);
    } else {
      StorePrefix(d, v, row + j, count - j);
    }
  }
  if (mask.visible.data != nullptr) {
    const uint8_t* flags = mask.visible.row(query) + key;
    // After the bias: a hidden key's bias (+inf, NaN) must not reach it.
    for (size_t j = 0; j < count; ++j) {
      if (flags[j] == 0) row[j] = hidden;
    }
  }
  return BlockWeights(d, mode, row, count, key, state);
}

// Rows a decode prefetches its keys ahead: of runs shorter than this (a
// paged cache's scattered pages) each key's lines, with its value's; of
// longer runs (rows one stride apart) of narrow keys the key's lines (float
// keys: the tuning's decode_key_prefetch_rows; float values prefetched a
// run ahead in the weighted sum cost 25%; narrow values are prefetched:
// NarrowDots, NarrowWeightedSum).
constexpr size_t kPrefetchRows = 64;

// Prefetches `count` rows of a list from row j into the second-level
// cache (each cache line of each; the loop written out: through
// PrefetchLines, paged float decode lost 8%, Zen 5, W9). A paged decode's
// rows, prefetched so, are read a block of keys later (its values: 512
// keys, 128 KiB of float values on), more than the first level holds:
// prefetched into it, they were evicted before they were read (Zen 4,
// W9: paged float decode at 0.35-0.41 of the contiguous rate into L1,
// 0.62-0.71 into L2, at one thread; 0.51-0.56 against 0.75-0.85 at two).
template <typename T>
HWY_INLINE void PrefetchRows(const detail::RowList<T>& list, size_t j,
                             size_t count) {
  const size_t element =
      list.is_narrow() ? kElementTypes[int(list.element)].bytes : sizeof(T);
  const char* base = list.is_narrow()
                         ? static_cast<const char*>(list.narrow)
                         : reinterpret_cast<const char*>(list.data);
  const size_t bytes = list.cols * element;
  for (size_t end = std::min(list.rows, j + count); j < end;) {
    const size_t run = list.Run(j, end - j);
    const char* row = base + list.Offset(j) * element;
    for (size_t r = 0; r < run; ++r, row += list.stride * element) {
      // Every line the row touches, from the one it starts in.
      const size_t skew = reinterpret_cast<uintptr_t>(row) % 64;
      for (size_t byte = 0; byte < bytes + skew; byte += 64) {
        PrefetchLine(row - skew + byte, PrefetchTo::l2);
      }
    }
    j += run;
  }
}

// PrefetchRows for rows taken one at a time in increasing order (into the
// second-level cache too: paged bf16 decode at 0.31 of the contiguous rate
// into L1, 0.58 into L2, Zen 4, one thread): a row's page is found
// (RowList::Offset divides) only where a run of rows one stride apart
// ends. Paged bf16 decode 1.5x faster (Zen 5, W9n); paged float decode
// lost 15-30% so (W9), and keeps PrefetchRows.
template <typename T>
class RowPrefetcher {
 public:
  explicit RowPrefetcher(const detail::RowList<T>& list)
      : list_(list),
        element_(list.is_narrow() ? kElementTypes[int(list.element)].bytes
                                  : sizeof(T)),
        base_(list.is_narrow() ? static_cast<const char*>(list.narrow)
                               : reinterpret_cast<const char*>(list.data)) {}

  void Row(size_t j) {
    if (j != next_ || left_ == 0) {
      left_ = list_.Run(j, list_.rows - j);
      row_ = base_ + list_.Offset(j) * element_;
    }
    PrefetchLines(row_, list_.cols * element_, PrefetchTo::l2);
    row_ += list_.stride * element_;
    --left_;
    next_ = j + 1;
  }

 private:
  const detail::RowList<T>& list_;
  const size_t element_;
  const char* const base_;
  const char* row_ = nullptr;
  size_t next_ = 0, left_ = 0;
};

// scores[k] = query · keys[k·stride, +depth) for k < count: a decode's dots
// over float keys one stride apart, called per key (alone, or beside a
// weighted sum: wsum::WeightedSumRow). With `rows_ahead`, the key row that
// many rows on is prefetched beside each, below `ahead_keys` rows.
template <class D, typename T = hn::TFromD<D>>
struct StridedDots {
  D d;
  size_t load_bytes;  // the tuning's decode_load_bytes
  const T* HWY_RESTRICT query;
  const T* HWY_RESTRICT keys;
  size_t stride, depth, count, rows_ahead, ahead_keys;
  T* HWY_RESTRICT scores;

  HWY_INLINE void operator()(size_t k) const {
    if (k >= count) return;
    const T* HWY_RESTRICT key = keys + k * stride;
    if (rows_ahead != 0 && k + rows_ahead < ahead_keys) {
      // (Written out: PrefetchLines cost the float decode 5%.)
      const char* ahead =
          reinterpret_cast<const char*>(key + rows_ahead * stride);
      for (size_t byte = 0; byte < depth * sizeof(T); byte += 64) {
        hwy::Prefetch(ahead + byte);
      }
    }
    scores[k] = DirectDotLoads(d, load_bytes, query, key, depth);
  }
};

// An int8 row's scale s is applied once, to the dot of its integers with a
// query or to its weight in a weighted sum, not to each of its elements
// (element.h; int8 decode 1.12x faster, Zen 4, W5n: those multiplies took
// the FMA pipes), where nothing can overflow either way: 2^-50 ≤ |s| ≤
// 2^50 (FoldsScale); for a dot, fewer than 2^20 query elements, each 0 or
// of magnitude in [2^-50, 2^50] (FoldsQuery: its products with the
// integers normal, and the held products |q|·|s·k| ≤ 2^107, so that
// neither side's sum leaves the floats); for a weighted sum, weights in
// [0, 1] (a softmax's; a weight·s below 2^-126 loses at most 2^-150·127,
// as the held product w·(s·k) may in its rounding). Elsewhere (zero,
// extreme or non-finite scales and queries, other weights) each element is
// s·k as held, so that NaN and ±inf arise where they would on the held
// floats.
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
// kPrefetchRows ahead is prefetched beside each, below that row: bf16 and f16
// decode 1.2-1.6x faster (Zen 5, W5n). Given `values` (the `value_bytes` of key
// j's value row, rows `value_stride` bytes apart; an int8 cache's only), a
// key's value row is prefetched beside it too, for the weighted sum after the
// stretch: int8 decode 1.17x faster, and 1.08x more with its keys ahead, which
// without the values cost it a third (Zen 5, W5n; bf16 and f16 values lost
// 10-13% so).
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
    if (depth == 4 * N) {  // (the loop below written out: int8 decode 1.05x
                           // faster, Zen 4, in cache; the same sums)
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
  // loop as a helper function cost the float decode 5%), and value row i's
  // value_bytes. With kDepth (not 0), the rows' depth and value_bytes (where
  // values are given) are kDepth elements of E, so that the loops unroll
  // and no branch is left between keys: int8 decode 1.05x faster in cache
  // (Zen 4, d 64, 4096 keys a head), the same at W5n's size. Copies of what
  // NarrowKeyDots holds: read through `this`, each was loaded again for
  // every key (int8 decode 1.1x slower).
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
  // nothing written, where a scale does not fold. (Against Keys' arrays,
  // through memory: int8 decode 1.25x faster in cache, 1.12x at W5n's
  // size, Zen 4; scales gathered 8 apart, a cache kept (m, heads): 1.4x, at
  // 0.9x the rate over contiguous scales, 8 heads of 4096 keys, Zen 4. The
  // products all before the sums, not summed as they came: the keys' loads
  // issued earlier, 1.035x faster in L3, Zen 4, 8 × 2048 keys.)
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
  // vectors beside its accumulators, int8 decode ran at half the speed (12-13
  // against 6.3 ns a key in L3, Zen 4), and each loop compiled it again.
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
// body they cost float decode 5-15% (Zen 5, W5).
template <typename T>
HWY_NOINLINE void NarrowDots(const detail::RowList<T>& keys, size_t j,
                             size_t count, size_t rows,
                             const T* HWY_RESTRICT query, size_t query_stride,
                             T* HWY_RESTRICT scores, size_t score_stride,
                             size_t ahead_limit = 0,
                             const char* values = nullptr,
                             size_t value_stride = 0, size_t value_bytes = 0) {
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

// Keys whose dots a narrow weighted sum computes beside its values, one
// key a value row (int8: a group of Lanes keys every Lanes value rows;
// NarrowWeightedSum): keys [first, first + count) of `keys`, rows one
// stride apart, of the values' element type, into `scores`, prefetched
// below `ahead_limit` as NarrowKeyDots does.
template <typename T>
struct KeysBeside {
  const detail::RowList<T>* keys = nullptr;
  size_t first = 0, count = 0, ahead_limit = 0;
  const T* query = nullptr;
  T* scores = nullptr;
};

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
  // below `ahead_limit`, prefetched beside each (bf16 decode 1.06x, f16
  // 1.10x faster, Zen 5, W5n; an int8 cache's values are prefetched
  // beside their keys where a decode does not interleave).
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
  // Offset's arithmetic (int8 decode 1.04x faster in L3, Zen 4, 8 heads ×
  // 4096 keys).
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
                                    const KeysBeside<T>& beside = {}) {
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

// Whether every one of the `count` elements at `sums` (aligned, a multiple
// of the vector length) is finite.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE bool SumsFinite(D d, const T* HWY_RESTRICT sums, size_t count) {
  // x·0 is ±0 for finite x and NaN for NaN and ±inf; OR-ing the bits keeps
  // an all-ones exponent (and the chain at one cycle a step).
  const auto zero = hn::Zero(d);
  auto probe = zero;
  for (size_t k = 0; k < count; k += hn::Lanes(d)) {
    probe = hn::Or(probe, hn::Mul(hn::Load(d, sums + k), zero));
  }
  return hn::AllTrue(d, hn::Eq(hn::Mul(probe, zero), zero));
}

// Accumulates queries [row_begin, row_end) over keys [key_begin, key_end)
// and writes their partial state (arch/fused.h).
template <typename T>
void FusedAccumulate(const detail::FusedPlan<T>& plan,
                     const detail::FusedState<T>& state, size_t row_begin,
                     size_t row_end, size_t key_begin, size_t key_end) {
  switch (plan.path) {
    case detail::FusedPath::small_depth:
    case detail::FusedPath::gaussian_one_pass:
    case detail::FusedPath::sorted_window:
      switch (plan.distance) {
        case Distance::sqeuclidean:
          if (plan.kernel.kernel == Kernel::gaussian &&
              plan.kernel.write_logits) {
            return SmallDepthAccumulate<SquaredDifferenceStep, true>(
                plan, state, row_begin, row_end, key_begin, key_end);
          }
          return SmallDepthAccumulate<SquaredDifferenceStep, false>(
              plan, state, row_begin, row_end, key_begin, key_end);
        case Distance::euclidean:
          return SmallDepthAccumulate<SquaredDifferenceStep, false>(
              plan, state, row_begin, row_end, key_begin, key_end);
        case Distance::manhattan:
          return SmallDepthAccumulate<AbsoluteDifferenceStep, false>(
              plan, state, row_begin, row_end, key_begin, key_end);
        case Distance::dot:
        case Distance::cosine:
          return SmallDepthAccumulate<DotStep, false>(
              plan, state, row_begin, row_end, key_begin, key_end);
      }
      return;
    case detail::FusedPath::tile:
    case detail::FusedPath::tile_bf16:
    case detail::FusedPath::decode:
      break;
  }
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const size_t rows = row_end - row_begin;
  const size_t columns = plan.values.cols;
  const size_t width = plan.packed.panel_width;
  const RowMode mode = detail::FusedModeOf(plan.normalize);
  const Mask<T>& mask = plan.normalize.mask;
  // Keys per block: the tuning's key_block_bytes of one score row (a
  // block's scores for the query block stay in L2 between the passes over
  // them), whole panels.
  const size_t key_block =
      std::max(width, plan.tuning.key_block_bytes / sizeof(T) / width * width);
  // Keys [starts[r], limits[r]) of [key_begin, key_end) pass the structural
  // masks (core/visible_run.h). Each row takes them in blocks of key_block
  // from its first, starts[r]: a grid of its own that no other row moves,
  // so a row's blocks, and its rounding, are the same in any block of rows
  // and in any grouping of queries into calls. Step s holds block s of
  // every row that has one; its scores are computed, and its weighted sum
  // run, over the union of those blocks, each row's weights 0 outside its
  // own. The rows' starts lie within `spread` keys of each other (a window
  // moves by one key per query), so the union is at most that much wider
  // than a block.
  std::vector<size_t> starts(rows), limits(rows);
  size_t steps = 0, lowest = key_end, highest = key_begin, widest = key_begin;
  for (size_t r = 0; r < rows; ++r) {
    const auto run =
        detail::VisibleRun(mask, row_begin + r, plan.key_offset, key_end);
    limits[r] = std::max(key_begin, run.limit);
    starts[r] = std::min(std::max(key_begin, run.start), limits[r]);
    if (starts[r] == limits[r]) continue;
    steps =
        std::max(steps, (limits[r] - starts[r] + key_block - 1) / key_block);
    lowest = std::min(lowest, starts[r]);
    highest = std::max(highest, starts[r]);
    widest = std::max(widest, limits[r]);
  }
  // Row r's keys in steps [step, step + count): empty past its last block.
  const auto row_keys = [&](size_t r, size_t step, size_t count) {
    const size_t start = std::min(limits[r], starts[r] + step * key_block);
    return detail::KeyRun{start,
                          std::min(limits[r], start + count * key_block)};
  };
  const size_t spread = steps == 0 ? 0 : highest - lowest;
  // The tuning's decode_interleave: one query over keys and values one
  // stride apart computes step s + 1's scores beside step s's weighted sum,
  // a key row and a value row in each step of that loop (two streams), into
  // the other half of a double buffer of scores. The operations, and so the
  // bits, are those of the passes one after the other. Float keys and
  // values read in place (whole vectors): W5 0.86-0.89 → 0.93-0.94 of a
  // plain read of the same bytes at one thread, 0.92-0.95 → 0.94-0.97 at
  // two; keys and values both bf16 or both f16, their keys prefetched only
  // where the tuning prefetches float keys: W5n bf16 1.07-1.10x faster at
  // one thread, the same at two. Zen 4, paired runs. Both int8, a group of
  // Lanes keys beside every Lanes-th value row (NarrowWeightedSum), nothing
  // prefetched but where the tuning prefetches float keys: a single stream
  // read 16.9 GB/s and a stream beside the other's prefetches 13.8, two
  // streams 22.9 (plain loops, Zen 4, one thread); int8 W5n time ÷ float's
  // 0.35 → 0.34 at one thread, 0.34 → 0.31 at two (medians of eight runs
  // each, builds alternated, Zen 4; an earlier attempt, the group inlined
  // in the weighted sum's loop and the first block's values prefetched,
  // ran at 0.7-0.9x at one thread).
  const bool interleave =
      plan.tuning.decode_interleave != 0 &&
      plan.path == detail::FusedPath::decode && rows == 1 &&
      plan.keys.strided() && plan.values.strided() && columns > 0 &&
      mode != RowMode::argmax &&
      (plan.keys.is_narrow() ? plan.values.element == plan.keys.element
                             : !plan.values.is_narrow() && columns % N == 0);
  // Decoding strided rows, the scores of the tuning's decode_stretch blocks
  // are computed at once (one stream of keys, then one of values; longer
  // streams keep the hardware prefetchers ahead, and a narrow cache's rows
  // are short: int8 decode 2.6× → 3.0× the float rate with 4 on Zen 5,
  // W5n); each block is then normalized and summed as alone, so results do
  // not change. Not interleaving, nor where the rows' starts differ: zeroing a
  // row's weights outside its block would overwrite its next block's scores.
  // Nor over a paged cache, whose values are prefetched while its keys are
  // read: they must still be in L2 for the weighted sum.
  const size_t stretch = plan.path == detail::FusedPath::decode &&
                                 plan.keys.strided() && spread == 0 &&
                                 !interleave
                             ? plan.tuning.decode_stretch * key_block
                             : key_block;
  // A stretch's scores lie in rows of `score_stride` from column 0 at key
  // `origin` (the panel holding the stretch's first key): the union is at
  // most stretch + spread keys, and whole panels add up to one panel on
  // each side — none when all rows start at one panel's first key.
  const size_t slack =
      spread == 0 && lowest % width == 0 ? 0 : spread + 2 * width;
  const size_t score_stride = (stretch + slack + N - 1) / N * N;
  // Values are read in place when their rows are whole vectors (a paged
  // cache's a page at a time); otherwise a step's keys at a time are copied
  // into zero-padded rows, `copied`. `zeroed_values` holds a step's values
  // whose non-finite entries need the exact sum (arch/contributions.h).
  // Each holds a step's keys × dv and is allocated where first needed:
  // finite values read in place need neither, whatever dv (the per-thread
  // memory pool.h states). The weighted sum runs key by key, so where the
  // values are read from, and in how many pieces, changes no bit; nor do
  // the keys of other rows' blocks, whose 0 weights add ±0. Narrow values
  // are widened as they are copied.
  const bool copy_values = columns % N != 0 || plan.values.is_narrow();
  const size_t padded_columns = (columns + N - 1) / N * N;
  const size_t score_elements = (interleave ? 2 : 1) * rows * score_stride;
  const size_t accumulator_elements = rows * padded_columns;
  const size_t value_elements = (key_block + spread) * padded_columns;
  // (A failure is caught by src/threads.h's ForEachRowBlock and rethrown
  // after the loop. Highway allocates no 0 bytes: dv may be 0.)
  const auto allocate = [](size_t elements) {
    auto allocated = hwy::AllocateAligned<T>(std::max<size_t>(elements, 1));
    if (!allocated) throw std::bad_alloc();
    return allocated;
  };
  const auto buffer =
      allocate(score_elements + 2 * accumulator_elements + rows);
  T* HWY_RESTRICT scores = buffer.get();
  T* HWY_RESTRICT accumulator = scores + score_elements;
  T* HWY_RESTRICT block_sum = accumulator + accumulator_elements;
  T* HWY_RESTRICT rescale = block_sum + accumulator_elements;
  hwy::AlignedFreeUniquePtr<T[]> copied_buffer, zeroed_buffer;
  std::fill(accumulator, accumulator + accumulator_elements, T(0));
  std::vector<RowState<T>> states(rows);
  size_t origin = key_begin;
  // The dots of a decode's `count` float keys from `first` (one stride
  // apart) into `out`, their rows the tuning's decode_key_prefetch_rows
  // ahead prefetched if `ahead` (never past the keys a row sees).
  const auto decode_dots = [&](const T* HWY_RESTRICT query, size_t first,
                               size_t count, bool ahead, T* HWY_RESTRICT out) {
    return StridedDots<hn::ScalableTag<T>>{
        d,
        plan.tuning.decode_load_bytes,
        query,
        plan.keys.row(first),
        plan.keys.stride,
        plan.queries.cols,
        count,
        ahead ? plan.tuning.decode_key_prefetch_rows : 0,
        widest - first,
        out};
  };
  // This step's scores; interleaving, `scores_next` holds step
  // `scored_step`'s, computed beside the last weighted sum.
  T* HWY_RESTRICT scores_here = scores;
  T* HWY_RESTRICT scores_next = scores + (interleave ? score_stride : 0);
  size_t scored_step = 0;  // (none before step 1)
  for (size_t step = 0; step < steps; ++step) {
    // The step's keys [at, end): the union of its rows' blocks (every step
    // before `steps` has a row with a block).
    size_t at = key_end, end = key_begin;
    for (size_t r = 0; r < rows; ++r) {
      const auto keys = row_keys(r, step, 1);
      if (keys.start == keys.limit) continue;
      at = std::min(at, keys.start);
      end = std::max(end, keys.limit);
    }
    const size_t at_count = end - at;
    const size_t in_stretch = step % (stretch / key_block);
    if (in_stretch == 0) origin = at / width * width;
    const bool scored = interleave && step != 0 && scored_step == step;
    if (scored) std::swap(scores_here, scores_next);
    const size_t panel_begin = at / width;
    const size_t panel_end = (end + width - 1) / width;
    if (plan.path == detail::FusedPath::tile_bf16) {
      // (Panels of kBf16PanelKeys keys: the fused plan's panel width on this
      // path, whatever the target's float panels.)
      if constexpr (std::is_same<T, float>::value) {
        detail::Bf16DotScores(
            plan.bf16_instruction, plan.bf16_queries, plan.bf16_query_stride,
            plan.queries.cols, plan.bf16_panels, panel_begin, panel_end,
            row_begin, row_end, scores_here, score_stride, row_begin, origin);
      }
    } else if (plan.path == detail::FusedPath::tile) {
      const MatrixView<T> score_view(scores_here, rows, score_stride,
                                     score_stride);
      DistanceWindow(plan.distance, plan.queries, plan.keys, plan.packed,
                     ScoreWindow<T>{score_view, row_begin, row_end, panel_begin,
                                    panel_end, row_begin, origin});
    } else if (in_stretch == 0 && !scored) {
      // Decode (few queries, dot): the keys the row sees read in place, once,
      // a stretch at a time.
      RowPrefetcher<T> keys_ahead(plan.keys), values_here(plan.values);
      // Rows that see the same keys (a decode's query heads that share a
      // key head) take each key row once, all their dots in turn: the keys
      // are read from memory once, not once per row, and each dot is the
      // one a row alone would compute.
      const auto first_keys = row_keys(0, step, stretch / key_block);
      bool shared = rows > 1 && rows <= detail::kDecodeRows;
      for (size_t r = 1; shared && r < rows; ++r) {
        const auto keys = row_keys(r, step, stretch / key_block);
        shared =
            keys.start == first_keys.start && keys.limit == first_keys.limit;
      }
      for (size_t r = 0; r < (shared ? 1 : rows); ++r) {
        const T* HWY_RESTRICT query = plan.queries.row(row_begin + r);
        const auto keys = row_keys(r, step, stretch / key_block);
        if (keys.start == keys.limit) continue;  // (before `origin`)
        const size_t key = keys.start, visible = keys.limit - keys.start;
        T* HWY_RESTRICT row_scores =
            scores_here + r * score_stride + (key - origin);
        for (size_t j = 0; j < visible;) {
          // A run of rows one stride apart (a paged cache's pages that
          // abut). Short runs (scattered pages) lie beyond what hardware
          // prefetchers follow: with each key, the first row prefetches the
          // key kPrefetchRows ahead (past this block too) and this key's
          // value, which the weighted sum reads after this block's keys
          // (both into the second-level cache: PrefetchRows says why).
          // Prefetches beside each key's loads, not a page's in a burst:
          // 0.72 of the contiguous rate against 0.45 (Zen 5, bench/compare
          // W9, when it was written). A plain loop reading the same rows in a
          // block's two passes (keys, then values, as its softmax needs) is no
          // faster: this decode runs at 1.06x its rate, and at 0.88 of the same
          // loop's in one pass (keys and values together). Interleaving the
          // passes (a block's values between the next block's keys) made
          // this paged decode slower (0.65 of contiguous; strided rows
          // interleave under decode_interleave).
          const size_t run = plan.keys.Run(key + j, visible - j);
          const bool prefetch =
              r == 0 && !plan.keys.strided() && run < kPrefetchRows;
          // Long runs: each key's row kPrefetchRows ahead too (float keys:
          // the tuning's decode_key_prefetch_rows, 0 for none), never past
          // the keys a row sees.
          const bool prefetch_ahead = r == 0 && plan.keys.strided();
          if (plan.keys.is_narrow()) {
            for (size_t k = 0; prefetch && k < run; ++k) {
              const size_t ahead = key + j + k + kPrefetchRows;
              if (ahead < limits[0]) keys_ahead.Row(ahead);
              values_here.Row(key + j + k);
            }
            // (Keys and values that fold their scales, int8's; NarrowDots
            // says why.) An interleaved folding decode's first block
            // prefetches as its blocks after it do (`interleave`: no
            // values, keys where the tuning says).
            const bool folded_cache = detail::ScaleFolds(plan.keys.element) &&
                                      detail::ScaleFolds(plan.values.element);
            const bool folded_values = prefetch_ahead && !interleave &&
                                       plan.values.strided() && folded_cache;
            const bool prefetch_keys =
                prefetch_ahead && !(interleave && folded_cache &&
                                    plan.tuning.decode_key_prefetch_rows == 0);
            NarrowDots(
                plan.keys, key + j, run, shared ? rows : 1, query,
                plan.queries.stride, row_scores + j, score_stride,
                prefetch_keys ? widest : 0,
                folded_values ? static_cast<const char*>(plan.values.narrow) +
                                    plan.values.Offset(key + j)
                              : nullptr,
                plan.values.stride, folded_values ? plan.values.cols : 0);
            j += run;
            continue;
          }
          const StridedDots<hn::ScalableTag<T>> dots =
              decode_dots(query, key + j, run, prefetch_ahead, row_scores + j);
          // The other rows' dots when shared (no prefetches of their own).
          StridedDots<hn::ScalableTag<T>> others[detail::kDecodeRows - 1];
          const size_t other_rows = shared ? rows - 1 : 0;
          for (size_t o = 0; o < other_rows; ++o) {
            others[o] =
                decode_dots(plan.queries.row(row_begin + 1 + o), key + j, run,
                            false, row_scores + (1 + o) * score_stride + j);
          }
          for (size_t k = 0; k < run; ++k) {
            if (prefetch) {
              const size_t ahead = key + j + k + kPrefetchRows;
              if (ahead < limits[0]) PrefetchRows(plan.keys, ahead, 1);
              PrefetchRows(plan.values, key + j + k, 1);
            }
            dots(k);
            for (size_t o = 0; o < other_rows; ++o) others[o](k);
          }
          j += run;
        }
      }
    }
    // Each row's weights at its block's keys, 0 at the step's others.
    T* HWY_RESTRICT at_scores = scores_here + (at - origin);
    bool any_weight = false;
    for (size_t r = 0; r < rows; ++r) {
      const auto keys = row_keys(r, step, 1);
      T* HWY_RESTRICT row = at_scores + r * score_stride;
      if (keys.start == keys.limit) {
        std::fill(row, row + at_count, T(0));
        rescale[r] = T(1);
        continue;
      }
      const size_t first = keys.start - at, count = keys.limit - keys.start;
      rescale[r] = ProcessRow(d, plan, mode, row + first, count, row_begin + r,
                              keys.start, states[r]);
      std::fill(row, row + first, T(0));
      std::fill(row + first + count, row + at_count, T(0));
      // Compact kernels: a row whose weights here are all 0 adds nothing.
      any_weight |= !plan.skip_zero_blocks ||
                    WeightsAsIs(d, row + first, count) != RowResult::empty;
    }
    // An all-zero step adds nothing (zero weights contribute nothing).
    if (mode == RowMode::argmax || !any_weight) continue;
    // block_sum = p · V[at, end); acc = acc·rescale + block_sum.
    // The step's values, contiguous (copied when they were not).
    const auto copy_block = [&] {
      if (!copied_buffer) copied_buffer = allocate(value_elements);
      T* HWY_RESTRICT copied = copied_buffer.get();
      if constexpr (std::is_same<T, float>::value) {
        if (plan.values.is_narrow()) {
          WidenRows(plan.values, at, at_count, copied, padded_columns);
        }
      }
      for (size_t j = 0; j < at_count; ++j) {
        T* target = copied + j * padded_columns;
        if (!plan.values.is_narrow()) {
          std::memcpy(target, plan.values.row(at + j), columns * sizeof(T));
        }
        std::fill(target + columns, target + padded_columns, T(0));
      }
      return ConstMatrixView<T>(copied, at_count, columns, padded_columns);
    };
    const ConstMatrixView<T> weights(at_scores, rows, at_count, score_stride);
    const MatrixView<T> sums(block_sum, rows, padded_columns);
    ConstMatrixView<T> block_values;
    // Interleaving, the next step's keys, whose dots the weighted sum
    // computes beside its values.
    detail::KeyRun next{0, 0};
    T* HWY_RESTRICT next_scores = nullptr;
    if (interleave && step + 1 < steps) {
      next = row_keys(0, step + 1, 1);
      next_scores = scores_next + (next.start - next.start / width * width);
      scored_step = step + 1;
    }
    if (plan.values.is_narrow() && plan.path == detail::FusedPath::decode) {
      NarrowWeightedSum(
          weights, plan.values, at, sums, widest, mode == RowMode::softmax,
          KeysBeside<T>{next_scores != nullptr ? &plan.keys : nullptr,
                        next.start, next.limit - next.start,
                        plan.tuning.decode_key_prefetch_rows != 0 ? widest : 0,
                        plan.queries.row(row_begin), next_scores});
    } else if (copy_values) {
      block_values = copy_block();
      wsum::WeightedSumRows(
          weights,
          ConstMatrixView<T>(copied_buffer.get(), at_count, padded_columns),
          static_cast<const T*>(nullptr), sums, size_t{0}, rows, size_t{0},
          padded_columns);
    } else {
      // In place, a run of rows one stride apart at a time; a decode's one
      // query through WeightedSumRow, its loads as wide as the tuning's
      // decode_load_bytes (the bits of any width).
      const bool one_row = plan.path == detail::FusedPath::decode && rows == 1;
      for (size_t j = 0; j < at_count;) {
        const size_t run = plan.values.Run(at + j, at_count - j);
        const T* HWY_RESTRICT weight_row = at_scores + j;
        const T* HWY_RESTRICT value_rows = plan.values.row(at + j);
        if (next_scores != nullptr) {
          // (Strided values: one run.) The next step's keys beside these
          // values; any past this block's count after them.
          const StridedDots<hn::ScalableTag<T>> dots =
              decode_dots(plan.queries.row(row_begin), next.start,
                          next.limit - next.start, true, next_scores);
          if (plan.tuning.decode_load_bytes == 32) {
            wsum::WeightedSumRow(hn::CappedTag<T, 32 / sizeof(T)>(), weight_row,
                                 value_rows, plan.values.stride, run, columns,
                                 block_sum, j != 0, dots);
          } else {
            wsum::WeightedSumRow(d, weight_row, value_rows, plan.values.stride,
                                 run, columns, block_sum, j != 0, dots);
          }
          for (size_t k = run; k < dots.count; ++k) dots(k);
        } else if (one_row && plan.tuning.decode_load_bytes == 32) {
          wsum::WeightedSumRow(hn::CappedTag<T, 32 / sizeof(T)>(), weight_row,
                               value_rows, plan.values.stride, run, columns,
                               block_sum, j != 0);
        } else if (one_row) {
          wsum::WeightedSumRow(d, weight_row, value_rows, plan.values.stride,
                               run, columns, block_sum, j != 0);
        } else {
          wsum::WeightedSumRows(
              ConstMatrixView<T>(weight_row, rows, run, score_stride),
              plan.values.Matrix(at + j, run), static_cast<const T*>(nullptr),
              sums, size_t{0}, rows, size_t{0}, padded_columns, j != 0);
        }
        j += run;
      }
      block_values = plan.values.strided() ? plan.values.Matrix(at, at_count)
                                           : ConstMatrixView<T>();
    }
    // A value that is not finite made sums NaN or ±inf: sum again without
    // the terms of keys that contribute nothing (arch/contributions.h).
    if (!SumsFinite(d, block_sum, rows * padded_columns)) {
      if (block_values.data == nullptr) block_values = copy_block();
      if (!zeroed_buffer) zeroed_buffer = allocate(value_elements);
      const MatrixView<T> zeroed(zeroed_buffer.get(), at_count, padded_columns);
      if (detail::CopyZeroingNonFinite(block_values, zeroed)) {
        wsum::WeightedSumRows(weights, ConstMatrixView<T>(zeroed),
                              static_cast<const T*>(nullptr), sums, size_t{0},
                              rows, size_t{0}, padded_columns);
        std::vector<detail::KeyRun> runs(rows);
        for (size_t r = 0; r < rows; ++r) {
          const auto keys = row_keys(r, step, 1);
          runs[r] = keys.start == keys.limit
                        ? detail::KeyRun{0, 0}
                        : detail::KeyRun{keys.start - at, keys.limit - at};
        }
        detail::AddNonFiniteTerms(plan.normalize, weights, block_values, sums,
                                  row_begin, at, plan.key_offset,
                                  detail::EmptyRowTerms::add, runs.data());
      }
    }
    for (size_t r = 0; r < rows; ++r) {
      const auto factor = hn::Set(d, rescale[r]);
      T* HWY_RESTRICT acc = accumulator + r * padded_columns;
      const T* HWY_RESTRICT add = block_sum + r * padded_columns;
      for (size_t c = 0; c < padded_columns; c += N) {
        hn::Store(
            hn::MulAdd(hn::Load(d, acc + c), factor, hn::Load(d, add + c)), d,
            acc + c);
      }
    }
  }

  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (size_t r = 0; r < rows; ++r) {
    const size_t row = row_begin + r;
    const RowState<T>& s = states[r];
    T* HWY_RESTRICT target = state.accumulator.row(row);
    state.max[row] = s.nan ? nan : s.max;
    state.sum[row] = s.nan ? nan : s.sum;
    state.best[row] = plan.key_offset + s.best;
    // A row whose weights here are all 0 (a weights row's Σ 0, a softmax
    // row's scores all −inf) keeps its Σ 0·v over the keys that contribute
    // (0, or NaN from a non-finite value where a zero weight contributes:
    // arch/contributions.h): a sink or a later shard makes it non-empty,
    // and 0·NaN must reach it there (ZeroWeightSums in the small-depth
    // paths). A row empty in the end is finished as such, whatever it holds.
    const bool empty =
        mode == RowMode::argmax && s.max == -std::numeric_limits<T>::infinity();
    if (empty || s.nan) {
      std::fill(target, target + columns, T(0));  // finished as empty or NaN
    } else if (mode == RowMode::argmax) {
      const T* row = RowOf(plan.values, s.best, target);
      if (row != target) std::copy_n(row, columns, target);
    } else {  // (copy_n: without columns `target` may be null)
      std::copy_n(accumulator + r * padded_columns, columns, target);
    }
  }
}

}  // namespace fused
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_FUSED_INL_H_
