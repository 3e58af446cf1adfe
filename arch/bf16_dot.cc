// The bf16 dot-product score tile (arch/bf16_dot.h): x86 AVX512_BF16, a
// function compiled for that extension alone (no -m flags for the TU).
#include "arch/bf16_dot.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ATTNPOOL_BF16_X86 1
#else
#define ATTNPOOL_BF16_X86 0
#endif

namespace attnpool {
namespace detail {

void PackBf16Panels(const uint16_t* keys, size_t stride, size_t count,
                    size_t depth, size_t panel_begin, size_t panel_end,
                    uint32_t* panels) {
  const size_t pairs = (depth + 1) / 2;
  for (size_t panel = panel_begin; panel < panel_end; ++panel) {
    uint32_t* packed = panels + panel * Bf16PanelElements(depth);
    for (size_t lane = 0; lane < kBf16PanelKeys; ++lane) {
      const size_t key = panel * kBf16PanelKeys + lane;
      const uint16_t* row = key < count ? keys + key * stride : nullptr;
      for (size_t pair = 0; pair < pairs; ++pair) {
        const size_t p = 2 * pair;
        const uint32_t low = row ? row[p] : 0;
        const uint32_t high = row && p + 1 < depth ? row[p + 1] : 0;
        packed[pair * kBf16PanelKeys + lane] = low | high << 16;
      }
    }
  }
}

#if ATTNPOOL_BF16_X86

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

// Query i's coordinates 2·pair and 2·pair + 1 as one uint32 (0 past depth).
inline uint32_t QueryPair(const uint16_t* row, size_t pair, size_t depth) {
  const size_t p = 2 * pair;
  const uint32_t high = p + 1 < depth ? row[p + 1] : 0;
  return row[p] | high << 16;
}

// Rows rows × one panel (32 keys): the accumulators stay in registers.
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
constexpr PanelTileFunction kPanelTiles[kTileRows + 1] = {
    nullptr,      PanelTile<1>, PanelTile<2>, PanelTile<3>, PanelTile<4>,
    PanelTile<5>, PanelTile<6>, PanelTile<7>, PanelTile<8>};

}  // namespace

void Bf16DotScores(const uint16_t* queries, size_t query_stride, size_t depth,
                   const uint32_t* panels, size_t panel_begin, size_t panel_end,
                   size_t row_begin, size_t row_end, float* scores,
                   size_t score_stride, size_t row_origin, size_t key_origin) {
  const size_t panel_elements = Bf16PanelElements(depth);
  for (size_t first = row_begin; first < row_end; first += kTileRows) {
    const size_t rows = std::min(kTileRows, row_end - first);
    const uint16_t* query_rows[kTileRows];
    for (size_t r = 0; r < rows; ++r) {
      query_rows[r] = queries + (first + r) * query_stride;
    }
    for (size_t panel = panel_begin; panel < panel_end; ++panel) {
      float* outs[kTileRows];
      for (size_t r = 0; r < rows; ++r) {
        outs[r] = scores + (first + r - row_origin) * score_stride +
                  (panel * kBf16PanelKeys - key_origin);
      }
      kPanelTiles[rows](query_rows, depth, panels + panel * panel_elements,
                        outs);
    }
  }
}

#else  // no bf16 dot-product instruction compiled

bool Bf16DotSupported() { return false; }

void Bf16DotScores(const uint16_t*, size_t, size_t, const uint32_t*, size_t,
                   size_t, size_t, size_t, float*, size_t, size_t, size_t) {
  std::abort();  // unreachable: Bf16DotSupported() is false
}

#endif

}  // namespace detail
}  // namespace attnpool
