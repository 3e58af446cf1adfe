// The bf16 panel tile on x86 AVX512_BF16 (arch/bf16_dot.h): functions
// compiled for that extension alone (no -m flags for the TU), called only
// where Bf16DotSupported().
#include <cstring>

#include "arch/bf16_dot.h"

#if ATTNPOOL_BF16_DOT_X86
#include <immintrin.h>

namespace attnpool {
namespace detail {

#define ATTNPOOL_BF16_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

bool Bf16DotSupported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return supported;
}

namespace {

// Rows rows × one panel (32 keys, two vectors): 2·Rows accumulators in
// registers.
template <size_t Rows>
ATTNPOOL_BF16_TARGET void PanelTile(const uint16_t* const* query_rows,
                                    size_t depth, const uint32_t* panel,
                                    float* const* outs) {
  const size_t pairs = (depth + 1) / 2;
  __m512 low[Rows], high[Rows];
  for (size_t r = 0; r < Rows; ++r) {
    low[r] = _mm512_setzero_ps();
    high[r] = _mm512_setzero_ps();
  }
  // Whole pairs: the query's two coordinates are one 32-bit word in place;
  // an odd depth's last coordinate alone.
  const size_t whole = depth / 2;
  for (size_t pair = 0; pair < pairs; ++pair) {
    const __m512i keys_low = _mm512_loadu_si512(panel + pair * kBf16PanelKeys);
    const __m512i keys_high =
        _mm512_loadu_si512(panel + pair * kBf16PanelKeys + 16);
    for (size_t r = 0; r < Rows; ++r) {
      int word;
      if (pair < whole) {
        std::memcpy(&word, query_rows[r] + 2 * pair, sizeof word);
      } else {
        word = static_cast<int>(QueryPair(query_rows[r], pair, depth));
      }
      const __m512i q = _mm512_set1_epi32(word);
      low[r] = _mm512_dpbf16_ps(low[r], (__m512bh)q, (__m512bh)keys_low);
      high[r] = _mm512_dpbf16_ps(high[r], (__m512bh)q, (__m512bh)keys_high);
    }
  }
  for (size_t r = 0; r < Rows; ++r) {
    _mm512_storeu_ps(outs[r], low[r]);
    _mm512_storeu_ps(outs[r] + 16, high[r]);
  }
}

using PanelTileFunction = void (*)(const uint16_t* const*, size_t,
                                   const uint32_t*, float* const*);
constexpr size_t kTileRows = 8;
static_assert(kTileRows <= kBf16MaxTileRows, "row pointers overflow");
constexpr PanelTileFunction kPanelTiles[kTileRows + 1] = {
    nullptr,      PanelTile<1>, PanelTile<2>, PanelTile<3>, PanelTile<4>,
    PanelTile<5>, PanelTile<6>, PanelTile<7>, PanelTile<8>};

}  // namespace

size_t Bf16TileRows() { return kTileRows; }

void Bf16PanelTile(size_t rows, const uint16_t* const* query_rows, size_t depth,
                   const uint32_t* panel, float* const* outs) {
  kPanelTiles[rows](query_rows, depth, panel, outs);
}

}  // namespace detail
}  // namespace attnpool

#endif  // ATTNPOOL_BF16_DOT_X86
