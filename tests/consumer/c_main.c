/* Uses the installed attnpool from C99: exact distances on small integer
 * data through the C API. */
#include <attnpool/attnpool_c.h>
#include <attnpool/version.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  const float queries[2 * 2] = {0, 0, 1, 1};
  const float keys[3 * 2] = {3, 4, 0, 0, 1, 1};
  const float expected[2 * 3] = {25, 0, 2, 13, 2, 0};
  float out[2 * 3];
  const attnpool_const_matrix q = {queries, 2, 2, 0}, k = {keys, 3, 2, 0};
  const attnpool_matrix o = {out, 2, 3, 0};
  int i;
  if (attnpool_pairwise_distances(ATTNPOOL_FLOAT32, ATTNPOOL_SQEUCLIDEAN, &q,
                                  &k, &o, NULL) != ATTNPOOL_OK) {
    printf("c consumer: %s\n", attnpool_last_error());
    return 1;
  }
  for (i = 0; i < 6; ++i) {
    if (out[i] != expected[i]) {
      printf("out[%d] = %g, expected %g\n", i, out[i], expected[i]);
      return 1;
    }
  }
  /* The headers' version is the library's. */
  if (strcmp(attnpool_version(), ATTNPOOL_VERSION_STRING) != 0 ||
      attnpool_abi_version() != ATTNPOOL_ABI_VERSION) {
    printf("c consumer: library %s (ABI %d), headers %s (ABI %d)\n",
           attnpool_version(), attnpool_abi_version(), ATTNPOOL_VERSION_STRING,
           ATTNPOOL_ABI_VERSION);
    return 1;
  }
  printf("c consumer: distances correct on %s\n", attnpool_last_run_target());
  return 0;
}
