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
  // Read at a thread's first call: omp_get_num_procs() asks the OS for the
  // calling thread's affinity each time, a system call that cost a small
  // call more than its work. (Per thread: threads may be pinned apart.) A
  // later, narrower affinity still leaves a bound.
  static thread_local const int max_threads = [] {
    const int most = kThreadsPerProcessor * std::max(1, omp_get_num_procs());
    return std::max(1, std::min(most, omp_get_thread_limit()));
  }();
  return max_threads;
}

}  // namespace detail

int thread_count(const Execution& execution) {
  detail::CheckExecution(execution);
  return detail::ThreadCount(execution);
}

}  // namespace attnpool
