// The attention layers as a table, for the tests that treat every layer
// alike, as tests/api_table.h does the functions on matrices: thread-count
// determinism (test_determinism.cc), concurrent calls
// (test_concurrency.cc), hidden keys holding NaN and ±inf
// (test_nonfinite.cc) and bad input (test_hostile.cc). A row builds a valid
// call of its layer from a seed — grouped query heads, random sizes, a
// random mask of the fields the layer takes — and runs it. Adding a layer is
// one row in layer_table.cc. The hostile test visits the mask's field list
// (mask_fields.h), so a new field with a check or an array reaches every
// row; the builder draws each field a layer takes (layer_table.cc).
#pragma once

#include <attnpool/attnpool.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnpool_test {

enum class LayerKind {
  dense,   // scaled_dot_product_attention over (B, H, n, d) tensors
  varlen,  // packed sequences
  paged,   // a paged KV cache
};

// One prepared call: every input it reads lives here, and the output view
// into `out`, whose elements outside the view are NaN canaries.
// The bytes of `data`.
template <typename T>
std::vector<unsigned char> Bytes(const std::vector<T>& data) {
  std::vector<unsigned char> bytes(data.size() * sizeof(T));
  if (!data.empty()) std::memcpy(bytes.data(), data.data(), bytes.size());
  return bytes;
}

template <typename T>
struct LayerCall {
  LayerKind kind = LayerKind::dense;
  size_t batch = 0, query_heads = 0, key_heads = 0, depth = 0, value_depth = 0;
  // The queries, keys and values (for paged calls, the cache's pools).
  std::vector<T> query_data, key_data, value_data;
  attnpool::TensorView<const T> queries, keys, values;
  std::vector<T> out;
  attnpool::TensorView<T> out_view;
  // Packed and paged calls: the sequences' offsets, the block table.
  std::vector<size_t> query_offsets, key_offsets, cache_lengths;
  std::vector<int32_t> block_table;
  size_t block_table_stride = 0;
  // The index arrays the call reads (those above a packed or paged call
  // takes), as errors name them, with what it reads them through (into the
  // vectors; the hostile test points them elsewhere) and their bytes.
  struct IndexArray {
    std::string name;
    const void* at;
    size_t bytes;
  };
  std::vector<IndexArray> index_arrays;
  // The mask and its storage.
  attnpool::AttentionMask<T> mask;
  std::vector<size_t> valid_lengths;
  std::vector<T> bias, slopes, sinks;
  std::vector<uint8_t> visible;
  std::optional<double> scale;
  attnpool::Execution execution;
  // The elements of key_data and value_data that no query sees: keys past
  // every query's run, and in a paged pool the rows no block lists.
  std::vector<size_t> hidden_keys, hidden_values;

  // The call as the layer makes it, into `into` (out's size, out_view's
  // layout), with `how` for its execution.
  void Run(std::vector<T>& into, const attnpool::Execution& how) const;
  void Run() { Run(out, execution); }
  // The bytes a call on `threads` threads leaves in a fresh copy of `out`
  // (canaries included).
  std::vector<unsigned char> Fresh(int threads) const;
  // The bytes of `out`.
  std::vector<unsigned char> OutBytes() const;
  // Whether every element of the output view is finite.
  bool OutputFinite() const;
  // Writes `value` into every hidden key and value row.
  void FillHidden(T value);
  // Names of the tensors the call reads, as errors name them, with their
  // views (the hostile test points each at null or at the output).
  std::vector<std::pair<std::string, attnpool::TensorView<const T>*>> Inputs();
};

// How a row builds its call.
struct LayerOptions {
  // Keys no query sees in every sequence (valid lengths short of the keys
  // where the layer takes them, else causal with a negative offset).
  bool hide_keys = false;
  // Every mask field the layer takes, given (the hostile test's start).
  bool every_field = false;
};

struct Layer {
  const char* name;
  LayerKind kind;
  // The mask fields of kinds lengths, matrix and booleans: per query of a
  // dense call only (packed and paged calls reject them).
  bool per_query_masks;
};

// The rows, in a fixed order.
const std::vector<Layer>& Layers();

template <typename T>
std::unique_ptr<LayerCall<T>> MakeLayerCall(const Layer& layer, uint64_t seed,
                                            const LayerOptions& options = {});

}  // namespace attnpool_test
