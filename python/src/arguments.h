// The arguments shared by the bindings: dtype dispatch, execution, the
// library's enums by name, the pooling spec and the masks (passed as
// tuples: the casters of std::optional and std::tuple are included here).
#pragma once

#include <attnpool/attnpool.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "python/src/arrays.h"

namespace attnpool_python {

// Valid lengths: size_t entries (the package converts them, NumPy's uintp).
using Lengths = nb::ndarray<nb::ro, const size_t, nb::ndim<1>, nb::c_contig,
                            nb::device::cpu>;
using BlockTable = nb::ndarray<nb::ro, const int32_t, nb::ndim<2>, nb::c_contig,
                               nb::device::cpu>;

// Calls compute(T()) for T the element type of `first` (float or double).
template <class Array, class Compute>
void WithDtype(const char* name, const Array& first, const Compute& compute) {
  if (FloatDtypeOf(name, first) == Dtype::float32) {
    compute(float());
  } else {
    compute(double());
  }
}

inline attnpool::Execution ExecutionOf(int threads) {
  if (threads < 0) {
    ThrowValue("threads", "must be ≥ 0 (0: the OpenMP default)");
  }
  return {threads};
}

inline attnpool::EmptyRows EmptyRowsOf(const std::string& name) {
  if (name == "nan") return attnpool::EmptyRows::nan;
  if (name == "zero") return attnpool::EmptyRows::zero;
  ThrowValue("empty_rows", "unknown value '" + name + "' (nan or zero)");
}

inline attnpool::KernelSpec KernelSpecOf(const std::string& kernel,
                                         double bandwidth,
                                         std::optional<double> scale) {
  attnpool::KernelSpec spec;
  spec.kernel = attnpool::kernel_from_name(kernel.c_str());
  spec.bandwidth = bandwidth;
  spec.scale = scale;
  return spec;
}

// What attention_pool and the shard API's calls are given by name, as the
// package passes it: (distance, kernel, bandwidth, scale, normalization,
// empty_rows).
using SpecArguments =
    std::tuple<std::string, std::string, double, std::optional<double>,
               std::string, std::string>;

inline attnpool::PoolSpec PoolSpecOf(const SpecArguments& arguments) {
  const auto& [distance, kernel, bandwidth, scale, normalization, empty_rows] =
      arguments;
  attnpool::PoolSpec spec;
  spec.distance = attnpool::distance_from_name(distance.c_str());
  spec.kernel = KernelSpecOf(kernel, bandwidth, scale);
  spec.normalization = attnpool::normalization_from_name(normalization.c_str());
  spec.empty_rows = EmptyRowsOf(empty_rows);
  return spec;
}

template <class Array>
void RequireVisibleDtype(const Array& visible) {
  if (visible.dtype() != nb::dtype<uint8_t>()) {
    ThrowType("visible", "dtype " + DtypeName(visible.dtype()) +
                             " is not supported (bool or uint8)");
  }
}

// The masks of a call as the package passes them: (valid_lengths,
// lengths_per_query, causal, causal_offset, window_left, window_right,
// bias, visible, softcap, alibi slopes, sinks); the slopes and sinks are
// empty (none), one value (Rank 2) or one per query head (Rank 4, checked
// by the package: the library reads that many).
using MaskTuple =
    std::tuple<std::optional<Lengths>, bool, bool, std::ptrdiff_t,
               std::optional<size_t>, std::optional<size_t>,
               std::optional<InArray>, std::optional<InArray>,
               std::optional<double>, std::vector<double>, std::vector<double>>;

// The masks of a call (Rank 2: on matrices, a Mask; Rank 4: on (batch,
// heads, n, m) tensors, an AttentionMask), checked; the arrays outlive the
// call (copies of inputs whose rows were not contiguous).
template <typename T, size_t Rank>
class MaskArguments {
 public:
  MaskArguments(const MaskTuple& masks, const char* first_name) {
    const auto& [lengths, per_query, causal, offset, left, right, bias, visible,
                 softcap, alibi_slopes, sinks] = masks;
    if (lengths) lengths_ = lengths->data();
    lengths_per_query_ = per_query;
    causal_ = causal;
    causal_offset_ = offset;
    window_left_ = left;
    window_right_ = right;
    if (bias) bias_.emplace("bias", *bias, first_name);
    if (visible) {
      RequireVisibleDtype(*visible);
      visible_.emplace("visible", *visible);
    }
    if (softcap) softcap_ = T(*softcap);
    alibi_slopes_.assign(alibi_slopes.begin(), alibi_slopes.end());
    sinks_.assign(sinks.begin(), sinks.end());
  }

