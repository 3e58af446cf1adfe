// The bad-input check of docs/design.md §5, shared by the error tests.
#pragma once

#include <attnpool/error.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace attnpool_test {

// Runs `call`, requires attnpool::Error naming `argument` (in argument() and
// in the message), and requires the canary-filled output buffer to be bitwise
// unchanged.
inline void RequireRejected(const std::string& argument,
                            const std::vector<float>& out,
                            const std::function<void()>& call) {
  const std::vector<float> before = out;
  try {
    call();
    FAIL("no error; expected one naming " << argument);
  } catch (const attnpool::Error& error) {
    INFO(error.what());
    REQUIRE(error.argument() == argument);
    REQUIRE(std::string(error.what()).find(argument) != std::string::npos);
  }
  // Bytewise (NaN canaries included); an empty buffer has nothing to compare.
  REQUIRE((out.empty() || std::memcmp(before.data(), out.data(),
                                      out.size() * sizeof(float)) == 0));
}

}  // namespace attnpool_test
