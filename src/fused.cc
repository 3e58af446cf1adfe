// attention_pool: checks, key packing, the split of keys into chunks, and the
// OpenMP driver of the fused kernel (arch/fused-inl.h); merging and finishing
// the per-query partial states.
#include <attnpool/error.h>
#include <attnpool/pool.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "arch/bf16_dot.h"
#include "arch/convert.h"
#include "arch/fused.h"
#include "arch/target_probe.h"
#include "core/visible_run.h"
#include "src/aligned_buffer.h"
#include "src/dispatch.h"
#include "src/fused_batch.h"
#include "src/packed_keys.h"
#include "src/pool_plan.h"
#include "src/threads.h"
#include "core/tuning.h"
#include "src/enum_names.h"
#include "src/kept_outputs.h"
#include "core/validate.h"

namespace attnpool {
namespace {

// Score tiles of queries per dispatched call under a sliding window: the
// keys a block visits are its rows' windows' union, one window plus the
// block's height, in whole key panels: two tiles, fewer keys outside the
// rows' windows than taller blocks visit (docs/benchmarks.md, "Design
// evidence": kWindowTiles).
constexpr size_t kWindowTiles = 2;
// With fewer query blocks than this, the keys are split into chunks so that
// all cores take part (decoding: a handful of queries over a long context).
// The split depends only on the shape, never on the thread count, so results
// do not either.
constexpr size_t kSplitBelowRowCalls = 4;
constexpr size_t kMinChunkKeys = 4096;
constexpr size_t kMaxChunks = 16;

// Merges state `part` (keys after those of `into`) into `into`, row by row:
// the log-sum-exp rule for softmax rows, sums for weight rows, the first
// strictly better score for argmax rows; NaN rows stay NaN.
template <typename T>
void MergeState(detail::FusedRowMode mode, const detail::FusedState<T>& into,
                const detail::FusedState<T>& part, size_t rows,
                size_t columns) {
  const T infinity = std::numeric_limits<T>::infinity();
  for (size_t i = 0; i < rows; ++i) {
    T* acc = into.accumulator.row(i);
    const T* add = part.accumulator.row(i);
    if (std::isnan(into.sum[i]) || std::isnan(part.sum[i])) {
      into.max[i] = into.sum[i] = std::numeric_limits<T>::quiet_NaN();
      continue;
    }
    if (mode == detail::FusedRowMode::weights) {
      into.sum[i] += part.sum[i];
      for (size_t c = 0; c < columns; ++c) acc[c] += add[c];
    } else if (mode == detail::FusedRowMode::argmax) {
      if (part.max[i] > into.max[i]) {
        into.max[i] = part.max[i];
        into.best[i] = part.best[i];
        std::copy_n(add, columns, acc);  // (no columns: acc may be null)
      }
    } else {
      const T old_max = into.max[i], other = part.max[i];
      const T new_max = std::max(old_max, other);
      if (new_max == -infinity) {  // both empty so far: Σ 0·v (0 or NaN)
        for (size_t c = 0; c < columns; ++c) acc[c] += add[c];
        continue;
      }
      // Each part's weight relative to the new max (arch/fused.h).
      const T keep = detail::SoftmaxWeight(old_max, new_max);
      const T take = detail::SoftmaxWeight(other, new_max);
      into.max[i] = new_max;
      into.sum[i] = into.sum[i] * keep + part.sum[i] * take;
      for (size_t c = 0; c < columns; ++c)
        acc[c] = acc[c] * keep + add[c] * take;
    }
  }
}

// Merges a sink's logit (normalize.h: a key of weight exp(sink − max) and
// no value) into every softmax row of `state`, as MergeState would a part
// holding it alone.
template <typename T>
void MergeSink(const detail::FusedState<T>& state, size_t rows, T sink) {
  for (size_t i = 0; i < rows; ++i) {
    if (std::isnan(state.sum[i])) continue;
    const T new_max = std::max(state.max[i], sink);
    const T keep = detail::SoftmaxWeight(state.max[i], new_max);
    state.max[i] = new_max;
    state.sum[i] = state.sum[i] * keep + detail::SoftmaxWeight(sink, new_max);
    T* acc = state.accumulator.row(i);
    for (size_t c = 0; c < state.accumulator.cols; ++c) acc[c] *= keep;
  }
}

// out ← the finished state (state.accumulator may be out itself).
template <typename T>
void FinishState(detail::FusedRowMode mode, Normalization normalization,
                 EmptyRows empty_rows, const detail::FusedState<T>& state,
                 MatrixView<T> out) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T empty = empty_rows == EmptyRows::zero ? T(0) : nan;
  for (size_t i = 0; i < out.rows; ++i) {
    const T* acc = state.accumulator.row(i);
    T* target = out.row(i);
    const bool is_empty =
        mode == detail::FusedRowMode::weights
            ? state.sum[i] == T(0)
            : state.max[i] == -std::numeric_limits<T>::infinity();
    T scale = T(1);
    if (std::isnan(state.sum[i])) {
      std::fill(target, target + out.cols, nan);
      continue;
    }
    if (is_empty) {  // whatever the values of its keys
      std::fill(target, target + out.cols, empty);
      continue;
    }
    if (mode == detail::FusedRowMode::softmax ||
        (mode == detail::FusedRowMode::weights &&
         normalization == Normalization::sum)) {
      scale = T(1) / state.sum[i];
    }
    for (size_t c = 0; c < out.cols; ++c) target[c] = acc[c] * scale;
  }
}

// Per-row arrays and (for chunks after the first) an accumulator.
template <typename T>
struct StateStorage {
  std::vector<T> max, sum;
  std::vector<size_t> best;
  hwy::AlignedFreeUniquePtr<T[]> accumulator;
  detail::FusedState<T> view;