  // Rank 2: the Mask; Rank 4: the AttentionMask.
  auto mask() const {
    std::conditional_t<Rank == 2, attnpool::Mask<T>, attnpool::AttentionMask<T>>
        mask;
    mask.valid_lengths = lengths_;
    if constexpr (Rank == 4) mask.lengths_per_query = lengths_per_query_;
    mask.causal = causal_;
    mask.causal_offset = causal_offset_;
    mask.window_left = window_left_;
    mask.window_right = window_right_;
    if (bias_) mask.bias = bias_->view();
    if (visible_) mask.visible = visible_->view();
    mask.softcap = softcap_;
    if constexpr (Rank == 2) {
      if (!alibi_slopes_.empty()) mask.alibi_slope = alibi_slopes_[0];
      if (!sinks_.empty()) mask.sink = sinks_[0];
    } else {
      if (!alibi_slopes_.empty()) mask.alibi_slopes = alibi_slopes_.data();
      if (!sinks_.empty()) mask.sinks = sinks_.data();
    }
    return mask;
  }

 private:
  const size_t* lengths_ = nullptr;
  bool lengths_per_query_ = false;
  bool causal_ = false;
  std::ptrdiff_t causal_offset_ = 0;
  std::optional<size_t> window_left_, window_right_;
  std::optional<Input<T, Rank>> bias_;
  std::optional<Input<uint8_t, Rank>> visible_;
  std::optional<T> softcap_;
  std::vector<T> alibi_slopes_, sinks_;
};

// The module's parts, one per file.
void DefineStages(nb::module_& m);      // stages.cc
void DefinePool(nb::module_& m);        // pool.cc
void DefineLayers(nb::module_& m);      // layers.cc
void DefineRegression(nb::module_& m);  // regression.cc
void DefineElements(nb::module_& m);    // elements.cc

// Packed sequences' offsets (count + 1 entries each, as many of both).
inline attnpool::PackedSequences PackedSequencesOf(const Lengths& query_offsets,
                                                   const Lengths& key_offsets) {
  if (query_offsets.shape(0) == 0) {
    ThrowValue("query_offsets", "is empty (count + 1 entries, from 0)");
  }
  if (key_offsets.shape(0) != query_offsets.shape(0)) {
    ThrowValue("key_offsets", "has " + std::to_string(key_offsets.shape(0)) +
                                  " entries but query_offsets " +
                                  std::to_string(query_offsets.shape(0)));
  }
  return {query_offsets.shape(0) - 1, query_offsets.data(), key_offsets.data()};
}

// The sequences of a paged call: one per length, with a row of the block
// table each and count + 1 query offsets.
inline size_t PagedCount(const BlockTable& block_table, const Lengths& lengths,
                         const Lengths& query_offsets) {
  const size_t count = lengths.shape(0);
  if (query_offsets.shape(0) != count + 1) {
    ThrowValue("query_offsets",
               "has " + std::to_string(query_offsets.shape(0)) +
                   " entries, expected " + std::to_string(count + 1) +
                   " (one more than lengths)");
  }
  if (block_table.shape(0) != count) {
    ThrowValue("block_table", "has " + std::to_string(block_table.shape(0)) +
                                  " rows, expected " + std::to_string(count) +
                                  " (one per sequence)");
  }
  return count;
}

// A paged cache (attnpool::PagedKVCache<T> or PagedElementCache) of these
// pools, block table and lengths.
template <typename Cache, typename Pool>
Cache PagedCacheOf(const Pool& keys, const Pool& values,
                   const BlockTable& block_table, const Lengths& lengths) {
  Cache cache;
  cache.keys = keys;
  cache.values = values;
  cache.block_table = block_table.data();
  cache.block_table_stride = block_table.shape(1);
  cache.lengths = lengths.data();
  return cache;
}

}  // namespace attnpool_python
