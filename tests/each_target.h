// Registers a Catch2 test case once per target this CPU supports, named
// "<name>/<TARGET>", that forces the target around the body. Bodies check
// with RequireRanOnTarget() that the forced target is the one that ran.
#pragma once

#include <catch2/catch.hpp>

#include <string>

namespace attnpool_test {

using TargetTestBody = void (*)();

int RegisterForEachTarget(const char* name, const char* tags,
                          TargetTestBody body, const char* file, size_t line);

// The target forced for the running test case.
const std::string& CurrentTarget();

// Asserts that the calling thread's last attnpool computation ran on
// CurrentTarget().
void RequireRanOnTarget();

}  // namespace attnpool_test

#define ATTNPOOL_TEST_EACH_TARGET(function, name, tags)                       \
  static void function();                                                     \
  static const int function##_registration =                                  \
      ::attnpool_test::RegisterForEachTarget(name, tags, &function, __FILE__, \
                                             __LINE__);                       \
  static void function()
