/* The C API from C99: every function, against direct formulas in double,
 * on every target this CPU supports; error codes, messages and untouched
 * outputs; the last error being per thread. */
#include <attnpool/attnpool_c.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks = 0, failures = 0;

#define CHECK(condition)                                                      \
  do {                                                                        \
    ++checks;                                                                 \
    if (!(condition)) {                                                       \
      ++failures;                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, \
              __LINE__, #condition, attnpool_last_error());                   \
    }                                                                         \
  } while (0)

#define CHECK_NEAR(actual, expected, tolerance)                                \
  do {                                                                         \
    const double actual_ = (actual), expected_ = (expected);                   \
    ++checks;                                                                  \
    if (!(fabs(actual_ - expected_) <= (tolerance) * (1 + fabs(expected_)))) { \
      ++failures;                                                              \
      fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g\n", __FILE__, __LINE__, \
              #actual, actual_, expected_);                                    \
    }                                                                          \
  } while (0)

enum { N = 7, M = 11, D = 3, DV = 2 };

static float queries[N * D], keys[M * D], values[M * DV];
static double queries64[N * D], keys64[M * D], values64[M * DV];

static void fill(void) {
  unsigned state = 12345;
  for (int i = 0; i < N * D; ++i) {
    state = state * 1103515245u + 12345u;
    queries64[i] = (double)((state >> 8) % 1000) / 250.0;
    queries[i] = (float)queries64[i];
  }
  for (int i = 0; i < M * D; ++i) {
    state = state * 1103515245u + 12345u;
    keys64[i] = (double)((state >> 8) % 1000) / 250.0;
    keys[i] = (float)keys64[i];
  }
  for (int i = 0; i < M * DV; ++i) {
    state = state * 1103515245u + 12345u;
    values64[i] = (double)((state >> 8) % 1000) / 100.0 - 5.0;
    values[i] = (float)values64[i];
  }
}

static double sqdist(int i, int j) {
  double sum = 0;
  for (int c = 0; c < D; ++c) {
    const double difference = (double)queries[i * D + c] - keys[j * D + c];
    sum += difference * difference;
  }
  return sum;
}

static void test_names(void) {
  attnpool_distance distance;
  attnpool_kernel kernel;
  attnpool_normalization normalization;
  CHECK(strcmp(attnpool_distance_name(ATTNPOOL_COSINE), "cosine") == 0);
  CHECK(strcmp(attnpool_kernel_name(ATTNPOOL_KERNEL_TRIANGULAR),
               "triangular") == 0);
  CHECK(strcmp(attnpool_normalization_name(ATTNPOOL_NORMALIZE_SOFTMAX),
               "softmax") == 0);
  CHECK(attnpool_distance_name((attnpool_distance)99) == NULL);
  CHECK(attnpool_distance_from_name("manhattan", &distance) == ATTNPOOL_OK);
  CHECK(distance == ATTNPOOL_MANHATTAN);
  CHECK(attnpool_kernel_from_name("boxcar", &kernel) == ATTNPOOL_OK);
  CHECK(kernel == ATTNPOOL_KERNEL_BOXCAR);
  CHECK(attnpool_normalization_from_name("argmax", &normalization) ==
        ATTNPOOL_OK);
  CHECK(normalization == ATTNPOOL_NORMALIZE_ARGMAX);
  CHECK(attnpool_kernel_from_name("gausian", &kernel) ==
        ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "kernel") == 0);
  CHECK(strstr(attnpool_last_error(), "gaussian") !=
        NULL); /* the known names */
  CHECK(attnpool_kernel_from_name("boxcar", NULL) == ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_status_name(ATTNPOOL_UNSUPPORTED_TARGET),
               "unsupported target") == 0);
  CHECK(strcmp(attnpool_version(), "") != 0);
  {
    const attnpool_pool_spec spec = attnpool_pool_spec_init();
    CHECK(spec.distance == ATTNPOOL_SQEUCLIDEAN);
    CHECK(spec.kernel.kernel == ATTNPOOL_KERNEL_GAUSSIAN);
    CHECK(spec.kernel.bandwidth == 1.0 && !spec.kernel.has_scale);
    CHECK(spec.normalization == ATTNPOOL_NORMALIZE_SUM);
    CHECK(spec.empty_rows == ATTNPOOL_EMPTY_ROWS_NAN);
  }
}

