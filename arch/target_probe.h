// Which compiled target Highway's dynamic dispatch selects (internal).
#pragma once

#include <cstdint>

namespace attnpool {
namespace detail {

// The target bit the next dispatched call would run on.
int64_t DispatchedTarget();

}  // namespace detail
}  // namespace attnpool
