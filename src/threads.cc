#include "src/threads.h"

#include <omp.h>

namespace attnpool {
namespace detail {

int ThreadCount(const Execution& execution) {
  return execution.threads > 0 ? execution.threads : omp_get_max_threads();
}

}  // namespace detail
}  // namespace attnpool
