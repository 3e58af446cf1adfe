// Target listing and forcing.
#include <attnpool/attnpool.h>
#include <attnpool/attnpool_c.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "tests/require_rejected.h"

namespace attnpool_test {
namespace {

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST_CASE("targets: lists are consistent", "[targets]") {
  const auto compiled = attnpool::compiled_targets();
  const auto supported = attnpool::supported_targets();
  REQUIRE(!supported.empty());
  // The baseline target (the portable fallback on x86, NEON on aarch64) is
  // compiled last and always supported.
  REQUIRE(compiled.back() == supported.back());
  for (const auto& name : supported) REQUIRE(Contains(compiled, name));
  // With nothing forced, the best supported target is active.
  attnpool::reset_target();
  REQUIRE(attnpool::active_target() == supported.front());
}

// The staged pipeline over values of no columns computed the weights: its
// last run target is theirs, not the empty weighted sum's "".
TEST_CASE("targets: a staged call without value columns reports its target",
          "[targets]") {
  attnpool::reset_target();
  const float queries[2] = {0, 1}, keys[3] = {0, 1, 2};
  float weights[6] = {-7, -7, -7, -7, -7, -7};
  const attnpool::PoolSpec spec;
  attnpool::attention_pool_staged(spec, {queries, 2, 1}, {keys, 3, 1},
                                  {keys, 3, 0}, {weights, 2, 0},
                                  {weights, 2, 3});
  REQUIRE(weights[0] != -7);
  REQUIRE(attnpool::last_run_target() == attnpool::active_target());
}

TEST_CASE("targets: forcing each supported target, then resetting",
          "[targets]") {
  for (const auto& name : attnpool::supported_targets()) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    attnpool::force_target(lower);  // names are case-insensitive
    REQUIRE(attnpool::active_target() == name);
  }
  const std::string baseline = attnpool::supported_targets().back();
  if (baseline == "SCALAR" || baseline == "EMU128") {
    for (const char* fallback : {"scalar", "EMU128"}) {
      attnpool::force_target(fallback);
      REQUIRE(attnpool::active_target() == baseline);
    }
  }
  attnpool::reset_target();
  REQUIRE(attnpool::active_target() == attnpool::supported_targets().front());
}

TEST_CASE("targets: forcing what is not there is an error",
          "[targets][errors]") {
  const std::string before = attnpool::active_target();
  for (const char* name : {"bogus", "", "AVX4"}) {
    INFO(name);
    RequireRejected("target", {}, [&] { attnpool::force_target(name); });
  }
  // A target of the other architecture is never compiled.
#if defined(__x86_64__)
  const char* foreign = "NEON";
#else
  const char* foreign = "AVX2";
#endif
  REQUIRE_THROWS_AS(attnpool::force_target(foreign), attnpool::Error);
  // Compiled but unsupported targets (if this CPU lacks any) are refused.
  for (const auto& name : attnpool::compiled_targets()) {
    if (Contains(attnpool::supported_targets(), name)) continue;
    INFO(name);
    REQUIRE_THROWS_AS(attnpool::force_target(name), attnpool::Error);
  }
  REQUIRE(attnpool::active_target() == before);
}

TEST_CASE("targets: tuning profiles are listed, forced and reset",
          "[targets]") {
  attnpool::reset_target();
  const auto profiles = attnpool::tunings();
  REQUIRE(Contains(profiles, "generic"));
  REQUIRE(Contains(profiles, "zen4"));
  REQUIRE(Contains(profiles, "small_l2"));
  // This CPU's choice first, active while nothing is forced.
  REQUIRE(attnpool::tuning() == profiles.front());
  const std::string chosen = attnpool::tuning_parameters();
  std::vector<std::string> parameters;
  for (const auto& profile : profiles) {
    INFO(profile);
    attnpool::force_tuning(profile);
    REQUIRE(attnpool::tuning() == profile);
    parameters.push_back(attnpool::tuning_parameters());
    REQUIRE(parameters.back().find("query_rows=") == 0);
  }
  // Each profile differs from every other in some parameter.
  for (size_t i = 0; i < parameters.size(); ++i) {
    for (size_t j = 0; j < i; ++j) REQUIRE(parameters[i] != parameters[j]);
  }
  attnpool::force_tuning("ZEN4");  // names are case-insensitive
  REQUIRE(attnpool::tuning() == "zen4");
  for (const char* name : {"bogus", "zen", "generic "}) {
    INFO(name);
    RequireRejected("tuning", {}, [&] { attnpool::force_tuning(name); });
  }
  REQUIRE(attnpool::tuning() == "zen4");  // a refused name changes nothing
  attnpool::force_tuning("");
  REQUIRE(attnpool::tuning() == profiles.front());
  REQUIRE(attnpool::tuning_parameters() == chosen);
  attnpool::force_tuning("small_l2");
  attnpool::reset_target();
  REQUIRE(attnpool::tuning() == profiles.front());
}

TEST_CASE("targets: a tuning profile forced with parameters of its own",
          "[targets]") {
  attnpool::reset_target();
  attnpool::force_tuning("generic");
  const std::string generic = attnpool::tuning_parameters();
  // Parameters after the name replace the profile's; the others stay.
  attnpool::force_tuning("Generic  QUERY_ROWS=192\tdecode_interleave=1");
  REQUIRE(attnpool::tuning() == "generic query_rows=192 decode_interleave=1");
  std::string expected = generic;
  expected.replace(expected.find("query_rows=96"), 13, "query_rows=192");
  expected.replace(expected.find("decode_interleave=0"), 19,
                   "decode_interleave=1");
  REQUIRE(attnpool::tuning_parameters() == expected);
  // Every parameter at its largest valid value; a later value wins.
  attnpool::force_tuning(
      "zen4 query_rows=24 query_rows=1536 key_block_bytes=1048576 "
      "decode_stretch=64 decode_key_prefetch_rows=4096 decode_load_bytes=0 "
      "decode_interleave=0");
  REQUIRE(attnpool::tuning_parameters() ==
          "query_rows=1536 key_block_bytes=1048576 decode_stretch=64 "
          "decode_key_prefetch_rows=4096 decode_load_bytes=0 "
          "decode_interleave=0");
  const std::string forced = attnpool::tuning();
  for (const char* text : {"generic query_rows=100",
                           "generic query_rows=0",
                           "generic query_rows=1560",
                           "generic key_block_bytes=0",
                           "generic key_block_bytes=1048577",
                           "generic decode_stretch=0",
                           "generic decode_stretch=65",
                           "generic decode_key_prefetch_rows=4097",
                           "generic decode_load_bytes=16",
                           "generic decode_interleave=2",
                           "generic query_rows=",
                           "generic query_rows=-24",
                           "generic query_rows=+24",
                           "generic query_rows=24.0",
                           "generic query_rows=0x60",
                           "generic query_rows=9999999999",
                           "generic query_rows",
                           "generic =96",
                           "generic bogus=1",
                           "generic query_rows=96 ",
                           " generic query_rows=96",
                           "query_rows=96",
                           "bogus query_rows=96"}) {
    INFO(text);
    RequireRejected("tuning", {}, [&] { attnpool::force_tuning(text); });
  }
  REQUIRE(attnpool::tuning() == forced);  // a refused text changes nothing
  // A name alone, in any case, is the profile itself.
  attnpool::force_tuning("SMALL_L2");
  REQUIRE(attnpool::tuning() == "small_l2");
  attnpool::reset_target();
}

// One version: CMake's project() states it; version.h's macros, the
// library's version() and the C API's repeat it (the CLI and Python are
// checked by their own tests).
TEST_CASE("version: the headers and the library agree with CMake",
          "[targets]") {
  const std::string stated = ATTNPOOL_TEST_CMAKE_VERSION;
  REQUIRE(std::string(ATTNPOOL_VERSION_STRING) == stated);
  REQUIRE(std::to_string(ATTNPOOL_VERSION_MAJOR) + "." +
              std::to_string(ATTNPOOL_VERSION_MINOR) + "." +
              std::to_string(ATTNPOOL_VERSION_PATCH) ==
          stated);
  REQUIRE(std::string(attnpool::version()) == stated);
  REQUIRE(std::string(attnpool_version()) == stated);
  REQUIRE(attnpool_abi_version() == ATTNPOOL_ABI_VERSION);
}

}  // namespace
}  // namespace attnpool_test
