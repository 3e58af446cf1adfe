// The bf16 dot-product score tile (arch/bf16_dot.h) on every instruction
// this CPU runs it on (supported_bf16_dot_instructions(), forced one by
// one: AMX_BF16 and AVX512_BF16 on x86, BF16 on ARM under qemu), against
// the double reference on fuzzed shapes: every score within d + 2 roundings
// of Σ|q·k| (plus the products of subnormal inputs, which the instructions
// count as 0), padding keys' scores 0, nothing written outside the rows
// and panels asked for, and the padding of query and key rows (NaN) never
// read. Where the CPU has none: the list is empty and forcing any name
// fails.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "arch/bf16_dot.h"
#include "tests/require_rejected.h"

namespace attnpool_test {
namespace detail = attnpool::detail;
namespace {

constexpr uint64_t kSeed = 20261127;
constexpr uint16_t kNaNBits = 0x7FC1;

float Widen(uint16_t bits) {
  const uint32_t word = uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

// A bf16 of random sign and magnitude 2^[-24, 24) (1 in 16 exactly 0, 1 in
// 32 subnormal).
uint16_t RandomBf16(std::mt19937_64& rng) {
  const uint32_t pick = rng() % 32;
  const uint16_t sign = (rng() & 1) << 15;
  if (pick < 2) return sign;
  if (pick == 2) return sign | (1 + rng() % 127);  // subnormal
  const uint32_t exponent = 127 - 24 + rng() % 48;
  return sign | static_cast<uint16_t>(exponent << 7 | (rng() % 128));
}

bool Subnormal(float value) {
  return value != 0 && std::fabs(value) < 0x1p-126f;
}

TEST_CASE("bf16_dot.instructions", "[bf16_dot]") {
  const auto supported = attnpool::supported_bf16_dot_instructions();
  const std::vector<float> none;
  RequireRejected("instruction", none, [] {
    attnpool::force_bf16_dot_instruction("NOT_AN_INSTRUCTION");
  });
  if (supported.empty()) {
    REQUIRE(attnpool::bf16_dot_instruction().empty());
    RequireRejected("instruction", none, [] {
      attnpool::force_bf16_dot_instruction("AVX512_BF16");
    });
    return;
  }
  // Reported only beside a target of the instructions' family (the best one
  // unless ATTNPOOL_ISA forces another). Unforced: the best that pays here.
  // The documented choice: AMX where granted, else the vector instruction
  // unless the CPU lists AMX (targets.h).
  const std::string chosen =
      supported.front() == "AMX_BF16" || !detail::CpuListsAmxBf16()
          ? supported.front()
          : "";
  const bool family = detail::Bf16TileDispatched();
  for (const std::string& name : supported) {
    attnpool::force_bf16_dot_instruction(name);
    REQUIRE(attnpool::bf16_dot_instruction() == (family ? name : ""));
    attnpool::force_bf16_dot_instruction("");
    REQUIRE(attnpool::bf16_dot_instruction() == (family ? chosen : ""));
  }
  attnpool::force_bf16_dot_instruction(supported.back());
  attnpool::reset_target();  // the best target: of the family
  REQUIRE(detail::Bf16TileDispatched());
  REQUIRE(attnpool::bf16_dot_instruction() == chosen);
}

TEST_CASE("bf16_dot.tile_against_reference", "[bf16_dot]") {
  // Each instruction given to the tile explicitly (none where the CPU has
  // none: bf16_dot.instructions checks the list).
  for (const auto instruction : detail::SupportedBf16DotInstructions()) {
    const char* name =
        instruction == detail::Bf16DotInstruction::amx ? "AMX" : "vector";
    std::mt19937_64 rng(kSeed);
    for (int trial = 0; trial < 60; ++trial) {
      const size_t depths[] = {1, 2, 13, 31, 32, 33, 64, 80, 96, 128, 130};
      const size_t depth = trial < 11 ? depths[trial] : 1 + rng() % 140;
      const size_t rows = 1 + rng() % 100, keys = 1 + rng() % 200;
      const size_t row_begin = rng() % 5, row_end = row_begin + rows;
      const size_t query_stride = depth + rng() % 3;
      const size_t key_stride = depth + rng() % 3;
      const size_t panels =
          (keys + detail::kBf16PanelKeys - 1) / detail::kBf16PanelKeys;
      const size_t panel_begin = rng() % panels;
      const size_t panel_end = panel_begin + 1 + rng() % (panels - panel_begin);
      INFO(name << " seed " << kSeed << " trial " << trial << ": depth "
                << depth << ", rows [" << row_begin << ", " << row_end
                << "), keys " << keys << ", panels [" << panel_begin << ", "
                << panel_end << ")");
      std::vector<uint16_t> queries(row_end * query_stride, kNaNBits);
      std::vector<uint16_t> key_rows(keys * key_stride, kNaNBits);
      for (size_t i = row_begin; i < row_end; ++i) {
        for (size_t p = 0; p < depth; ++p) {
          queries[i * query_stride + p] = RandomBf16(rng);
        }
      }
      for (size_t j = 0; j < keys; ++j) {
        for (size_t p = 0; p < depth; ++p) {
          key_rows[j * key_stride + p] = RandomBf16(rng);
        }
      }
      std::vector<uint32_t> packed(
          panels * detail::Bf16PanelElements(depth, instruction));
      detail::PackBf16Panels(instruction, key_rows.data(), key_stride, keys,
                             depth, 0, panels, packed.data());
      const size_t key_origin = panel_begin * detail::kBf16PanelKeys;
      const size_t columns = (panel_end - panel_begin) * detail::kBf16PanelKeys;
      const size_t score_stride = columns + 7;
      const float canary = -12345.0f;
      std::vector<float> scores(rows * score_stride, canary);
      detail::Bf16DotScores(instruction, queries.data(), query_stride, depth,
                            packed.data(), panel_begin, panel_end, row_begin,
                            row_end, scores.data(), score_stride, row_begin,
                            key_origin);
      for (size_t r = 0; r < rows; ++r) {
        for (size_t c = 0; c < score_stride; ++c) {
          const float score = scores[r * score_stride + c];
          const size_t j = key_origin + c;
          if (c >= columns) {
            REQUIRE(score == canary);
            continue;
          }
          if (j >= keys) {
            REQUIRE(score == 0.0f);
            continue;
          }
          double exact = 0, magnitude = 0, dropped = 0;
          for (size_t p = 0; p < depth; ++p) {
            const float q = Widen(queries[(row_begin + r) * query_stride + p]);
            const float k = Widen(key_rows[j * key_stride + p]);
            const double product = double(q) * k;
            if (Subnormal(q) || Subnormal(k)) {
              dropped += std::fabs(product);
            } else {
              exact += product;
            }
            magnitude += std::fabs(product);
          }
          const double bound = (depth + 2) * 0x1p-24 * magnitude + dropped;
          INFO("row " << row_begin + r << " key " << j << ": " << score
                      << " against " << exact);
          REQUIRE(std::fabs(score - exact) <= bound);
        }
      }
    }
  }
}

}  // namespace
}  // namespace attnpool_test
