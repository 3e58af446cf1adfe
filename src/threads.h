// OpenMP drivers of the src/ entry points (internal).
#pragma once

#include <attnpool/execution.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <type_traits>

#include <omp.h>

#include "src/dispatch.h"

namespace attnpool {
namespace detail {

// execution.threads if positive, else the OpenMP default (OMP_NUM_THREADS),
// at most MaxThreads(): a count the machine cannot run (threads the OS
// refuses end the process inside the OpenMP runtime, where no error can be
// caught) is clamped; results do not depend on it.
int ThreadCount(const Execution& execution);

// A call's workers: its thread count (ThreadCount) and its progress
// callback (execution.h), which ForEachRowBlock polls.
struct Workers {
  int threads = 1;
  ProgressCallback progress = nullptr;
  void* progress_context = nullptr;
};
Workers WorkersOf(const Execution& execution);

// kThreadsPerProcessor threads per processor available to the calling
// thread (omp_get_num_procs() at its first call: the affinity it then had),
// within OpenMP's thread limit; at least 1.
constexpr int kThreadsPerProcessor = 4;
int MaxThreads();

// Blocks of `block_rows` over `rows` (without overflow: rows may be near
// SIZE_MAX where a view holds no element).
inline size_t BlockCount(size_t rows, size_t block_rows) {
  return rows / block_rows + (rows % block_rows != 0);
}

// The slots ForEachRowBlock(rows, block_rows, threads, ...) gives its
// blocks: one per thread of its region (at most one per block), else 1.
inline size_t BlockSlots(size_t rows, size_t block_rows, int threads) {
  const size_t blocks = BlockCount(rows, block_rows);
  return threads > 1 && blocks > 1
             ? std::min(static_cast<size_t>(threads), blocks)
             : 1;
}

// Runs block(begin, end) over [0, rows) in fixed blocks of `block_rows`, on
// `workers.threads` OpenMP threads, at most one per block (one block, or one
// thread, runs on the calling thread without an OpenMP region). Blocks do not
// depend on the thread count, so neither do results. `block` returns the
// target bit it ran on, which is recorded for last_run_target(). An exception
// thrown by a block (std::bad_alloc of its scratch) must not leave the OpenMP
// region (that terminates the process): the first one is kept, the remaining
// blocks are skipped, and it is rethrown after the loop. A block taking a
// third argument is given its slot: 0 on the calling thread, else the
// thread's number in the region opened here, so always < BlockSlots(rows,
// block_rows, threads) (never the caller's number in an OpenMP team of its
// own, which may be any). The calling thread polls workers.progress before
// the first block and after each of its own; once it returns 0 no thread
// takes a further block, and Cancelled is thrown after the loop.
template <class Block>
void ForEachRowBlock(size_t rows, size_t block_rows, const Workers& workers,
                     const Block& block) {
  std::atomic<int64_t> ran{0};
  std::atomic<bool> failed{false}, cancelled{false};
  std::atomic<size_t> done{0};
  std::exception_ptr failure;
  const size_t blocks = BlockCount(rows, block_rows);
  const bool in_region = workers.threads > 1 && blocks > 1;
  const auto slot = [in_region] {
    return in_region ? omp_get_thread_num() : 0;
  };
  const auto keep_failure = [&] {
#pragma omp critical(attnpool_block_failure)
    if (!failed.exchange(true)) failure = std::current_exception();
  };
  // On the calling thread only: the callback may not be thread-safe.
  const auto poll = [&](size_t finished) {
    if (workers.progress == nullptr || cancelled.load()) return;
    const double fraction = blocks == 0 ? 1.0 : double(finished) / blocks;
    if (workers.progress(workers.progress_context, fraction) == 0) {
      cancelled.store(true);
    }
  };
  const auto run = [&](size_t index) {
    const size_t begin = index * block_rows;
    const size_t end = rows - begin < block_rows ? rows : begin + block_rows;
    try {
      const int at = slot();
      if constexpr (std::is_invocable_v<const Block&, size_t, size_t, int>) {
        ran.store(block(begin, end, at), std::memory_order_relaxed);
      } else {
        ran.store(block(begin, end), std::memory_order_relaxed);
      }
      const size_t finished = done.fetch_add(1) + 1;
      if (at == 0) poll(finished);
    } catch (...) {
      keep_failure();
    }
  };
  try {
    poll(0);
  } catch (...) {
    keep_failure();
  }
  const auto stopped = [&] {
    return failed.load(std::memory_order_relaxed) ||
           cancelled.load(std::memory_order_relaxed);
  };
  if (!in_region) {
    // No OpenMP region at all: small calls pay nothing for threads.
    for (size_t index = 0; index < blocks && !stopped(); ++index) run(index);
  } else {
    // Each thread takes the next block until none is left or the call
    // stops (an OpenMP loop would still step through every index).
    const int team =
        static_cast<int>(BlockSlots(rows, block_rows, workers.threads));
    std::atomic<size_t> next{0};
#pragma omp parallel num_threads(team)
    for (size_t index = next.fetch_add(1); index < blocks && !stopped();
         index = next.fetch_add(1)) {
      run(index);
    }
  }
  // (Cancelled first: the caller asked for it, and Python's
  // KeyboardInterrupt must not turn into a later block's error.)
  if (cancelled.load()) throw Cancelled();
  if (failure) std::rethrow_exception(failure);
  RecordRunTarget(ran.load());
}

}  // namespace detail
}  // namespace attnpool
