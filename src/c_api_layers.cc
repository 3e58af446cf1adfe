// The C API (include/attnpool/attnpool_c.h): the attention layers and
// Nadaraya–Watson regression.
#include <attnpool/attnpool_c.h>

#include <vector>

#include "src/c_api_convert.h"

using namespace attnpool_c_api;  // NOLINT: this file is its implementation

extern "C" {

attnpool_status attnpool_scaled_dot_product_attention(
    attnpool_dtype dtype, const attnpool_const_tensor* queries,
    const attnpool_const_tensor* keys, const attnpool_const_tensor* values,
    const attnpool_tensor* out, const attnpool_attention_mask* mask,
    const double* scale, attnpool_empty_rows empty_rows,
    const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto t = LayerTensorsOf<T>(queries, keys, values, out);
    const std::optional<double> factor = ScaleOf(scale);
    attnpool::scaled_dot_product_attention(
        t.queries, t.keys, t.values, t.out, AttentionMaskOf<T>(mask), factor,
        static_cast<attnpool::EmptyRows>(empty_rows), ExecutionOf(execution));
  });
}

attnpool_status attnpool_scaled_dot_product_attention_varlen(
    attnpool_dtype dtype, const attnpool_const_tensor* queries,
    const attnpool_const_tensor* keys, const attnpool_const_tensor* values,
    const attnpool_tensor* out, size_t count, const size_t* query_offsets,
    const size_t* key_offsets, const attnpool_attention_mask* mask,
    const double* scale, attnpool_empty_rows empty_rows,
    const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto t = LayerTensorsOf<T>(queries, keys, values, out);
    const std::optional<double> factor = ScaleOf(scale);
    attnpool::scaled_dot_product_attention_varlen(
        t.queries, t.keys, t.values, t.out, {count, query_offsets, key_offsets},
        AttentionMaskOf<T>(mask), factor,
        static_cast<attnpool::EmptyRows>(empty_rows), ExecutionOf(execution));
  });
}

attnpool_status attnpool_scaled_dot_product_attention_paged(
    attnpool_dtype dtype, const attnpool_const_tensor* queries,
    const attnpool_paged_kv_cache* cache, const attnpool_tensor* out,
    size_t count, const size_t* query_offsets,
    const attnpool_attention_mask* mask, const double* scale,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto query_view = Tensor<T>(queries, "queries");
    const auto& c_cache = Required(cache, "cache");
    attnpool::PagedKVCache<T> paged;
    paged.keys = TensorOf<const T>("cache.keys", c_cache.keys);
    paged.values = TensorOf<const T>("cache.values", c_cache.values);
    paged.block_table = c_cache.block_table;
    paged.block_table_stride = c_cache.block_table_stride;
    paged.lengths = c_cache.lengths;
    const auto out_view = Tensor<T>(out, "out");
    const std::optional<double> factor = ScaleOf(scale);
    attnpool::scaled_dot_product_attention_paged(
        query_view, paged, out_view, count, query_offsets,
        AttentionMaskOf<T>(mask), factor,
        static_cast<attnpool::EmptyRows>(empty_rows), ExecutionOf(execution));
  });
}

attnpool_status attnpool_additive_attention(
    attnpool_dtype dtype, const attnpool_additive_weights* weights,
    const attnpool_const_tensor* queries, const attnpool_const_tensor* keys,
    const attnpool_const_tensor* values, const attnpool_tensor* out,
    const attnpool_attention_mask* mask, attnpool_empty_rows empty_rows,
    const attnpool_execution* execution) {
  return WeightedLayer(
      dtype, weights, queries, keys, values, out, mask, empty_rows, execution,
      [](const auto&... args) { attnpool::additive_attention(args...); });
}

attnpool_status attnpool_multi_head_attention(
    attnpool_dtype dtype, const attnpool_multi_head_weights* weights,
    const attnpool_const_tensor* queries, const attnpool_const_tensor* keys,
    const attnpool_const_tensor* values, const attnpool_tensor* out,
    const attnpool_attention_mask* mask, attnpool_empty_rows empty_rows,
    const attnpool_execution* execution) {
  return WeightedLayer(
      dtype, weights, queries, keys, values, out, mask, empty_rows, execution,
      [](const auto&... args) { attnpool::multi_head_attention(args...); });
}

attnpool_status attnpool_linear(attnpool_dtype dtype,
                                const attnpool_const_matrix* x,
                                const attnpool_const_matrix* w,
                                const void* bias, const attnpool_matrix* out,
                                const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    attnpool::linear(ViewOf<T>(x, "x"), ViewOf<T>(w, "w"),
                     static_cast<const T*>(bias), ViewOf<T>(out, "out"),
                     ExecutionOf(execution));
  });
}

