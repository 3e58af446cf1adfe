// pairwise_distances: argument checks, key packing and the OpenMP driver.
#include <attnpool/distance.h>
#include <attnpool/error.h>

#include <algorithm>
#include <string>

#include "arch/distance.h"
#include "hwy/aligned_allocator.h"
#include "src/dispatch.h"
#include "src/enum_names.h"
#include "src/threads.h"
#include "src/validate.h"

namespace attnpool {
namespace {

constexpr const char* kDistanceNames[kDistanceCount] = {
    "sqeuclidean", "euclidean", "manhattan", "dot", "cosine"};

// Queries per dispatched call: a multiple of every target's tile height
// (6 and 8), large enough to amortize streaming the packed keys through L2.
constexpr size_t kQueryBlock = 96;
// Key panels packed per dispatched call.
constexpr size_t kPackBlock = 16;

template <typename T>
void PairwiseDistances(Distance distance, ConstMatrixView<T> queries,
                       ConstMatrixView<T> keys, MatrixView<T> out,
                       const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::CheckEnum("distance", static_cast<int>(distance), kDistanceCount);
  detail::CheckExecution(execution);
  const auto query_bytes = detail::CheckView("queries", queries);
  const auto key_bytes = detail::CheckView("keys", keys);
  const auto out_bytes = detail::CheckView("out", out);
  detail::CheckSize("keys.cols", keys.cols, queries.cols, "queries.cols");
  detail::CheckSize("out.rows", out.rows, queries.rows, "queries.rows");
  detail::CheckSize("out.cols", out.cols, keys.rows, "keys.rows");
  detail::CheckNoOverlap("out", out_bytes, "queries", query_bytes);
  detail::CheckNoOverlap("out", out_bytes, "keys", key_bytes);

  const size_t rows = queries.rows, key_count = keys.rows, depth = queries.cols;
  detail::RecordRunTarget(0);
  if (rows == 0 || key_count == 0) return;

  detail::PackedKeys<T> packed;
  packed.count = key_count;
  packed.depth = depth;
  packed.panel_width = detail::DistancePanelWidth(T());
  const size_t panel_count =
      (key_count + packed.panel_width - 1) / packed.panel_width;
  const size_t padded_count = panel_count * packed.panel_width;
  // Allocation failure throws std::bad_alloc here, before any output write.
  auto panels =
      hwy::AllocateAligned<T>(std::max<size_t>(1, padded_count * depth));
  auto key_factor = hwy::AllocateAligned<T>(padded_count);
  if (!panels || !key_factor) throw std::bad_alloc();
  packed.panels = panels.get();
  packed.key_factor = key_factor.get();

  const int threads = detail::ThreadCount(execution);
  detail::ForEachRowBlock(
      panel_count, kPackBlock, threads, [&](size_t begin, size_t end) {
        return detail::PackDistanceKeys(distance, keys, begin, end,
                                        panels.get(), key_factor.get());
      });
  detail::ForEachRowBlock(
      rows, kQueryBlock, threads, [&](size_t begin, size_t end) {
        return detail::DistanceRows(distance, queries, keys, packed, out, begin,
                                    end);
      });
}

}  // namespace

const char* distance_name(Distance distance) {
  return detail::EnumName("distance", kDistanceNames, distance);
}

Distance distance_from_name(const char* name) {
  return detail::EnumFromName<Distance>("distance", kDistanceNames, name);
}

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

}  // namespace attnpool
