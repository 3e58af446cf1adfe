// Run with ATTNPOOL_ISA set; argv[1] is the target the library must pick, or
// "fallback" for the portable one, or "error" when every call must throw
// attnpool::Error naming ATTNPOOL_ISA (targets.h: computations, merges and
// finishes, rules of thumb, the target queries; the C API's text functions
// answer "" and record the error), writing nothing, while the facts of the
// build answer.
#include <attnpool/attnpool.h>
#include <attnpool/attnpool_c.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

// Whether every call that must refuse the environment does, naming it.
bool EveryCallRefuses() {
  bool ok = true;
  float one[2] = {1, 2}, max[1] = {0}, sum[1] = {1}, out[2] = {-7, -7};
  size_t best[1] = {0};
  attnpool::PoolPartial<float> state{{one, 1, 2}, max, sum, best};
  const attnpool::PoolSpec spec;
  const std::vector<std::pair<const char*, std::function<void()>>> calls = {
      {"active_target", [] { attnpool::active_target(); }},
      {"tuning", [] { attnpool::tuning(); }},
      {"attention_pool_finish",
       [&] {
         attnpool::attention_pool_finish(spec, state, {out, 1, 2});
       }},
      {"attention_pool_merge",
       [&] {
         float max2[1] = {0}, sum2[1] = {1}, acc2[2] = {3, 4};
         size_t best2[1] = {0};
         attnpool::attention_pool_merge(
             spec, state,
             attnpool::PoolPartial<float>{{acc2, 1, 2}, max2, sum2, best2});
       }},
      {"silverman_bandwidth",
       [&] {
         attnpool::silverman_bandwidth(
             attnpool::ConstMatrixView<float>(one, 2, 1));
       }},
      {"gaussian_bandwidth_grid",
       [] { attnpool::gaussian_bandwidth_grid(0.1, 1, 4); }},
      {"alibi_slopes", [] { attnpool::alibi_slopes<float>(4); }},
  };
  for (const auto& call : calls) {
    try {
      call.second();
      std::printf("%s: no error\n", call.first);
      ok = false;
    } catch (const attnpool::Error& error) {
      if (error.argument() != "ATTNPOOL_ISA") {
        std::printf("%s: error naming %s\n", call.first,
                    error.argument().c_str());
        ok = false;
      }
    }
  }
  if (out[0] != -7 || one[0] != 1) {
    std::printf("a refused call wrote its output\n");
    ok = false;
  }
  // The C API's text: "" and the error recorded.
  if (std::strcmp(attnpool_active_target(), "") != 0 ||
      std::strcmp(attnpool_last_error_argument(), "ATTNPOOL_ISA") != 0) {
    std::printf("attnpool_active_target: '%s', last error on '%s'\n",
                attnpool_active_target(), attnpool_last_error_argument());
    ok = false;
  }
  // The facts of the build answer.
  if (attnpool::compiled_targets().empty() || attnpool::tunings().empty()) {
    std::printf("the lists of targets or profiles are empty\n");
    ok = false;
  }
  return ok;
}

}  // namespace

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
    return expected == "error" && error.argument() == "ATTNPOOL_ISA" &&
                   EveryCallRefuses()
               ? 0
               : 1;
  }
}
