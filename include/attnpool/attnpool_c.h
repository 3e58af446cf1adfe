/* attnpool C API: the stages, the pooling (whole or sharded), the attention
 * layers, kernel regression and the targets from C (C99) and from any language
 * with a C foreign-function interface (Python ctypes, ...). It wraps the C++
 * API of <attnpool/attnpool.h>, whose headers state the formulas and the
 * accuracy; the behaviour is the same.
 *
 * Errors: every function that can fail returns an attnpool_status. On
 * failure nothing has been written to any output, and
 * attnpool_last_error() gives a message naming the argument
 * ("attnpool: keys.cols: is 2 but must equal queries.cols (3)"), and
 * attnpool_last_error_argument() the argument alone ("keys.cols"). Both are
 * per thread and last until the thread's next failing call; a call that
 * succeeds leaves them as they were.
 *
 * Matrices: row-major views { data, rows, cols, stride }, stride in
 * elements; a stride of 0 means cols (dense rows). The element type of every
 * float matrix of a call is the call's attnpool_dtype. The layers take
 * (batch, heads, rows, cols) tensor views the same way (attnpool_tensor).
 *
 * Structs are plain: zero-initialized they hold default execution;
 * initialize specs with attnpool_pool_spec_init() /
 * attnpool_kernel_spec_init() so that fields added later get their
 * defaults, and masks with attnpool_mask_init() /
 * attnpool_attention_mask_init() (their struct_size lets them grow). Enum
 * values equal those of the C++ enums. attnpool_abi_version() is this
 * binary interface's number: it changes when a struct changes other than by
 * growing through its struct_size, or a function's signature changes.
 *
 * Thread safety: as the C++ API. attnpool_force_target(),
 * attnpool_force_bf16_dot_instruction(), attnpool_force_tuning() and
 * attnpool_reset_target() are process-global and must not run while other
 * threads call attnpool. */
#ifndef ATTNPOOL_ATTNPOOL_C_H_
#define ATTNPOOL_ATTNPOOL_C_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <attnpool/mask_fields.h>