  StateStorage(size_t rows, MatrixView<T> out)
      : max(rows), sum(rows), best(rows) {
    view = {max.data(), sum.data(), best.data(), out};
  }
  StateStorage(size_t rows, size_t columns)
      : StateStorage(rows, MatrixView<T>()) {
    accumulator = detail::AllocateBuffer<T>(rows * columns);
    view.accumulator = MatrixView<T>(accumulator.get(), rows, columns);
  }
};

detail::FusedRowMode ModeOf(const PoolSpec& spec) {
  detail::NormalizePlan<float> plan;
  plan.normalization = spec.normalization;
  plan.logits = is_exponential(spec.kernel.kernel);
  return detail::FusedModeOf(plan);
}

// The state of a query that saw no key (pool.h): max −inf, sum 0,
// accumulator 0.
template <typename T>
void SetEmpty(const detail::FusedState<T>& state, size_t rows) {
  for (size_t i = 0; i < rows; ++i) {
    state.max[i] = -std::numeric_limits<T>::infinity();
    state.sum[i] = 0;
    state.best[i] = 0;
    std::fill(state.accumulator.row(i),
              state.accumulator.row(i) + state.accumulator.cols, T(0));
  }
}

constexpr const char* kFusedPathNames[] = {"tile",          "decode",
                                           "small_depth",   "gaussian_one_pass",
                                           "sorted_window", "tile_bf16"};
static_assert(std::size(kFusedPathNames) == detail::kFusedPathCount,
              "a name for every FusedPath");
// The path of the calling thread's last fused call (last_fused_path).
thread_local int last_path = -1;

// Whether the keys' single column ascends (no NaN).
template <typename T>
bool KeysSorted(const detail::RowList<T>& keys) {
  for (size_t j = 0; j < keys.rows; ++j) {
    if (!(keys(j, 0) == keys(j, 0)) || (j > 0 && keys(j - 1, 0) > keys(j, 0))) {
      return false;
    }
  }
  return true;
}

// counts[j] = the number of keys before key j with a coordinate that is not
// finite (keys.rows + 1 entries).
template <typename T>
std::vector<size_t> NonFiniteKeyCounts(const detail::RowList<T>& keys) {
  std::vector<size_t> counts(keys.rows + 1, 0);
  for (size_t j = 0; j < keys.rows; ++j) {
    bool finite = true;
    for (size_t c = 0; c < keys.cols; ++c) {
      finite = finite && std::isfinite(keys(j, c));
    }
    counts[j + 1] = counts[j] + (finite ? 0 : 1);
  }
  return counts;
}

// The path of one fused call (arch/fused.h): chosen here and nowhere else,
// from the shape, the spec and (sorted_window) whether 1-D keys ascend.
template <typename T>
detail::FusedPath ChooseFusedPath(const PoolSpec& spec,
                                  const detail::PoolPlans<T>& plans,
                                  detail::FusedRowMode mode,
                                  ConstMatrixView<T> queries,
                                  const detail::RowList<T>& keys,
                                  const detail::RowList<T>& values) {
  const auto& mask = plans.normalize.mask;
  const bool small_depth =
      queries.cols <= detail::kFusedSmallDepth &&
      values.cols <= detail::kFusedSmallColumns && values.cols != 0 &&
      mode != detail::FusedRowMode::argmax && mask.bias.data == nullptr &&
      mask.visible.data == nullptr && !detail::HasVisibleStart(mask) &&
      !detail::AdjustsScores(mask);
  if (!small_depth) {
    return queries.rows <= detail::kDecodeRows && spec.distance == Distance::dot
               ? detail::FusedPath::decode
               : detail::FusedPath::tile;
  }
  if (spec.distance == Distance::sqeuclidean &&
      spec.kernel.kernel == Kernel::gaussian &&
      mode == detail::FusedRowMode::softmax) {
    return detail::FusedPath::gaussian_one_pass;
  }
  if (is_compact(spec.kernel.kernel) && mode == detail::FusedRowMode::weights &&
      keys.cols == 1 && !is_similarity(spec.distance) && KeysSorted(keys)) {
    return detail::FusedPath::sorted_window;
  }
  return detail::FusedPath::small_depth;
}

// One fused pooling of all queries over all `keys` (a sequence, or a shard
// starting at key_offset) into `state`, prepared to run: keys packed (or
// not: decode), the plan, and the keys split into chunks when there are few
// query blocks. Its work items (query block × key chunk) run in any order on
// any thread; Merge then combines the chunks in key order. The split depends
// only on the shape, so the result does not depend on the thread count.
template <typename T>
class FusedJob {
 public:
  FusedJob(const PoolSpec& spec, const detail::PoolPlans<T>& plans,
           ConstMatrixView<T> queries, detail::RowList<T> keys,
           detail::RowList<T> values, size_t key_offset,
           const detail::FusedState<T>& state, const detail::Workers& threads,
           const detail::Bf16Queries& bf16_queries = {})
      : state_(state) {
    const size_t rows = queries.rows;
    const auto& mask = plans.normalize.mask;
    mode_ = detail::FusedModeOf(plans.normalize);
    // The shard holding the sequence's first key holds the sink.
    if (key_offset == 0 && detail::HasSink(mask)) sink_ = mask.sink;
    // Keys outside every query's run of structurally visible keys (before
    // its start, from its limit) are never read, not even to pack them:
    // padding there may hold anything. The keys before the first are cut
    // off like a shard's predecessors: key_offset, the views and the mask's
    // matrices move to the first key.
    size_t key_first = keys.rows, key_count = 0;
    for (size_t i = 0; i < rows; ++i) {
      const auto run = detail::VisibleRun(mask, i, key_offset, keys.rows);
      if (run.start >= run.limit) continue;
      key_first = std::min(key_first, run.start);
      key_count = std::max(key_count, run.limit);
    }
    if (key_first >= key_count) key_first = key_count = 0;
    plan_.normalize = plans.normalize;
    if (key_first != 0) {
      keys = keys.Slice(key_first, key_count);
      values = values.Slice(key_first, key_count);
      plan_.normalize.mask =
          detail::MaskColumnsFrom(plan_.normalize.mask, key_first);
      key_offset += key_first;
      key_count -= key_first;
    }
    keys.rows = values.rows = key_count;
    plan_.queries = queries;
    plan_.tuning = detail::ActiveTuning();
    plan_.path = ChooseFusedPath(spec, plans, mode_, queries, keys, values);
    // Dot products of bf16 queries and keys: the score tile on the bf16
    // dot-product instruction, where the CPU has one beside the dispatched
    // target (and it pays there, arch/bf16_dot.h; asked only here: the
    // first answer may request AMX's tile state from Linux).
    if (plan_.path == detail::FusedPath::tile &&
        spec.distance == Distance::dot && bf16_queries.data != nullptr &&
        keys.is_narrow() && keys.strided() &&
        keys.element == ElementType::bfloat16) {
      plan_.bf16_instruction = detail::ActiveBf16DotInstruction();
      if (plan_.bf16_instruction != detail::Bf16DotInstruction::none) {
        plan_.path = detail::FusedPath::tile_bf16;
      }
    }
    if (key_count == 0) return;  // no items; Merge writes empty states
    if (plan_.path == detail::FusedPath::decode) {
      packed_.view = {nullptr, nullptr, key_count, keys.cols,
                      detail::DistancePanelWidth(T())};
    } else if (plan_.path == detail::FusedPath::tile_bf16) {
      PackBf16(keys, threads);
      plan_.bf16_queries = bf16_queries.data;
      plan_.bf16_query_stride = bf16_queries.stride;
    } else {
      packed_ = detail::PackKeys(spec.distance, keys, threads);
    }
    plan_.distance = spec.distance;
    plan_.kernel = plans.kernel;
    plan_.keys = keys;
    plan_.values = values;
    plan_.packed = packed_.view;
    plan_.key_offset = key_offset;
    if (detail::PacksValues(plan_.path)) {
      packed_values_ = detail::PackKeys(Distance::dot, values, threads);
      plan_.packed_values = packed_values_.view;
    }
    if (plan_.path == detail::FusedPath::gaussian_one_pass) {
      nonfinite_keys_ = NonFiniteKeyCounts(keys);
      plan_.nonfinite_keys = nonfinite_keys_.data();
    }
    // Compact kernels under none or sum: all-zero key blocks are skipped
    // (arch/fused.h).
    plan_.skip_zero_blocks = is_compact(spec.kernel.kernel) &&
                             mode_ == detail::FusedRowMode::weights;
    // Key chunks: one, or for few query blocks up to kMaxChunks of at least
    // kMinChunkKeys keys, each a multiple of the panel width.
    // A block of rows sees the union of their windows, `rows` keys wider
    // than one window: with a window's left side, smaller blocks. Narrow
    // values are widened into a copy once per block of rows and key block:
    // larger blocks halve that (docs/benchmarks.md, "Design evidence":
    // narrow value blocks).
    block_rows_ =
        detail::HasVisibleStart(plan_.normalize.mask)
            ? kWindowTiles * detail::DistanceTileRows(T())
        : values.is_narrow() && (plan_.path == detail::FusedPath::tile ||
                                 plan_.path == detail::FusedPath::tile_bf16)
            ? 2 * plan_.tuning.query_rows
            : plan_.tuning.query_rows;
    // (Counts rounded up without overflow: the keys may be rows of no
    // column, near SIZE_MAX.)
    row_calls_ = detail::BlockCount(rows, block_rows_);
    const size_t width = packed_.view.panel_width;
    chunk_keys_ = key_count;
    if (row_calls_ < kSplitBelowRowCalls && key_count >= 2 * kMinChunkKeys) {
      chunk_keys_ =
          std::max(kMinChunkKeys, detail::BlockCount(key_count, kMaxChunks));
      chunk_keys_ = (chunk_keys_ + width - 1) / width * width;
    }
    chunks_ = detail::BlockCount(key_count, chunk_keys_);
    // Chunk 0 accumulates in `state`; the others in their own storage.
    storage_.reserve(chunks_);
    for (size_t c = 1; c < chunks_; ++c) {
      storage_.emplace_back(rows, values.cols);
    }
  }

