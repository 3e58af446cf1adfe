// OpenMP drivers of the src/ entry points (internal).
#pragma once

#include <attnpool/execution.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "src/dispatch.h"

namespace attnpool {
namespace detail {

// execution.threads if positive, else the OpenMP default (OMP_NUM_THREADS).
int ThreadCount(const Execution& execution);

// Runs block(begin, end) over [0, rows) in fixed blocks of `block_rows`, on
// `threads` OpenMP threads. Blocks do not depend on the thread count, so
// neither do results. `block` returns the target bit it ran on, which is
// recorded for last_run_target().
template <class Block>
void ForEachRowBlock(size_t rows, size_t block_rows, int threads,
                     const Block& block) {
  std::atomic<int64_t> ran{0};
  const long blocks = static_cast<long>((rows + block_rows - 1) / block_rows);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (long index = 0; index < blocks; ++index) {
    const size_t begin = static_cast<size_t>(index) * block_rows;
    const size_t end = rows - begin < block_rows ? rows : begin + block_rows;
    ran.store(block(begin, end), std::memory_order_relaxed);
  }
  RecordRunTarget(ran.load());
}

}  // namespace detail
}  // namespace attnpool
