// Run with ATTNPOOL_TUNING set; argv[1] is the profile the library must run
// with, or "error" when every call must throw attnpool::Error naming
// ATTNPOOL_TUNING.
#include <attnpool/attnpool.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string expected = argv[1];
  for (int call = 0; call < 2; ++call) {  // the error again at a second call
    try {
      const std::string tuning = attnpool::tuning();
      std::printf("ATTNPOOL_TUNING selected %s (%s)\n", tuning.c_str(),
                  attnpool::tuning_parameters().c_str());
      if (expected == "error" || tuning != expected) return 1;
      // A computation runs with it: a decode over a few key blocks.
      const size_t m = 3000, d = 8;
      std::vector<float> query(d, 0.5f), keys(m * d, 0.25f), values(m, 2.0f);
      float out[1] = {-1};
      attnpool::scaled_dot_product_attention(
          attnpool::dense_tensor<const float>(query.data(), 1, 1, 1, d),
          attnpool::dense_tensor<const float>(keys.data(), 1, 1, m, d),
          attnpool::dense_tensor<const float>(values.data(), 1, 1, m, 1),
          attnpool::dense_tensor(out, 1, 1, 1, 1));
      std::printf("out %g\n", out[0]);
      if (!(std::fabs(out[0] - 2.0f) < 1e-5f)) return 1;
    } catch (const attnpool::Error& error) {
      std::printf("error: %s\n", error.what());
      if (expected != "error" || error.argument() != "ATTNPOOL_TUNING") {
        return 1;
      }
    }
  }
  return 0;
}