  size_t items() const { return row_calls_ * chunks_; }
  detail::FusedPath path() const { return plan_.path; }

  // Work item `item`; returns the target bit it ran on.
  int64_t Run(size_t item) const {
    const size_t chunk = item % chunks_;
    const size_t row_begin = item / chunks_ * block_rows_;
    const size_t key_begin = chunk * chunk_keys_;
    return detail::FusedAccumulate(
        plan_, chunk == 0 ? state_ : storage_[chunk - 1].view, row_begin,
        std::min(plan_.queries.rows, row_begin + block_rows_), key_begin,
        std::min(plan_.keys.rows, key_begin + chunk_keys_));
  }

  // After every item: the chunks merged into `state` in key order, then the
  // sink.
  void Merge() {
    if (chunks_ == 0) SetEmpty(state_, plan_.queries.rows);
    for (const StateStorage<T>& chunk : storage_) {
      MergeState(mode_, state_, chunk.view, plan_.queries.rows,
                 plan_.values.cols);
    }
    if (sink_) MergeSink(state_, plan_.queries.rows, *sink_);
  }

  // Bytes of the packed copies this job holds.
  size_t packed_bytes() const {
    const auto bytes = [](const detail::PackedKeys<T>& p) {
      return p.panels == nullptr ? size_t{0} : p.count * p.depth * sizeof(T);
    };
    return bytes(packed_.view) + bytes(packed_values_.view) +
           bf16_panel_count_ *
               detail::Bf16PanelElements(plan_.keys.cols,
                                         plan_.bf16_instruction) *
               sizeof(uint32_t);
  }

