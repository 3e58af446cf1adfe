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
#include "arch/fused/parts-inl.h"
#include "arch/fused/row_policy-inl.h"
#include "arch/fused/row_prefetch-inl.h"
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
      // (Written out: through PrefetchLines the float decode was slower;
      // docs/benchmarks.md, "Design evidence": StridedDots.)
      const char* ahead =
          reinterpret_cast<const char*>(key + rows_ahead * stride);
      for (size_t byte = 0; byte < depth * sizeof(T); byte += 64) {
        hwy::Prefetch(ahead + byte);
      }
    }
    scores[k] = DirectDotLoads(d, load_bytes, query, key, depth);
  }
};

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
  if (detail::PacksValues(plan.path)) {
    return SmallDepthAccumulate(plan, state, row_begin, row_end, key_begin,
                                key_end);
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
  // values read in place (whole vectors); keys and values both bf16 or both
  // f16, their keys prefetched only where the tuning prefetches float keys;
  // both int8, a group of Lanes keys beside every Lanes-th value row
  // (NarrowWeightedSum, the group not inlined there: GroupApart), nothing
  // prefetched but where the tuning prefetches float keys. Two streams read
  // faster than one, and each of these beat the passes one after the other
  // where the tuning interleaves (docs/benchmarks.md, "Design evidence":
  // decode_interleave).
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
  // are short: docs/benchmarks.md, "Design evidence": decode_stretch);
  // each block is then normalized and summed as alone, so results do
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
          // faster. A plain loop reading the same rows in a block's two
          // passes (keys, then values, as its softmax needs) is no faster
          // than this decode. Interleaving the passes (a block's values
          // between the next block's keys) made this paged decode slower
          // (strided rows interleave under decode_interleave). Figures:
          // docs/benchmarks.md, "Design evidence": paged decode.
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
