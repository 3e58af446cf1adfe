// The parts of a pooling spec and mask that every rank must share, for
// SameEverywhere (agreement.h). Floating-point fields are compared by their
// bits (add_number); an optional as whether it is set, then its value.
#pragma once

#include <attnpool/pool.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "core/mask.h"
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

inline void AddSpec(SameEverywhere& same, const PoolSpec& spec) {
  same.add("spec.distance", static_cast<int64_t>(spec.distance))
      .add("spec.kernel.kernel", static_cast<int64_t>(spec.kernel.kernel))
      .add_number("spec.kernel.bandwidth", spec.kernel.bandwidth)
      .add("spec.normalization", static_cast<int64_t>(spec.normalization))
      .add("spec.empty_rows", static_cast<int64_t>(spec.empty_rows));
  AddOptional(same, "spec.kernel.scale", spec.kernel.scale);
}

// `rows`: the rank's queries (a rank without any has no valid lengths to
// give). Every field of the list (mask_fields.h): arrays by whether they
// are given, values by their bits.
template <typename T>
void AddMask(SameEverywhere& same, const Mask<T>& mask, size_t rows) {
  VisitMask(mask, [&](auto field, const auto& member) {
    using Kind = typename decltype(field)::Kind;
    const char* name = field.argument;  // (a literal: kept by `same`)
    if constexpr (std::is_same<Kind, mask_kind::lengths>::value) {
      same.add_where(rows != 0, name, member != nullptr);
    } else if constexpr (std::is_same<Kind, mask_kind::matrix>::value ||
                         std::is_same<Kind, mask_kind::booleans>::value) {
      same.add(name, attnpool::detail::Given(member));
    } else if constexpr (std::is_same<Kind, mask_kind::flag>::value ||
                         std::is_same<Kind, mask_kind::position>::value) {
      same.add(name, static_cast<int64_t>(member));
    } else {
      AddOptional(same, name, member);
    }
  });
}

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
