// Target listing and forcing.
#include <attnpool/attnpool.h>

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

}  // namespace
}  // namespace attnpool_test
