// The bf16 dot-product score tile (internal): Q·Kᵀ of bfloat16 queries and
// keys on the CPU's bf16 dot-product instruction, where each fp32 lane adds
// the products of a pair of bf16 elements (exact products; subnormal bf16
// inputs count as 0):
//   x86 AVX512_BF16 vdpbf16ps (arch/bf16_dot_x86.cc): rounds to nearest
//     even, as a chain of two fused multiply-adds;
//   x86 AMX-BF16 tdpbf16ps (arch/bf16_dot_amx.cc): the products summed in
//     float in an order of its own, each addition rounded to nearest even
//     (where measured it matched neither vdpbf16ps's chain nor a pair
//     sum bitwise: docs/benchmarks.md, "Design evidence": AMX-BF16),
//     subnormal results flushed to 0; chosen over vdpbf16ps where the CPU
//     has it and Linux grants the tile state;
//   ARMv8.6 BF16 BFDOT (arch/bf16_dot_arm.cc): the pair's sum, then the
//     accumulation, each rounded to odd (at most one float ulp each, not
//     half), subnormal results flushed to 0.
// Each stays within the float tile's bound of d + 2 roundings. Not a
// Highway target: functions compiled for that extension alone, chosen at
// run time (ActiveBf16DotInstruction, once per fused call: src/fused.cc)
// where the CPU has one that pays and the active target is one of its
// family's vector targets (Bf16TileDispatched). Target-independent
// interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

// Which file compiles the instruction's tile: one at most.
#if defined(__x86_64__) && defined(__GNUC__)
#define ATTNPOOL_BF16_DOT_X86 1
#else
#define ATTNPOOL_BF16_DOT_X86 0
#endif
// AMX: x86-64 Linux (the tile state is granted by arch_prctl), compilers
// with the AMX target attributes (GCC 11, clang 12).
#if ATTNPOOL_BF16_DOT_X86 && defined(__linux__) &&    \
    ((defined(__clang__) && __clang_major__ >= 12) || \
     (!defined(__clang__) && __GNUC__ >= 11))
#define ATTNPOOL_BF16_DOT_AMX 1
#else
#define ATTNPOOL_BF16_DOT_AMX 0
#endif
// ARM: GCC (clang 14 lacks the target attribute's +bf16) on Linux
// (HWCAP2_BF16 from getauxval).
#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__) && \
    defined(__linux__)
#define ATTNPOOL_BF16_DOT_ARM 1
#else
#define ATTNPOOL_BF16_DOT_ARM 0
#endif

