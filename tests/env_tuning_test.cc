// Run with ATTNPOOL_TUNING set; argv[1] is the profile the library must run
// with, or "error" when every call must throw attnpool::Error naming
// ATTNPOOL_TUNING.
#include <attnpool/attnpool.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

// A decode (1 query) and a tile (6 queries) over keys that span several
// key blocks and decode stretches of every profile.
std::vector<float> Attention() {
  const size_t m = 3000, d = 32, dv = 8;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> queries(7 * d), keys(m * d), values(m * dv),
      out(7 * dv, -1);
  for (auto* array : {&queries, &keys, &values}) {
    for (float& x : *array) x = normal(rng);
  }
  for (const size_t first : {size_t{0}, size_t{1}}) {
    const size_t rows = first == 0 ? 1 : 6;
    attnpool::scaled_dot_product_attention(
        attnpool::dense_tensor<const float>(queries.data() + first * d, 1, 1,
                                            rows, d),
        attnpool::dense_tensor<const float>(keys.data(), 1, 1, m, d),
        attnpool::dense_tensor<const float>(values.data(), 1, 1, m, dv),
        attnpool::dense_tensor(out.data() + first * dv, 1, 1, rows, dv));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string expected = argv[1];
  for (int call = 0; call < 2; ++call) {  // the error again at a second call
    try {
      const std::string tuning = attnpool::tuning();
      std::printf("ATTNPOOL_TUNING selected %s (%s)\n", tuning.c_str(),
                  attnpool::tuning_parameters().c_str());
      if (expected == "error" || tuning != expected) return 1;
      // It computes, within the float bound of this CPU's choice.
      const std::vector<float> forced = Attention();
      attnpool::force_tuning("");
      const std::vector<float> chosen = Attention();
      attnpool::force_tuning(expected);
      for (size_t i = 0; i < forced.size(); ++i) {
        if (!(std::fabs(forced[i] - chosen[i]) <= 1e-4f)) {
          std::printf("output %zu: %g against %g\n", i, forced[i], chosen[i]);
          return 1;
        }
      }
    } catch (const attnpool::Error& error) {
      std::printf("error: %s\n", error.what());
      if (expected != "error" || error.argument() != "ATTNPOOL_TUNING") {
        return 1;
      }
    }
  }
  return 0;
}
