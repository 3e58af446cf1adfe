// Which compiled target Highway's dynamic dispatch selects (internal).
#pragma once

#include <cstdint>

namespace attnpool {
namespace detail {

// The target bit the next dispatched call would run on.
int64_t DispatchedTarget();

// Whether that target is one beside which the bf16 dot-product tile
// (arch/bf16_dot.h) runs: x86 AVX-512 (AVX3, AVX3_DL); ARM NEON and the SVE
// family.
bool DispatchesBf16Family();

}  // namespace detail
}  // namespace attnpool
