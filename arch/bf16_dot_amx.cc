// The bf16 score tile on x86 AMX-BF16 tiles (arch/bf16_dot.h): functions
// compiled for that extension alone (no -m flags for the TU), called only
// where AmxBf16Supported().
//
// Tiles: C0..C3 (tmm0–3) hold 32 query rows × one 32-key panel of float
// scores; A0, A1 (tmm4, 5) two 16-row blocks of 32 query coordinates; B0,
// B1 (tmm6, 7) 16 coordinate pairs of the panel's keys 0–15 and 16–31,
// loaded in place from the packed panel (its pair rows are 128 bytes apart;
// a pair's 16 keys are one tile row).
#include "arch/bf16_dot.h"

#if ATTNPOOL_BF16_DOT_AMX
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace attnpool {
namespace detail {

#define ATTNPOOL_AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))

namespace {

// Linux's arch_prctl codes for the dynamically enabled AMX tile state
// (asm/prctl.h, Linux 5.16).
constexpr long kArchGetXcompPerm = 0x1022;
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtileData = 18;

// CPUID lists the units, and the OS enables their state in XCR0.
bool CpuHasAmxBf16() {
  if (!CpuListsAmxBf16()) return false;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !((ecx >> 27) & 1)) {
    return false;  // no OSXSAVE: XCR0 unreadable
  }
  unsigned xcr0_low, xcr0_high;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  constexpr unsigned kTileState = 3u << 17;  // XTILECFG, XTILEDATA
  return (xcr0_low & kTileState) == kTileState;
}

// Asks Linux for the tile data state (once per process; a kernel that
// refuses, e.g. before 5.16 or with a too-small sigaltstack, leaves AMX off).
bool LinuxGrantsTiles() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0) {
    return false;
  }
  unsigned long features = 0;
  return syscall(SYS_arch_prctl, kArchGetXcompPerm, &features) == 0 &&
         ((features >> kXfeatureXtileData) & 1);
}

// The ldtilecfg operand: palette 1, every tile 16 rows × 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
  TileConfig() {
    for (int t = 0; t < 8; ++t) {
      bytes_per_row[t] = 64;
      rows[t] = 16;
    }
  }
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

constexpr size_t kRowBlock = 32;   // query rows per tile block (A0, A1)
constexpr size_t kStepPairs = 16;  // coordinate pairs per tile step

// One block of 32 staged query rows (padded_depth bf16 each, zero past the
// query's depth) × one panel: 32 × 32 float scores into out (row stride
// out_stride floats).
ATTNPOOL_AMX_TARGET void BlockPanel(const uint16_t* staged, size_t padded_depth,
                                    const uint32_t* panel, float* out,
                                    size_t out_stride) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const size_t a_stride = padded_depth * sizeof(uint16_t);
  const size_t b_stride = kBf16PanelKeys * sizeof(uint32_t);
  const size_t steps = padded_depth / (2 * kStepPairs);
  for (size_t step = 0; step < steps; ++step) {
    const uint16_t* a = staged + step * 2 * kStepPairs;
    const uint32_t* b = panel + step * kStepPairs * kBf16PanelKeys;
    _tile_loadd(4, a, a_stride);
    _tile_loadd(5, a + 16 * padded_depth, a_stride);
    _tile_loadd(6, b, b_stride);
    _tile_loadd(7, b + 16, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  const size_t c_stride = out_stride * sizeof(float);
  _tile_stored(0, out, c_stride);
  _tile_stored(1, out + 16, c_stride);
  _tile_stored(2, out + 16 * out_stride, c_stride);
  _tile_stored(3, out + 16 * out_stride + 16, c_stride);
}

ATTNPOOL_AMX_TARGET void LoadConfig(const TileConfig& config) {
  _tile_loadconfig(&config);
}

ATTNPOOL_AMX_TARGET void ReleaseTiles() { _tile_release(); }

}  // namespace

bool CpuListsAmxBf16() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amx_bf16 = (edx >> 22) & 1, amx_tile = (edx >> 24) & 1;
  return amx_bf16 && amx_tile;
}

bool AmxBf16Supported() {
  static const bool supported = CpuHasAmxBf16() && LinuxGrantsTiles();
  return supported;
}

void AmxBf16Scores(const uint16_t* queries, size_t query_stride, size_t depth,
                   const uint32_t* panels, size_t panel_begin, size_t panel_end,
                   size_t row_begin, size_t row_end, float* scores,
                   size_t score_stride, size_t row_origin, size_t key_origin) {
  const size_t padded_depth =
      2 * Bf16PanelPairs(depth, Bf16DotInstruction::amx);
  const size_t panel_elements =
      Bf16PanelElements(depth, Bf16DotInstruction::amx);
  // The rows staged in blocks of 32, zero past their depth and past the last
  // row (the panels' padding pairs are 0 too: every padding product is 0·0).
  const size_t blocks = (row_end - row_begin + kRowBlock - 1) / kRowBlock;
  std::vector<uint16_t> staged(blocks * kRowBlock * padded_depth, 0);
  for (size_t i = row_begin; i < row_end && depth != 0; ++i) {
    std::memcpy(staged.data() + (i - row_begin) * padded_depth,
                queries + i * query_stride, depth * sizeof(uint16_t));
  }
  alignas(64) float partial[kRowBlock * kBf16PanelKeys];
  static const TileConfig config;
  LoadConfig(config);
  for (size_t block = 0; block < blocks; ++block) {
    const size_t first = row_begin + block * kRowBlock;
    const size_t rows = std::min(kRowBlock, row_end - first);
    const uint16_t* a = staged.data() + block * kRowBlock * padded_depth;
    for (size_t panel = panel_begin; panel < panel_end; ++panel) {
      float* out = scores + (first - row_origin) * score_stride +
                   (panel * kBf16PanelKeys - key_origin);
      const uint32_t* b = panels + panel * panel_elements;
      if (rows == kRowBlock) {
        BlockPanel(a, padded_depth, b, out, score_stride);
        continue;
      }
      BlockPanel(a, padded_depth, b, partial, kBf16PanelKeys);
      for (size_t r = 0; r < rows; ++r) {
        std::memcpy(out + r * score_stride, partial + r * kBf16PanelKeys,
                    kBf16PanelKeys * sizeof(float));
      }
    }
  }
  ReleaseTiles();
}

}  // namespace detail
}  // namespace attnpool

#endif  // ATTNPOOL_BF16_DOT_AMX
