// The bf16 panel tile on ARM (ARMv8.6 BF16, NEON BFDOT; arch/bf16_dot.h):
// functions compiled for that extension alone, called only where
// Bf16DotSupported() (the kernel's HWCAP2_BF16).
#include <cstring>

#include "arch/bf16_dot.h"

#if ATTNPOOL_BF16_DOT_ARM
#include <arm_neon.h>
#include <sys/auxv.h>

namespace attnpool {
namespace detail {

#define ATTNPOOL_BF16_TARGET __attribute__((target("arch=armv8.2-a+bf16")))

bool Bf16DotSupported() {
  constexpr unsigned long kHwcap2Bf16 = 1ul << 14;  // HWCAP2_BF16
  static const bool supported = (getauxval(AT_HWCAP2) & kHwcap2Bf16) != 0;
  return supported;
}

namespace {

// Rows rows × half a panel (16 keys, four vectors of 4 fp32 lanes):
// 4·Rows accumulators, four key vectors and a query in 32 registers.
template <size_t Rows>
ATTNPOOL_BF16_TARGET void HalfPanelTile(const uint16_t* const* query_rows,
                                        size_t depth, const uint32_t* panel,
                                        size_t half, float* const* outs) {
  constexpr size_t kHalf = kBf16PanelKeys / 2;
  const size_t pairs = (depth + 1) / 2;
  const size_t whole = depth / 2;
  float32x4_t sums[Rows][4];
  for (size_t r = 0; r < Rows; ++r) {
    for (size_t v = 0; v < 4; ++v) sums[r][v] = vdupq_n_f32(0.0f);
  }
  for (size_t pair = 0; pair < pairs; ++pair) {
    const uint32_t* keys = panel + pair * kBf16PanelKeys + half * kHalf;
    bfloat16x8_t k[4];
    for (size_t v = 0; v < 4; ++v) {
      k[v] = vreinterpretq_bf16_u32(vld1q_u32(keys + 4 * v));
    }
    for (size_t r = 0; r < Rows; ++r) {
      uint32_t word;
      if (pair < whole) {
        std::memcpy(&word, query_rows[r] + 2 * pair, sizeof word);
      } else {
        word = QueryPair(query_rows[r], pair, depth);
      }
      const bfloat16x8_t q = vreinterpretq_bf16_u32(vdupq_n_u32(word));
      for (size_t v = 0; v < 4; ++v) {
        sums[r][v] = vbfdotq_f32(sums[r][v], q, k[v]);
      }
    }
  }
  for (size_t r = 0; r < Rows; ++r) {
    for (size_t v = 0; v < 4; ++v) {
      vst1q_f32(outs[r] + half * kHalf + 4 * v, sums[r][v]);
    }
  }
}

template <size_t Rows>
void PanelTile(const uint16_t* const* query_rows, size_t depth,
               const uint32_t* panel, float* const* outs) {
  HalfPanelTile<Rows>(query_rows, depth, panel, 0, outs);
  HalfPanelTile<Rows>(query_rows, depth, panel, 1, outs);
}

using PanelTileFunction = void (*)(const uint16_t* const*, size_t,
                                   const uint32_t*, float* const*);
constexpr size_t kTileRows = 6;
static_assert(kTileRows <= kBf16MaxTileRows, "row pointers overflow");
constexpr PanelTileFunction kPanelTiles[kTileRows + 1] = {
    nullptr,      PanelTile<1>, PanelTile<2>, PanelTile<3>,
    PanelTile<4>, PanelTile<5>, PanelTile<6>};

}  // namespace

size_t Bf16TileRows() { return kTileRows; }

void Bf16PanelTile(size_t rows, const uint16_t* const* query_rows, size_t depth,
                   const uint32_t* panel, float* const* outs) {
  kPanelTiles[rows](query_rows, depth, panel, outs);
}

}  // namespace detail
}  // namespace attnpool

#endif  // ATTNPOOL_BF16_DOT_ARM