#ifdef __cplusplus
extern "C" {
#endif

/* In C++ (the library's side) the enums get int as their fixed underlying
 * type, as in C: any int a caller passes, an invalid one included (which is
 * rejected), is then a value of the enum type, not undefined behavior. */
#ifdef __cplusplus
#define ATTNPOOL_C_ENUM_BASE : int
#else
#define ATTNPOOL_C_ENUM_BASE
#endif

/* ---------------------------------------------------------------- status */

typedef enum attnpool_status ATTNPOOL_C_ENUM_BASE {
  ATTNPOOL_OK = 0,
  /* An argument is invalid (null data, shape mismatch, stride < cols,
   * overlapping output, bad enum value, bandwidth, mask, ...). */
  ATTNPOOL_INVALID_ARGUMENT = 1,
  /* A target that is not compiled or not supported by this CPU. */
  ATTNPOOL_UNSUPPORTED_TARGET = 2,
  ATTNPOOL_OUT_OF_MEMORY = 3,
  /* Anything else: a bug in attnpool. */
  ATTNPOOL_INTERNAL_ERROR = 4,
  /* The execution's progress callback returned 0 (attnpool_execution). */
  ATTNPOOL_CANCELLED = 5
} attnpool_status;

/* "ok", "invalid argument", ...; "unknown status" for other values. */
const char* attnpool_status_name(attnpool_status status);

/* The calling thread's last error message, or "" if none. Never NULL. */
const char* attnpool_last_error(void);
/* The argument named by the last error ("keys.cols", "kernel.bandwidth",
 * "target", ...), or "" if none. Never NULL. */
const char* attnpool_last_error_argument(void);

/* The library's version, "major.minor.patch" (attnpool/version.h:
 * ATTNPOOL_VERSION_STRING, the headers'). */
const char* attnpool_version(void);
/* The C binary interface's number (attnpool/version.h:
 * ATTNPOOL_ABI_VERSION, the headers'; the N of libattnpool_c.so.N). */
int attnpool_abi_version(void);

/* ---------------------------------------------------------------- types */

typedef enum attnpool_dtype ATTNPOOL_C_ENUM_BASE {
  ATTNPOOL_FLOAT32 = 0,
  ATTNPOOL_FLOAT64 = 1
} attnpool_dtype;

typedef enum attnpool_distance ATTNPOOL_C_ENUM_BASE {
  ATTNPOOL_SQEUCLIDEAN = 0, /* sum (q_i - k_i)^2 */
  ATTNPOOL_EUCLIDEAN = 1,   /* sqrt of the above */
  ATTNPOOL_MANHATTAN = 2,   /* sum |q_i - k_i| */
  ATTNPOOL_DOT = 3,         /* sum q_i k_i */
  ATTNPOOL_COSINE = 4       /* dot / (|q| |k|); 0 when a norm is 0 */
} attnpool_distance;

typedef enum attnpool_kernel ATTNPOOL_C_ENUM_BASE {
  ATTNPOOL_KERNEL_GAUSSIAN = 0,     /* exp(-u^2/2), u = r / h */
  ATTNPOOL_KERNEL_BOXCAR = 1,       /* 1 if u < 1 else 0 */
  ATTNPOOL_KERNEL_TRIANGULAR = 2,   /* max(1 - u, 0) */
  ATTNPOOL_KERNEL_EPANECHNIKOV = 3, /* max(1 - u^2, 0) */
  ATTNPOOL_KERNEL_CONSTANT = 4,     /* 1 */
  ATTNPOOL_KERNEL_EXP = 5,       /* exp(scale * s), scale default 1/sqrt(d) */
  ATTNPOOL_KERNEL_BIWEIGHT = 6,  /* max(1 - u^2, 0)^2 */
  ATTNPOOL_KERNEL_TRIWEIGHT = 7, /* max(1 - u^2, 0)^3 */
  ATTNPOOL_KERNEL_TRICUBE = 8,   /* max(1 - u^3, 0)^3 */
  ATTNPOOL_KERNEL_COSINE = 9     /* cos(pi u / 2) if u < 1 else 0 */
} attnpool_kernel;

typedef enum attnpool_normalization ATTNPOOL_C_ENUM_BASE {
  ATTNPOOL_NORMALIZE_NONE = 0,
  ATTNPOOL_NORMALIZE_SUM = 1,     /* a_i / sum_j a_j (Nadaraya-Watson) */
  ATTNPOOL_NORMALIZE_SOFTMAX = 2, /* exp(a_i - max) / sum_j exp(a_j - max) */
  ATTNPOOL_NORMALIZE_ARGMAX = 3   /* 1 on the largest (lowest index on ties) */
} attnpool_normalization;

/* What a query with no weight left (no visible key, or all weights 0) gets. */
typedef enum attnpool_empty_rows ATTNPOOL_C_ENUM_BASE {
  ATTNPOOL_EMPTY_ROWS_NAN = 0,
  ATTNPOOL_EMPTY_ROWS_ZERO = 1
} attnpool_empty_rows;

/* A read-only matrix view. */
typedef struct attnpool_const_matrix {
  const void* data;
  size_t rows;
  size_t cols;
  size_t stride; /* elements between row starts; 0: cols */
} attnpool_const_matrix;

/* A writable matrix view. */
typedef struct attnpool_matrix {
  void* data;
  size_t rows;
  size_t cols;
  size_t stride; /* elements between row starts; 0: cols */
} attnpool_matrix;

typedef struct attnpool_kernel_spec {
  attnpool_kernel kernel;
  double bandwidth; /* h of the distance kernels: finite, > 0 */
  int has_scale;    /* 0: exp's scale is 1/sqrt(d) */
  double scale;     /* the factor of exp when has_scale */
} attnpool_kernel_spec;

typedef struct attnpool_pool_spec {
  attnpool_distance distance;
  attnpool_kernel_spec kernel;
  attnpool_normalization normalization;
  attnpool_empty_rows empty_rows;
} attnpool_pool_spec;

/* The members of a mask by the kind of its field (attnpool/mask_fields.h,
 * whose list generates both mask structs): a count or number is given when
 * its has_ flag is nonzero. Every member is 8 bytes or a whole number of
 * them, so that the structs hold no padding: each field added at the end
 * grows the struct_size its callers compile in. */
#define ATTNPOOL_C_MEMBER_lengths(name) const size_t* name;
#define ATTNPOOL_C_MEMBER_flag(name) int64_t name;
#define ATTNPOOL_C_MEMBER_position(name) ptrdiff_t name;
#define ATTNPOOL_C_MEMBER_count(name) \
  int64_t has_##name;                 \
  size_t name;
#define ATTNPOOL_C_MEMBER_matrix(name) attnpool_const_matrix name;
#define ATTNPOOL_C_MEMBER_booleans(name) attnpool_const_matrix name;
#define ATTNPOOL_C_MEMBER_number(name) \
  int64_t has_##name;                  \
  double name;
#define ATTNPOOL_C_MEMBER_head_number(name) ATTNPOOL_C_MEMBER_number(name)
#define ATTNPOOL_C_MASK_MEMBER(name, heads_name, kind, needs, check, help) \
  ATTNPOOL_C_MEMBER_##kind(name)

/* Which keys each query sees, and the adjustments of its scores (mask.h
 * states the fields): query i is row i of the call, key j column j; bias
 * (n x m of the call's dtype) and visible (n x m of uint8) are none when
 * their data is NULL and their shape empty. Initialize it with
 * attnpool_mask_init(): it sets struct_size to the size this header gives
 * the struct, by which the struct grows (a library reads the fields its
 * caller's struct_size holds, and refuses nonzero bytes past the fields it
 * knows). */
typedef struct attnpool_mask {
  size_t struct_size;
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_C_MASK_MEMBER)
} attnpool_mask;

/* {struct_size}, every field absent: every key visible to every query.
 * Inline, so that struct_size is the caller's sizeof. */
static inline attnpool_mask attnpool_mask_init(void) {
  attnpool_mask mask;
  memset(&mask, 0, sizeof mask);
  mask.struct_size = sizeof mask;
  return mask;
}

/* A call's progress callback (attnpool/execution.h): called on the
 * calling thread between blocks of the call's work, with the fraction of
 * the current pass done (a call may make more than one pass), and from
 * nowhere else. Returning 0 cancels the call: it returns
 * ATTNPOOL_CANCELLED once the blocks under way end, its outputs as they
 * were (a call with a callback keeps a copy of them until it returns). It
 * must not call attnpool. */
typedef int (*attnpool_progress_callback)(void* context, double done);

/* Per-call settings; NULL means the defaults. Initialize it with
 * attnpool_execution_init(), whose struct_size lets it grow as the masks
 * do. */
typedef struct attnpool_execution {
  size_t struct_size;
  int64_t threads;                     /* OpenMP threads; 0: OMP_NUM_THREADS */
  attnpool_progress_callback progress; /* NULL: none */
  void* progress_context;
} attnpool_execution;

