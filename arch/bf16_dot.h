// The bf16 dot-product score tile (internal): Q·Kᵀ of bfloat16 queries and
// keys on the CPU's bf16 dot-product instruction (x86 AVX512_BF16
// vdpbf16ps: each fp32 lane adds the products of a pair of bf16 elements,
// exact, rounding as a chain of two fused multiply-adds; subnormal bf16
// inputs count as 0). Not a Highway target: one x86 function compiled for
// that extension, chosen at run time where the CPU has it and the active
// target is AVX3 (src/fused.cc). Elsewhere Bf16DotSupported() is false.
// Target-independent interface.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attnpool {
namespace detail {

// Keys per panel: two vectors of 16 fp32 lanes.
constexpr size_t kBf16PanelKeys = 32;

// Whether this CPU runs the bf16 tile.
bool Bf16DotSupported();

// uint32 elements of one packed panel of keys of `depth` coordinates.
inline size_t Bf16PanelElements(size_t depth) {
  return (depth + 1) / 2 * kBf16PanelKeys;
}

// Packs panels [panel_begin, panel_end) of `count` bf16 key rows (`depth`
// coordinates, row j at keys + j·stride): panel p's element [pair][lane]
// holds key p·32 + lane's coordinates 2·pair (low half) and 2·pair + 1
// (high half), 0 past depth and past the keys.
void PackBf16Panels(const uint16_t* keys, size_t stride, size_t count,
                    size_t depth, size_t panel_begin, size_t panel_end,
                    uint32_t* panels);

// scores[(i − row_origin)·score_stride + (j − key_origin)] = Σ_p q(i, p)·
// k(j, p) for the query rows i in [row_begin, row_end) (bf16, row i at
// queries + i·query_stride) and the keys j of panels [panel_begin,
// panel_end) (whole panels: their padding keys get 0).
void Bf16DotScores(const uint16_t* queries, size_t query_stride, size_t depth,
                   const uint32_t* panels, size_t panel_begin, size_t panel_end,
                   size_t row_begin, size_t row_end, float* scores,
                   size_t score_stride, size_t row_origin, size_t key_origin);

}  // namespace detail
}  // namespace attnpool