attnpool_status attnpool_nadaraya_watson_predict(
    attnpool_dtype dtype, attnpool_kernel kernel, const double* bandwidths,
    size_t bandwidth_count, const attnpool_const_matrix* x,
    const attnpool_const_matrix* y, const attnpool_const_matrix* queries,
    const attnpool_matrix* out, const attnpool_matrix* weights,
    attnpool_empty_rows empty_rows, const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto& x_matrix = Required(x, "x");
    const auto& y_matrix = Required(y, "y");
    const auto q = ViewOf<T>(queries, "queries");
    const auto o = ViewOf<T>(out, "out");
    CheckEmptyRows(empty_rows);
    auto model = FitNadarayaWatson<T>(kernel, bandwidths, bandwidth_count,
                                      x_matrix, y_matrix);
    model.set_empty_rows(static_cast<attnpool::EmptyRows>(empty_rows));
    if (weights != nullptr && weights->data != nullptr) {
      model.predict(q, o, View<T>(*weights), ExecutionOf(execution));
    } else {
      model.predict(q, o, ExecutionOf(execution));
    }
  });
}

attnpool_status attnpool_rule_of_thumb_bandwidth(attnpool_dtype dtype,
                                                 attnpool_bandwidth_rule rule,
                                                 const attnpool_const_matrix* x,
                                                 double* out) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto view = ViewOf<T>(x, "x");
    Required(out, "out");
    std::vector<double> bandwidths;
    if (rule == ATTNPOOL_BANDWIDTH_RULE_SILVERMAN) {
      bandwidths = attnpool::silverman_bandwidth(view);
    } else if (rule == ATTNPOOL_BANDWIDTH_RULE_SCOTT) {
      bandwidths = attnpool::scott_bandwidth(view);
    } else {
      throw attnpool::Error(
          "rule", "invalid value " + std::to_string(static_cast<int>(rule)) +
                      " (ATTNPOOL_BANDWIDTH_RULE_SILVERMAN or "
                      "ATTNPOOL_BANDWIDTH_RULE_SCOTT)");
    }
    std::copy(bandwidths.begin(), bandwidths.end(), out);
  });
}

attnpool_status attnpool_alibi_slopes(size_t heads, double* slopes) {
  return attnpool_alibi_slopes_as(ATTNPOOL_FLOAT64, heads, slopes);
}

attnpool_status attnpool_alibi_slopes_as(attnpool_dtype dtype, size_t heads,
                                         void* slopes) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    if (heads != 0) Required(static_cast<T*>(slopes), "slopes");
    const auto standard = attnpool::alibi_slopes<T>(heads);
    std::copy(standard.begin(), standard.end(), static_cast<T*>(slopes));
  });
}

attnpool_status attnpool_gaussian_bandwidth_grid(double h_min, double h_max,
                                                 size_t count, double* out) {
  return Guard([&] {
    Required(out, "out");
    const auto grid = attnpool::gaussian_bandwidth_grid(h_min, h_max, count);
    std::copy(grid.begin(), grid.end(), out);
  });
}

attnpool_status attnpool_cross_validate(
    attnpool_dtype dtype, attnpool_kernel kernel,
    const attnpool_const_matrix* x, const attnpool_const_matrix* y,
    const double* bandwidths, size_t bandwidth_count,
    const attnpool_cross_validation_options* options, double* scores,
    size_t* unpredictable, size_t* best, const attnpool_execution* execution) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto& x_matrix = Required(x, "x");
    const auto& y_matrix = Required(y, "y");
    Required(scores, "scores");
    const auto grid = Doubles(bandwidths, bandwidth_count, "bandwidths");
    attnpool::CrossValidationOptions cpp_options;
    if (options != nullptr) {
      cpp_options.folds = options->folds;
      cpp_options.skip_distant = options->every_pair == 0;
      if (options->scales != nullptr) {
        cpp_options.scales =
            Doubles(options->scales, x_matrix.cols, "options.scales");
      }
    }
    const auto result = attnpool::cross_validate(
        static_cast<attnpool::Kernel>(kernel), View<T>(x_matrix),
        View<T>(y_matrix), grid, cpp_options, ExecutionOf(execution));
    std::copy(result.scores.begin(), result.scores.end(), scores);
    if (unpredictable != nullptr) {
      std::copy(result.unpredictable.begin(), result.unpredictable.end(),
                unpredictable);
    }
    if (best != nullptr) {
      *best = result.best == attnpool::CrossValidationResult::npos
                  ? ATTNPOOL_NO_BANDWIDTH
                  : result.best;
    }
  });
}

}  // extern "C"