/* {struct_size}, threads 0, no callback. Inline, so that struct_size is
 * the caller's sizeof. */
static inline attnpool_execution attnpool_execution_init(void) {
  attnpool_execution execution;
  memset(&execution, 0, sizeof execution);
  execution.struct_size = sizeof execution;
  return execution;
}

/* {gaussian, bandwidth 1, no scale}. */
attnpool_kernel_spec attnpool_kernel_spec_init(void);
/* {sqeuclidean, gaussian h = 1, sum, NaN rows}: Nadaraya-Watson. */
attnpool_pool_spec attnpool_pool_spec_init(void);

/* Names of the enum values ("sqeuclidean", "gaussian", "sum"), NULL for an
 * invalid value; and the value of a name (ATTNPOOL_INVALID_ARGUMENT for an
 * unknown one, with the known names in the message). */
const char* attnpool_distance_name(attnpool_distance distance);
const char* attnpool_kernel_name(attnpool_kernel kernel);
const char* attnpool_normalization_name(attnpool_normalization normalization);
attnpool_status attnpool_distance_from_name(const char* name,
                                            attnpool_distance* distance);
attnpool_status attnpool_kernel_from_name(const char* name,
                                          attnpool_kernel* kernel);
attnpool_status attnpool_normalization_from_name(
    const char* name, attnpool_normalization* normalization);

/* ---------------------------------------------------------------- stages */

/* Stage 1: out (n x m) = distance(queries row i (n x d), keys row j (m x d)).
 */
attnpool_status attnpool_pairwise_distances(
    attnpool_dtype dtype, attnpool_distance distance,
    const attnpool_const_matrix* queries, const attnpool_const_matrix* keys,
    const attnpool_matrix* out, const attnpool_execution* execution);

/* Stage 2, in place: values(i, j) <- kernel weight of values(i, j), which
 * the distance `input` produced (sqeuclidean: r^2; euclidean, manhattan: r;
 * dot, cosine: a score, for exp and constant only). `depth` is d (exp's
 * default scale). */
attnpool_status attnpool_apply_kernel(attnpool_dtype dtype,
                                      const attnpool_kernel_spec* spec,
                                      attnpool_distance input,
                                      const attnpool_matrix* values,
                                      size_t depth,
                                      const attnpool_execution* execution);

/* Stage 3, in place on n x m values, over the keys each query sees. `mask`
 * may be NULL. */
attnpool_status attnpool_normalize(attnpool_dtype dtype,
                                   attnpool_normalization normalization,
                                   const attnpool_matrix* values,
                                   const attnpool_mask* mask,
                                   attnpool_empty_rows empty_rows,
                                   const attnpool_execution* execution);

/* Stage 4: out (n x dv) = weights (n x m) . values (m x dv). */
attnpool_status attnpool_weighted_sum(attnpool_dtype dtype,
                                      const attnpool_const_matrix* weights,
                                      const attnpool_const_matrix* values,
                                      const attnpool_matrix* out,
                                      const attnpool_execution* execution);

/* ---------------------------------------------------------------- pooling */

/* Attention pooling, fused: out (n x dv) = the normalized kernel weights of
 * the query-key distances . values, in one streaming pass over blocks of keys
 * that never forms the n x m weights (FlashAttention-2 style); queries n x d,
 * keys m x d, values m x dv. Nadaraya-Watson is attnpool_pool_spec_init();
 * scaled dot-product attention is {ATTNPOOL_DOT, {ATTNPOOL_KERNEL_EXP},
 * ATTNPOOL_NORMALIZE_SOFTMAX}. `mask` may be NULL. Equals
 * attnpool_pool_staged within the stages' tolerances. */
attnpool_status attnpool_pool(
    attnpool_dtype dtype, const attnpool_pool_spec* spec,
    const attnpool_const_matrix* queries, const attnpool_const_matrix* keys,
    const attnpool_const_matrix* values, const attnpool_matrix* out,
    const attnpool_mask* mask, const attnpool_execution* execution);

/* The staged pipeline: out (n x dv) = normalized kernel weights of the
 * query-key distances . values; queries n x d, keys m x d, values m x dv.
 * `weights` (n x m) receives the normalized weights; NULL (or data NULL)
 * allocates a workspace instead. `mask` may be NULL. */
attnpool_status attnpool_pool_staged(
    attnpool_dtype dtype, const attnpool_pool_spec* spec,
    const attnpool_const_matrix* queries, const attnpool_const_matrix* keys,
    const attnpool_const_matrix* values, const attnpool_matrix* out,
    const attnpool_matrix* weights, const attnpool_mask* mask,
    const attnpool_execution* execution);

/* ---------------------------------------------------------------- shards */

/* The state of attention pooling over a shard of the keys (pool.h's
 * PoolPartial): per query, `max` and `sum` (n entries of the call's dtype),
 * `best` (n key indices) and the n x dv `accumulator` of the call's dtype.
 * All four are required (n > 0); pool.h says what they hold. */
typedef struct attnpool_partial_state {
  attnpool_matrix accumulator;
  void* max;
  void* sum;
  size_t* best;
} attnpool_partial_state;

/* The state of keys [key_offset, key_offset + m) of the whole sequence into
 * `partial`: `keys` (m x d), `values` (m x dv) and the mask's bias and
 * visible matrices (n x m) hold just this shard; valid lengths and the
 * causal mask count keys from the start of the whole sequence (valid
 * lengths may exceed m). `mask` may be NULL. */