namespace attnpool {
namespace detail {

// Keys per panel: the fused plan's panel width on the tile_bf16 path (two
// AVX-512 vectors of fp32 lanes; eight NEON vectors).
constexpr size_t kBf16PanelKeys = 32;

// Whether this CPU has the vector instruction (vdpbf16ps, BFDOT): every CPU
// with a bf16 tile has it (AMX CPUs have AVX512_BF16).
bool Bf16DotSupported();

// The instructions the tile can run on, worst first (the vector dot-product
// instruction: vdpbf16ps or BFDOT).
enum class Bf16DotInstruction { none, vector, amx };

// The instructions this CPU runs the tile on, best first (none: empty).
std::vector<Bf16DotInstruction> SupportedBf16DotInstructions();

// The instruction this CPU's tile runs on unless another is forced: AMX
// where granted, else the vector instruction where VectorBf16DotPays(),
// else none (the float tile).
Bf16DotInstruction ChosenBf16DotInstruction();

// Whether the vector instruction's tile is taken to beat the float tile
// here: not on x86 CPUs that list AMX-BF16 (where measured, the vdpbf16ps
// tile ran slower than the float tile), whose bf16 tile is AMX's or, where
// Linux refuses the tile state, the float tile. Everywhere else yes:
// measured faster on an x86 CPU without AMX; assumed, not measured, for
// ARM's BFDOT, Cooper Lake (AVX512_BF16 without AMX), and a VM that hides
// AMX from a host that has it (docs/benchmarks.md, "Design evidence":
// VectorBf16DotPays).
bool VectorBf16DotPays();

// The instruction the tile runs on now: none unless Bf16TileDispatched();
// else the forced one (ForceBf16DotInstruction), else the chosen one.
Bf16DotInstruction ActiveBf16DotInstruction();

// Forces `instruction` (which the CPU must have; none turns the tile off)
// until ResetBf16DotInstruction(). Process-global, like the forced target.
void ForceBf16DotInstruction(Bf16DotInstruction instruction);
void ResetBf16DotInstruction();

// Whether this CPU has AMX-BF16 and Linux grants its tile state (asked for
// once, at the first call, which SupportedBf16DotInstructions() and so
// every query of the instructions makes: arch_prctl(ARCH_REQ_XCOMP_PERM,
// XTILEDATA)).
bool AmxBf16Supported();

// Whether CPUID lists AMX-BF16 and AMX-TILE (granted or not).
bool CpuListsAmxBf16();

// Whether the dispatched target is one beside which the tile exists, on a
// CPU that has one (x86: AVX3; ARM: NEON and SVE, not the emulated
// EMU128/SCALAR): forcing a target off turns the tile off. Whether it runs
// is ActiveBf16DotInstruction() != none.
bool Bf16TileDispatched();

// Coordinate pairs a packed panel for `instruction` holds for `depth`
// coordinates: the keys' (depth + 1) / 2, for AMX rounded up to a multiple
// of 16 (a tile step) with zero pairs.
inline size_t Bf16PanelPairs(size_t depth, Bf16DotInstruction instruction) {
  const size_t pairs = (depth + 1) / 2;
  return instruction == Bf16DotInstruction::amx ? (pairs + 15) / 16 * 16
                                                : pairs;
}

// uint32 elements of one packed panel of keys of `depth` coordinates.
inline size_t Bf16PanelElements(size_t depth, Bf16DotInstruction instruction) {
  return Bf16PanelPairs(depth, instruction) * kBf16PanelKeys;
}

// Packs panels [panel_begin, panel_end) of `count` bf16 key rows (`depth`
// coordinates, row j at keys + j·stride) for `instruction`: panel p's
// element [pair][lane] holds key p·32 + lane's coordinates 2·pair (low
// half) and 2·pair + 1 (high half), 0 past depth (to Bf16PanelPairs) and
// past the keys.
void PackBf16Panels(Bf16DotInstruction instruction, const uint16_t* keys,
                    size_t stride, size_t count, size_t depth,
                    size_t panel_begin, size_t panel_end, uint32_t* panels);

// On `instruction` (not none; the CPU must have it) and its panels:
// scores[(i − row_origin)·score_stride + (j − key_origin)] = Σ_p q(i, p)·
// k(j, p) for the query rows i in [row_begin, row_end) (bf16, row i at
// queries + i·query_stride) and the keys j of panels [panel_begin,
// panel_end) (whole panels: their padding keys get 0).
void Bf16DotScores(Bf16DotInstruction instruction, const uint16_t* queries,
                   size_t query_stride, size_t depth, const uint32_t* panels,
                   size_t panel_begin, size_t panel_end, size_t row_begin,
                   size_t row_end, float* scores, size_t score_stride,
                   size_t row_origin, size_t key_origin);

// Bf16DotScores on AMX tiles (arch/bf16_dot_amx.cc), where
// AmxBf16Supported().
void AmxBf16Scores(const uint16_t* queries, size_t query_stride, size_t depth,
                   const uint32_t* panels, size_t panel_begin, size_t panel_end,
                   size_t row_begin, size_t row_end, float* scores,
                   size_t score_stride, size_t row_origin, size_t key_origin);

// Query coordinates 2·pair and 2·pair + 1 of a bf16 row of `depth`
// coordinates as one uint32, as the panels hold them (0 past depth).
inline uint32_t QueryPair(const uint16_t* row, size_t pair, size_t depth) {
  const size_t p = 2 * pair;
  const uint32_t high = p + 1 < depth ? row[p + 1] : 0;
  return row[p] | high << 16;
}

// Rows a panel tile computes at most (the row registers of the widest ISA).
constexpr size_t kBf16MaxTileRows = 8;

// The ISA's panel tile (arch/bf16_dot_x86.cc, arch/bf16_dot_arm.cc):
// outs[r][lane] = Σ_p q(r, p)·k(lane, p) for the `rows` query rows
// query_rows[r] (rows ≤ Bf16TileRows()) and one packed panel's 32 keys.
size_t Bf16TileRows();
void Bf16PanelTile(size_t rows, const uint16_t* const* query_rows, size_t depth,
                   const uint32_t* panel, float* const* outs);

}  // namespace detail
}  // namespace attnpool
