// Uses the installed attnpool: exact distances on small integer data.
#include <attnpool/attnpool.h>

#include <cstdio>

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
  std::printf("consumer: distances correct on %s\n",
              attnpool::last_run_target().c_str());
  return 0;
}