 private:
  // The bf16 keys packed in pairs for the bf16 tile (arch/bf16_dot.h); the
  // float panels' view keeps their count and width for the key chunks.
  void PackBf16(const detail::RowList<T>& keys,
                const detail::Workers& threads) {
    const size_t width = detail::kBf16PanelKeys;
    bf16_panel_count_ = detail::BlockCount(keys.rows, width);
    bf16_panels_ = detail::AllocateBuffer<uint32_t>(
        bf16_panel_count_ *
        detail::Bf16PanelElements(keys.cols, plan_.bf16_instruction));
    const uint16_t* rows = keys.template narrow_row<uint16_t>(0);
    uint32_t* panels = bf16_panels_.get();
    detail::ForEachRowBlock(
        bf16_panel_count_, 16, threads, [&](size_t begin, size_t end) {
          detail::PackBf16Panels(plan_.bf16_instruction, rows, keys.stride,
                                 keys.rows, keys.cols, begin, end, panels);
          return detail::DispatchedTarget();
        });
    packed_.view = {nullptr, nullptr, keys.rows, keys.cols, width};
    plan_.bf16_panels = panels;
  }

  hwy::AlignedFreeUniquePtr<uint32_t[]> bf16_panels_;
  size_t bf16_panel_count_ = 0;
  std::vector<size_t> nonfinite_keys_;  // gaussian_one_pass (arch/fused.h)
  detail::FusedState<T> state_;
  detail::FusedRowMode mode_;
  std::optional<T> sink_;
  detail::OwnedPackedKeys<T> packed_, packed_values_;
  detail::FusedPlan<T> plan_;
  size_t block_rows_ = 0, row_calls_ = 0, chunk_keys_ = 0, chunks_ = 0;
  std::vector<StateStorage<T>> storage_;
};

// Accumulates all queries over all keys into `state` (FusedJob).
template <typename T>
void AccumulateAll(const PoolSpec& spec, const detail::PoolPlans<T>& plans,
                   ConstMatrixView<T> queries, const detail::RowList<T>& keys,
                   const detail::RowList<T>& values, size_t key_offset,
                   const detail::FusedState<T>& state,
                   const detail::Workers& threads,
                   const detail::Bf16Queries& bf16_queries = {}) {
  FusedJob<T> job(spec, plans, queries, keys, values, key_offset, state,
                  threads, bf16_queries);
  detail::ForEachRowBlock(job.items(), 1, threads,
                          [&](size_t item, size_t) { return job.Run(item); });
  // Every key hidden: no item ran, the result is the target's all the same.
  if (job.items() == 0) detail::RecordRunTarget(detail::DispatchedTarget());
  // (No item: every key hidden, nothing ran.)
  if (job.items() != 0) last_path = static_cast<int>(job.path());
  job.Merge();
}

// normalizer[i] from a finished accumulation (pool.h).
template <typename T>
void WriteNormalizer(detail::FusedRowMode mode,
                     const detail::FusedState<T>& state, size_t rows,
                     T* normalizer) {
  for (size_t i = 0; i < rows; ++i) {
    const T max = state.max[i], sum = state.sum[i];
    switch (mode) {
      case detail::FusedRowMode::softmax:  // −inf for an empty row
        normalizer[i] = std::isnan(sum) || max == -HUGE_VAL
                            ? max + sum
                            : max + std::log(sum);
        break;
      case detail::FusedRowMode::weights:
        normalizer[i] = sum;
        break;
      case detail::FusedRowMode::argmax:
        normalizer[i] = std::isnan(sum) ? sum : max;
        break;
    }
  }
}

// An output array `name` (bytes `range`) beside a pooling call's other
// arguments: apart from each of them (int8 scales included).
template <typename T, typename Rows>
void CheckApartFromCall(const std::string& name, detail::ByteRange range,
                        ConstMatrixView<T> queries, const Rows& keys,
                        const Rows& values,
                        const detail::MaskArrays& mask_arrays,
                        MatrixView<T> out) {
  detail::CheckApartFromMask(name, range, mask_arrays);
  detail::CheckNoOverlap(name, range, "out", detail::CheckView("out", out));
  detail::CheckNoOverlap(name, range, "queries",
                         detail::CheckView("queries", queries));
  const std::pair<const char*, const Rows*> inputs[] = {{"keys", &keys},
                                                        {"values", &values}};
  for (const auto& [input, rows] : inputs) {
    detail::ByteRange scales;
    if constexpr (std::is_same<Rows, ElementRows>::value) {
      detail::CheckNoOverlap(name, range, input,
                             detail::CheckView(input, *rows, &scales));
    } else {
      detail::CheckNoOverlap(name, range, input,
                             detail::CheckView(input, *rows));
    }
    detail::CheckNoOverlap(name, range, std::string(input) + ".scales", scales);
  }
}

// attention_pool, and with `with_normalizer` attention_pool_with_normalizer;
// Rows: ConstMatrixView<T>, or ElementRows for T = float.
template <typename T, typename Rows>
void AttentionPool(const PoolSpec& spec, ConstMatrixView<T> queries,
                   const Rows& keys, const Rows& values, MatrixView<T> out,
                   bool with_normalizer, T* normalizer, const Mask<T>& mask,
                   const Execution& execution,
                   const detail::Bf16Queries& bf16_queries = {}) {
  detail::EnsureDispatchReady();
  const auto plans = detail::CheckPool<T>(spec, queries, keys, values, out,
                                          nullptr, mask, execution);
  const size_t rows = queries.rows;
  if (normalizer == nullptr && with_normalizer && rows != 0) {
    throw Error("normalizer",
                "is null but there are " + std::to_string(rows) + " queries");
  }
  if (normalizer != nullptr) {
    CheckApartFromCall(
        "normalizer",
        detail::CheckViewBytes("normalizer", normalizer, rows, 1, 1, sizeof(T)),
        queries, keys, values, plans.mask_arrays, out);
  }
  detail::RecordRunTarget(0);
  last_path = -1;
  // Nothing to write (rows of no column may be astronomically many).
  if (rows == 0 || (out.cols == 0 && normalizer == nullptr)) return;
  const auto mode = ModeOf(spec);
  if (keys.rows == 0) {  // the log-sum-exp of the sink alone, if any
    if (normalizer != nullptr) {
      std::fill(normalizer, normalizer + rows,
                mode == detail::FusedRowMode::weights
                    ? T(0)
                    : mask.sink.value_or(-std::numeric_limits<T>::infinity()));
    }
    return detail::FillEmptyRows(spec.empty_rows, detail::HasSink(mask), out);
  }
  detail::KeptOutputs kept(execution);
  kept.Keep(out);
  kept.Keep(normalizer, rows);
  // The state accumulates in `out`, then finishes in place.
  StateStorage<T> state(rows, out);
  AccumulateAll<T>(spec, plans, queries, detail::RowList<T>(keys),
                   detail::RowList<T>(values), 0, state.view,
                   detail::WorkersOf(execution), bf16_queries);
  if (normalizer != nullptr)
    WriteNormalizer(mode, state.view, rows, normalizer);
  FinishState(mode, spec.normalization, spec.empty_rows, state.view, out);
}

// Packed bytes a batch group may hold beyond its first call.
constexpr size_t kBatchPackedBytes = size_t{64} << 20;

template <typename T>
void RunPoolBatch(const PoolSpec& spec,
                  const std::vector<detail::PoolCall<T>>& calls,
                  const Execution& execution) {
  detail::EnsureDispatchReady();
  std::vector<detail::PoolPlans<T>> plans;
  plans.reserve(calls.size());
  // Paged and narrow rows are checked by the caller; here their shape (a
  // paged one's as no rows: the caller checked the mask against its
  // lengths).
  const auto shape = [](const std::string& name,
                        const detail::RowList<T>& rows) {
    if (!rows.strided()) return detail::RowsShape{0, rows.cols, {}, {}};
    if (rows.is_narrow())
      return detail::RowsShape{rows.rows, rows.cols, {}, {}};
    return detail::ShapeOf(name, rows.Matrix(0, rows.rows));
  };
  for (const auto& call : calls) {
    detail::CheckView("queries", call.queries);
    const auto key_shape = shape("keys", call.keys);
    plans.push_back(detail::CheckPoolShapes<T>(
        spec, call.queries, key_shape, shape("values", call.values), call.out,
        nullptr, call.mask, execution, false, "out"));
  }
  detail::RecordRunTarget(0);
  last_path = -1;
  detail::KeptOutputs kept(execution);
  for (const auto& call : calls) kept.Keep(call.out);
  const detail::Workers threads = detail::WorkersOf(execution);
  const auto mode = ModeOf(spec);
  for (size_t first = 0; first < calls.size();) {
    // A group: calls [first, end) with their states and jobs.
    std::vector<std::unique_ptr<StateStorage<T>>> states;
    std::vector<std::unique_ptr<FusedJob<T>>> jobs;
    std::vector<size_t> owner, offsets = {0};  // job → call; items before it
    size_t end = first, packed = 0;
    for (; end < calls.size() && (end == first || packed <= kBatchPackedBytes);
         ++end) {
      const auto& call = calls[end];
      // (Rows of no column, however many: nothing to write.)
      if (call.queries.rows == 0 || call.out.cols == 0) continue;
      if (call.keys.rows == 0) {
        detail::FillEmptyRows(spec.empty_rows, detail::HasSink(call.mask),
                              call.out);
        continue;
      }
      states.push_back(
          std::make_unique<StateStorage<T>>(call.queries.rows, call.out));
      jobs.push_back(std::make_unique<FusedJob<T>>(
          spec, plans[end], call.queries, call.keys, call.values, 0,
          states.back()->view, threads, call.bf16_queries));
      owner.push_back(end);
      offsets.push_back(offsets.back() + jobs.back()->items());
      packed += jobs.back()->packed_bytes();
    }
    detail::ForEachRowBlock(
        offsets.back(), 1, threads, [&](size_t item, size_t) {
          const size_t job =
              std::upper_bound(offsets.begin(), offsets.end(), item) -
              offsets.begin() - 1;
          return jobs[job]->Run(item - offsets[job]);
        });
    if (offsets.back() == 0) {  // every key hidden (or none)
      detail::RecordRunTarget(detail::DispatchedTarget());
    }
    for (const auto& job : jobs) {  // the last call's that ran
      if (job->items() != 0) last_path = static_cast<int>(job->path());
    }
    for (size_t j = 0; j < jobs.size(); ++j) {
      jobs[j]->Merge();
      FinishState(mode, spec.normalization, spec.empty_rows, states[j]->view,
                  calls[owner[j]].out);
    }
    first = end;
  }
}

// A state's arrays (pool.h), each well-formed and apart from the others:
// the accumulator, max, sum and best, by name.
struct NamedRange {
  std::string name;
  detail::ByteRange bytes;
};
template <typename T>
std::array<NamedRange, 4> CheckPartialArrays(const std::string& name,
                                             const PoolPartial<T>& partial,
                                             size_t rows, size_t columns) {
  std::array<NamedRange, 4> arrays{
      {{name + ".accumulator",
        detail::CheckView(name + ".accumulator", partial.accumulator)},
       {name + ".max", {}},
       {name + ".sum", {}},
       {name + ".best", {}}}};
  detail::CheckSize(name + ".accumulator.rows", partial.accumulator.rows, rows,
                    "the number of queries");
  detail::CheckSize(name + ".accumulator.cols", partial.accumulator.cols,
                    columns, "values.cols");
  if (rows == 0) return arrays;
  const void* const vectors[3] = {partial.max, partial.sum, partial.best};
  const size_t bytes[3] = {sizeof(T), sizeof(T), sizeof(size_t)};
  for (size_t k = 1; k < 4; ++k) {
    if (vectors[k - 1] == nullptr) throw Error(arrays[k].name, "is null");
    arrays[k].bytes = detail::CheckViewBytes(arrays[k].name, vectors[k - 1],
                                             rows, 1, 1, bytes[k - 1]);
    for (size_t before = 0; before < k; ++before) {
      detail::CheckNoOverlap(arrays[k].name, arrays[k].bytes,
                             arrays[before].name, arrays[before].bytes);
    }
  }
  return arrays;
}

template <typename T>
detail::FusedState<T> StateOf(const PoolPartial<T>& partial) {
  return {partial.max, partial.sum, partial.best, partial.accumulator};
}

template <typename T, typename Rows>
void AttentionPoolPartial(const PoolSpec& spec, ConstMatrixView<T> queries,
                          const Rows& keys, const Rows& values,
                          size_t key_offset, const PoolPartial<T>& partial,
                          const Mask<T>& mask, const Execution& execution) {
  detail::EnsureDispatchReady();
  const auto plans = detail::CheckPool<T>(
      spec, queries, keys, values, partial.accumulator, nullptr, mask,
      execution, /*shard=*/true, "partial.accumulator");
  const auto arrays =
      CheckPartialArrays("partial", partial, queries.rows, values.cols);
  // (The accumulator is CheckPool's `out`.)
  for (size_t k = 1; k < arrays.size(); ++k) {
    CheckApartFromCall(arrays[k].name, arrays[k].bytes, queries, keys, values,
                       plans.mask_arrays, partial.accumulator);
  }
  if (key_offset > std::numeric_limits<size_t>::max() - keys.rows) {
    throw Error("key_offset", "is " + std::to_string(key_offset) + ": with " +
                                  std::to_string(keys.rows) +
                                  " keys, positions past the size_t range");
  }
  const auto state = StateOf(partial);
  detail::RecordRunTarget(0);
  last_path = -1;
  if (queries.rows == 0) return;
  detail::KeptOutputs kept(execution);
  kept.Keep(partial.accumulator);
  kept.Keep(partial.max, queries.rows);
  kept.Keep(partial.sum, queries.rows);
  kept.Keep(partial.best, queries.rows);
  AccumulateAll<T>(spec, plans, queries, detail::RowList<T>(keys),
                   detail::RowList<T>(values), key_offset, state,
                   detail::WorkersOf(execution));
}

template <typename T>
void AttentionPoolMerge(const PoolSpec& spec, const PoolPartial<T>& into,
                        const PoolPartial<T>& later) {
  detail::EnsureDispatchReady();
  detail::CheckEnum("spec.normalization", static_cast<int>(spec.normalization),
                    kNormalizationCount);
  const size_t rows = into.accumulator.rows, columns = into.accumulator.cols;
  const auto written = CheckPartialArrays("into", into, rows, columns);
  const auto read = CheckPartialArrays("later", later, rows, columns);
  for (const NamedRange& target : written) {
    for (const NamedRange& source : read) {
      detail::CheckNoOverlap(target.name, target.bytes, source.name,
                             source.bytes);
    }
  }
  MergeState(ModeOf(spec), StateOf(into), StateOf(later), rows, columns);
}

template <typename T>
void AttentionPoolFinish(const PoolSpec& spec, const PoolPartial<T>& partial,
                         MatrixView<T> out) {
  detail::EnsureDispatchReady();
  detail::CheckEnum("spec.normalization", static_cast<int>(spec.normalization),
                    kNormalizationCount);
  detail::CheckEnum("spec.empty_rows", static_cast<int>(spec.empty_rows), 2);
  const auto arrays =
      CheckPartialArrays("partial", partial, out.rows, out.cols);
  const auto out_bytes = detail::CheckView("out", out);
  // out may be the accumulator itself, or lie apart from every array.
  const bool in_place =
      out.data == partial.accumulator.data &&
      (out.stride == partial.accumulator.stride || out.rows <= 1);
  for (size_t k = in_place ? 1 : 0; k < arrays.size(); ++k) {
    detail::CheckNoOverlap("out", out_bytes, arrays[k].name, arrays[k].bytes);
  }
  FinishState(ModeOf(spec), spec.normalization, spec.empty_rows,
              StateOf(partial), out);
}

}  // namespace