attnpool_status attnpool_pool_partial(
    attnpool_dtype dtype, const attnpool_pool_spec* spec,
    const attnpool_const_matrix* queries, const attnpool_const_matrix* keys,
    const attnpool_const_matrix* values, size_t key_offset,
    const attnpool_partial_state* partial, const attnpool_mask* mask,
    const attnpool_execution* execution);

/* into <- into merged with `later`, whose keys all come after into's. */
attnpool_status attnpool_pool_merge(attnpool_dtype dtype,
                                    const attnpool_pool_spec* spec,
                                    const attnpool_partial_state* into,
                                    const attnpool_partial_state* later);

/* out (n x dv) <- the pooled result of a (merged) state: what attnpool_pool
 * gives over all the keys, within rounding. out may be the state's
 * accumulator. */
attnpool_status attnpool_pool_finish(attnpool_dtype dtype,
                                     const attnpool_pool_spec* spec,
                                     const attnpool_partial_state* partial,
                                     const attnpool_matrix* out);

/* ---------------------------------------------------------------- layers */

/* A read-only (batch, heads, rows, cols) tensor view (attention.h's
 * TensorView): element (b, h, r, c) at
 * data[b * batch_stride + h * head_stride + r * row_stride + c], strides in
 * elements. A stride of 0 means the dense value: row_stride cols,
 * head_stride rows * row_stride, batch_stride heads * head_stride; so an
 * all-zero stride set is PyTorch's contiguous (B, H, N, D), and (B, N, H, D)
 * is {row_stride H * D, head_stride D, batch_stride N * H * D} (unlike the
 * C++ API, a zero stride cannot repeat data here: masks broadcast through a
 * batch or heads of 1). The element type is the call's attnpool_dtype
 * (uint8 for a visible mask). */
typedef struct attnpool_const_tensor {
  const void* data;
  size_t batch;
  size_t heads;
  size_t rows;
  size_t cols;
  size_t batch_stride; /* 0: heads * head_stride */
  size_t head_stride;  /* 0: rows * row_stride */
  size_t row_stride;   /* 0: cols */
} attnpool_const_tensor;

/* A writable tensor view; its elements must not overlap. */
typedef struct attnpool_tensor {
  void* data;
  size_t batch;
  size_t heads;
  size_t rows;
  size_t cols;
  size_t batch_stride; /* 0: heads * head_stride */
  size_t head_stride;  /* 0: rows * row_stride */
  size_t row_stride;   /* 0: cols */
} attnpool_tensor;

/* The members of the layers' mask: as the matrix functions' (above), but
 * bias and visible (B or 1, H or 1, n, m) tensors (a batch or heads of 1 is
 * broadcast over that dimension; data NULL and an empty shape: none), and a
 * value per query head (H entries of the call's dtype, NULL: none;
 * attnpool_alibi_slopes_as gives the standard ALiBi slopes in it). */
#define ATTNPOOL_C_HEADS_MEMBER_lengths(name) ATTNPOOL_C_MEMBER_lengths(name)
#define ATTNPOOL_C_HEADS_MEMBER_flag(name) ATTNPOOL_C_MEMBER_flag(name)
#define ATTNPOOL_C_HEADS_MEMBER_position(name) ATTNPOOL_C_MEMBER_position(name)
#define ATTNPOOL_C_HEADS_MEMBER_count(name) ATTNPOOL_C_MEMBER_count(name)
#define ATTNPOOL_C_HEADS_MEMBER_matrix(name) attnpool_const_tensor name;
#define ATTNPOOL_C_HEADS_MEMBER_booleans(name) attnpool_const_tensor name;
#define ATTNPOOL_C_HEADS_MEMBER_number(name) ATTNPOOL_C_MEMBER_number(name)
#define ATTNPOOL_C_HEADS_MEMBER_head_number(name) const void* name;
#define ATTNPOOL_C_HEADS_MASK_MEMBER(name, heads_name, kind, needs, check, \
                                     help)                                 \
  ATTNPOOL_C_HEADS_MEMBER_##kind(heads_name)

/* Which keys each query of the layers sees (attention.h's AttentionMask):
 * valid_lengths has B entries (query i of batch entry b sees keys
 * j < L[b]) or, with lengths_per_query, B * n (L[b * n + i]), each at most
 * m. Initialize it with attnpool_attention_mask_init() (struct_size, as
 * attnpool_mask). */
typedef struct attnpool_attention_mask {
  size_t struct_size;
  int64_t lengths_per_query;
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_C_HEADS_MASK_MEMBER)
} attnpool_attention_mask;

/* {struct_size}, every field absent (inline, as attnpool_mask_init). */
static inline attnpool_attention_mask attnpool_attention_mask_init(void) {
  attnpool_attention_mask mask;
  memset(&mask, 0, sizeof mask);
  mask.struct_size = sizeof mask;
  return mask;
}

/* The fields of a mask, one a line, as "name kind" (heads: the
 * attention mask's names), in the structs' order: for foreign-function
 * interfaces that build the structs at run time (Python ctypes). */
const char* attnpool_mask_layout(int heads);

/* slopes (heads entries) = the standard ALiBi slopes of `heads` heads:
 * 2^(-8(h+1)/H) for a power of two H, else those of the power of two below
 * H followed by every other slope of twice that many, in double. */
