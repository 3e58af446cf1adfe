// The Catch2 main, compiled once (it takes ~15 s) and linked into every test
// binary.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
