// Attention pooling by similarity: all four stages in one call.
#pragma once

#include <attnpool/distance.h>
#include <attnpool/element.h>
#include <attnpool/execution.h>
#include <attnpool/kernel.h>
#include <attnpool/matrix.h>
#include <attnpool/normalize.h>

#include <string>

namespace attnpool {

// The whole mechanism: out(i, :) = Σⱼ wᵢⱼ · values(j, :) with
// wᵢⱼ = normalization over j of kernel(distance(queries(i), keys(j))).
//
// With an exponential kernel (gaussian, exp) the weights are exp of a logit
// ℓ (gaussian: −r²/(2h²); exp: scale·s). Then `sum` and `softmax` are both
// the max-subtracted softmax of ℓ (+ the mask's bias): a query far from every
// key gets the average of its nearest keys' values, never 0/0, as long as
// its largest logit is a finite number of T (gaussian: r/h < 1.8e19 for the
// nearest key in float, 1.3e154 in double; a row whose every logit
// overflows to −inf is taken as empty: docs/design.md §9); `argmax` takes
// the largest ℓ, `none` gives exp(ℓ). With the other kernels the
// stages apply as written (`softmax` then treats the weights as scores).
// Scaled dot-product attention is {dot, {exp}, sum}; Nadaraya–Watson is
// {sqeuclidean, {gaussian, h}, sum}.
struct PoolSpec {
  Distance distance = Distance::sqeuclidean;
  KernelSpec kernel;
  Normalization normalization = Normalization::sum;
  EmptyRows empty_rows = EmptyRows::nan;
};

// The fused kernel: the same result as attention_pool_staged (within the
// stages' stated tolerances) in one streaming pass over blocks of keys with a
// running max, sum and accumulator per query (FlashAttention-2 style). It
// never forms the n×m weights: extra memory is a packed copy of the keys
// (m×d) plus, per thread, a block of scores and two accumulators of its
// block of queries (the tuning's query_rows, 96 by default, × dv) and,
// where the values are copied (narrow, or dv not a multiple of the vector
// width), a block of keys' values (key_block_bytes / sizeof(T) keys, 512
// float keys by default, × dv): a few hundred KiB for the dv of attention
// heads. Keys before the first or after the last key that any query sees
// through the valid lengths, the causal mask and the window are never read
// (not even packed; a key between two that queries see is, even where every
// query is denied it), and key blocks outside the keys a whole block of
// queries sees are not visited.
// Results are bitwise identical for every thread count. Hidden keys and
// non-finite data as attention_pool_staged says: non-finite exactly where
// it is, NaN where it has NaN — but an infinite value whose weight
// underflows to 0 here and not there (or there and not here) gives NaN
// (0·inf) on that side and ±inf on the other. Values are summed with
// weights of at most 1 before the division by their sum: where Σ w·|v|
// passes T's largest number (values near it over the number of keys that
// weigh, e.g. a thousand equal weights on float values of 1e36) the result
// is ±inf, where the staged pipeline's normalized weights stay finite
// (docs/design.md §9). queries n×d, keys m×d, values
// m×dv, out n×dv. Throws attnpool::Error naming the argument on invalid
// input, before writing anything.
void attention_pool(const PoolSpec& spec, ConstMatrixView<float> queries,
                    ConstMatrixView<float> keys, ConstMatrixView<float> values,
                    MatrixView<float> out, const Mask<float>& mask = {},
                    const Execution& execution = {});
void attention_pool(const PoolSpec& spec, ConstMatrixView<double> queries,
                    ConstMatrixView<double> keys,
                    ConstMatrixView<double> values, MatrixView<double> out,
                    const Mask<double>& mask = {},
                    const Execution& execution = {});

// attention_pool over keys and values stored in any element type
// (element.h: bfloat16, binary16, int8 with row scales; each may differ):
// computed in float as on the float values they hold, within the same
// bounds against the reference on those values (int8 rows in a decode:
// element.h's two roundings more a dot). Keys are widened once as
// they are packed (a float copy, as for float keys) or, decoding, in
// registers; values a key block at a time. Extra memory stays the packed
// keys plus O(threads × block).
void attention_pool(const PoolSpec& spec, ConstMatrixView<float> queries,
                    const ElementRows& keys, const ElementRows& values,
                    MatrixView<float> out, const Mask<float>& mask = {},
                    const Execution& execution = {});

// The same with queries stored in any element type too: widened once (n × d
// floats). Dot products of bfloat16 queries and bfloat16 keys take the
// "tile_bf16" path where the CPU has a bf16 dot-product instruction that
// beats the float tile there (x86 AMX-BF16 or AVX512_BF16 beside the AVX3
// target; ARMv8.6 BF16 beside NEON or SVE; targets.h's
// bf16_dot_instruction() names it): the scores on it, products of the bf16
// values exact and summed in float, in another order than the float tile
// (within the same bound; bf16 subnormals count as 0 there, and ARM's BFDOT
// rounds its sums to odd); the rest as the float path.
void attention_pool(const PoolSpec& spec, const ElementRows& queries,
                    const ElementRows& keys, const ElementRows& values,
                    MatrixView<float> out, const Mask<float>& mask = {},
                    const Execution& execution = {});

// The path the calling thread's last fused call took (attention_pool, its
// shards, and the attention layers over it: their last head's), as
// last_run_target() reports the target: "tile" (keys packed, tiles of
// distances: any shape), "decode" (a few dot-product queries, keys read in
// place once), "small_depth" (d ≤ 8, dv ≤ 4, no bias or visible matrix, not
// argmax), "gaussian_one_pass" (small_depth for the Gaussian of sqeuclidean
// under a softmax of its logits; a query whose logits all lie far below 0
// takes two passes), "sorted_window" (small_depth for a compact kernel of
// 1-D ascending keys under none or sum) or "tile_bf16" (tile on the bf16
// dot-product instruction, above); "" where no key was visited (no query, no
// key, every key hidden) and before any call.
std::string last_fused_path();

// attention_pool that also writes each query's normalizer to
// normalizer[0, n): for exponential kernels under sum or softmax, and for
// softmax, the log-sum-exp log Σⱼ exp(aᵢⱼ) of its visible logits or scores
// (mask bias included; exp(sink) joins the sum where the mask has a sink;
// −inf for an empty row without one), as attention backward passes
// and shard merges use; for none and for sum of other kernels (and none of
// exponential ones) Σⱼ wᵢⱼ; for argmax the best score. NaN where the row
// met a visible NaN. normalizer may not overlap the other arguments.
void attention_pool_with_normalizer(const PoolSpec& spec,
                                    ConstMatrixView<float> queries,
                                    ConstMatrixView<float> keys,
                                    ConstMatrixView<float> values,
                                    MatrixView<float> out, float* normalizer,
                                    const Mask<float>& mask = {},
                                    const Execution& execution = {});
void attention_pool_with_normalizer(const PoolSpec& spec,
                                    ConstMatrixView<double> queries,
                                    ConstMatrixView<double> keys,
                                    ConstMatrixView<double> values,
                                    MatrixView<double> out, double* normalizer,
                                    const Mask<double>& mask = {},
                                    const Execution& execution = {});

// Sharding the keys: attention pooling of n queries over a shard of the
// keys, as a state that merges with the states of other shards (in key
// order) and finishes into the same result as attention_pool over all keys
// (within rounding). For callers that split long contexts across processes.
// Per query (all arrays have n entries; accumulator is n×dv):
//   exponential kernels under sum/softmax, and softmax: max = the largest
//     score seen (−inf: none), sum = Σ exp(a − max), accumulator =
//     Σ exp(a − max)·v;
//   none and sum of other kernels (and none of exponential ones):
//     sum = Σ w, accumulator = Σ w·v over the keys that contribute (also
//     where every w is 0: an exponential weight that underflowed still
//     carries 0·NaN to the merged row);
//   argmax: max = the best score, best = its key's index in the whole
//     sequence, accumulator = its value row.
// A query that met a visible NaN has max = sum = NaN. Every array is
// required whatever the spec (one layout for all, as the C API's): max,
// sum and best may not be null where n > 0, and none may overlap another.
template <typename T>
struct PoolPartial {
  MatrixView<T> accumulator;
  T* max = nullptr;
  T* sum = nullptr;
  size_t* best = nullptr;
};

// The state of keys [key_offset, key_offset + m) of the whole sequence.
// `keys`, `values` and the mask's bias and visible matrices hold just this
// shard (n×m); valid lengths and the causal mask count keys from the start of
// the whole sequence (valid lengths may exceed m).
void attention_pool_partial(const PoolSpec& spec,
                            ConstMatrixView<float> queries,
                            ConstMatrixView<float> keys,
                            ConstMatrixView<float> values, size_t key_offset,
                            const PoolPartial<float>& partial,
                            const Mask<float>& mask = {},
                            const Execution& execution = {});
void attention_pool_partial(const PoolSpec& spec,
                            ConstMatrixView<double> queries,
                            ConstMatrixView<double> keys,
                            ConstMatrixView<double> values, size_t key_offset,
                            const PoolPartial<double>& partial,
                            const Mask<double>& mask = {},
                            const Execution& execution = {});

// A shard of keys and values in any element type (as attention_pool's).
void attention_pool_partial(const PoolSpec& spec,
                            ConstMatrixView<float> queries,
                            const ElementRows& keys, const ElementRows& values,
                            size_t key_offset,
                            const PoolPartial<float>& partial,
                            const Mask<float>& mask = {},
                            const Execution& execution = {});

// into ← into merged with `later`, whose keys all come after into's.
void attention_pool_merge(const PoolSpec& spec, const PoolPartial<float>& into,
                          const PoolPartial<float>& later);
void attention_pool_merge(const PoolSpec& spec, const PoolPartial<double>& into,
                          const PoolPartial<double>& later);

// out ← the pooled result of a (merged) state; out may be its accumulator.
void attention_pool_finish(const PoolSpec& spec,
                           const PoolPartial<float>& partial,
                           MatrixView<float> out);
void attention_pool_finish(const PoolSpec& spec,
                           const PoolPartial<double>& partial,
                           MatrixView<double> out);

// The staged pipeline: distance → kernel → normalization → weighted sum, each
// a full pass, writing the n×m normalized weights to `weights` (for heatmaps
// and inspection; it is also the only workspace). queries n×d, keys m×d,
// values m×dv, out n×dv. Throws attnpool::Error naming the argument on
// invalid input, before writing anything.
// A key contributes nothing to a query — whatever its key and value rows
// hold, NaN and ±inf included — when a mask hides it (past the valid
// length, after the causal limit, `visible` 0, bias −inf), or when its
// weight is exactly 0 under none or sum of a non-exponential kernel
// (outside a compact kernel's support): out(i, :) = Σ wᵢⱼ·vⱼ over the other
// keys, in IEEE arithmetic on those terms, and a row without any follows
// `empty_rows`. So a NaN in query i makes row i NaN, a NaN in key j the rows
// of the queries that see key j (not under `constant`, which ignores
// distances), a NaN in values(j, c) column c of the rows of the queries key
// j contributes to — even where its weight is 0 there, an exponential
// weight that underflowed (0·NaN) — except under argmax, whose rows are the
// winner's value row, copied (README "Non-finite data").
void attention_pool_staged(const PoolSpec& spec, ConstMatrixView<float> queries,
                           ConstMatrixView<float> keys,
                           ConstMatrixView<float> values, MatrixView<float> out,
                           MatrixView<float> weights,
                           const Mask<float>& mask = {},
                           const Execution& execution = {});
void attention_pool_staged(const PoolSpec& spec,
                           ConstMatrixView<double> queries,
                           ConstMatrixView<double> keys,
                           ConstMatrixView<double> values,
                           MatrixView<double> out, MatrixView<double> weights,
                           const Mask<double>& mask = {},
                           const Execution& execution = {});

// The same without the weights: allocates one n×m workspace.
void attention_pool_staged(const PoolSpec& spec, ConstMatrixView<float> queries,
                           ConstMatrixView<float> keys,
                           ConstMatrixView<float> values, MatrixView<float> out,
                           const Mask<float>& mask = {},
                           const Execution& execution = {});
void attention_pool_staged(const PoolSpec& spec,
                           ConstMatrixView<double> queries,
                           ConstMatrixView<double> keys,
                           ConstMatrixView<double> values,
                           MatrixView<double> out,
                           const Mask<double>& mask = {},
                           const Execution& execution = {});

}  // namespace attnpool