attnpool_status attnpool_alibi_slopes(size_t heads, double* slopes);
/* The same in `dtype` (each rounded from double): the entries an
 * attnpool_attention_mask of a call of that dtype takes. */
attnpool_status attnpool_alibi_slopes_as(attnpool_dtype dtype, size_t heads,
                                         void* slopes);

/* softmax(scale * Q K^T + bias, masked) V per (batch, head), on the fused
 * kernel: queries (B, Hq, n, dk), keys (B, Hkv, m, dk), values
 * (B, Hkv, m, dv), out (B, Hq, n, dv); Hkv divides Hq (query head h reads
 * key/value head h / (Hq / Hkv): grouped-query attention). `scale` NULL:
 * 1/sqrt(dk). `mask` may be NULL. A query that sees no key follows
 * empty_rows. */
attnpool_status attnpool_scaled_dot_product_attention(
    attnpool_dtype dtype, const attnpool_const_tensor* queries,
    const attnpool_const_tensor* keys, const attnpool_const_tensor* values,
    const attnpool_tensor* out, const attnpool_attention_mask* mask,
    const double* scale, attnpool_empty_rows empty_rows,
    const attnpool_execution* execution);

/* attnpool_scaled_dot_product_attention of `count` sequences packed along
 * the rows (flash-attention's varlen, cu_seqlens): sequence b owns query
 * rows [query_offsets[b], query_offsets[b + 1]) and key and value rows
 * [key_offsets[b], key_offsets[b + 1]) (count + 1 ascending entries from 0
 * to the rows). queries (1, Hq, sum n, dk), keys (1, Hkv, sum m, dk),
 * values (1, Hkv, sum m, dv), out (1, Hq, sum n, dv): a (sum n, H, d)
 * array is such a tensor with head_stride d, row_stride H * d. Query i of
 * a sequence of n queries and m keys sits at key i + m - n +
 * mask->causal_offset (the ends aligned); the mask's valid_lengths, bias
 * and visible do not apply. Batched decode: one query per sequence. */
attnpool_status attnpool_scaled_dot_product_attention_varlen(
    attnpool_dtype dtype, const attnpool_const_tensor* queries,
    const attnpool_const_tensor* keys, const attnpool_const_tensor* values,
    const attnpool_tensor* out, size_t count, const size_t* query_offsets,
    const size_t* key_offsets, const attnpool_attention_mask* mask,
    const double* scale, attnpool_empty_rows empty_rows,
    const attnpool_execution* execution);

/* A paged KV cache (vLLM's): keys (blocks, Hkv, block_size, dk) and values
 * (blocks, Hkv, block_size, dv) of the call's dtype, a (blocks, block_size,
 * Hkv, d) pool being such a tensor with head_stride d and row_stride
 * Hkv * d; row b of block_table (block_table_stride entries apart) lists
 * sequence b's blocks in order (key j in block table[b * stride + j /
 * block_size], row j % block_size); lengths[b] keys each. */
typedef struct attnpool_paged_kv_cache {
  attnpool_const_tensor keys;
  attnpool_const_tensor values;
  const int32_t* block_table;
  size_t block_table_stride;
  const size_t* lengths;
} attnpool_paged_kv_cache;

/* attnpool_scaled_dot_product_attention_varlen with the keys and values of
 * sequence b in a paged cache, read in place: queries (1, Hq, sum n, dk)
 * packed by query_offsets (count + 1 entries, from 0), out (1, Hq, sum n,
 * dv); bitwise what the same rows give contiguous. */
attnpool_status attnpool_scaled_dot_product_attention_paged(
    attnpool_dtype dtype, const attnpool_const_tensor* queries,
    const attnpool_paged_kv_cache* cache, const attnpool_tensor* out,
    size_t count, const size_t* query_offsets,
    const attnpool_attention_mask* mask, const double* scale,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution);

/* Additive (Bahdanau) attention's weights, of the call's dtype: w_q
 * (h x dq), w_k (h x dk), w_v (h entries). */
typedef struct attnpool_additive_weights {
  attnpool_const_matrix w_q;
  attnpool_const_matrix w_k;
  const void* w_v;
} attnpool_additive_weights;

/* score(q, k) = w_v . tanh(W_q q + W_k k), then the masks, softmax and the
 * weighted sum of values: queries (B, H, n, dq), keys (B, H, m, dk), values
 * (B, H, m, dv), out (B, H, n, dv); the same weights serve every head.
 * `mask` may be NULL. */
attnpool_status attnpool_additive_attention(
    attnpool_dtype dtype, const attnpool_additive_weights* weights,
    const attnpool_const_tensor* queries, const attnpool_const_tensor* keys,
    const attnpool_const_tensor* values, const attnpool_tensor* out,
    const attnpool_attention_mask* mask, attnpool_empty_rows empty_rows,
    const attnpool_execution* execution);

/* Multi-head attention's weights, of the call's dtype, with `heads` heads
 * of dh (queries, keys) and dv (values) columns: w_q (d_q x H*dh), w_k
 * (d_k x H*dh), w_v (d_v_in x H*dv), w_o (H*dv x d_out); biases (NULL:
 * none) of H*dh, H*dh, H*dv and d_out entries. Head h owns columns
 * [h*dh, (h+1)*dh) of the projections (PyTorch's nn.MultiheadAttention
 * weights, transposed: x W, not W x). */
typedef struct attnpool_multi_head_weights {
  size_t heads;
  attnpool_const_matrix w_q;
  attnpool_const_matrix w_k;
  attnpool_const_matrix w_v;
  attnpool_const_matrix w_o;
  const void* b_q;
  const void* b_k;
  const void* b_v;
  const void* b_o;
} attnpool_multi_head_weights;

