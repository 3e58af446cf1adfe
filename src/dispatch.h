// Dispatch state shared by the src/ drivers (internal).
#pragma once

#include <cstdint>

namespace attnpool {
namespace detail {

// Called first by every public entry point: initializes Highway's dispatch
// (once) and applies ATTNPOOL_ISA and ATTNPOOL_TUNING. Throws
// attnpool::Error ("ATTNPOOL_ISA", "ATTNPOOL_TUNING") if either names no
// supported target or no tuning profile.
void EnsureDispatchReady();

// Remembers, for the calling thread, the Highway target bit a computation ran
// on (0: none ran); attnpool::last_run_target() reports it.
void RecordRunTarget(int64_t target);

}  // namespace detail
}  // namespace attnpool
