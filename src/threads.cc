#include "src/threads.h"

#include "core/validate.h"

#include <omp.h>

#include <algorithm>

namespace attnpool {
namespace detail {

int ThreadCount(const Execution& execution) {
  const int wanted =
      execution.threads > 0 ? execution.threads : omp_get_max_threads();
  return std::min(wanted, MaxThreads());
}

Workers WorkersOf(const Execution& execution) {
  return {ThreadCount(execution), execution.progress,
          execution.progress_context};
}

int MaxThreads() {
  const int most = kThreadsPerProcessor * std::max(1, omp_get_num_procs());
  return std::max(1, std::min(most, omp_get_thread_limit()));
}

}  // namespace detail

int thread_count(const Execution& execution) {
  detail::CheckExecution(execution);
  return detail::ThreadCount(execution);
}

}  // namespace attnpool