/* The four stages one by one, then the staged pipeline, on one target. */
static void test_stages(void) {
  float distances[N * M], out[N * DV];
  const attnpool_const_matrix q = {queries, N, D, 0}, k = {keys, M, D, 0},
                              v = {values, M, DV, 0};
  const attnpool_matrix d = {distances, N, M, 0}, o = {out, N, DV, 0};
  const attnpool_execution two_threads = {2};
  attnpool_kernel_spec kernel = attnpool_kernel_spec_init();
  const double h = 0.8;
  size_t valid[N];
  attnpool_mask mask;

  CHECK(attnpool_pairwise_distances(ATTNPOOL_FLOAT32, ATTNPOOL_SQEUCLIDEAN, &q,
                                    &k, &d, &two_threads) == ATTNPOOL_OK);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < M; ++j)
      CHECK_NEAR(distances[i * M + j], sqdist(i, j), 1e-5);

  kernel.bandwidth = h;
  CHECK(attnpool_apply_kernel(ATTNPOOL_FLOAT32, &kernel, ATTNPOOL_SQEUCLIDEAN,
                              &d, D, NULL) == ATTNPOOL_OK);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < M; ++j)
      CHECK_NEAR(distances[i * M + j], exp(-sqdist(i, j) / (2 * h * h)), 1e-5);

  /* Sum normalization over the first i keys of query i: query 0 sees none. */
  memset(&mask, 0, sizeof(mask));
  for (int i = 0; i < N; ++i) valid[i] = (size_t)i;
  mask.valid_lengths = valid;
  CHECK(attnpool_normalize(ATTNPOOL_FLOAT32, ATTNPOOL_NORMALIZE_SUM, &d, &mask,
                           ATTNPOOL_EMPTY_ROWS_NAN, NULL) == ATTNPOOL_OK);
  for (int j = 0; j < M; ++j) CHECK(isnan(distances[j]));
  for (int i = 1; i < N; ++i) {
    double total = 0;
    for (int j = 0; j < i; ++j) total += exp(-sqdist(i, j) / (2 * h * h));
    for (int j = 0; j < M; ++j) {
      const double expected =
          j < i ? exp(-sqdist(i, j) / (2 * h * h)) / total : 0;
      CHECK_NEAR(distances[i * M + j], expected, 1e-5);
    }
  }

  /* out = W . V with the NaN row 0 left out. */
  {
    const attnpool_const_matrix w = {distances + M, N - 1, M, M};
    const attnpool_matrix o_rows = {out + DV, N - 1, DV, 0};
    CHECK(attnpool_weighted_sum(ATTNPOOL_FLOAT32, &w, &v, &o_rows, NULL) ==
          ATTNPOOL_OK);
    for (int i = 1; i < N; ++i)
      for (int c = 0; c < DV; ++c) {
        double expected = 0;
        for (int j = 0; j < M; ++j)
          expected += distances[i * M + j] * values[j * DV + c];
        CHECK_NEAR(out[i * DV + c], expected, 1e-5);
      }
  }

  /* The staged pipeline, Nadaraya-Watson with a Gaussian, keeping weights. */
  {
    attnpool_pool_spec spec = attnpool_pool_spec_init();
    float weights[N * M];
    const attnpool_matrix w = {weights, N, M, 0};
    spec.kernel.bandwidth = h;
    CHECK(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &q, &k, &v, &o, &w,
                               NULL, &two_threads) == ATTNPOOL_OK);
    for (int i = 0; i < N; ++i) {
      double total = 0, sums[DV] = {0, 0};
      for (int j = 0; j < M; ++j) {
        const double weight = exp(-sqdist(i, j) / (2 * h * h));
        total += weight;
        for (int c = 0; c < DV; ++c) sums[c] += weight * values[j * DV + c];
      }
      for (int j = 0; j < M; ++j)
        CHECK_NEAR(weights[i * M + j], exp(-sqdist(i, j) / (2 * h * h)) / total,
                   1e-5);
      for (int c = 0; c < DV; ++c)
        CHECK_NEAR(out[i * DV + c], sums[c] / total, 1e-5);
    }
    /* The fused kernel gives the same. */
    {
      float fused[N * DV];
      const attnpool_matrix f = {fused, N, DV, 0};
      CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &q, &k, &v, &f, NULL,
                          &two_threads) == ATTNPOOL_OK);
      for (int i = 0; i < N * DV; ++i) CHECK_NEAR(fused[i], out[i], 1e-5);
    }
  }
}

