/* The C API from C99: every function, against direct formulas in double,
 * on every target this CPU supports; error codes, messages and untouched
 * outputs; the last error being per thread. */
#include <attnpool/attnpool_c.h>

#include <math.h>
#include <stddef.h>
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

static attnpool_execution with_threads(int64_t threads) {
  attnpool_execution execution = attnpool_execution_init();
  execution.threads = threads;
  return execution;
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
  const attnpool_execution two_threads = with_threads(2);
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
  mask = attnpool_mask_init();
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
  mask = attnpool_mask_init();
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

/* Masks grow by their struct_size: 0 is refused; a caller's struct larger
 * than the library's must hold zeros past what the library knows; a smaller
 * one (an older caller) has the fields past it absent. */
static void test_mask_struct_size(void) {
  float q[2] = {0, 1}, k[3] = {0, 1, 2}, v[3] = {1, 2, 3}, out[2] = {-7, -7};
  size_t lengths[2] = {1, 1};
  const attnpool_const_matrix qm = {q, 2, 1, 0}, km = {k, 3, 1, 0},
                              vm = {v, 3, 1, 0};
  const attnpool_matrix om = {out, 2, 1, 0};
  attnpool_pool_spec spec = attnpool_pool_spec_init();
  struct {
    attnpool_mask mask;
    unsigned char after[16];
  } larger;
  attnpool_mask mask = attnpool_mask_init();
  attnpool_attention_mask heads = attnpool_attention_mask_init();
  CHECK(mask.struct_size == sizeof(attnpool_mask));
  CHECK(heads.struct_size == sizeof(attnpool_attention_mask));
  CHECK(attnpool_abi_version() == 3);
  CHECK(strstr(attnpool_mask_layout(0), "valid_lengths lengths\n") ==
        attnpool_mask_layout(0));
  CHECK(strstr(attnpool_mask_layout(1), "alibi_slopes head_number\n") != NULL);
  mask.struct_size = 0;
  CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &qm, &km, &vm, &om, &mask,
                      NULL) == ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "mask.struct_size") == 0);
  CHECK(out[0] == -7 && out[1] == -7);
  memset(&larger, 0, sizeof(larger));
  larger.mask = attnpool_mask_init();
  larger.mask.struct_size = sizeof(larger);
  larger.mask.valid_lengths = lengths;
  CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &qm, &km, &vm, &om, &larger.mask,
                      NULL) == ATTNPOOL_OK);
  CHECK(out[0] == 1 && out[1] == 1); /* each query sees key 0 alone */
  out[0] = out[1] = -7;
  larger.after[3] = 1;
  CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &qm, &km, &vm, &om, &larger.mask,
                      NULL) == ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "mask.struct_size") == 0);
  CHECK(out[0] == -7 && out[1] == -7);
  /* A struct that ends before valid_lengths: it is absent. */
  mask = attnpool_mask_init();
  mask.valid_lengths = lengths;
  mask.struct_size = offsetof(attnpool_mask, valid_lengths);
  CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &qm, &km, &vm, &om, &mask,
                      NULL) == ATTNPOOL_OK);
  CHECK(out[0] != 1 && out[1] != 1);
  /* Sizes no struct has: inside a member, or a pointer where an ABI 1
   * caller's mask began (its valid_lengths): refused, nothing read past. */
  out[0] = out[1] = -7;
  mask = attnpool_mask_init();
  mask.struct_size = 12;
  CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &qm, &km, &vm, &om, &mask,
                      NULL) == ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "mask.struct_size") == 0);
  mask.struct_size = (size_t)(uintptr_t)lengths;
  CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &qm, &km, &vm, &om, &mask,
                      NULL) == ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "mask.struct_size") == 0);
  CHECK(out[0] == -7 && out[1] == -7);
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
  const attnpool_execution bad_threads = with_threads(-1);
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

/* ------------------------------------------------------------- layers */

enum { B = 2, HQ = 2, HKV = 1, HIDDEN = 5, DH = 2, DOUT = 3 };

static float t_queries[B * HQ * N * D], t_keys[B * HKV * M * D],
    t_values[B * HKV * M * DV], t_bias[HQ * N * M], w_hidden_q[HIDDEN * D],
    w_hidden_k[HIDDEN * D], w_hidden_v[HIDDEN], w_proj_q[D * HQ * DH],
    w_proj_k[D * HQ * DH], w_proj_v[DV * HQ * DH], w_proj_o[HQ * DH * DOUT],
    b_proj_q[HQ * DH], b_proj_k[HQ * DH], b_proj_v[HQ * DH], b_proj_o[DOUT];

static void fill_uniform(float* data, int count, unsigned* state, double low,
                         double high) {
  for (int i = 0; i < count; ++i) {
    *state = *state * 1103515245u + 12345u;
    data[i] =
        (float)(low + (high - low) * (double)((*state >> 8) % 1000) / 1000.0);
  }
}

static void fill_layers(void) {
  unsigned state = 777;
  fill_uniform(t_queries, B * HQ * N * D, &state, -1, 1);
  fill_uniform(t_keys, B * HKV * M * D, &state, -1, 1);
  fill_uniform(t_values, B * HKV * M * DV, &state, -3, 3);
  fill_uniform(t_bias, HQ * N * M, &state, -0.5, 0.5);
  fill_uniform(w_hidden_q, HIDDEN * D, &state, -1, 1);
  fill_uniform(w_hidden_k, HIDDEN * D, &state, -1, 1);
  fill_uniform(w_hidden_v, HIDDEN, &state, -1, 1);
  fill_uniform(w_proj_q, D * HQ * DH, &state, -1, 1);
  fill_uniform(w_proj_k, D * HQ * DH, &state, -1, 1);
  fill_uniform(w_proj_v, DV * HQ * DH, &state, -1, 1);
  fill_uniform(w_proj_o, HQ * DH * DOUT, &state, -1, 1);
  fill_uniform(b_proj_q, HQ * DH, &state, -0.5, 0.5);
  fill_uniform(b_proj_k, HQ * DH, &state, -0.5, 0.5);
  fill_uniform(b_proj_v, HQ * DH, &state, -0.5, 0.5);
  fill_uniform(b_proj_o, DOUT, &state, -0.5, 0.5);
}

/* out[c] = softmax over the visible j of scores[j] . values(j, c), in
 * double; returns 0 when no key is visible. */
static int softmax_pool(const double* scores, const int* visible, int m,
                        const float* values, int value_stride, int dv,
                        double* out) {
  double top = -INFINITY, total = 0;
  for (int c = 0; c < dv; ++c) out[c] = 0;
  for (int j = 0; j < m; ++j)
    if (visible[j] && scores[j] > top) top = scores[j];
  if (top == -INFINITY) return 0;
  for (int j = 0; j < m; ++j) {
    if (!visible[j]) continue;
    const double weight = exp(scores[j] - top);
    total += weight;
    for (int c = 0; c < dv; ++c)
      out[c] += weight * values[j * value_stride + c];
  }
  for (int c = 0; c < dv; ++c) out[c] /= total;
  return 1;
}

/* Scaled dot-product attention: grouped-query (2 query heads on 1 key/value
 * head), queries dense (B, H, n, d), out in the (B, n, H, dv) layout, a
 * causal mask with offset, per-batch valid lengths and a bias broadcast
 * over the batch. */
static void test_sdpa(void) {
  float out[B * N * HQ * DV];
  const size_t lengths[B] = {M, 4};
  const attnpool_const_tensor q = {t_queries, B, HQ, N, D, 0, 0, 0},
                              k = {t_keys, B, HKV, M, D, 0, 0, 0},
                              v = {t_values, B, HKV, M, DV, 0, 0, 0};
  /* (B, n, H, dv): row stride H * dv, head stride dv. */
  const attnpool_tensor o = {out, B, HQ, N, DV, N * HQ * DV, DV, HQ * DV};
  const double scale = 0.7;
  const attnpool_execution two_threads = with_threads(2);
  attnpool_attention_mask mask;
  mask = attnpool_attention_mask_init();
  mask.valid_lengths = lengths;
  mask.causal = 1;
  mask.causal_offset = 2;
  mask.bias.data = t_bias;
  mask.bias.batch = 1;
  mask.bias.heads = HQ;
  mask.bias.rows = N;
  mask.bias.cols = M;
  for (int i = 0; i < B * N * HQ * DV; ++i) out[i] = -777;
  CHECK(attnpool_scaled_dot_product_attention(
            ATTNPOOL_FLOAT32, &q, &k, &v, &o, &mask, &scale,
            ATTNPOOL_EMPTY_ROWS_NAN, &two_threads) == ATTNPOOL_OK);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < HQ; ++h)
      for (int i = 0; i < N; ++i) {
        double scores[M], expected[DV];
        int visible[M];
        const float* query = t_queries + ((b * HQ + h) * N + i) * D;
        for (int j = 0; j < M; ++j) {
          const float* key = t_keys + (b * M + j) * D;
          double dot = 0;
          for (int c = 0; c < D; ++c) dot += (double)query[c] * key[c];
          scores[j] = scale * dot + t_bias[(h * N + i) * M + j];
          visible[j] = j < (int)lengths[b] && j <= i + 2;
        }
        CHECK(softmax_pool(scores, visible, M, t_values + b * M * DV, DV, DV,
                           expected));
        for (int c = 0; c < DV; ++c)
          CHECK_NEAR(out[((b * N + i) * HQ + h) * DV + c], expected[c], 1e-5);
      }

  /* float64, no mask, the default scale 1/sqrt(d): against attnpool_pool. */
  {
    double out64[N * DV], pooled[N * DV];
    const attnpool_const_tensor q64 = {queries64, 1, 1, N, D, 0, 0, 0},
                                k64 = {keys64, 1, 1, M, D, 0, 0, 0},
                                v64 = {values64, 1, 1, M, DV, 0, 0, 0};
    const attnpool_tensor o64 = {out64, 1, 1, N, DV, 0, 0, 0};
    const attnpool_const_matrix qm = {queries64, N, D, 0},
                                km = {keys64, M, D, 0},
                                vm = {values64, M, DV, 0};
    const attnpool_matrix pm = {pooled, N, DV, 0};
    attnpool_pool_spec spec = attnpool_pool_spec_init();
    spec.distance = ATTNPOOL_DOT;
    spec.kernel.kernel = ATTNPOOL_KERNEL_EXP;
    spec.normalization = ATTNPOOL_NORMALIZE_SOFTMAX;
    CHECK(attnpool_scaled_dot_product_attention(
              ATTNPOOL_FLOAT64, &q64, &k64, &v64, &o64, NULL, NULL,
              ATTNPOOL_EMPTY_ROWS_NAN, NULL) == ATTNPOOL_OK);
    CHECK(attnpool_pool(ATTNPOOL_FLOAT64, &spec, &qm, &km, &vm, &pm, NULL,
                        NULL) == ATTNPOOL_OK);
    for (int i = 0; i < N * DV; ++i) CHECK_NEAR(out64[i], pooled[i], 1e-13);
  }
}

