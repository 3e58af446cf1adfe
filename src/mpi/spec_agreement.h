// The parts of a pooling spec and mask that every rank must share, for
// SameEverywhere (agreement.h). Floating-point fields are compared by their
// bits; an optional as whether it is set, then its value.
#pragma once

#include <attnpool/pool.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "src/mpi/agreement.h"

namespace attnpool {
namespace mpi {
namespace detail {

inline int64_t Bits(double value) {  // float options widen exactly
  int64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline int64_t Bits(size_t value) { return static_cast<int64_t>(value); }

// Whether the option is set, then its value (0 when absent).
template <typename U>
void AddOptional(SameEverywhere& same, const char* argument,
                 const std::optional<U>& value) {
  same.add(argument, value.has_value()).add(argument, value ? Bits(*value) : 0);
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
      .add("spec.kernel.bandwidth", Bits(spec.kernel.bandwidth))
      .add("spec.normalization", static_cast<int64_t>(spec.normalization))
      .add("spec.empty_rows", static_cast<int64_t>(spec.empty_rows));
  AddOptional(same, "spec.kernel.scale", spec.kernel.scale);
}

template <typename T>
void AddMask(SameEverywhere& same, const Mask<T>& mask) {
  same.add("mask.valid_lengths", mask.valid_lengths != nullptr)
      .add("mask.causal", mask.causal)
      .add("mask.causal_offset", mask.causal_offset)
      .add("mask.bias", Given(mask.bias))
      .add("mask.visible", Given(mask.visible))
      .add("mask.alibi_slope", Bits(double(mask.alibi_slope)));
  AddOptional(same, "mask.window_left", mask.window_left);
  AddOptional(same, "mask.window_right", mask.window_right);
  AddOptional(same, "mask.softcap", mask.softcap);
  AddOptional(same, "mask.sink", mask.sink);
}

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
