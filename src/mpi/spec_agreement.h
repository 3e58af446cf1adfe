// The parts of a pooling spec and mask that every rank must share, for
// SameEverywhere (agreement.h). Floating-point fields are compared by their
// bits (add_number); an optional as whether it is set, then its value.
#pragma once

#include <attnpool/pool.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "src/mpi/agreement.h"

namespace attnpool {
namespace mpi {
namespace detail {

// Whether the option is set, then its value (0 when absent; float options
// widen exactly).
template <typename U>
void AddOptional(SameEverywhere& same, const char* argument,
                 const std::optional<U>& value) {
  same.add(argument, value.has_value());
  if constexpr (std::is_floating_point<U>::value) {
    same.add_number(argument, value ? double(*value) : 0);
  } else {
    same.add(argument, value ? static_cast<int64_t>(*value) : 0);
  }
}

// A matrix is given when it has data or a shape: an empty shard's n×0
// bias may have null data.
template <typename U>
bool Given(const MatrixView<U>& view) {
  return view.data != nullptr || view.rows != 0 || view.cols != 0;
}

inline void AddSpec(SameEverywhere& same, const PoolSpec& spec) {
  same.add("spec.distance", static_cast<int64_t>(spec.distance))
      .add("spec.kernel.kernel", static_cast<int64_t>(spec.kernel.kernel))
      .add_number("spec.kernel.bandwidth", spec.kernel.bandwidth)
      .add("spec.normalization", static_cast<int64_t>(spec.normalization))
      .add("spec.empty_rows", static_cast<int64_t>(spec.empty_rows));
  AddOptional(same, "spec.kernel.scale", spec.kernel.scale);
}

// `rows`: the rank's queries (a rank without any has no valid lengths to
// give).
template <typename T>
void AddMask(SameEverywhere& same, const Mask<T>& mask, size_t rows) {
  same.add_where(rows != 0, "mask.valid_lengths", mask.valid_lengths != nullptr)
      .add("mask.causal", mask.causal)
      .add("mask.causal_offset", mask.causal_offset)
      .add("mask.bias", Given(mask.bias))
      .add("mask.visible", Given(mask.visible))
      .add_number("mask.alibi_slope", mask.alibi_slope);
  AddOptional(same, "mask.window_left", mask.window_left);
  AddOptional(same, "mask.window_right", mask.window_right);
  AddOptional(same, "mask.softcap", mask.softcap);
  AddOptional(same, "mask.sink", mask.sink);
}

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