/* Additive attention, 2 heads sharing the weights; a causal mask. */
static void test_additive(void) {
  float out[HQ * N * DV];
  const attnpool_const_tensor q = {t_queries, 1, HQ, N, D, 0, 0, 0},
                              k = {t_keys, 1, 1, M, D, 0, 0, 0},
                              v = {t_values, 1, 1, M, DV, 0, 0, 0};
  const attnpool_tensor o = {out, 1, HQ, N, DV, 0, 0, 0};
  attnpool_additive_weights weights;
  attnpool_attention_mask mask;
  memset(&weights, 0, sizeof(weights));
  mask = attnpool_attention_mask_init();
  weights.w_q.data = w_hidden_q;
  weights.w_q.rows = HIDDEN;
  weights.w_q.cols = D;
  weights.w_k.data = w_hidden_k;
  weights.w_k.rows = HIDDEN;
  weights.w_k.cols = D;
  weights.w_v = w_hidden_v;
  mask.causal = 1;
  mask.causal_offset = 1;
  CHECK(attnpool_additive_attention(ATTNPOOL_FLOAT32, &weights, &q, &k, &v, &o,
                                    &mask, ATTNPOOL_EMPTY_ROWS_NAN,
                                    NULL) == ATTNPOOL_OK);
  for (int h = 0; h < HQ; ++h)
    for (int i = 0; i < N; ++i) {
      double scores[M], expected[DV];
      int visible[M];
      const float* query = t_queries + (h * N + i) * D;
      for (int j = 0; j < M; ++j) {
        double score = 0;
        for (int u = 0; u < HIDDEN; ++u) {
          double pre = 0;
          for (int c = 0; c < D; ++c)
            pre += (double)w_hidden_q[u * D + c] * query[c] +
                   (double)w_hidden_k[u * D + c] * t_keys[j * D + c];
          score += w_hidden_v[u] * tanh(pre);
        }
        scores[j] = score;
        visible[j] = j <= i + 1;
      }
      CHECK(softmax_pool(scores, visible, M, t_values, DV, DV, expected));
      for (int c = 0; c < DV; ++c)
        CHECK_NEAR(out[(h * N + i) * DV + c], expected[c], 1e-5);
    }
}

static void multi_head_weights(attnpool_multi_head_weights* weights) {
  const attnpool_const_matrix w_q = {w_proj_q, D, HQ * DH, 0},
                              w_k = {w_proj_k, D, HQ * DH, 0},
                              w_v = {w_proj_v, DV, HQ * DH, 0},
                              w_o = {w_proj_o, HQ * DH, DOUT, 0};
  weights->heads = HQ;
  weights->w_q = w_q;
  weights->w_k = w_k;
  weights->w_v = w_v;
  weights->w_o = w_o;
  weights->b_q = b_proj_q;
  weights->b_k = b_proj_k;
  weights->b_v = b_proj_v;
  weights->b_o = b_proj_o;
}

/* row (k entries) . w (k x c) + bias, in double. */
static void project(const float* row, int k, const float* w, int c,
                    const float* bias, double* out) {
  for (int col = 0; col < c; ++col) {
    out[col] = bias ? bias[col] : 0;
    for (int r = 0; r < k; ++r) out[col] += (double)row[r] * w[r * c + col];
  }
}

/* Multi-head attention with every bias: 2 heads of 2, queries of the first
 * batch entry against its keys, values = the keys' first DV columns. */
static void test_multi_head(void) {
  float out[N * DOUT], projected_v[M * HQ * DH];
  const attnpool_const_tensor q = {t_queries, 1, 1, N, D, 0, 0, 0},
                              k = {t_keys, 1, 1, M, D, 0, 0, 0},
                              v = {t_values, 1, 1, M, DV, 0, 0, 0};
  const attnpool_tensor o = {out, 1, 1, N, DOUT, 0, 0, 0};
  attnpool_multi_head_weights weights;
  double projected_k[M][HQ * DH];
  memset(&weights, 0, sizeof(weights));
  multi_head_weights(&weights);
  CHECK(attnpool_multi_head_attention(ATTNPOOL_FLOAT32, &weights, &q, &k, &v,
                                      &o, NULL, ATTNPOOL_EMPTY_ROWS_NAN,
                                      NULL) == ATTNPOOL_OK);
  for (int j = 0; j < M; ++j) {
    double row[HQ * DH];
    project(t_keys + j * D, D, w_proj_k, HQ * DH, b_proj_k, projected_k[j]);
    project(t_values + j * DV, DV, w_proj_v, HQ * DH, b_proj_v, row);
    for (int c = 0; c < HQ * DH; ++c)
      projected_v[j * HQ * DH + c] = (float)row[c];
  }
  for (int i = 0; i < N; ++i) {
    double projected_q[HQ * DH], concat[HQ * DH], expected[DOUT];
    int visible[M];
    project(t_queries + i * D, D, w_proj_q, HQ * DH, b_proj_q, projected_q);
    for (int h = 0; h < HQ; ++h) {
      double scores[M];
      for (int j = 0; j < M; ++j) {
        double dot = 0;
        for (int c = 0; c < DH; ++c)
          dot += projected_q[h * DH + c] * projected_k[j][h * DH + c];
        scores[j] = dot / sqrt((double)DH);
        visible[j] = 1;
      }
      CHECK(softmax_pool(scores, visible, M, projected_v + h * DH, HQ * DH, DH,
                         concat + h * DH));
    }
    for (int c = 0; c < DOUT; ++c) {
      expected[c] = b_proj_o[c];
      for (int r = 0; r < HQ * DH; ++r)
        expected[c] += concat[r] * w_proj_o[r * DOUT + c];
      CHECK_NEAR(out[i * DOUT + c], expected[c], 1e-4);
    }
  }
}

/* linear: x . w + bias, with and without the bias, strided x. */
static void test_linear(void) {
  float out[N * DV];
  const attnpool_const_matrix x = {t_queries, N, D - 1, D},
                              w = {w_proj_v, D - 1, DV, HQ * DH};
  const attnpool_matrix o = {out, N, DV, 0};
  for (int with_bias = 0; with_bias < 2; ++with_bias) {
    CHECK(attnpool_linear(ATTNPOOL_FLOAT32, &x, &w, with_bias ? b_proj_o : NULL,
                          &o, NULL) == ATTNPOOL_OK);
    for (int i = 0; i < N; ++i)
      for (int c = 0; c < DV; ++c) {
        double expected = with_bias ? b_proj_o[c] : 0;
        for (int r = 0; r < D - 1; ++r)
          expected += (double)t_queries[i * D + r] * w_proj_v[r * HQ * DH + c];
        CHECK_NEAR(out[i * DV + c], expected, 1e-5);
      }
  }
}

/* The shard API: keys [0, 5) and [5, M) pooled apart, merged and finished,
 * equal the pooling over all keys; for a softmax (with a causal mask, which
 * counts keys from the start of the whole sequence), a kernel regression
 * (sum of Gaussian weights) and argmax. */
static void test_shards(void) {
  enum { SPLIT = 5 };
  float whole[N * DV], finished[N * DV];
  float accumulator[2][N * DV], maxima[2][N], sums[2][N];
  size_t best[2][N];
  attnpool_partial_state states[2];
  const attnpool_const_matrix q = {queries, N, D, 0}, k = {keys, M, D, 0},
                              v = {values, M, DV, 0},
                              k_first = {keys, SPLIT, D, 0},
                              v_first = {values, SPLIT, DV, 0},
                              k_second = {keys + SPLIT * D, M - SPLIT, D, 0},
                              v_second = {values + SPLIT * DV, M - SPLIT, DV,
                                          0};
  const attnpool_matrix w = {whole, N, DV, 0}, f = {finished, N, DV, 0};
  attnpool_mask mask;
  for (int s = 0; s < 2; ++s) {
    const attnpool_matrix acc = {accumulator[s], N, DV, 0};
    states[s].accumulator = acc;
    states[s].max = maxima[s];
    states[s].sum = sums[s];
    states[s].best = best[s];
  }
  for (int variant = 0; variant < 3; ++variant) {
    attnpool_pool_spec spec = attnpool_pool_spec_init();
    mask = attnpool_mask_init();
    if (variant == 0) {
      spec.distance = ATTNPOOL_DOT;
      spec.kernel.kernel = ATTNPOOL_KERNEL_EXP;
      spec.normalization = ATTNPOOL_NORMALIZE_SOFTMAX;
      mask.causal = 1;
      mask.causal_offset = 3;
    } else if (variant == 1) {
      spec.kernel.bandwidth = 0.9;
    } else {
      spec.normalization = ATTNPOOL_NORMALIZE_ARGMAX;
    }
    CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &q, &k, &v, &w, &mask, NULL) ==
          ATTNPOOL_OK);
    CHECK(attnpool_pool_partial(ATTNPOOL_FLOAT32, &spec, &q, &k_first, &v_first,
                                0, &states[0], &mask, NULL) == ATTNPOOL_OK);
    CHECK(attnpool_pool_partial(ATTNPOOL_FLOAT32, &spec, &q, &k_second,
                                &v_second, SPLIT, &states[1], &mask,
                                NULL) == ATTNPOOL_OK);
    CHECK(attnpool_pool_merge(ATTNPOOL_FLOAT32, &spec, &states[0],
                              &states[1]) == ATTNPOOL_OK);
    CHECK(attnpool_pool_finish(ATTNPOOL_FLOAT32, &spec, &states[0], &f) ==
          ATTNPOOL_OK);
    for (int i = 0; i < N * DV; ++i) CHECK_NEAR(finished[i], whole[i], 1e-5);
    if (variant == 2)
      for (int i = 0; i < N; ++i) CHECK(best[0][i] < M);
    /* finish in place, into the accumulator. */
    CHECK(attnpool_pool_finish(ATTNPOOL_FLOAT32, &spec, &states[0],
                               &states[0].accumulator) == ATTNPOOL_OK);
    for (int i = 0; i < N * DV; ++i)
      CHECK_NEAR(accumulator[0][i], whole[i], 1e-5);
  }
}