#define ATTNPOOL_DEFINE(T)                                                    \
  void attention_pool_partial(                                                \
      const PoolSpec& spec, ConstMatrixView<T> queries,                       \
      ConstMatrixView<T> keys, ConstMatrixView<T> values, size_t key_offset,  \
      const PoolPartial<T>& partial, const Mask<T>& mask,                     \
      const Execution& execution) {                                           \
    AttentionPoolPartial<T>(spec, queries, keys, values, key_offset, partial, \
                            mask, execution);                                 \
  }                                                                           \
  void attention_pool_merge(const PoolSpec& spec, const PoolPartial<T>& into, \
                            const PoolPartial<T>& later) {                    \
    AttentionPoolMerge(spec, into, later);                                    \
  }                                                                           \
  void attention_pool_finish(const PoolSpec& spec,                            \
                             const PoolPartial<T>& partial,                   \
                             MatrixView<T> out) {                             \
    AttentionPoolFinish(spec, partial, out);                                  \
  }
ATTNPOOL_DEFINE(float)
ATTNPOOL_DEFINE(double)
#undef ATTNPOOL_DEFINE

namespace detail {
template <typename T>
void AttentionPoolBatch(const PoolSpec& spec,
                        const std::vector<PoolCall<T>>& calls,
                        const Execution& execution) {
  RunPoolBatch<T>(spec, calls, execution);
}
template void AttentionPoolBatch(const PoolSpec&,
                                 const std::vector<PoolCall<float>>&,
                                 const Execution&);
template void AttentionPoolBatch(const PoolSpec&,
                                 const std::vector<PoolCall<double>>&,
                                 const Execution&);
}  // namespace detail