/* out = concat_h(attention(X_q W_q^h + b_q^h, X_k W_k^h + b_k^h,
 * X_v W_v^h + b_v^h)) W_o + b_o, each head scaled dot-product attention
 * with scale 1/sqrt(dh) and `mask` (heads 1 or H): queries (B, 1, n, d_q),
 * keys (B, 1, m, d_k), values (B, 1, m, d_v_in), out (B, 1, n, d_out).
 * `mask` may be NULL. */
attnpool_status attnpool_multi_head_attention(
    attnpool_dtype dtype, const attnpool_multi_head_weights* weights,
    const attnpool_const_tensor* queries, const attnpool_const_tensor* keys,
    const attnpool_const_tensor* values, const attnpool_tensor* out,
    const attnpool_attention_mask* mask, attnpool_empty_rows empty_rows,
    const attnpool_execution* execution);

/* out (n x c) = x (n x k) . w (k x c) + bias (c entries of the call's dtype
 * added to every row; NULL: none). */
attnpool_status attnpool_linear(attnpool_dtype dtype,
                                const attnpool_const_matrix* x,
                                const attnpool_const_matrix* w,
                                const void* bias, const attnpool_matrix* out,
                                const attnpool_execution* execution);

/* ------------------------------------------------------------- regression */

/* Nadaraya-Watson kernel regression (regression.h) of y (n x dy) on x
 * (n x d):
 *   y_hat(q) = sum_j K(|q - x_j| / h) y_j / sum_j K(|q - x_j| / h)
 * with the kernels of distances (gaussian and the compact ones). With
 * per-dimension bandwidths (h_1, ..., h_d), coordinate k is divided by h_k
 * and h = 1. */

/* out (m x dy) = y_hat of each row of queries (m x d). `bandwidths` holds
 * bandwidth_count entries: 1 (one h for every dimension) or d (one per
 * dimension), each finite, > 0 and a normal number of the dtype. x and y
 * are finite, n >= 1. Runs the fused pooling; with `weights` (m x n; NULL or
 * data NULL: none) the staged pipeline, which also writes the normalized
 * weight of each training point for each query. The Gaussian is normalized
 * in the stable form (a query far from every point gets the mean of its
 * nearest points' y); a query whose kernel window holds no training point
 * gets empty_rows. Bitwise the same for every thread count. Errors name
 * "bandwidths", "bandwidth_count", "kernel", "x", "y", "queries.cols",
 * "out.rows", "weights.cols", "empty_rows", ... */
attnpool_status attnpool_nadaraya_watson_predict(
    attnpool_dtype dtype, attnpool_kernel kernel, const double* bandwidths,
    size_t bandwidth_count, const attnpool_const_matrix* x,
    const attnpool_const_matrix* y, const attnpool_const_matrix* queries,
    const attnpool_matrix* out, const attnpool_matrix* weights,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution);

/* Normal-reference rules of thumb, per column k of x, with
 * sigma_k = min(sd_k, IQR_k / 1.349) (sd with the n - 1 denominator, IQR
 * between linearly interpolated quartiles, numpy's default), or sd_k when
 * IQR_k = 0. */
typedef enum attnpool_bandwidth_rule ATTNPOOL_C_ENUM_BASE {
  /* (4 / (d + 2))^(1/(d+4)) sigma_k n^(-1/(d+4)); d = 1: 1.06 sigma n^-1/5 */
  ATTNPOOL_BANDWIDTH_RULE_SILVERMAN = 0,
  /* 1.059 sigma_k n^(-1/(d+4)) (statsmodels' bw_scott for d = 1) */
  ATTNPOOL_BANDWIDTH_RULE_SCOTT = 1
} attnpool_bandwidth_rule;

/* out (x.cols entries) = the rule's bandwidth of each column of x (n x d,
 * n >= 2, finite, no constant column), computed in double. */
attnpool_status attnpool_rule_of_thumb_bandwidth(attnpool_dtype dtype,
                                                 attnpool_bandwidth_rule rule,
                                                 const attnpool_const_matrix* x,
                                                 double* out);

/* out (count entries) = count bandwidths ascending from h_min to h_max
 * whose 1/h^2 are evenly spaced (count 1: h_min): on such a grid the
 * Gaussian cross-validation takes two exps per pair for all the bandwidths
 * together. 0 < h_min <= h_max, both finite; count >= 1. */
attnpool_status attnpool_gaussian_bandwidth_grid(double h_min, double h_max,
                                                 size_t count, double* out);

/* Settings of attnpool_cross_validate; all-zero (or NULL) is leave-one-out
 * with every scale 1. */
typedef struct attnpool_cross_validation_options {
  /* 0: leave-one-out; k >= 2 (and <= n): k-fold, point i in fold i mod k,
   * each fold predicted from the other k - 1. */
  size_t folds;
  /* NULL: all 1; else d entries s_k > 0: the distance uses x_k / s_k, so
   * the bandwidth h means (h s_1, ..., h s_d). */
  const double* scales;
  /* 0: skip the pairs that cannot matter (regression.h,
   * CrossValidationOptions::skip_distant: Gaussian weights below 2^-32 / n
   * of the query's largest, 2^-61 / n in double; zero weights of the compact
   * kernels); nonzero: visit every pair. */
  int every_pair;
} attnpool_cross_validation_options;