/* One bad argument per new function: the status, the argument named in the
 * message, and the output untouched. */
static void test_layer_errors(void) {
  float out[B * HQ * N * DV], state_max[N], state_sum[N];
  size_t state_best[N];
  const attnpool_const_tensor q = {t_queries, B, HQ, N, D, 0, 0, 0},
                              k = {t_keys, B, HKV, M, D, 0, 0, 0},
                              k_narrow = {t_keys, B, HKV, M, D - 1, 0, 0, 0},
                              v = {t_values, B, HKV, M, DV, 0, 0, 0};
  const attnpool_tensor o = {out, B, HQ, N, DV, 0, 0, 0};
  const double bad_scale = INFINITY;
  attnpool_attention_mask mask;
  attnpool_additive_weights additive;
  attnpool_multi_head_weights multi_head;
  attnpool_pool_spec spec = attnpool_pool_spec_init();
  attnpool_partial_state state;
  for (int i = 0; i < B * HQ * N * DV; ++i) out[i] = -777;
  for (int i = 0; i < N; ++i) state_max[i] = state_sum[i] = -777;
  mask = attnpool_attention_mask_init();
  memset(&additive, 0, sizeof(additive));
  memset(&multi_head, 0, sizeof(multi_head));

  REJECTED(attnpool_scaled_dot_product_attention(ATTNPOOL_FLOAT32, &q,
                                                 &k_narrow, &v, &o, NULL, NULL,
                                                 ATTNPOOL_EMPTY_ROWS_NAN, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "keys.cols");
  REJECTED(attnpool_scaled_dot_product_attention(ATTNPOOL_FLOAT32, &q, &k, &v,
                                                 &o, NULL, &bad_scale,
                                                 ATTNPOOL_EMPTY_ROWS_NAN, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "scale");
  REJECTED(attnpool_scaled_dot_product_attention(ATTNPOOL_FLOAT32, &q, &k, &v,
                                                 NULL, NULL, NULL,
                                                 ATTNPOOL_EMPTY_ROWS_NAN, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "out");
  mask.bias.batch = 1; /* a shape without data */
  mask.bias.heads = 1;
  mask.bias.rows = N;
  mask.bias.cols = M;
  REJECTED(attnpool_scaled_dot_product_attention(ATTNPOOL_FLOAT32, &q, &k, &v,
                                                 &o, &mask, NULL,
                                                 ATTNPOOL_EMPTY_ROWS_NAN, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "mask.bias.data");
  mask.bias.data = t_bias;
  mask.bias.rows = N - 1;
  REJECTED(attnpool_scaled_dot_product_attention(ATTNPOOL_FLOAT32, &q, &k, &v,
                                                 &o, &mask, NULL,
                                                 ATTNPOOL_EMPTY_ROWS_NAN, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "mask.bias.rows");

  additive.w_q.data = w_hidden_q;
  additive.w_q.rows = HIDDEN;
  additive.w_q.cols = D;
  additive.w_k.data = w_hidden_k;
  additive.w_k.rows = HIDDEN;
  additive.w_k.cols = D;
  REJECTED(attnpool_additive_attention(ATTNPOOL_FLOAT32, &additive, &q, &k, &v,
                                       &o, NULL, ATTNPOOL_EMPTY_ROWS_NAN, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "weights.w_v");

  multi_head_weights(&multi_head);
  multi_head.heads = 3; /* 4 projection columns */
  {
    const attnpool_const_tensor q1 = {t_queries, 1, 1, N, D, 0, 0, 0},
                                k1 = {t_keys, 1, 1, M, D, 0, 0, 0},
                                v1 = {t_values, 1, 1, M, DV, 0, 0, 0};
    const attnpool_tensor o1 = {out, 1, 1, N, DOUT, 0, 0, 0};
    REJECTED(attnpool_multi_head_attention(ATTNPOOL_FLOAT32, &multi_head, &q1,
                                           &k1, &v1, &o1, NULL,
                                           ATTNPOOL_EMPTY_ROWS_NAN, NULL),
             ATTNPOOL_INVALID_ARGUMENT, "weights.w_q.cols");
  }

  {
    const attnpool_const_matrix x = {t_queries, N, D, 0},
                                w = {w_proj_v, D - 1, DV, 0};
    const attnpool_matrix o2 = {out, N, DV, 0};
    REJECTED(attnpool_linear(ATTNPOOL_FLOAT32, &x, &w, NULL, &o2, NULL),
             ATTNPOOL_INVALID_ARGUMENT, "w.rows");
  }

  {
    const attnpool_const_matrix qm = {queries, N, D, 0}, km = {keys, M, D, 0},
                                vm = {values, M, DV, 0};
    const attnpool_matrix acc = {out, N, DV, 0},
                          acc_short = {out, N - 1, DV, 0};
    attnpool_partial_state later;
    state.accumulator = acc;
    state.max = state_max;
    state.sum = NULL;
    state.best = state_best;
    REJECTED(attnpool_pool_partial(ATTNPOOL_FLOAT32, &spec, &qm, &km, &vm, 0,
                                   &state, NULL, NULL),
             ATTNPOOL_INVALID_ARGUMENT, "partial.sum");
    state.sum = state_sum;
    later = state;
    later.accumulator = acc_short;
    REJECTED(attnpool_pool_merge(ATTNPOOL_FLOAT32, &spec, &state, &later),
             ATTNPOOL_INVALID_ARGUMENT, "later.accumulator.rows");
    spec.normalization = (attnpool_normalization)9;
    REJECTED(attnpool_pool_merge(ATTNPOOL_FLOAT32, &spec, &state, &state),
             ATTNPOOL_INVALID_ARGUMENT, "spec.normalization");
    spec = attnpool_pool_spec_init();
    {
      float finish_out[N * DV];
      const attnpool_matrix narrow = {finish_out, N, DV - 1, 0};
      for (int i = 0; i < N * DV; ++i) finish_out[i] = -777;
      REJECTED(attnpool_pool_finish(ATTNPOOL_FLOAT32, &spec, &state, &narrow),
               ATTNPOOL_INVALID_ARGUMENT, "partial.accumulator.cols");
      for (int i = 0; i < N * DV; ++i) CHECK(finish_out[i] == -777);
    }
  }
  for (int i = 0; i < B * HQ * N * DV; ++i) CHECK(out[i] == -777);
  for (int i = 0; i < N; ++i)
    CHECK(state_max[i] == -777 && state_sum[i] == -777);
}

/* ------------------------------------------------------------- regression */

enum { NR = 23, NQ = 7 };

static float r_x[NR], r_y[NR], r_queries[NQ];

/* y = 2 sin x + x + noise on [0, 5), queries past both ends too. */
static void fill_regression(void) {
  unsigned state = 4242;
  fill_uniform(r_x, NR, &state, 0, 5);
  fill_uniform(r_y, NR, &state, -0.5, 0.5);
  for (int i = 0; i < NR; ++i) r_y[i] += (float)(2 * sin(r_x[i]) + r_x[i]);
  for (int i = 0; i < NQ; ++i) r_queries[i] = (float)(-0.5 + 0.9 * i);
}

/* The kernel of a distance r (not squared) and bandwidth h, in double. */
static double kernel_weight(attnpool_kernel kernel, double r, double h) {
  const double u = r / h;
  switch (kernel) {
    case ATTNPOOL_KERNEL_GAUSSIAN:
      return exp(-u * u / 2);
    case ATTNPOOL_KERNEL_BOXCAR:
      return u < 1 ? 1 : 0;
    case ATTNPOOL_KERNEL_TRIANGULAR:
      return fmax(1 - u, 0);
    case ATTNPOOL_KERNEL_EPANECHNIKOV:
      return fmax(1 - u * u, 0);
    default:
      return NAN;
  }
}

/* Brute-force cross-validation of one bandwidth on 1-D float data (folds
 * 0: leave-one-out): the score, and the unpredictable count in *missing. */
static double brute_force_score(attnpool_kernel kernel, const float* x,
                                const float* y, int n, double h, int folds,
                                size_t* missing) {
  double total = 0;
  int predicted = 0;
  *missing = 0;
  for (int i = 0; i < n; ++i) {
    double sum = 0, weighted = 0;
    for (int j = 0; j < n; ++j) {
      const int held_out = folds == 0 ? j == i : j % folds == i % folds;
      if (held_out) continue;
      const double w = kernel_weight(kernel, fabs((double)x[i] - x[j]), h);
      sum += w;
      weighted += w * y[j];
    }
    if (sum > 0) {
      total += (y[i] - weighted / sum) * (y[i] - weighted / sum);
      ++predicted;
    } else {
      ++*missing;
    }
  }
  return predicted > 0 ? total / predicted : NAN;
}

static int compare_doubles(const void* a, const void* b) {
  const double left = *(const double*)a, right = *(const double*)b;
  return (left > right) - (left < right);
}

/* Silverman's (or Scott's) bandwidth of column k of an n x d double matrix:
 * sigma = min(sd, IQR / 1.349) with numpy's linear quantiles. */
static double rule_bandwidth(const double* x, int n, int d, int k,
                             int silverman) {
  double column[M], mean = 0, squares = 0, quartile[2];
  for (int j = 0; j < n; ++j) mean += column[j] = x[j * d + k];
  mean /= n;
  for (int j = 0; j < n; ++j)
    squares += (column[j] - mean) * (column[j] - mean);
  qsort(column, (size_t)n, sizeof(double), compare_doubles);
  for (int q = 0; q < 2; ++q) {
    const double position = (q == 0 ? 0.25 : 0.75) * (n - 1);
    const int below = (int)floor(position);
    const int above = below + 1 < n ? below + 1 : n - 1;
    quartile[q] =
        column[below] + (position - below) * (column[above] - column[below]);
  }
  {
    const double sd = sqrt(squares / (n - 1)), iqr = quartile[1] - quartile[0];
    const double sigma = iqr > 0 ? fmin(sd, iqr / 1.349) : sd;
    const double factor = silverman ? pow(4.0 / (d + 2), 1.0 / (d + 4)) : 1.059;
    return factor * sigma * pow(n, -1.0 / (d + 4));
  }
}

/* Nadaraya-Watson predictions (with weights), the rules of thumb, the grid
 * and cross-validation, against direct evaluations in double. */
static void test_regression(void) {
  /* float32, 1-D, one Gaussian bandwidth, keeping the weights. */
  {
    float out[NQ], weights[NQ * NR];
    const double h = 0.6;
    const attnpool_const_matrix x = {r_x, NR, 1, 0}, y = {r_y, NR, 1, 0},
                                q = {r_queries, NQ, 1, 0};
    const attnpool_matrix o = {out, NQ, 1, 0}, w = {weights, NQ, NR, 0};
    const attnpool_execution two_threads = with_threads(2);
    for (int with_weights = 0; with_weights < 2; ++with_weights) {
      CHECK(attnpool_nadaraya_watson_predict(
                ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_GAUSSIAN, &h, 1, &x, &y, &q,
                &o, with_weights ? &w : NULL, ATTNPOOL_EMPTY_ROWS_NAN,
                &two_threads) == ATTNPOOL_OK);
      for (int i = 0; i < NQ; ++i) {
        double total = 0, weighted = 0;
        for (int j = 0; j < NR; ++j) {
          const double weight = kernel_weight(
              ATTNPOOL_KERNEL_GAUSSIAN, fabs((double)r_queries[i] - r_x[j]), h);
          total += weight;
          weighted += weight * r_y[j];
        }
        CHECK_NEAR(out[i], weighted / total, 1e-5);
        if (with_weights)
          for (int j = 0; j < NR; ++j)
            CHECK_NEAR(weights[i * NR + j],
                       kernel_weight(ATTNPOOL_KERNEL_GAUSSIAN,
                                     fabs((double)r_queries[i] - r_x[j]), h) /
                           total,
                       1e-5);
      }
    }
  }
  /* float64, 3-D, per-dimension bandwidths (Gaussian), and an
   * Epanechnikov kernel whose narrow window leaves rows empty (zero). */
  {
    double out[N * DV];
    const double h[D] = {0.8, 1.3, 2.1}, narrow = 0.5;
    const attnpool_const_matrix x = {keys64, M, D, 0}, y = {values64, M, DV, 0},
                                q = {queries64, N, D, 0};
    const attnpool_matrix o = {out, N, DV, 0};
    int empty = 0;
    for (int variant = 0; variant < 2; ++variant) {
      const attnpool_kernel kernel = variant == 0
                                         ? ATTNPOOL_KERNEL_GAUSSIAN
                                         : ATTNPOOL_KERNEL_EPANECHNIKOV;
      CHECK(attnpool_nadaraya_watson_predict(
                ATTNPOOL_FLOAT64, kernel, variant == 0 ? h : &narrow,
                variant == 0 ? D : 1, &x, &y, &q, &o, NULL,
                ATTNPOOL_EMPTY_ROWS_ZERO, NULL) == ATTNPOOL_OK);
      for (int i = 0; i < N; ++i) {
        double total = 0, sums[DV] = {0, 0};
        for (int j = 0; j < M; ++j) {
          double r2 = 0, weight;
          for (int c = 0; c < D; ++c) {
            const double scaled = (queries64[i * D + c] - keys64[j * D + c]) /
                                  (variant == 0 ? h[c] : 1.0);
            r2 += scaled * scaled;
          }
          weight = kernel_weight(kernel, sqrt(r2), variant == 0 ? 1.0 : narrow);
          total += weight;
          for (int c = 0; c < DV; ++c) sums[c] += weight * values64[j * DV + c];
        }
        empty += total == 0;
        for (int c = 0; c < DV; ++c)
          CHECK_NEAR(out[i * DV + c], total > 0 ? sums[c] / total : 0.0, 1e-12);
      }
    }
    CHECK(empty > 0); /* the zero rows were exercised */
  }
  /* The rules of thumb, per column. */
  {
    double bandwidths[D];
    const attnpool_const_matrix x = {keys64, M, D, 0};
    for (int silverman = 0; silverman < 2; ++silverman) {
      CHECK(attnpool_rule_of_thumb_bandwidth(
                ATTNPOOL_FLOAT64,
                silverman ? ATTNPOOL_BANDWIDTH_RULE_SILVERMAN
                          : ATTNPOOL_BANDWIDTH_RULE_SCOTT,
                &x, bandwidths) == ATTNPOOL_OK);
      for (int k = 0; k < D; ++k)
        CHECK_NEAR(bandwidths[k], rule_bandwidth(keys64, M, D, k, silverman),
                   1e-12);
    }
  }
  /* Leave-one-out on a grid even in 1/h^2 (the Gaussian powers path), at 1
   * and 2 threads (bitwise equal), and 3-fold with a boxcar on an uneven,
   * unsorted grid whose narrowest width leaves points unpredictable. */
  {
    enum { COUNT = 6 };
    double grid[COUNT], scores[2][COUNT];
    size_t unpredictable[COUNT], best = 99, missing;
    const attnpool_const_matrix x = {r_x, NR, 1, 0}, y = {r_y, NR, 1, 0};
    const attnpool_execution threads[2] = {with_threads(1), with_threads(2)};
    const double lambda_max = 1 / (0.2 * 0.2), lambda_min = 1 / (2.0 * 2.0);
    int least = 0;
    CHECK(attnpool_gaussian_bandwidth_grid(0.2, 2.0, COUNT, grid) ==
          ATTNPOOL_OK);
    for (int b = 0; b < COUNT; ++b)
      CHECK_NEAR(grid[b],
                 1 / sqrt(lambda_max - b * (lambda_max - lambda_min) / 5),
                 1e-14);
    for (int t = 0; t < 2; ++t)
      CHECK(attnpool_cross_validate(ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_GAUSSIAN,
                                    &x, &y, grid, COUNT, NULL, scores[t],
                                    unpredictable, &best,
                                    &threads[t]) == ATTNPOOL_OK);
    for (int b = 0; b < COUNT; ++b) {
      CHECK(memcmp(&scores[0][b], &scores[1][b], sizeof(double)) == 0);
      CHECK_NEAR(scores[0][b],
                 brute_force_score(ATTNPOOL_KERNEL_GAUSSIAN, r_x, r_y, NR,
                                   grid[b], 0, &missing),
                 2e-5);
      CHECK(unpredictable[b] == 0 && missing == 0);
      if (scores[0][b] < scores[0][least]) least = b;
    }
    CHECK(best == (size_t)least);
  }
  {
    enum { COUNT = 3 };
    const double grid[COUNT] = {3.0011, 0.0213, 1.0007};
    double scores[COUNT];
    size_t unpredictable[COUNT], best = 99, missing;
    const attnpool_const_matrix x = {r_x, NR, 1, 0}, y = {r_y, NR, 1, 0};
    attnpool_cross_validation_options options;
    memset(&options, 0, sizeof(options));
    options.folds = 3;
    CHECK(attnpool_cross_validate(ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_BOXCAR, &x,
                                  &y, grid, COUNT, &options, scores,
                                  unpredictable, &best, NULL) == ATTNPOOL_OK);
    for (int b = 0; b < COUNT; ++b) {
      const double expected = brute_force_score(ATTNPOOL_KERNEL_BOXCAR, r_x,
                                                r_y, NR, grid[b], 3, &missing);
      CHECK(unpredictable[b] == missing);
      if (isnan(expected)) {
        CHECK(isnan(scores[b]));
      } else {
        CHECK_NEAR(scores[b], expected, 2e-5);
      }
    }
    CHECK(unpredictable[1] > 0 && unpredictable[0] == 0 &&
          unpredictable[2] == 0);
    CHECK(best == (scores[2] < scores[0] ? 2u : 0u));
    /* Every pair visited: a compact kernel skips only zero weights. */
    {
      double every[COUNT];
      options.every_pair = 1;
      CHECK(attnpool_cross_validate(ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_BOXCAR,
                                    &x, &y, grid, COUNT, &options, every, NULL,
                                    NULL, NULL) == ATTNPOOL_OK);
      CHECK(memcmp(every, scores, sizeof(every)) == 0);
      options.every_pair = 0;
    }
    /* Only the narrowest width: no bandwidth predicts every point. */
    CHECK(attnpool_cross_validate(ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_BOXCAR, &x,
                                  &y, grid + 1, 1, &options, scores, NULL,
                                  &best, NULL) == ATTNPOOL_OK);
    CHECK(best == ATTNPOOL_NO_BANDWIDTH);
  }
}

/* One bad argument per regression function: the status, the argument named
 * in the message, and the outputs untouched. */
static void test_regression_errors(void) {
  float out[NQ];
  double doubles[8], scores[2];
  size_t unpredictable[2] = {777, 777}, best = 777;
  const double h = 0.5, bad_h = -1, pair[2] = {0.5, 0.7};
  const attnpool_const_matrix x = {r_x, NR, 1, 0}, y = {r_y, NR, 1, 0},
                              q = {r_queries, NQ, 1, 0},
                              one_row = {r_x, 1, 1, 0};
  const attnpool_matrix o = {out, NQ, 1, 0};
  attnpool_cross_validation_options options;
  for (int i = 0; i < NQ; ++i) out[i] = -777;
  for (int i = 0; i < 8; ++i) doubles[i] = -777;
  scores[0] = scores[1] = -777;
  memset(&options, 0, sizeof(options));

  REJECTED(attnpool_nadaraya_watson_predict(
               ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_GAUSSIAN, pair, 2, &x, &y, &q,
               &o, NULL, ATTNPOOL_EMPTY_ROWS_NAN, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "bandwidth_count");
  REJECTED(attnpool_nadaraya_watson_predict(
               ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_GAUSSIAN, &bad_h, 1, &x, &y,
               &q, &o, NULL, ATTNPOOL_EMPTY_ROWS_NAN, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "bandwidths");
  REJECTED(attnpool_nadaraya_watson_predict(
               ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_EXP, &h, 1, &x, &y, &q, &o,
               NULL, ATTNPOOL_EMPTY_ROWS_NAN, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "kernel");
  REJECTED(attnpool_nadaraya_watson_predict(
               ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_GAUSSIAN, &h, 1, &x, &y, &q,
               &o, NULL, (attnpool_empty_rows)5, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "empty_rows");
  for (int i = 0; i < NQ; ++i) CHECK(out[i] == -777);

  REJECTED(attnpool_rule_of_thumb_bandwidth(ATTNPOOL_FLOAT32,
                                            ATTNPOOL_BANDWIDTH_RULE_SILVERMAN,
                                            &one_row, doubles),
           ATTNPOOL_INVALID_ARGUMENT, "x");
  REJECTED(attnpool_rule_of_thumb_bandwidth(
               ATTNPOOL_FLOAT32, (attnpool_bandwidth_rule)2, &x, doubles),
           ATTNPOOL_INVALID_ARGUMENT, "rule");

  REJECTED(attnpool_gaussian_bandwidth_grid(1.0, 0.5, 8, doubles),
           ATTNPOOL_INVALID_ARGUMENT, "h_max");
  for (int i = 0; i < 8; ++i) CHECK(doubles[i] == -777);

  options.folds = 1;
  REJECTED(attnpool_cross_validate(ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_GAUSSIAN,
                                   &x, &y, pair, 2, &options, scores,
                                   unpredictable, &best, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "options.folds");
  REJECTED(attnpool_cross_validate(ATTNPOOL_FLOAT32, ATTNPOOL_KERNEL_GAUSSIAN,
                                   &x, &y, NULL, 2, NULL, scores, unpredictable,
                                   &best, NULL),
           ATTNPOOL_INVALID_ARGUMENT, "bandwidths");
  CHECK(scores[0] == -777 && scores[1] == -777);
  CHECK(unpredictable[0] == 777 && unpredictable[1] == 777 && best == 777);
}

static void* fail_in_thread(void* unused) {
  (void)unused;
  attnpool_kernel kernel;
  return (void*)(size_t)(attnpool_kernel_from_name("nope", &kernel) ==
                             ATTNPOOL_INVALID_ARGUMENT &&
                         strcmp(attnpool_last_error_argument(), "kernel") == 0);
}

/* The execution's progress callback: polled on the calling thread (a count
 * and the fraction it last saw), cancelling from its `stop_at`-th call. */
struct progress_log {
  int calls, stop_at;
  double last;
};
static int log_progress(void* context, double done) {
  struct progress_log* log = (struct progress_log*)context;
  CHECK(done >= 0 && done <= 1);
  log->last = done;
  return ++log->calls != log->stop_at;
}

static void test_progress(void) {
  enum { CN = 700, CM = 300, CD = 8 };
  static float x[CN * CD], out[CN * CM], plain[CN * CM];
  for (int i = 0; i < CN * CD; ++i) x[i] = (float)((i * 37) % 101) / 17.0f;
  const attnpool_const_matrix q = {x, CN, CD, 0}, k = {x, CM, CD, 0};
  const attnpool_matrix o = {out, CN, CM, 0}, p = {plain, CN, CM, 0};
  attnpool_execution execution = with_threads(2);
  struct progress_log log = {0, 0, -1};
  CHECK(execution.struct_size == sizeof(attnpool_execution));
  CHECK(attnpool_pairwise_distances(ATTNPOOL_FLOAT32, ATTNPOOL_SQEUCLIDEAN, &q,
                                    &k, &p, &execution) == ATTNPOOL_OK);
  /* Going on: the same bits, the callback called from the start. */
  execution.progress = log_progress;
  execution.progress_context = &log;
  CHECK(attnpool_pairwise_distances(ATTNPOOL_FLOAT32, ATTNPOOL_SQEUCLIDEAN, &q,
                                    &k, &o, &execution) == ATTNPOOL_OK);
  CHECK(log.calls >= 1 && log.last >= 0);
  CHECK(memcmp(out, plain, sizeof out) == 0);
  /* Cancelled at once, and after a block where the calling thread ran one
   * (the other thread may have run them all). */
  for (int stop_at = 1; stop_at <= 2; ++stop_at) {
    attnpool_status status;
    log.calls = 0;
    log.stop_at = stop_at;
    status = attnpool_pairwise_distances(ATTNPOOL_FLOAT32, ATTNPOOL_SQEUCLIDEAN,
                                         &q, &k, &o, &execution);
    if (log.calls < stop_at) {
      CHECK(status == ATTNPOOL_OK);
      continue;
    }
    CHECK(status == ATTNPOOL_CANCELLED);
    CHECK(log.calls == stop_at);
    CHECK(strcmp(attnpool_last_error_argument(), "execution.progress") == 0);
  }
  CHECK(strcmp(attnpool_status_name(ATTNPOOL_CANCELLED), "cancelled") == 0);
  /* The struct's size and its threads, checked. */
  execution = with_threads(1);
  execution.struct_size = 4;
  CHECK(attnpool_pairwise_distances(ATTNPOOL_FLOAT32, ATTNPOOL_SQEUCLIDEAN, &q,
                                    &k, &o,
                                    &execution) == ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "execution.struct_size") == 0);
  execution = with_threads((int64_t)1 << 40);
  CHECK(attnpool_pairwise_distances(ATTNPOOL_FLOAT32, ATTNPOOL_SQEUCLIDEAN, &q,
                                    &k, &o,
                                    &execution) == ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "execution.threads") == 0);
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

/* A KV cache padded past its valid lengths with NaN and +-inf: the fused and
 * staged pools give the bits of the same call with finite padding. */
static void test_hidden_padding(void) {
  enum { PN = 5, PM = 600, PD = 16, PV = 4, FILLED = 280 };
  static float q[PN * PD], k[PM * PD], v[PM * PV], padded_k[PM * PD],
      padded_v[PM * PV], clean[PN * PV], dirty[PN * PV], weights[PN * PM];
  const size_t lengths[PN] = {280, 1, 137, 0, 200};
  const float specials[3] = {NAN, INFINITY, -INFINITY};
  unsigned state = 12345;
  attnpool_pool_spec spec = attnpool_pool_spec_init();
  attnpool_mask mask;
  fill_uniform(q, PN * PD, &state, -1, 1);
  fill_uniform(k, PM * PD, &state, -1, 1);
  fill_uniform(v, PM * PV, &state, -1, 1);
  memcpy(padded_k, k, sizeof(k));
  memcpy(padded_v, v, sizeof(v));
  for (int e = FILLED * PD; e < PM * PD; ++e) padded_k[e] = specials[e % 3];
  for (int e = FILLED * PV; e < PM * PV; ++e) padded_v[e] = specials[e % 3];
  mask = attnpool_mask_init();
  mask.valid_lengths = lengths;
  spec.distance = ATTNPOOL_DOT;
  spec.kernel.kernel = ATTNPOOL_KERNEL_EXP;
  spec.normalization = ATTNPOOL_NORMALIZE_SOFTMAX;
  spec.empty_rows = ATTNPOOL_EMPTY_ROWS_ZERO;
  {
    const attnpool_const_matrix cq = {q, PN, PD, 0}, ck = {k, PM, PD, 0},
                                cv = {v, PM, PV, 0}, pk = {padded_k, PM, PD, 0},
                                pv = {padded_v, PM, PV, 0};
    const attnpool_matrix co = {clean, PN, PV, 0}, po = {dirty, PN, PV, 0},
                          w = {weights, PN, PM, 0};
    CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &cq, &ck, &cv, &co, &mask,
                        NULL) == ATTNPOOL_OK);
    CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &cq, &pk, &pv, &po, &mask,
                        NULL) == ATTNPOOL_OK);
    CHECK(memcmp(clean, dirty, sizeof(clean)) == 0);
    CHECK(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &cq, &ck, &cv, &co, &w,
                               &mask, NULL) == ATTNPOOL_OK);
    CHECK(attnpool_pool_staged(ATTNPOOL_FLOAT32, &spec, &cq, &pk, &pv, &po, &w,
                               &mask, NULL) == ATTNPOOL_OK);
    CHECK(memcmp(clean, dirty, sizeof(clean)) == 0);
    for (int e = 0; e < PN * PV; ++e) CHECK(isfinite(clean[e]));
  }
}

/* Keys and values stored as bfloat16, binary16 and int8: bitwise the float
 * calls on the values they hold; the conversions; errors named. */
/* One SDPA over keys spanning several key blocks and decode stretches of
 * every tuning profile: a decode (1 query) and a tile (6 queries) per head;
 * `out` holds 2 heads x 7 rows x 8 columns. */
enum { TUNED_M = 1100, TUNED_D = 16, TUNED_DV = 8, TUNED_ROWS = 7 };
static void tuned_sdpa(float* out) {
  static float q[2 * TUNED_ROWS * TUNED_D], k[TUNED_M * TUNED_D],
      v[TUNED_M * TUNED_DV];
  unsigned state = 12345;
  float* arrays[3] = {q, k, v};
  const size_t sizes[3] = {sizeof(q) / 4, sizeof(k) / 4, sizeof(v) / 4};
  for (int a = 0; a < 3; ++a) {
    for (size_t i = 0; i < sizes[a]; ++i) {
      state = state * 1103515245u + 12345u;
      arrays[a][i] = (float)((state >> 8) % 2001) / 1000.0f - 1.0f;
    }
  }
  for (int rows = 1; rows <= 6; rows += 5) {
    const float* first = q + (rows == 1 ? 0 : TUNED_D);
    const attnpool_const_tensor
        tq = {first, 1, 2, (size_t)rows, TUNED_D, 0, TUNED_ROWS * TUNED_D, 0},
        tk = {k, 1, 1, TUNED_M, TUNED_D, 0, 0, 0},
        tv = {v, 1, 1, TUNED_M, TUNED_DV, 0, 0, 0};
    const attnpool_tensor to = {out + (rows == 1 ? 0 : TUNED_DV),
                                1,
                                2,
                                (size_t)rows,
                                TUNED_DV,
                                0,
                                TUNED_ROWS * TUNED_DV,
                                0};
    CHECK(attnpool_scaled_dot_product_attention(
              ATTNPOOL_FLOAT32, &tq, &tk, &tv, &to, NULL, NULL,
              ATTNPOOL_EMPTY_ROWS_NAN, NULL) == ATTNPOOL_OK);
  }
}

static void test_elements(void) {
  uint16_t keys16[M * D];
  int8_t values8[M * DV];
  float value_scales[M], held_keys[M * D], held_values[M * DV];
  float out[N * DV], expected[N * DV];
  const float one = 1.0f;
  uint16_t bits = 0;
  CHECK(attnpool_to_bfloat16(&one, 1, &bits) == ATTNPOOL_OK && bits == 0x3F80);
  CHECK(attnpool_to_float16(&one, 1, &bits) == ATTNPOOL_OK && bits == 0x3C00);
  CHECK(attnpool_to_bfloat16(keys, M * D, keys16) == ATTNPOOL_OK);
  CHECK(attnpool_bfloat16_to_float(keys16, M * D, held_keys) == ATTNPOOL_OK);
  {
    const attnpool_const_matrix in = {values, M, DV, 0};
    const attnpool_matrix q8 = {values8, M, DV, 0},
                          back = {held_values, M, DV, 0};
    const attnpool_const_matrix q8_in = {values8, M, DV, 0};
    CHECK(attnpool_quantize_rows(&in, &q8, value_scales) == ATTNPOOL_OK);
    CHECK(attnpool_dequantize_rows(&q8_in, value_scales, &back) == ATTNPOOL_OK);
    /* Errors name the C call's arguments. */
    const attnpool_const_matrix narrow = {values8, M, DV, DV - 1};
    CHECK(attnpool_dequantize_rows(&q8_in, NULL, &back) ==
          ATTNPOOL_INVALID_ARGUMENT);
    CHECK(strcmp(attnpool_last_error_argument(), "scales") == 0);
    CHECK(attnpool_dequantize_rows(&narrow, value_scales, &back) ==
          ATTNPOOL_INVALID_ARGUMENT);
    CHECK(strncmp(attnpool_last_error_argument(), "in", 2) == 0 &&
          strncmp(attnpool_last_error_argument(), "in.data", 7) != 0);
    /* widen_rows: the same values from the element tensor; its scales
     * required and named. */
    float widened[M * DV];
    const attnpool_matrix wide = {widened, M, DV, 0};
    attnpool_element_tensor stored;
    memset(&stored, 0, sizeof(stored));
    stored.element = ATTNPOOL_ELEMENT_INT8;
    stored.data = (attnpool_const_tensor){values8, 1, 1, M, DV, 0, 0, 0};
    CHECK(attnpool_widen_rows(&stored, &wide) == ATTNPOOL_INVALID_ARGUMENT);
    CHECK(strncmp(attnpool_last_error_argument(), "in.scales", 9) == 0);
    stored.scales = (attnpool_const_tensor){value_scales, 1, 1, M, 1, 0, 0, 0};
    CHECK(attnpool_widen_rows(&stored, &wide) == ATTNPOOL_OK);
    CHECK(memcmp(widened, held_values, sizeof(widened)) == 0);
  }
  attnpool_pool_spec spec = attnpool_pool_spec_init();
  spec.distance = ATTNPOOL_DOT;
  spec.kernel.kernel = ATTNPOOL_KERNEL_EXP;
  spec.normalization = ATTNPOOL_NORMALIZE_SOFTMAX;
  const attnpool_const_matrix q = {queries, N, D, 0}, hk = {held_keys, M, D, 0},
                              hv = {held_values, M, DV, 0};
  const attnpool_matrix o = {out, N, DV, 0}, e = {expected, N, DV, 0};
  attnpool_element_tensor k, v;
  memset(&k, 0, sizeof(k));
  memset(&v, 0, sizeof(v));
  k.element = ATTNPOOL_ELEMENT_BFLOAT16;
  k.data = (attnpool_const_tensor){keys16, 1, 1, M, D, 0, 0, 0};
  v.element = ATTNPOOL_ELEMENT_INT8;
  v.data = (attnpool_const_tensor){values8, 1, 1, M, DV, 0, 0, 0};
  v.scales = (attnpool_const_tensor){value_scales, 1, 1, M, 1, 0, 0, 0};
  CHECK(attnpool_pool_elements(&spec, &q, &k, &v, &o, NULL, NULL) ==
        ATTNPOOL_OK);
  CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &q, &hk, &hv, &e, NULL, NULL) ==
        ATTNPOOL_OK);
  CHECK(memcmp(out, expected, sizeof(out)) == 0);
  /* float8 keys (E4M3FN patterns, one scale a row; E5M2 values): bitwise
   * the float call on the values they hold, which widen_rows gives. */
  {
    uint8_t keys8[M * D], vals8[M * DV];
    float key_scales[M], held8_keys[M * D], held8_values[M * DV];
    float out8[N * DV], expected8[N * DV];
    const attnpool_matrix o8 = {out8, N, DV, 0}, e8 = {expected8, N, DV, 0};
    for (size_t i = 0; i < M * D; ++i) keys8[i] = (uint8_t)(i * 37 % 0xFE);
    for (size_t i = 0; i < M * DV; ++i) vals8[i] = (uint8_t)(i * 29 % 0xFB);
    for (size_t i = 0; i < M * DV; ++i) {
      if ((vals8[i] & 0x7F) > 0x7B) vals8[i] = 0x3C; /* no inf, NaN: 1 */
    }
    for (size_t r = 0; r < M; ++r) key_scales[r] = 0.01f * (float)(r + 1);
    attnpool_element_tensor k8, v8;
    memset(&k8, 0, sizeof(k8));
    memset(&v8, 0, sizeof(v8));
    k8.element = ATTNPOOL_ELEMENT_FLOAT8_E4M3FN;
    k8.data = (attnpool_const_tensor){keys8, 1, 1, M, D, 0, 0, 0};
    k8.scales = (attnpool_const_tensor){key_scales, 1, 1, M, 1, 0, 0, 0};
    v8.element = ATTNPOOL_ELEMENT_FLOAT8_E5M2;
    v8.data = (attnpool_const_tensor){vals8, 1, 1, M, DV, 0, 0, 0};
    v8.scales = k8.scales;
    const attnpool_matrix wk = {held8_keys, M, D, 0},
                          wv = {held8_values, M, DV, 0};
    CHECK(attnpool_widen_rows(&k8, &wk) == ATTNPOOL_OK);
    CHECK(attnpool_widen_rows(&v8, &wv) == ATTNPOOL_OK);
    CHECK(held8_keys[1] == key_scales[0] * 0.203125f); /* 0x25: 13·2^-6 */
    const attnpool_const_matrix h8k = {held8_keys, M, D, 0},
                                h8v = {held8_values, M, DV, 0};
    CHECK(attnpool_pool_elements(&spec, &q, &k8, &v8, &o8, NULL, NULL) ==
          ATTNPOOL_OK);
    CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &q, &h8k, &h8v, &e8, NULL,
                        NULL) == ATTNPOOL_OK);
    CHECK(memcmp(out8, expected8, sizeof(out8)) == 0);
    k8.scales.data = NULL;
    CHECK(attnpool_pool_elements(&spec, &q, &k8, &v8, &o8, NULL, NULL) ==
          ATTNPOOL_INVALID_ARGUMENT);
    CHECK(strncmp(attnpool_last_error_argument(), "keys.scales", 11) == 0);
  }
  /* The shard API and the distances over the same narrow rows. */
  {
    float acc[N * DV], maxes[N], sums[N], distances[N * M],
        held_distances[N * M];
    size_t best[N];
    attnpool_partial_state state = {{acc, N, DV, 0}, maxes, sums, best};
    CHECK(attnpool_pool_partial_elements(&spec, &q, &k, &v, 0, &state, NULL,
                                         NULL) == ATTNPOOL_OK);
    CHECK(attnpool_pool_finish(ATTNPOOL_FLOAT32, &spec, &state,
                               &state.accumulator) == ATTNPOOL_OK);
    CHECK(memcmp(acc, expected, sizeof(acc)) == 0);
    const attnpool_matrix dm = {distances, N, M, 0},
                          hdm = {held_distances, N, M, 0};
    CHECK(attnpool_pairwise_distances_elements(ATTNPOOL_SQEUCLIDEAN, &q, &k,
                                               &dm, NULL) == ATTNPOOL_OK);
    CHECK(attnpool_pairwise_distances(ATTNPOOL_FLOAT32, ATTNPOOL_SQEUCLIDEAN,
                                      &q, &hk, &hdm, NULL) == ATTNPOOL_OK);
    CHECK(memcmp(distances, held_distances, sizeof(distances)) == 0);
  }
  /* Queries stored narrow too: binary16 queries widened once (bitwise the
   * float call on the values they hold); bfloat16 queries with the bf16
   * keys take the bf16 dot-product tile where one is reported (within a
   * rounding of each score of the float call), else bitwise. */
  {
    uint16_t queries16[N * D];
    float held_queries[N * D];
    const attnpool_const_matrix hq = {held_queries, N, D, 0};
    attnpool_element_tensor eq;
    memset(&eq, 0, sizeof(eq));
    eq.element = ATTNPOOL_ELEMENT_FLOAT16;
    eq.data = (attnpool_const_tensor){queries16, 1, 1, N, D, 0, 0, 0};
    CHECK(attnpool_to_float16(queries, N * D, queries16) == ATTNPOOL_OK);
    CHECK(attnpool_float16_to_float(queries16, N * D, held_queries) ==
          ATTNPOOL_OK);
    CHECK(attnpool_pool_element_queries(&spec, &eq, &k, &v, &o, NULL, NULL) ==
          ATTNPOOL_OK);
    CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &hq, &hk, &hv, &e, NULL,
                        NULL) == ATTNPOOL_OK);
    CHECK(memcmp(out, expected, sizeof(out)) == 0);
    eq.element = ATTNPOOL_ELEMENT_BFLOAT16;
    CHECK(attnpool_to_bfloat16(queries, N * D, queries16) == ATTNPOOL_OK);
    CHECK(attnpool_bfloat16_to_float(queries16, N * D, held_queries) ==
          ATTNPOOL_OK);
    CHECK(attnpool_pool_element_queries(&spec, &eq, &k, &v, &o, NULL, NULL) ==
          ATTNPOOL_OK);
    CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &hq, &hk, &hv, &e, NULL,
                        NULL) == ATTNPOOL_OK);
    CHECK(memcmp(out, expected, sizeof(out)) == 0); /* d 3: small depth */
    /* The tile's shape (12 rows, d 16): bf16 queries and keys take the bf16
     * dot-product tile where one is reported (within a rounding of each
     * score of the float call), else bitwise the float call. */
    {
      enum { TN = 12, TM = 40, TD = 16, TV = 4 };
      uint16_t tq16[TN * TD], tk16[TM * TD];
      float tq[TN * TD], tk[TM * TD], tv[TM * TV], tout[TN * TV],
          texpected[TN * TV];
      for (int i = 0; i < TN * TD; ++i) tq[i] = (float)sin(0.37 * i);
      for (int i = 0; i < TM * TD; ++i) tk[i] = (float)cos(0.23 * i);
      for (int i = 0; i < TM * TV; ++i) tv[i] = (float)sin(0.11 * i + 1);
      CHECK(attnpool_to_bfloat16(tq, TN * TD, tq16) == ATTNPOOL_OK);
      CHECK(attnpool_to_bfloat16(tk, TM * TD, tk16) == ATTNPOOL_OK);
      CHECK(attnpool_bfloat16_to_float(tq16, TN * TD, tq) == ATTNPOOL_OK);
      CHECK(attnpool_bfloat16_to_float(tk16, TM * TD, tk) == ATTNPOOL_OK);
      attnpool_element_tensor bq, bk, fv;
      memset(&bq, 0, sizeof(bq));
      memset(&bk, 0, sizeof(bk));
      memset(&fv, 0, sizeof(fv));
      bq.element = bk.element = ATTNPOOL_ELEMENT_BFLOAT16;
      bq.data = (attnpool_const_tensor){tq16, 1, 1, TN, TD, 0, 0, 0};
      bk.data = (attnpool_const_tensor){tk16, 1, 1, TM, TD, 0, 0, 0};
      fv.element = ATTNPOOL_ELEMENT_FLOAT32;
      fv.data = (attnpool_const_tensor){tv, 1, 1, TM, TV, 0, 0, 0};
      const attnpool_const_matrix fq = {tq, TN, TD, 0}, fk = {tk, TM, TD, 0},
                                  fvm = {tv, TM, TV, 0};
      const attnpool_matrix to = {tout, TN, TV, 0}, te = {texpected, TN, TV, 0};
      CHECK(attnpool_pool_element_queries(&spec, &bq, &bk, &fv, &to, NULL,
                                          NULL) == ATTNPOOL_OK);
      CHECK(attnpool_pool(ATTNPOOL_FLOAT32, &spec, &fq, &fk, &fvm, &te, NULL,
                          NULL) == ATTNPOOL_OK);
      if (attnpool_bf16_dot_instruction()[0] == '\0') {
        CHECK(memcmp(tout, texpected, sizeof(tout)) == 0);
      } else {
        for (int i = 0; i < TN * TV; ++i) {
          CHECK(fabsf(tout[i] - texpected[i]) <= 1e-4f);
        }
      }
    }
    /* SDPA: the same queries as two heads of 3 rows over one key head. */
    const attnpool_const_tensor tq = {held_queries, 1, 2, N / 2, D, 0, 0, 0},
                                tk = {held_keys, 1, 1, M, D, 0, 0, 0},
                                tv = {held_values, 1, 1, M, DV, 0, 0, 0};
    const attnpool_tensor to = {out, 1, 2, N / 2, DV, 0, 0, 0},
                          te = {expected, 1, 2, N / 2, DV, 0, 0, 0};
    eq.element = ATTNPOOL_ELEMENT_FLOAT16;
    eq.data = (attnpool_const_tensor){queries16, 1, 2, N / 2, D, 0, 0, 0};
    CHECK(attnpool_to_float16(queries, N * D, queries16) == ATTNPOOL_OK);
    CHECK(attnpool_float16_to_float(queries16, N * D, held_queries) ==
          ATTNPOOL_OK);
    CHECK(attnpool_scaled_dot_product_attention_element_queries(
              &eq, &k, &v, &to, NULL, NULL, ATTNPOOL_EMPTY_ROWS_NAN, NULL) ==
          ATTNPOOL_OK);
    CHECK(attnpool_scaled_dot_product_attention(
              ATTNPOOL_FLOAT32, &tq, &tk, &tv, &te, NULL, NULL,
              ATTNPOOL_EMPTY_ROWS_NAN, NULL) == ATTNPOOL_OK);
    CHECK(memcmp(out, expected, 2 * (N / 2) * DV * sizeof(float)) == 0);
    /* Errors name the queries; nothing written. */
    for (int i = 0; i < N * DV; ++i) out[i] = -5;
    eq.element = (attnpool_element)9;
    CHECK(attnpool_scaled_dot_product_attention_element_queries(
              &eq, &k, &v, &to, NULL, NULL, ATTNPOOL_EMPTY_ROWS_NAN, NULL) ==
          ATTNPOOL_INVALID_ARGUMENT);
    CHECK(strcmp(attnpool_last_error_argument(), "queries.element") == 0);
    eq.element = ATTNPOOL_ELEMENT_FLOAT16; /* two heads: not a matrix */
    CHECK(attnpool_pool_element_queries(&spec, &eq, &k, &v, &o, NULL, NULL) ==
          ATTNPOOL_INVALID_ARGUMENT);
    CHECK(strcmp(attnpool_last_error_argument(), "queries.heads") == 0);
    CHECK(attnpool_pool_element_queries(&spec, NULL, &k, &v, &o, NULL, NULL) ==
          ATTNPOOL_INVALID_ARGUMENT);
    CHECK(strcmp(attnpool_last_error_argument(), "queries") == 0);
    for (int i = 0; i < N * DV; ++i) CHECK(out[i] == -5);
  }
  /* SDPA over binary16 keys and values, two heads sharing them. */
  {
    uint16_t half_values[M * DV];
    float sdpa_out[2 * N * DV], sdpa_expected[2 * N * DV];
    float half_keys_held[M * D], half_values_held[M * DV];
    CHECK(attnpool_to_float16(keys, M * D, keys16) == ATTNPOOL_OK);
    CHECK(attnpool_to_float16(values, M * DV, half_values) == ATTNPOOL_OK);
    CHECK(attnpool_float16_to_float(keys16, M * D, half_keys_held) ==
          ATTNPOOL_OK);
    CHECK(attnpool_float16_to_float(half_values, M * DV, half_values_held) ==
          ATTNPOOL_OK);
    const attnpool_const_tensor tq = {queries, 1, 2, 3, D, 0, 0, 0},
                                tk = {half_keys_held, 1, 1, M, D, 0, 0, 0},
                                tv = {half_values_held, 1, 1, M, DV, 0, 0, 0};
    const attnpool_tensor to = {sdpa_out, 1, 2, 3, DV, 0, 0, 0},
                          te = {sdpa_expected, 1, 2, 3, DV, 0, 0, 0};
    attnpool_element_tensor ek, ev;
    memset(&ek, 0, sizeof(ek));
    memset(&ev, 0, sizeof(ev));
    ek.element = ev.element = ATTNPOOL_ELEMENT_FLOAT16;
    ek.data = (attnpool_const_tensor){keys16, 1, 1, M, D, 0, 0, 0};
    ev.data = (attnpool_const_tensor){half_values, 1, 1, M, DV, 0, 0, 0};
    CHECK(attnpool_scaled_dot_product_attention_elements(
              &tq, &ek, &ev, &to, NULL, NULL, ATTNPOOL_EMPTY_ROWS_NAN, NULL) ==
          ATTNPOOL_OK);
    CHECK(attnpool_scaled_dot_product_attention(
              ATTNPOOL_FLOAT32, &tq, &tk, &tv, &te, NULL, NULL,
              ATTNPOOL_EMPTY_ROWS_NAN, NULL) == ATTNPOOL_OK);
    CHECK(memcmp(sdpa_out, sdpa_expected, 2 * 3 * DV * sizeof(float)) == 0);
    /* Packed sequences over them: 1 query over keys 0-3, 2 over 4-10. */
    const size_t query_offsets[3] = {0, 1, 3}, key_offsets[3] = {0, 4, M};
    CHECK(attnpool_scaled_dot_product_attention_varlen_elements(
              &tq, &ek, &ev, &to, 2, query_offsets, key_offsets, NULL, NULL,
              ATTNPOOL_EMPTY_ROWS_NAN, NULL) == ATTNPOOL_OK);
    CHECK(attnpool_scaled_dot_product_attention_varlen(
              ATTNPOOL_FLOAT32, &tq, &tk, &tv, &te, 2, query_offsets,
              key_offsets, NULL, NULL, ATTNPOOL_EMPTY_ROWS_NAN,
              NULL) == ATTNPOOL_OK);
    CHECK(memcmp(sdpa_out, sdpa_expected, 2 * 3 * DV * sizeof(float)) == 0);
    /* A paged cache of one-row blocks, the sequences' blocks scattered. */
    const int32_t table[2 * 4] = {10, 3, 5, -1, 0, 1, 2, 7};
    const size_t lengths[2] = {3, 4};
    attnpool_paged_element_cache cache;
    memset(&cache, 0, sizeof(cache));
    cache.keys.element = cache.values.element = ATTNPOOL_ELEMENT_FLOAT16;
    cache.keys.data = (attnpool_const_tensor){keys16, M, 1, 1, D, 0, 0, 0};
    cache.values.data =
        (attnpool_const_tensor){half_values, M, 1, 1, DV, 0, 0, 0};
    cache.block_table = table;
    cache.block_table_stride = 4;
    cache.lengths = lengths;
    const attnpool_paged_kv_cache held = {
        {half_keys_held, M, 1, 1, D, 0, 0, 0},
        {half_values_held, M, 1, 1, DV, 0, 0, 0},
        table,
        4,
        lengths};
    CHECK(attnpool_scaled_dot_product_attention_paged_elements(
              &tq, &cache, &to, 2, query_offsets, NULL, NULL,
              ATTNPOOL_EMPTY_ROWS_NAN, NULL) == ATTNPOOL_OK);
    CHECK(attnpool_scaled_dot_product_attention_paged(
              ATTNPOOL_FLOAT32, &tq, &held, &te, 2, query_offsets, NULL, NULL,
              ATTNPOOL_EMPTY_ROWS_NAN, NULL) == ATTNPOOL_OK);
    CHECK(memcmp(sdpa_out, sdpa_expected, 2 * 3 * DV * sizeof(float)) == 0);
    cache.block_table = NULL;
    CHECK(attnpool_scaled_dot_product_attention_paged_elements(
              &tq, &cache, &to, 2, query_offsets, NULL, NULL,
              ATTNPOOL_EMPTY_ROWS_NAN, NULL) == ATTNPOOL_INVALID_ARGUMENT);
    CHECK(strcmp(attnpool_last_error_argument(), "cache.block_table") == 0);
  }
  /* Errors, named; nothing written. */
  for (int i = 0; i < N * DV; ++i) out[i] = -5;
  k.element = (attnpool_element)7;
  CHECK(attnpool_pool_elements(&spec, &q, &k, &v, &o, NULL, NULL) ==
        ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "keys.element") == 0);
  k.element = ATTNPOOL_ELEMENT_BFLOAT16;
  v.scales.data = NULL;
  CHECK(attnpool_pool_elements(&spec, &q, &k, &v, &o, NULL, NULL) ==
        ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strncmp(attnpool_last_error_argument(), "values.scales", 13) == 0);
  v.scales.data = value_scales;
  k.data.batch = 2;
  CHECK(attnpool_pool_elements(&spec, &q, &k, &v, &o, NULL, NULL) ==
        ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "keys.batch") == 0);
  for (int i = 0; i < N * DV; ++i) CHECK(out[i] == -5);
}

