// Which compiled target Highway's dynamic dispatch selects (internal).
#pragma once

#include <cstdint>

namespace attnpool {
namespace detail {

// The target bit the next dispatched call would run on.
int64_t DispatchedTarget();

// Whether that target is one beside which the bf16 dot-product tile
// (arch/bf16_dot.h) runs: x86 AVX3 and better (AVX3_DL, …); on ARM every
// vector target (NEON, the SVE family), not the emulated EMU128/SCALAR.
bool DispatchesBf16Family();

}  // namespace detail
}  // namespace attnpool
