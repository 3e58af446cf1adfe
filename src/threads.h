// OpenMP thread count of a call (internal).
#pragma once

#include <attnpool/execution.h>

namespace attnpool {
namespace detail {

// execution.threads if positive, else the OpenMP default (OMP_NUM_THREADS).
int ThreadCount(const Execution& execution);

}  // namespace detail
}  // namespace attnpool
