// pairwise_distances: argument checks, key packing and the OpenMP driver.
#include <attnpool/distance.h>
#include <attnpool/error.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "arch/distance.h"
#include "hwy/aligned_allocator.h"
#include "src/dispatch.h"
#include "src/threads.h"
#include "src/validate.h"

namespace attnpool {
namespace {

constexpr const char* kDistanceNames[kDistanceCount] = {
    "sqeuclidean", "euclidean", "manhattan", "dot", "cosine"};

void CheckDistance(Distance distance) {
  const int value = static_cast<int>(distance);
  if (value < 0 || value >= kDistanceCount) {
    throw Error("distance", "invalid value " + std::to_string(value));
  }
}

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
  CheckDistance(distance);
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
  auto panels = hwy::AllocateAligned<T>(std::max<size_t>(1, padded_count * depth));
  auto key_factor = hwy::AllocateAligned<T>(padded_count);
  if (!panels || !key_factor) throw std::bad_alloc();
  packed.panels = panels.get();
  packed.key_factor = key_factor.get();

  const int threads = detail::ThreadCount(execution);
  std::atomic<int64_t> ran{0};
  const long pack_calls = static_cast<long>((panel_count + kPackBlock - 1) / kPackBlock);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long call = 0; call < pack_calls; ++call) {
    const size_t begin = static_cast<size_t>(call) * kPackBlock;
    detail::PackDistanceKeys(distance, keys, begin,
                             std::min(panel_count, begin + kPackBlock),
                             panels.get(), key_factor.get());
  }
  const long row_calls = static_cast<long>((rows + kQueryBlock - 1) / kQueryBlock);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (long call = 0; call < row_calls; ++call) {
    const size_t begin = static_cast<size_t>(call) * kQueryBlock;
    ran.store(detail::DistanceRows(distance, queries, keys, packed, out, begin,
                                   std::min(rows, begin + kQueryBlock)),
              std::memory_order_relaxed);
  }
  detail::RecordRunTarget(ran.load());
}

}  // namespace

const char* distance_name(Distance distance) {
  CheckDistance(distance);
  return kDistanceNames[static_cast<int>(distance)];
}

Distance distance_from_name(const char* name) {
  for (int i = 0; i < kDistanceCount; ++i) {
    if (name != nullptr && std::strcmp(name, kDistanceNames[i]) == 0) {
      return static_cast<Distance>(i);
    }
  }
  throw Error("distance", std::string("unknown name '") +
                              (name ? name : "(null)") + "'");
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
