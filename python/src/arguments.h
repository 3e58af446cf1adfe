// The arguments shared by the bindings: dtype dispatch, execution, the
// library's enums by name, the pooling spec and the masks (the casters of
// std::optional, std::tuple and std::vector are included here).
#pragma once

#include <attnpool/attnpool.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
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

// The interpreter's main thread, the one that runs signal handlers (set
// when the module is imported, module.cc).
inline unsigned long main_thread_ident = 0;

// The progress callback of calls from the main thread: Python's signal
// handlers run (Ctrl-C's among them) at most every kSignalPoll, the GIL
// taken for it; a handler that raises cancels the call, its exception kept
// for the caller (the translator of attnpool::Cancelled, module.cc).
// Between polls it costs a clock read. Calls from other threads, which run
// no handler, are not polled: they go on, as Python's own blocking calls
// do.
constexpr std::chrono::milliseconds kSignalPoll{20};
inline int PollSignals(void*, double) {
  thread_local auto next = std::chrono::steady_clock::time_point();
  const auto now = std::chrono::steady_clock::now();
  if (now < next) return 1;
  next = now + kSignalPoll;
  nb::gil_scoped_acquire acquire;
  return PyErr_CheckSignals() == 0 ? 1 : 0;
}

inline attnpool::Execution ExecutionOf(int threads) {
  if (threads < 0) {
    ThrowValue("threads", "must be ≥ 0 (0: the OpenMP default)");
  }
  attnpool::Execution execution;
  execution.threads = threads;
  if (PyThread_get_thread_ident() == main_thread_ident) {
    execution.progress = &PollSignals;
  }
  return execution;
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
void RequireVisibleDtype(const char* name, const Array& visible) {
  if (visible.dtype() != nb::dtype<uint8_t>()) {
    ThrowType(name, "dtype " + DtypeName(visible.dtype()) +
                        " is not supported (bool or uint8)");
  }
}

// The masks of a call as the package passes them: a dict of the fields
// given, keyed by their names in the list (mask_fields.h: `name` on
// matrices, Rank 2; `heads_name` on (batch, heads, n, m) tensors, Rank 4),
// each converted by its kind (_checks.mask_arguments): lengths an (array of
// uintp, per_query) pair, flag a bool, position and count ints, matrix and
// booleans arrays (uint8 for booleans), number a float, head_number a float
// (Rank 2) or a list of one per query head (Rank 4, checked by the
// package: the library reads that many).
using MaskKeywords = nb::dict;

// The mask of a call (Rank 2: on matrices, a Mask; Rank 4: on (batch,
// heads, n, m) tensors, an AttentionMask), its arrays checked and kept
// alive (copies of inputs whose rows were not contiguous).
template <typename T, size_t Rank>
class MaskArguments {
 public:
  using MaskT = std::conditional_t<Rank == 2, attnpool::Mask<T>,
                                   attnpool::AttentionMask<T>>;

  MaskArguments() = default;
  MaskArguments(const MaskKeywords& keywords, const char* first_name) {
    attnpool::VisitMask(mask_, [&](auto field, auto& member) {
      const char* key = Rank == 2 ? field.name : field.heads_name;
      if (keywords.contains(key)) {
        Set(key, nb::handle(keywords[key]), member, first_name);
      }
    });
  }

  const MaskT& mask() const { return mask_; }

 private:
  // One field from its converted value, by the member's type.
  void Set(const char*, nb::handle value, const size_t*& member, const char*) {
    const auto [lengths, per_query] =
        nb::cast<std::tuple<Lengths, bool>>(value);
    keep_.push_back(std::make_shared<Lengths>(lengths));
    member = lengths.data();
    if constexpr (Rank == 4) mask_.lengths_per_query = per_query;
  }
  void Set(const char*, nb::handle value, bool& member, const char*) {
    member = nb::cast<bool>(value);
  }
  void Set(const char*, nb::handle value, std::ptrdiff_t& member, const char*) {
    member = nb::cast<std::ptrdiff_t>(value);
  }
  void Set(const char*, nb::handle value, std::optional<size_t>& member,
           const char*) {
    member = nb::cast<size_t>(value);
  }
  void Set(const char*, nb::handle value, std::optional<T>& member,
           const char*) {
    member = T(nb::cast<double>(value));
  }
  void Set(const char*, nb::handle value, const T*& member, const char*) {
    const auto values = nb::cast<std::vector<double>>(value);
    auto held = std::make_shared<std::vector<T>>(values.begin(), values.end());
    keep_.push_back(held);
    member = held->data();
  }
  template <typename U, class View>
  void SetArray(const char* key, nb::handle value, View& member,
                const char* first_name) {
    const auto array = nb::cast<InArray>(value);
    std::shared_ptr<Input<U, Rank>> input;
    if constexpr (std::is_same<U, uint8_t>::value) {
      RequireVisibleDtype(key, array);
      input = std::make_shared<Input<U, Rank>>(key, array);
    } else {
      input = std::make_shared<Input<U, Rank>>(key, array, first_name);
    }
    keep_.push_back(input);
    member = input->view();
  }
  template <typename U>
  void Set(const char* key, nb::handle value,
           attnpool::MatrixView<const U>& member, const char* first_name) {
    SetArray<U>(key, value, member, first_name);
  }
  template <typename U>
  void Set(const char* key, nb::handle value,
           attnpool::TensorView<const U>& member, const char* first_name) {
    SetArray<U>(key, value, member, first_name);
  }

  MaskT mask_;
  std::vector<std::shared_ptr<const void>> keep_;
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
