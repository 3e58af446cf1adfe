// pairwise_distances: argument checks, key packing and the OpenMP driver.
#include <attnpool/distance.h>
#include <attnpool/error.h>

#include <algorithm>
#include <new>
#include <string>
#include <type_traits>

#include "arch/distance.h"
#include "src/aligned_buffer.h"
#include "src/dispatch.h"
#include "src/enum_names.h"
#include "src/packed_keys.h"
#include "src/threads.h"
#include "src/kept_outputs.h"
#include "core/validate.h"

namespace attnpool {
namespace {

// Queries per dispatched call: a multiple of every target's tile height
// (6 and 8), large enough to amortize streaming the packed keys through L2.
constexpr size_t kQueryBlock = 96;
// Key panels packed per dispatched call.
constexpr size_t kPackBlock = 16;

template <typename T, typename Keys>
void PairwiseDistances(Distance distance, ConstMatrixView<T> queries,
                       const Keys& keys, MatrixView<T> out,
                       const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::CheckEnum("distance", static_cast<int>(distance), kDistanceCount);
  detail::CheckExecution(execution);
  if constexpr (std::is_same<Keys, ConstMatrixView<T>>::value) {
    detail::CheckBinaryRowOp("queries", queries, "keys", keys, "out", out,
                             detail::Pairing::rows);
  } else {
    const auto query_bytes = detail::CheckView("queries", queries);
    detail::ByteRange scale_bytes;
    const auto key_bytes = detail::CheckView("keys", keys, &scale_bytes);
    const auto out_bytes = detail::CheckView("out", out);
    detail::CheckSize("keys.cols", keys.cols, queries.cols, "queries.cols");
    detail::CheckSize("out.rows", out.rows, queries.rows, "queries.rows");
    detail::CheckSize("out.cols", out.cols, keys.rows, "keys.rows");
    detail::CheckNoOverlap("out", out_bytes, "queries", query_bytes);
    detail::CheckNoOverlap("out", out_bytes, "keys", key_bytes);
    detail::CheckNoOverlap("out", out_bytes, "keys.scales", scale_bytes);
  }

  const size_t rows = queries.rows, key_count = keys.rows;
  detail::RecordRunTarget(0);
  if (rows == 0 || key_count == 0) return;

  detail::KeptOutputs kept(execution);
  kept.Keep(out);
  const detail::Workers threads = detail::WorkersOf(execution);
  // (Narrow keys, T = float, are widened as they are packed.)
  const detail::RowList<T> key_rows(keys);
  const auto packed = detail::PackKeys(distance, key_rows, threads);
  detail::ForEachRowBlock(
      rows, kQueryBlock, threads, [&](size_t begin, size_t end) {
        return detail::DistanceRows(distance, queries, key_rows, packed.view,
                                    out, begin, end);
      });
}

}  // namespace

namespace detail {

template <typename T>
OwnedPackedKeys<T> PackKeys(Distance distance, const RowList<T>& keys,
                            const Workers& threads) {
  OwnedPackedKeys<T> owned;
  PackedKeys<T>& packed = owned.view;
  packed.count = keys.rows;
  packed.depth = keys.cols;
  packed.panel_width = DistancePanelWidth(T());
  const size_t panel_count = BlockCount(keys.rows, packed.panel_width);
  size_t padded_count;  // (rows of no column may be near SIZE_MAX)
  if (__builtin_mul_overflow(panel_count, packed.panel_width, &padded_count)) {
    throw std::bad_alloc();
  }
  owned.panels = AllocateBuffer<T>(padded_count * keys.cols);
  owned.key_factor = AllocateBuffer<T>(padded_count);
  packed.panels = owned.panels.get();
  packed.key_factor = owned.key_factor.get();
  T* panels = owned.panels.get();
  T* key_factor = owned.key_factor.get();
  ForEachRowBlock(
      panel_count, kPackBlock, threads, [&](size_t begin, size_t end) {
        return PackDistanceKeys(distance, keys, begin, end, panels, key_factor);
      });
  return owned;
}

template OwnedPackedKeys<float> PackKeys(Distance, const RowList<float>&,
                                         const Workers&);
template OwnedPackedKeys<double> PackKeys(Distance, const RowList<double>&,
                                          const Workers&);

}  // namespace detail

ATTNPOOL_DEFINE_ENUM_NAMES(Distance, distance, kDistances)

void pairwise_distances(Distance distance, ConstMatrixView<float> queries,
                        ConstMatrixView<float> keys, MatrixView<float> out,
                        const Execution& execution) {
  PairwiseDistances(distance, queries, keys, out, execution);
}

void pairwise_distances(Distance distance, ConstMatrixView<double> queries,
                        ConstMatrixView<double> keys, MatrixView<double> out,
                        const Execution& execution) {
  PairwiseDistances(distance, queries, keys, out, execution);
}

void pairwise_distances(Distance distance, ConstMatrixView<float> queries,
                        const ElementRows& keys, MatrixView<float> out,
                        const Execution& execution) {
  PairwiseDistances<float, ElementRows>(distance, queries, keys, out,
                                        execution);
}

}  // namespace attnpool