/* The `best` of attnpool_cross_validate when every bandwidth leaves some
 * point unpredictable. */
#define ATTNPOOL_NO_BANDWIDTH ((size_t)-1)

/* Scores each of the bandwidth_count `bandwidths` (any order, each finite
 * and > 0) by leave-one-out or k-fold cross-validation of the regression of
 * y (n x dy) on x (n x d, n >= 2), in one streaming pass over the pairs
 * (never an n x n matrix): scores[b] = the mean, over the points whose
 * held-out kernel window is not empty, of the held-out squared error
 * sum_c (y(i, c) - y_hat_-i(c))^2 (NaN when no point is predictable);
 * unpredictable[b] (NULL: not written) = the number of points left out
 * of scores[b] (never any for the Gaussian); *best (NULL: not written) = the
 * index of the least score among the bandwidths with no unpredictable point
 * (the first on ties), or ATTNPOOL_NO_BANDWIDTH. `options` may be NULL. Bitwise
 * the same for every thread count. Errors name "bandwidths", "kernel",
 * "x", "y", "x.rows", "options.folds", "options.scales", "scores", ... */
attnpool_status attnpool_cross_validate(
    attnpool_dtype dtype, attnpool_kernel kernel,
    const attnpool_const_matrix* x, const attnpool_const_matrix* y,
    const double* bandwidths, size_t bandwidth_count,
    const attnpool_cross_validation_options* options, double* scores,
    size_t* unpredictable, size_t* best, const attnpool_execution* execution);

/* ---------------------------------------------------------------- targets */

/* The functions below that return text return "" when the call fails (a
 * bad ATTNPOOL_ISA or ATTNPOOL_TUNING: targets.h), the error then the
 * thread's last error, as for a failing status. */

/* Space-separated target names, best first ("AVX3 AVX2 SSE4 SCALAR").
 * The strings stay valid for the life of the process. */
const char* attnpool_compiled_targets(void);
const char* attnpool_supported_targets(void);
/* The target the next call runs on, and the one the calling thread's last
 * computation ran on ("" if none). Valid until the thread's next call of
 * the same function. */
const char* attnpool_active_target(void);
const char* attnpool_last_run_target(void);
/* The bf16 dot-product instruction that the fused score tile of bfloat16
 * queries and keys runs on beside the active target ("AMX_BF16",
 * "AVX512_BF16", "BF16" on ARM), or "" (targets.h). Valid until the thread's
 * next call of it. */
const char* attnpool_bf16_dot_instruction(void);
/* Forces a target ("avx2", "AVX3", "avx512", "neon", "scalar", ...;
 * case-insensitive) for the whole process: ATTNPOOL_UNSUPPORTED_TARGET when
 * it is not compiled or this CPU lacks it. */
attnpool_status attnpool_force_target(const char* name);
/* Back to the best supported target (and this CPU's choice of bf16
 * dot-product instruction and of tuning profile). */
attnpool_status attnpool_reset_target(void);
/* The bf16 dot-product instructions this CPU runs that tile on, best first,
 * space-separated ("" where none; targets.h). */
const char* attnpool_supported_bf16_dot_instructions(void);
/* Forces one of them (case-insensitive) for the whole process, "" restores
 * this CPU's choice: ATTNPOOL_UNSUPPORTED_TARGET for any other name. */
attnpool_status attnpool_force_bf16_dot_instruction(const char* name);
/* The tuning profile the fused kernel runs with ("zen4", "small_l2",
 * "generic") and its parameters ("query_rows=96 key_block_bytes=2048 ...";
 * targets.h). Valid until the thread's next call of the same function. */
const char* attnpool_tuning(void);
const char* attnpool_tuning_parameters(void);
/* Every profile, this CPU's choice first, space-separated. */
const char* attnpool_tunings(void);
/* Forces a profile (case-insensitive), any of its parameters after its name
 * as name=value ("generic query_rows=192"; targets.h force_tuning), for the
 * whole process; "" restores this CPU's choice: ATTNPOOL_INVALID_ARGUMENT
 * (argument "tuning") for an unknown name or parameter or a value out of
 * range. */
attnpool_status attnpool_force_tuning(const char* name);

/* ------------------------------------------ reduced-precision keys, values */

/* The element types keys and values may be stored in (element.h): every
 * computation is in float, on the float values the elements hold. */
typedef enum attnpool_element ATTNPOOL_C_ENUM_BASE {
  ATTNPOOL_ELEMENT_FLOAT32 = 0,
  ATTNPOOL_ELEMENT_BFLOAT16 = 1, /* uint16_t bit patterns */
  ATTNPOOL_ELEMENT_FLOAT16 = 2,  /* IEEE binary16, uint16_t bit patterns */
  ATTNPOOL_ELEMENT_INT8 = 3,     /* int8_t, one float scale per row */
  /* OCP float8 bit patterns (uint8_t), one float scale per row */
  ATTNPOOL_ELEMENT_FLOAT8_E4M3FN = 4,
  ATTNPOOL_ELEMENT_FLOAT8_E5M2 = 5
} attnpool_element;

/* Keys or values of any element type: `data` a tensor of `element`s (zero
 * strides dense, as attnpool_const_tensor); for the scaled types (int8,
 * float8), `scales` a float (B, H, rows, 1) tensor, row (b, h, r)'s scale
 * its element (b, h, r, 0) (unused otherwise). A matrix is such a tensor
 * with batch = heads = 1. */
