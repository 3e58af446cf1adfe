// Uses the installed attnpool: exact distances on small integer data.
#include <attnpool/attnpool.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  const float queries[2 * 2] = {0, 0, 1, 1};
  const float keys[3 * 2] = {3, 4, 0, 0, 1, 1};
  float out[2 * 3];
  attnpool::pairwise_distances(attnpool::Distance::sqeuclidean, {queries, 2, 2},
                               {keys, 3, 2}, {out, 2, 3});
  const float expected[2 * 3] = {25, 0, 2, 13, 2, 0};
  for (int i = 0; i < 6; ++i) {
    if (out[i] != expected[i]) {
      std::printf("out[%d] = %g, expected %g\n", i, out[i], expected[i]);
      return 1;
    }
  }
  // The README's spec, brace-initialized (builds under -Wextra -Werror):
  // one query on a key of its own (weight 1) and one 28 bandwidths away
  // (weight e^-400: 0 in float).
  using attnpool::Distance;
  using attnpool::Kernel;
  using attnpool::Normalization;
  const attnpool::PoolSpec spec{
      Distance::sqeuclidean, {Kernel::gaussian, 0.05}, Normalization::sum};
  const float values[3] = {7, 5, 9};
  float pooled = 0;
  attnpool::attention_pool(spec, {queries, 1, 2}, {keys + 2, 2, 2},
                           {values + 1, 2, 1}, {&pooled, 1, 1});
  if (pooled != 5) {
    std::printf("pooled %g, expected 5\n", pooled);
    return 1;
  }
  // ALiBi slopes in the mask's type.
  attnpool::AttentionMask<float> mask;
  const std::vector<float> slopes = attnpool::alibi_slopes<float>(4);
  mask.alibi_slopes = slopes.data();
  if (std::strcmp(attnpool::version(), ATTNPOOL_VERSION_STRING) != 0) {
    std::printf("library %s, headers %s\n", attnpool::version(),
                ATTNPOOL_VERSION_STRING);
    return 1;
  }
  std::printf("consumer: distances and pooling correct on %s\n",
              attnpool::last_run_target().c_str());
  return 0;
}
