// Run with ATTNPOOL_ISA set; argv[1] is the target the library must pick, or
// "fallback" for the portable one, or "error" when the first call must throw
// attnpool::Error naming ATTNPOOL_ISA.
#include <attnpool/attnpool.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::string expected = argv[1];
  if (expected == "fallback") expected = attnpool::supported_targets().back();
  try {
    const std::string active = attnpool::active_target();
    std::printf("ATTNPOOL_ISA selected %s\n", active.c_str());
    if (expected == "error") return 1;
    // A computation must run on it too.
    float query[3] = {1, 2, 3}, key[3] = {1, 2, 4}, out[1] = {-1};
    attnpool::pairwise_distances(attnpool::Distance::sqeuclidean, {query, 1, 3},
                                 {key, 1, 3}, {out, 1, 1});
    std::printf("ran on %s, distance %g\n", attnpool::last_run_target().c_str(),
                out[0]);
    return active == expected && attnpool::last_run_target() == expected &&
                   out[0] == 1.0f
               ? 0
               : 1;
  } catch (const attnpool::Error& error) {
    std::printf("error: %s\n", error.what());
    return expected == "error" && error.argument() == "ATTNPOOL_ISA" ? 0 : 1;
  }
}