/* float64, strided views, a visible mask, no weights kept, zero rows. */
static void test_pool_float64(void) {
  double out[N * 4];
  unsigned char visible[N * M];
  const attnpool_const_matrix q = {queries64, N, D, 0}, k = {keys64, M, D, 0},
                              v = {values64, M, DV, 0};
  const attnpool_matrix o = {out, N, DV, 4}; /* padded rows */
  attnpool_pool_spec spec = attnpool_pool_spec_init();
  attnpool_mask mask;
  memset(&mask, 0, sizeof(mask));
  for (int i = 0; i < N * 4; ++i) out[i] = -777;
  for (int i = 0; i < N * M; ++i)
    visible[i] = (unsigned char)((i % 3) != 0 && i / M != 2);
  mask.visible.data = visible;
  mask.visible.rows = N;
  mask.visible.cols = M;
  spec.kernel.kernel = ATTNPOOL_KERNEL_TRIANGULAR;
  spec.kernel.bandwidth = 3.0;
  spec.empty_rows = ATTNPOOL_EMPTY_ROWS_ZERO;
  CHECK(attnpool_pool_staged(ATTNPOOL_FLOAT64, &spec, &q, &k, &v, &o, NULL,
                             &mask, NULL) == ATTNPOOL_OK);
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < N; ++i) {
      double total = 0, sums[DV] = {0, 0};
      for (int j = 0; j < M; ++j) {
        double r = 0, weight;
        for (int c = 0; c < D; ++c) {
          const double difference = queries64[i * D + c] - keys64[j * D + c];
          r += difference * difference;
        }
        weight = visible[i * M + j] ? fmax(1 - sqrt(r) / 3.0, 0) : 0;
        total += weight;
        for (int c = 0; c < DV; ++c) sums[c] += weight * values64[j * DV + c];
      }
      for (int c = 0; c < DV; ++c)
        CHECK_NEAR(out[i * 4 + c], total > 0 ? sums[c] / total : 0.0, 1e-12);
      CHECK(out[i * 4 + 2] == -777 && out[i * 4 + 3] == -777); /* padding */
      /* Second pass: the fused kernel, into the same padded rows. */
      if (pass == 0 && i == N - 1) {
        for (int j = 0; j < N * 4; ++j) out[j] = -777;
        CHECK(attnpool_pool(ATTNPOOL_FLOAT64, &spec, &q, &k, &v, &o, &mask,
                            NULL) == ATTNPOOL_OK);
      }
    }
}

