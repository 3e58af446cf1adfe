// Per-call execution settings.
#pragma once

namespace attnpool {

struct Execution {
  // OpenMP threads for this call; 0 follows OMP_NUM_THREADS (the OpenMP
  // default). Results are bitwise identical for every thread count.
  int threads = 0;
};

}  // namespace attnpool
