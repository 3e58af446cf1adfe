// The fused attention-pooling kernel's interface between src/ and arch/.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <attnpool/distance.h>
#include <attnpool/matrix.h>

#include "arch/bf16_dot.h"
#include "arch/distance.h"
#include "arch/stages.h"
#include "core/tuning.h"

namespace attnpool {
namespace detail {

// How a query's weights are accumulated (see FusedState).
enum class FusedRowMode { softmax, weights, argmax };

template <typename T>
FusedRowMode FusedModeOf(const NormalizePlan<T>& plan) {
  if (plan.normalization == Normalization::argmax) return FusedRowMode::argmax;
  if (plan.normalization == Normalization::softmax ||
      (plan.logits && plan.normalization == Normalization::sum)) {
    return FusedRowMode::softmax;
  }
  return FusedRowMode::weights;
}

// The online softmax's one rule (a running max m and sum l of exp(a − m),
// FlashAttention style), shared by every fused path's updates and by the
// merges of partial states (attention_pool_merge): the weight exp(a − m)
// of a score, or an earlier max, `a` relative to a max m ≥ a. A −inf score
// (masked, or nothing seen yet) weighs 0; under m = +inf, the limit of
// softmax, the +inf scores share all the weight: 1 each, every other 0.
template <typename T>
T SoftmaxWeight(T a, T m) {
  const T infinity = std::numeric_limits<T>::infinity();
  if (m == infinity) return a == infinity ? T(1) : T(0);
  return a == -infinity ? T(0) : std::exp(a - m);
}

// Moves a running (max, sum) to new_max ≥ max and adds a block's sum of
// weights relative to new_max; returns the factor by which what was
// accumulated relative to the old max is rescaled.
template <typename T>
T AdvanceSoftmax(T* max, T* sum, T new_max, T block_sum) {
  const T rescale = SoftmaxWeight(*max, new_max);
  *max = new_max;
  *sum = *sum * rescale + block_sum;
  return rescale;
}

// Queries up to which dot-product attention takes the decode path
// (src/fused.cc); scaled_dot_product_attention gives a decode's query heads
// that share a key head to one call, this many at a time (src/attention.cc).
constexpr size_t kDecodeRows = 4;

// The fused kernel's paths. src/fused.cc chooses one per call
// (ChooseFusedPath, the only place) and reports it (last_fused_path(),
// pool.h); FusedAccumulate runs it.
enum class FusedPath : int {
  // Keys packed in panels, a tile of distances per key block, then the
  // kernel, the online normalization and the weighted sum per row: any shape.
  tile,
  // A few queries of dot products: the keys read in place, once (packing
  // would double their traffic).
  decode,
  // d ≤ kFusedSmallDepth, dv ≤ kFusedSmallColumns (kernel regression), no
  // bias or visible matrix, not argmax: distances, weights and sums in
  // registers, the values packed like keys.
  small_depth,
  // small_depth for the Gaussian of squared distances under a softmax of
  // its logits: one pass, no max first (arch/fused/small_depth-inl.h).
  gaussian_one_pass,
  // small_depth for a compact kernel under none or sum with d = 1, sorted
  // keys and r a function of |q − k|: each query visits only the panels
  // within the kernel's support (SortedKeyWindow).
  sorted_window,
  // tile for dot products of bfloat16 queries and keys where the CPU has a
  // bf16 dot-product instruction (arch/bf16_dot.h): the score tile on it,
  // the keys packed as bf16 pairs; the rest as tile.
  tile_bf16,
};
constexpr int kFusedPathCount = 6;

// Whether the path packs the values like keys (the small-depth kernels).
constexpr bool PacksValues(FusedPath path) {
  return path == FusedPath::small_depth ||
         path == FusedPath::gaussian_one_pass ||
         path == FusedPath::sorted_window;
}

// Everything a block of queries needs, validated by src/. Keys are packed
// once for the whole call (PackDistanceKeys); everything else is read in
// place.
template <typename T>
struct FusedPlan {
  Distance distance = Distance::dot;
  KernelPlan<T> kernel;        // write_logits set for exponential kernels
  NormalizePlan<T> normalize;  // logits set likewise; the mask
  ConstMatrixView<T> queries;
  // Strided, or a paged cache's rows (arch/row_list.h).
  RowList<T> keys, values;
  PackedKeys<T> packed;
  // Index of keys' first row in the whole sequence (a shard's offset): the
  // valid-length and causal masks and argmax indices count from there.
  size_t key_offset = 0;
  FusedPath path = FusedPath::tile;
  // The values packed like keys (PackDistanceKeys with dot) where the path
  // PacksValues; otherwise panels is null.
  PackedKeys<T> packed_values;
  // tile_bf16: the queries as bf16 (row i at bf16_queries +
  // i·bf16_query_stride) and the keys packed in bf16 pairs.
  const uint16_t* bf16_queries = nullptr;
  size_t bf16_query_stride = 0;
  const uint32_t* bf16_panels = nullptr;
  // The instruction that packed them and computes the scores (chosen once
  // per call: arch/bf16_dot.h).
  Bf16DotInstruction bf16_instruction = Bf16DotInstruction::none;
  // The tuning profile's block sizes and decode prefetch (core/tuning.h),
  // taken once per call.
  Tuning tuning = {};
  // Compact kernels (kernel.h: weight 0 at r ≥ support·h) under none or
  // sum: key blocks where every weight is 0 skip the weighted sum (zero
  // weights contribute nothing, arch/contributions.h).
  bool skip_zero_blocks = false;
  // gaussian_one_pass: nonfinite_keys[j] counts the keys before key j with
  // a coordinate that is not finite (keys.rows + 1 entries). A row whose
  // visible keys have none takes the one-pass loop, which tracks no NaN
  // (arch/fused/small_depth-inl.h): the choice depends on no key the row
  // cannot see.
  const size_t* nonfinite_keys = nullptr;
};

constexpr size_t kFusedSmallDepth = 8;
constexpr size_t kFusedSmallColumns = 4;

// Where the queries' partial states go; arrays are indexed by query row.
// Per row, by the row's mode (arch/fused-inl.h):
//   softmax rows: max = the running max m of the scores seen (−inf: none),
//     sum = Σ exp(a − m), accumulator = Σ exp(a − m)·v;
//   weight rows: sum = Σ w, accumulator = Σ w·v (max unused);
//   argmax rows: max = the best score (−inf: none), best = its key index,
//     accumulator = that key's value row.
// A row that saw a visible NaN has max = sum = NaN.
template <typename T>
struct FusedState {
  T* max = nullptr;
  T* sum = nullptr;
  size_t* best = nullptr;
  MatrixView<T> accumulator;  // n×dv
};

// Accumulates queries [row_begin, row_end) over keys [key_begin, key_end)
// (key_begin a multiple of the distance panel width) into `state`.
int64_t FusedAccumulate(const FusedPlan<float>& plan,
                        const FusedState<float>& state, size_t row_begin,
                        size_t row_end, size_t key_begin, size_t key_end);
int64_t FusedAccumulate(const FusedPlan<double>& plan,
                        const FusedState<double>& state, size_t row_begin,
                        size_t row_end, size_t key_begin, size_t key_end);

}  // namespace detail
}  // namespace attnpool
