// Per-call execution settings.
#pragma once

#include <stdexcept>

namespace attnpool {

// A call's progress callback: called on the calling thread between blocks
// of the call's work, with the fraction of the current pass's blocks done
// (in [0, 1]; a call may make more than one pass), and from nowhere else.
// Returning 0 cancels the call: no thread takes a further block (one being
// taken may still start), and the call throws attnpool::Cancelled once the
// blocks under way end. A cancelled call writes nothing: its outputs,
// in-place arguments and partial states included, are put back as they
// were (a call given a callback keeps a copy of its outputs' rows until it
// returns: their size in memory), as they are when the callback throws.
// The callback must not call attnpool.
// (It returns an int, not a bool, so that the C API's callbacks are these.)
using ProgressCallback = int (*)(void* context, double done);

struct Execution {
  // OpenMP threads for this call; 0 follows OMP_NUM_THREADS (the OpenMP
  // default). Either is clamped to 4 per processor available to the
  // process (omp_get_num_procs()) and to OMP_THREAD_LIMIT. Results are
  // bitwise identical for every thread count.
  int threads = 0;
  // Polled as ProgressCallback states, given `progress_context`; none when
  // null. Results do not depend on it, unless it cancels.
  ProgressCallback progress = nullptr;
  void* progress_context = nullptr;
};

// Thrown by a call that its Execution::progress cancelled.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("attnpool: the call was cancelled") {}
};

// The most threads a call with `execution` runs on: its count after the
// default and the clamp above. Throws attnpool::Error for a negative count,
// as every call does.
int thread_count(const Execution& execution = {});

}  // namespace attnpool