#define ATTNPOOL_FUSED_OVERLOADS(T)                                            \
  void attention_pool(const PoolSpec& spec, ConstMatrixView<T> queries,        \
                      ConstMatrixView<T> keys, ConstMatrixView<T> values,      \
                      MatrixView<T> out, const Mask<T>& mask,                  \
                      const Execution& execution) {                            \
    AttentionPool<T>(spec, queries, keys, values, out, false, nullptr, mask,   \
                     execution);                                               \
  }                                                                            \
  void attention_pool_with_normalizer(                                         \
      const PoolSpec& spec, ConstMatrixView<T> queries,                        \
      ConstMatrixView<T> keys, ConstMatrixView<T> values, MatrixView<T> out,   \
      T* normalizer, const Mask<T>& mask, const Execution& execution) {        \
    AttentionPool<T>(spec, queries, keys, values, out, true, normalizer, mask, \
                     execution);                                               \
  }
ATTNPOOL_FUSED_OVERLOADS(float)
ATTNPOOL_FUSED_OVERLOADS(double)
#undef ATTNPOOL_FUSED_OVERLOADS

void attention_pool(const PoolSpec& spec, ConstMatrixView<float> queries,
                    const ElementRows& keys, const ElementRows& values,
                    MatrixView<float> out, const Mask<float>& mask,
                    const Execution& execution) {
  AttentionPool<float>(spec, queries, keys, values, out, false, nullptr, mask,
                       execution);
}

