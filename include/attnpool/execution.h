// Per-call execution settings.
#pragma once

namespace attnpool {

struct Execution {
  // OpenMP threads for this call; 0 follows OMP_NUM_THREADS (the OpenMP
  // default). Either is clamped to 4 per processor available to the
  // process (omp_get_num_procs()) and to OMP_THREAD_LIMIT. Results are
  // bitwise identical for every thread count.
  int threads = 0;
};

// The most threads a call with `execution` runs on: its count after the
// default and the clamp above. Throws attnpool::Error for a negative count,
// as every call does.
int thread_count(const Execution& execution = {});

}  // namespace attnpool
