// The C API (include/attnpool/attnpool_c.h): status and names, the stages,
// the pools and their shards, the targets. The layers and regression are in
// src/c_api_layers.cc; the conversions in src/c_api_convert.h.
#include <attnpool/attnpool_c.h>

#include <string>

#include "src/c_api_convert.h"

using namespace attnpool_c_api;  // NOLINT: this file is its implementation

extern "C" {

const char* attnpool_status_name(attnpool_status status) {
  switch (status) {
    case ATTNPOOL_OK:
      return "ok";
    case ATTNPOOL_INVALID_ARGUMENT:
      return "invalid argument";
    case ATTNPOOL_UNSUPPORTED_TARGET:
      return "unsupported target";
    case ATTNPOOL_OUT_OF_MEMORY:
      return "out of memory";
    case ATTNPOOL_INTERNAL_ERROR:
      return "internal error";
    case ATTNPOOL_CANCELLED:
      return "cancelled";
  }
  return "unknown status";
}

const char* attnpool_last_error(void) { return last_error.c_str(); }
const char* attnpool_last_error_argument(void) {
  return last_error_argument.c_str();
}

const char* attnpool_mask_layout(int heads) {
  static const std::string layouts[2] = {
#define ATTNPOOL_LAYOUT_LINE(name, heads_name, kind, needs, check, help) \
#name " " #kind "\n"
      ATTNPOOL_MASK_FIELDS(ATTNPOOL_LAYOUT_LINE),
#undef ATTNPOOL_LAYOUT_LINE
#define ATTNPOOL_LAYOUT_LINE(name, heads_name, kind, needs, check, help) \
#heads_name " " #kind "\n"
      ATTNPOOL_MASK_FIELDS(ATTNPOOL_LAYOUT_LINE)
#undef ATTNPOOL_LAYOUT_LINE
  };
  return layouts[heads != 0 ? 1 : 0].c_str();
}

attnpool_kernel_spec attnpool_kernel_spec_init(void) {
  attnpool_kernel_spec spec;
  spec.kernel = ATTNPOOL_KERNEL_GAUSSIAN;
  spec.bandwidth = 1.0;
  spec.has_scale = 0;
  spec.scale = 0.0;
  return spec;
}

attnpool_pool_spec attnpool_pool_spec_init(void) {
  attnpool_pool_spec spec;
  spec.distance = ATTNPOOL_SQEUCLIDEAN;
  spec.kernel = attnpool_kernel_spec_init();
  spec.normalization = ATTNPOOL_NORMALIZE_SUM;
  spec.empty_rows = ATTNPOOL_EMPTY_ROWS_NAN;
  return spec;
}

const char* attnpool_distance_name(attnpool_distance distance) {
  return NameOrNull(attnpool::distance_name, distance);
}
const char* attnpool_kernel_name(attnpool_kernel kernel) {
  return NameOrNull(attnpool::kernel_name, kernel);
}
const char* attnpool_normalization_name(attnpool_normalization normalization) {
  return NameOrNull(attnpool::normalization_name, normalization);
}

attnpool_status attnpool_distance_from_name(const char* name,
                                            attnpool_distance* distance) {
  return FromName(attnpool::distance_from_name, name, distance, "distance");
}
attnpool_status attnpool_kernel_from_name(const char* name,
                                          attnpool_kernel* kernel) {
  return FromName(attnpool::kernel_from_name, name, kernel, "kernel");
}
attnpool_status attnpool_normalization_from_name(
    const char* name, attnpool_normalization* normalization) {
  return FromName(attnpool::normalization_from_name, name, normalization,
                  "normalization");
}

attnpool_status attnpool_pairwise_distances(
    attnpool_dtype dtype, attnpool_distance distance,
    const attnpool_const_matrix* queries, const attnpool_const_matrix* keys,
    const attnpool_matrix* out, const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    attnpool::pairwise_distances(static_cast<attnpool::Distance>(distance),
                                 ViewOf<T>(queries, "queries"),
                                 ViewOf<T>(keys, "keys"), ViewOf<T>(out, "out"),
                                 ExecutionOf(execution));
  });
}

attnpool_status attnpool_apply_kernel(attnpool_dtype dtype,
                                      const attnpool_kernel_spec* spec,
                                      attnpool_distance input,
                                      const attnpool_matrix* values,
                                      size_t depth,
                                      const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    attnpool::apply_kernel(KernelSpecOf(Required(spec, "spec")),
                           static_cast<attnpool::Distance>(input),
                           ViewOf<T>(values, "values"), depth,
                           ExecutionOf(execution));
  });
}

attnpool_status attnpool_normalize(attnpool_dtype dtype,
                                   attnpool_normalization normalization,
                                   const attnpool_matrix* values,
                                   const attnpool_mask* mask,
                                   attnpool_empty_rows empty_rows,
                                   const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    attnpool::normalize(static_cast<attnpool::Normalization>(normalization),
                        ViewOf<T>(values, "values"), MaskOf<T>(mask),
                        static_cast<attnpool::EmptyRows>(empty_rows),
                        ExecutionOf(execution));
  });
}