void attention_pool(const PoolSpec& spec, const ElementRows& queries,
                    const ElementRows& keys, const ElementRows& values,
                    MatrixView<float> out, const Mask<float>& mask,
                    const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::ByteRange query_scales;
  const auto query_bytes = detail::CheckView("queries", queries, &query_scales);
  const auto out_bytes = detail::CheckView("out", out);
  detail::CheckNoOverlap("out", out_bytes, "queries", query_bytes);
  detail::CheckNoOverlap("out", out_bytes, "queries.scales", query_scales);
  if (queries.type == ElementType::float32) {
    return attention_pool(
        spec,
        ConstMatrixView<float>(static_cast<const float*>(queries.data),
                               queries.rows, queries.cols, queries.stride),
        keys, values, out, mask, execution);
  }
  // The queries widened once (n × d floats, the size of an output).
  const size_t rows = queries.rows, cols = queries.cols;
  auto widened =
      detail::AllocateBuffer<float>(std::max<size_t>(1, rows * cols));
  const MatrixView<float> wide(widened.get(), rows, cols);
  detail::WidenRows(queries, wide);
  detail::Bf16Queries bf16;
  if (queries.type == ElementType::bfloat16) {
    bf16 = {static_cast<const uint16_t*>(queries.data), queries.stride};
  }
  AttentionPool<float>(spec, ConstMatrixView<float>(wide), keys, values, out,
                       false, nullptr, mask, execution, bf16);
}

void attention_pool_partial(const PoolSpec& spec,
                            ConstMatrixView<float> queries,
                            const ElementRows& keys, const ElementRows& values,
                            size_t key_offset,
                            const PoolPartial<float>& partial,
                            const Mask<float>& mask,
                            const Execution& execution) {
  AttentionPoolPartial<float>(spec, queries, keys, values, key_offset, partial,
                              mask, execution);
}

std::string last_fused_path() {
  return last_path < 0 ? std::string() : kFusedPathNames[last_path];
}

}  // namespace attnpool