typedef struct attnpool_element_tensor {
  attnpool_element element;
  attnpool_const_tensor data;
  attnpool_const_tensor scales;
} attnpool_element_tensor;

/* attnpool_pool in float over keys (m x d) and values (m x dv) of any
 * element type (batch = heads = 1); queries and out are float. */
attnpool_status attnpool_pool_elements(const attnpool_pool_spec* spec,
                                       const attnpool_const_matrix* queries,
                                       const attnpool_element_tensor* keys,
                                       const attnpool_element_tensor* values,
                                       const attnpool_matrix* out,
                                       const attnpool_mask* mask,
                                       const attnpool_execution* execution);

/* attnpool_pool_elements with queries (n x d) of any element type too
 * (pool.h: widened once; dot products of bfloat16 queries and keys take the
 * bf16 dot-product tile on the fused tile path where
 * attnpool_bf16_dot_instruction() names one). */
attnpool_status attnpool_pool_element_queries(
    const attnpool_pool_spec* spec, const attnpool_element_tensor* queries,
    const attnpool_element_tensor* keys, const attnpool_element_tensor* values,
    const attnpool_matrix* out, const attnpool_mask* mask,
    const attnpool_execution* execution);

/* attnpool_pool_partial over a shard of keys and values of any element
 * type (float queries and state; merge and finish as for float). */
attnpool_status attnpool_pool_partial_elements(
    const attnpool_pool_spec* spec, const attnpool_const_matrix* queries,
    const attnpool_element_tensor* keys, const attnpool_element_tensor* values,
    size_t key_offset, const attnpool_partial_state* partial,
    const attnpool_mask* mask, const attnpool_execution* execution);

/* attnpool_pairwise_distances of float queries to keys of any element type
 * (batch = heads = 1); out is float. */
attnpool_status attnpool_pairwise_distances_elements(
    attnpool_distance distance, const attnpool_const_matrix* queries,
    const attnpool_element_tensor* keys, const attnpool_matrix* out,
    const attnpool_execution* execution);

/* attnpool_scaled_dot_product_attention over keys and values of any element
 * type; queries and out are float. */
attnpool_status attnpool_scaled_dot_product_attention_elements(
    const attnpool_const_tensor* queries, const attnpool_element_tensor* keys,
    const attnpool_element_tensor* values, const attnpool_tensor* out,
    const attnpool_attention_mask* mask, const double* scale,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution);

/* attnpool_scaled_dot_product_attention_elements with queries of any element
 * type too (attention.h: widened once; the bf16 tile as above). */
attnpool_status attnpool_scaled_dot_product_attention_element_queries(
    const attnpool_element_tensor* queries, const attnpool_element_tensor* keys,
    const attnpool_element_tensor* values, const attnpool_tensor* out,
    const attnpool_attention_mask* mask, const double* scale,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution);

/* attnpool_scaled_dot_product_attention_varlen over packed keys and values
 * of any element type; queries and out are float. */
attnpool_status attnpool_scaled_dot_product_attention_varlen_elements(
    const attnpool_const_tensor* queries, const attnpool_element_tensor* keys,
    const attnpool_element_tensor* values, const attnpool_tensor* out,
    size_t count, const size_t* query_offsets, const size_t* key_offsets,
    const attnpool_attention_mask* mask, const double* scale,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution);

/* A paged KV cache of any element type: pools as attnpool_paged_kv_cache's
 * (int8: scales a (blocks, Hkv, block_size, 1) tensor paged with them). */
typedef struct attnpool_paged_element_cache {
  attnpool_element_tensor keys;
  attnpool_element_tensor values;
  const int32_t* block_table;
  size_t block_table_stride;
  const size_t* lengths;
} attnpool_paged_element_cache;

/* attnpool_scaled_dot_product_attention_paged over such a cache, read in
 * place; queries and out are float. */
attnpool_status attnpool_scaled_dot_product_attention_paged_elements(
    const attnpool_const_tensor* queries,
    const attnpool_paged_element_cache* cache, const attnpool_tensor* out,
    size_t count, const size_t* query_offsets,
    const attnpool_attention_mask* mask, const double* scale,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution);

/* Conversions of `count` elements (element.h: nearest even, inf on
 * overflow, NaN kept; widening exact). */
attnpool_status attnpool_to_bfloat16(const float* in, size_t count,
                                     uint16_t* out);
attnpool_status attnpool_to_float16(const float* in, size_t count,
                                    uint16_t* out);
attnpool_status attnpool_bfloat16_to_float(const uint16_t* in, size_t count,
                                           float* out);
attnpool_status attnpool_float16_to_float(const uint16_t* in, size_t count,
                                          float* out);

/* Quantizes each row of `in` (float) to int8 `out` (same shape):
 * scales[r] = max |in(r, :)| / 127. Dequantizing gives scales[r] * out(r, c).
 */
attnpool_status attnpool_quantize_rows(const attnpool_const_matrix* in,
                                       const attnpool_matrix* out,
                                       float* scales);
attnpool_status attnpool_dequantize_rows(const attnpool_const_matrix* in,
                                         const float* scales,
                                         const attnpool_matrix* out);

/* Rows of any element type back in float (a matrix: batch = heads = 1):
 * out(r, c) = the float element (r, c) of `in` holds, as every computation
 * reads it. out has in's shape and may not overlap it or its scales. */
attnpool_status attnpool_widen_rows(const attnpool_element_tensor* in,
                                    const attnpool_matrix* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTNPOOL_ATTNPOOL_C_H_ */