/* Each failure: the status, the argument, and the output untouched. */
static void test_errors(void) {
  float out[N * DV];
  const attnpool_const_matrix q = {queries, N, D, 0}, k = {keys, M, D, 0},
                              v = {values, M, DV, 0},
                              k_narrow = {keys, M, 2, 0},
                              v_short = {values, M - 1, DV, 0};
  const attnpool_matrix o = {out, N, DV, 0}, o_strided = {out, N, DV, 1};
  attnpool_pool_spec spec = attnpool_pool_spec_init();
  const attnpool_execution bad_threads = {-1};
  for (int i = 0; i < N * DV; ++i) out[i] = -777;

#define REJECTED(call, status, argument)                          \
  do {                                                            \
    CHECK((call) == (status));                                    \
    CHECK(strcmp(attnpool_last_error_argument(), argument) == 0); \
    CHECK(strstr(attnpool_last_error(), argument) != NULL);       \
  } while (0)

  REJECTED(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &q, &k_narrow, &v, &o,
                                NULL, NULL, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "keys.cols");
  REJECTED(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &q, &k, &v_short, &o,
                                NULL, NULL, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "values.rows");
  REJECTED(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &q, &k, &v, &o_strided,
                                NULL, NULL, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "out.stride");
  REJECTED(attnpool_pool_staged(ATTNPOOL_FLOAT32, NULL, &q, &k, &v, &o, NULL,
                                NULL, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "spec");
  REJECTED(
      attnpool_pool(ATTNPOOL_FLOAT32, &spec, &q, &k_narrow, &v, &o, NULL, NULL),
      ATTNPOOL_INVALID_ARGUMENT, "keys.cols");
  REJECTED(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &q, &k, &v, NULL, NULL, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "out");
  REJECTED(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &q, NULL, &v, &o, NULL,
                                NULL, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "keys");
  REJECTED(attnpool_pool_staged((attnpool_dtype)7, &spec, &q, &k, &v, &o, NULL,
                                NULL, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "dtype");
  REJECTED(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &q, &k, &v, &o, NULL,
                                NULL, &bad_threads),
           ATTNPOOL_INVALID_ARGUMENT, "execution.threads");
  spec.kernel.bandwidth = -1;
  REJECTED(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &q, &k, &v, &o, NULL,
                                NULL, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "kernel.bandwidth");
  spec = attnpool_pool_spec_init();
  spec.distance = ATTNPOOL_DOT; /* a Gaussian needs a distance */
  REJECTED(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &q, &k, &v, &o, NULL,
                                NULL, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "kernel.kernel");
  {
    const attnpool_const_matrix null_queries = {NULL, N, D, 0};
    REJECTED(
        attnpool_weighted_sum(ATTNPOOL_FLOAT32, &null_queries, &v, &o, NULL),
        ATTNPOOL_INVALID_ARGUMENT, "weights.data");
  }
  for (int i = 0; i < N * DV; ++i) CHECK(out[i] == -777);
  /* A success leaves the last error as it was. */
  spec = attnpool_pool_spec_init();
  CHECK(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &q, &k, &v, &o, NULL,
                             NULL, NULL) == ATTNPOOL_OK);
  CHECK(strcmp(attnpool_last_error_argument(), "weights.data") == 0);
}

static void* fail_in_thread(void* unused) {
  (void)unused;
  attnpool_kernel kernel;
  return (void*)(size_t)(attnpool_kernel_from_name("nope", &kernel) ==
                             ATTNPOOL_INVALID_ARGUMENT &&
                         strcmp(attnpool_last_error_argument(), "kernel") == 0);
}

static void test_thread_local_error(void) {
  pthread_t thread;
  void* result = NULL;
  attnpool_distance distance;
  CHECK(attnpool_distance_from_name("nope", &distance) ==
        ATTNPOOL_INVALID_ARGUMENT);
  CHECK(pthread_create(&thread, NULL, fail_in_thread, NULL) == 0);
  CHECK(pthread_join(thread, &result) == 0);
  CHECK(result == (void*)1);
  CHECK(strcmp(attnpool_last_error_argument(), "distance") == 0);
}

int main(void) {
  char targets[256];
  fill();
  test_names();
  test_errors();
  test_thread_local_error();
  CHECK(strlen(attnpool_compiled_targets()) > 0);
  CHECK(strlen(attnpool_supported_targets()) > 0);
  CHECK(attnpool_force_target("no-such-isa") == ATTNPOOL_UNSUPPORTED_TARGET);
  CHECK(strcmp(attnpool_last_error_argument(), "target") == 0);
  CHECK(attnpool_force_target(NULL) == ATTNPOOL_INVALID_ARGUMENT);

  /* Every supported target, forced one by one. */
  snprintf(targets, sizeof(targets), "%s", attnpool_supported_targets());
  for (char* name = strtok(targets, " "); name; name = strtok(NULL, " ")) {
    const int before = failures;
    CHECK(attnpool_force_target(name) == ATTNPOOL_OK);
    CHECK(strcmp(attnpool_active_target(), name) == 0);
    test_stages();
    CHECK(strcmp(attnpool_last_run_target(), name) == 0);
    test_pool_float64();
    printf("%-8s %s\n", name, failures == before ? "ok" : "FAILED");
  }
  CHECK(attnpool_reset_target() == ATTNPOOL_OK);
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