attnpool_status attnpool_weighted_sum(attnpool_dtype dtype,
                                      const attnpool_const_matrix* weights,
                                      const attnpool_const_matrix* values,
                                      const attnpool_matrix* out,
                                      const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    attnpool::weighted_sum(ViewOf<T>(weights, "weights"),
                           ViewOf<T>(values, "values"), ViewOf<T>(out, "out"),
                           ExecutionOf(execution));
  });
}

attnpool_status attnpool_pool(
    attnpool_dtype dtype, const attnpool_pool_spec* spec,
    const attnpool_const_matrix* queries, const attnpool_const_matrix* keys,
    const attnpool_const_matrix* values, const attnpool_matrix* out,
    const attnpool_mask* mask, const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    attnpool::attention_pool(
        PoolSpecOf(Required(spec, "spec")), ViewOf<T>(queries, "queries"),
        ViewOf<T>(keys, "keys"), ViewOf<T>(values, "values"),
        ViewOf<T>(out, "out"), MaskOf<T>(mask), ExecutionOf(execution));
  });
}

attnpool_status attnpool_pool_staged(
    attnpool_dtype dtype, const attnpool_pool_spec* spec,
    const attnpool_const_matrix* queries, const attnpool_const_matrix* keys,
    const attnpool_const_matrix* values, const attnpool_matrix* out,
    const attnpool_matrix* weights, const attnpool_mask* mask,
    const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto in = PoolInputsOf<T>(spec, queries, keys, values);
    const auto o = ViewOf<T>(out, "out");
    if (weights != nullptr && weights->data != nullptr) {
      attnpool::attention_pool_staged(in.spec, in.queries, in.keys, in.values,
                                      o, View<T>(*weights), MaskOf<T>(mask),
                                      ExecutionOf(execution));
    } else {
      attnpool::attention_pool_staged(in.spec, in.queries, in.keys, in.values,
                                      o, MaskOf<T>(mask),
                                      ExecutionOf(execution));
    }
  });
}

attnpool_status attnpool_pool_partial(
    attnpool_dtype dtype, const attnpool_pool_spec* spec,
    const attnpool_const_matrix* queries, const attnpool_const_matrix* keys,
    const attnpool_const_matrix* values, size_t key_offset,
    const attnpool_partial_state* partial, const attnpool_mask* mask,
    const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto in = PoolInputsOf<T>(spec, queries, keys, values);
    const auto state = PartialOf<T>(Required(partial, "partial"));
    attnpool::attention_pool_partial(in.spec, in.queries, in.keys, in.values,
                                     key_offset, state, MaskOf<T>(mask),
                                     ExecutionOf(execution));
  });
}

attnpool_status attnpool_pool_merge(attnpool_dtype dtype,
                                    const attnpool_pool_spec* spec,
                                    const attnpool_partial_state* into,
                                    const attnpool_partial_state* later) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto pool_spec = CheckedPoolSpecOf(spec);
    const auto target = PartialOf<T>(Required(into, "into"));
    const auto part = PartialOf<T>(Required(later, "later"));
    attnpool::attention_pool_merge(pool_spec, target, part);
  });
}

attnpool_status attnpool_pool_finish(attnpool_dtype dtype,
                                     const attnpool_pool_spec* spec,
                                     const attnpool_partial_state* partial,
                                     const attnpool_matrix* out) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto pool_spec = CheckedPoolSpecOf(spec);
    const auto state = PartialOf<T>(Required(partial, "partial"));
    attnpool::attention_pool_finish(pool_spec, state, ViewOf<T>(out, "out"));
  });
}

const char* attnpool_compiled_targets(void) {
  static const std::string names = JoinedOrEmpty(attnpool::compiled_targets);
  return names.c_str();
}

const char* attnpool_supported_targets(void) {
  static const std::string names = JoinedOrEmpty(attnpool::supported_targets);
  return names.c_str();
}

const char* attnpool_active_target(void) {
  thread_local std::string name;
  return ThreadLocalText(name, attnpool::active_target);
}

const char* attnpool_bf16_dot_instruction(void) {
  thread_local std::string name;
  return ThreadLocalText(name, attnpool::bf16_dot_instruction);
}

const char* attnpool_last_run_target(void) {
  thread_local std::string name;
  return ThreadLocalText(name, attnpool::last_run_target);
}

attnpool_status attnpool_force_target(const char* name) {
  return ForceNamed(name, attnpool::force_target);
}

attnpool_status attnpool_reset_target(void) {
  return Guard([] { attnpool::reset_target(); });
}

const char* attnpool_supported_bf16_dot_instructions(void) {
  static const std::string names =
      JoinedOrEmpty(attnpool::supported_bf16_dot_instructions);
  return names.c_str();
}

attnpool_status attnpool_force_bf16_dot_instruction(const char* name) {
  return ForceNamed(name, attnpool::force_bf16_dot_instruction);
}

const char* attnpool_tuning(void) {
  thread_local std::string name;
  return ThreadLocalText(name, attnpool::tuning);
}

const char* attnpool_tuning_parameters(void) {
  thread_local std::string text;
  return ThreadLocalText(text, attnpool::tuning_parameters);
}

const char* attnpool_tunings(void) {
  static const std::string names = JoinedOrEmpty(attnpool::tunings);
  return names.c_str();
}

attnpool_status attnpool_force_tuning(const char* name) {
  return ForceNamed(name, attnpool::force_tuning);
}

}  // extern "C"
