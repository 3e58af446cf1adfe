// The bf16 dot-product score tile's ISA-independent part (arch/bf16_dot.h):
// packing keys in pairs, and the walk over row tiles and panels that calls
// the ISA's panel tile.
#include "arch/bf16_dot.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <vector>

#include "arch/target_probe.h"

namespace attnpool {
namespace detail {

void PackBf16Panels(Bf16DotInstruction instruction, const uint16_t* keys,
                    size_t stride, size_t count, size_t depth,
                    size_t panel_begin, size_t panel_end, uint32_t* panels) {
  const size_t pairs = (depth + 1) / 2;
  const size_t padded_pairs = Bf16PanelPairs(depth, instruction);
  for (size_t panel = panel_begin; panel < panel_end; ++panel) {
    uint32_t* packed = panels + panel * Bf16PanelElements(depth, instruction);
    std::fill(packed + pairs * kBf16PanelKeys,
              packed + padded_pairs * kBf16PanelKeys, 0u);
    for (size_t lane = 0; lane < kBf16PanelKeys; ++lane) {
      const size_t key = panel * kBf16PanelKeys + lane;
      for (size_t pair = 0; pair < pairs; ++pair) {
        packed[pair * kBf16PanelKeys + lane] =
            key < count ? QueryPair(keys + key * stride, pair, depth) : 0;
      }
    }
  }
}

bool Bf16TileDispatched() {
  return Bf16DotSupported() && DispatchesBf16Family();
}

namespace {

// The forced instruction; amx's rank + 1: none forced (the chosen one).
// Read by every fused call's plan, possibly in many threads.
constexpr int kChosen = static_cast<int>(Bf16DotInstruction::amx) + 1;
std::atomic<int> forced_instruction{kChosen};

}  // namespace

std::vector<Bf16DotInstruction> SupportedBf16DotInstructions() {
  std::vector<Bf16DotInstruction> supported;
  if (!Bf16DotSupported()) return supported;
  if (AmxBf16Supported()) supported.push_back(Bf16DotInstruction::amx);
  supported.push_back(Bf16DotInstruction::vector);
  return supported;
}

bool VectorBf16DotPays() {
  static const bool pays = !CpuListsAmxBf16();  // CPUID: a VM exit
  return pays;
}

Bf16DotInstruction ChosenBf16DotInstruction() {
  // Read at every tile call: computed once.
  static const Bf16DotInstruction chosen = [] {
    for (const auto instruction : SupportedBf16DotInstructions()) {
      if (instruction != Bf16DotInstruction::vector || VectorBf16DotPays()) {
        return instruction;
      }
    }
    return Bf16DotInstruction::none;
  }();
  return chosen;
}

Bf16DotInstruction ActiveBf16DotInstruction() {
  if (!Bf16TileDispatched()) return Bf16DotInstruction::none;
  const int forced = forced_instruction.load(std::memory_order_relaxed);
  return forced == kChosen ? ChosenBf16DotInstruction()
                           : static_cast<Bf16DotInstruction>(forced);
}

void ForceBf16DotInstruction(Bf16DotInstruction instruction) {
  forced_instruction.store(static_cast<int>(instruction),
                           std::memory_order_relaxed);
}

void ResetBf16DotInstruction() {
  forced_instruction.store(kChosen, std::memory_order_relaxed);
}

void Bf16DotScores(Bf16DotInstruction instruction, const uint16_t* queries,
                   size_t query_stride, size_t depth, const uint32_t* panels,
                   size_t panel_begin, size_t panel_end, size_t row_begin,
                   size_t row_end, float* scores, size_t score_stride,
                   size_t row_origin, size_t key_origin) {
  if (instruction == Bf16DotInstruction::amx) {
    AmxBf16Scores(queries, query_stride, depth, panels, panel_begin, panel_end,
                  row_begin, row_end, scores, score_stride, row_origin,
                  key_origin);
    return;
  }
  const size_t panel_elements = Bf16PanelElements(depth, instruction);
  const size_t tile_rows = Bf16TileRows();
  for (size_t first = row_begin; first < row_end; first += tile_rows) {
    const size_t rows = std::min(tile_rows, row_end - first);
    const uint16_t* query_rows[kBf16MaxTileRows];
    for (size_t r = 0; r < rows; ++r) {
      query_rows[r] = queries + (first + r) * query_stride;
    }
    for (size_t panel = panel_begin; panel < panel_end; ++panel) {
      float* outs[kBf16MaxTileRows];
      for (size_t r = 0; r < rows; ++r) {
        outs[r] = scores + (first + r - row_origin) * score_stride +
                  (panel * kBf16PanelKeys - key_origin);
      }
      Bf16PanelTile(rows, query_rows, depth, panels + panel * panel_elements,
                    outs);
    }
  }
}

#if !ATTNPOOL_BF16_DOT_AMX
bool AmxBf16Supported() { return false; }
bool CpuListsAmxBf16() { return false; }
void AmxBf16Scores(const uint16_t*, size_t, size_t, const uint32_t*, size_t,
                   size_t, size_t, size_t, float*, size_t, size_t, size_t) {
  std::abort();  // unreachable: AmxBf16Supported() is false
}
#endif

#if !ATTNPOOL_BF16_DOT_X86 && !ATTNPOOL_BF16_DOT_ARM  // no instruction

bool Bf16DotSupported() { return false; }
size_t Bf16TileRows() { return 1; }
void Bf16PanelTile(size_t, const uint16_t* const*, size_t, const uint32_t*,
                   float* const*) {
  std::abort();  // unreachable: Bf16DotSupported() is false
}

#endif

}  // namespace detail
}  // namespace attnpool
