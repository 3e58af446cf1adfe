// The fuzz target's function "attention_layers" (tests/fuzz/fuzz_layers.cc):
// scaled_dot_product_attention over packed sequences and a paged cache,
// with grouped heads, every mask feature and reduced-precision caches.
#pragma once

#include <cstdint>

#include "tests/fuzz/fuzz_common.h"

namespace attnpool_test {

// Its name in ATTNPOOL_FUZZ_API and in the fuzz target's list.
constexpr const char* kLayersName = "attention_layers";

// Decodes the rest of an input (after the function and flags bytes) and
// checks the calls it describes; a failure aborts with a report.
void FuzzLayers(Bytes& bytes, uint8_t flags);

}  // namespace attnpool_test