int main(void) {
  char targets[256];
  fill();
  fill_layers();
  fill_regression();
  test_names();
  test_mask_struct_size();
  test_errors();
  test_layer_errors();
  test_regression_errors();
  test_thread_local_error();
  test_progress();
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
    /* The bf16 tile runs beside AVX3, NEON and SVE only. */
    if (strcmp(name, "AVX3") != 0 && strcmp(name, "NEON") != 0 &&
        strncmp(name, "SVE", 3) != 0) {
      CHECK(attnpool_bf16_dot_instruction()[0] == '\0');
    }
    test_stages();
    CHECK(strcmp(attnpool_last_run_target(), name) == 0);
    test_pool_float64();
    test_sdpa();
    test_additive();
    test_multi_head();
    test_linear();
    test_shards();
    test_hidden_padding();
    test_regression();
    test_elements();
    printf("%-8s %s\n", name, failures == before ? "ok" : "FAILED");
  }
  CHECK(attnpool_reset_target() == ATTNPOOL_OK);

  /* Every bf16 dot-product instruction this CPU runs the tile on, forced
   * one by one beside the best target; "" restores the CPU's choice. */
  CHECK(attnpool_force_bf16_dot_instruction("no-such") ==
        ATTNPOOL_UNSUPPORTED_TARGET);
  CHECK(strcmp(attnpool_last_error_argument(), "instruction") == 0);
  CHECK(attnpool_force_bf16_dot_instruction(NULL) == ATTNPOOL_INVALID_ARGUMENT);
  const char* chosen_instruction = attnpool_bf16_dot_instruction();
  char chosen[64];
  snprintf(chosen, sizeof(chosen), "%s", chosen_instruction);
  snprintf(targets, sizeof(targets), "%s",
           attnpool_supported_bf16_dot_instructions());
  for (char* name = strtok(targets, " "); name; name = strtok(NULL, " ")) {
    const int before = failures;
    CHECK(attnpool_force_bf16_dot_instruction(name) == ATTNPOOL_OK);
    CHECK(strcmp(attnpool_bf16_dot_instruction(), name) == 0);
    test_elements();
    printf("bf16 dot %-12s %s\n", name, failures == before ? "ok" : "FAILED");
  }
  CHECK(attnpool_force_bf16_dot_instruction("") == ATTNPOOL_OK);
  CHECK(strcmp(attnpool_bf16_dot_instruction(), chosen) == 0);

  /* Every tuning profile forced one by one, each within the float bound of
   * the CPU's choice; "" restores that choice. */
  CHECK(attnpool_force_tuning("no-such") == ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "tuning") == 0);
  CHECK(attnpool_force_tuning(NULL) == ATTNPOOL_INVALID_ARGUMENT);
  CHECK(attnpool_force_tuning("") == ATTNPOOL_OK); /* over ATTNPOOL_TUNING */
  snprintf(chosen, sizeof(chosen), "%s", attnpool_tuning());
  static float tuned_chosen[2 * TUNED_ROWS * TUNED_DV],
      tuned[2 * TUNED_ROWS * TUNED_DV];
  tuned_sdpa(tuned_chosen);
  snprintf(targets, sizeof(targets), "%s", attnpool_tunings());
  CHECK(strncmp(targets, chosen, strlen(chosen)) == 0);
  for (char* name = strtok(targets, " "); name; name = strtok(NULL, " ")) {
    const int before = failures;
    CHECK(attnpool_force_tuning(name) == ATTNPOOL_OK);
    CHECK(strcmp(attnpool_tuning(), name) == 0);
    CHECK(strncmp(attnpool_tuning_parameters(), "query_rows=", 11) == 0);
    tuned_sdpa(tuned);
    for (int i = 0; i < 2 * TUNED_ROWS * TUNED_DV; ++i) {
      CHECK(fabsf(tuned[i] - tuned_chosen[i]) <= 1e-4f);
    }
    test_elements();
    printf("tuning %-12s %s\n", name, failures == before ? "ok" : "FAILED");
  }
  /* A profile with parameters of its own; out-of-range values refused. */
  CHECK(attnpool_force_tuning("GENERIC query_rows=48 decode_stretch=1") ==
        ATTNPOOL_OK);
  CHECK(strcmp(attnpool_tuning(), "generic query_rows=48 decode_stretch=1") ==
        0);
  CHECK(strncmp(attnpool_tuning_parameters(), "query_rows=48 ", 14) == 0);
  tuned_sdpa(tuned);
  for (int i = 0; i < 2 * TUNED_ROWS * TUNED_DV; ++i) {
    CHECK(fabsf(tuned[i] - tuned_chosen[i]) <= 1e-4f);
  }
  CHECK(attnpool_force_tuning("generic query_rows=50") ==
        ATTNPOOL_INVALID_ARGUMENT);
  CHECK(strcmp(attnpool_last_error_argument(), "tuning") == 0);
  CHECK(attnpool_force_tuning("") == ATTNPOOL_OK);
  CHECK(strcmp(attnpool_tuning(), chosen) == 0);
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
