// The pattern of the library's enum tables (kernel.h, distance.h,
// normalize.h): an X-macro lists the entries, one line each, and generates
// the enum and a properties array whose entry k describes value k.
#pragma once

#include <cstddef>

// In an enum's body: one enumerator per table line (its first column).
#define ATTNPOOL_TABLE_ENUMERATOR(name, ...) name,

namespace attnpool {

// The number of entries of a properties array.
template <typename Entry, std::size_t Count>
constexpr int table_size(const Entry (&)[Count]) {
  return static_cast<int>(Count);
}

// Whether `value` has an entry in `table` (a value cast from an int may
// not).
template <typename Entry, std::size_t Count, typename Enum>
constexpr bool in_table(const Entry (&)[Count], Enum value) {
  return static_cast<unsigned>(value) < Count;
}

}  // namespace attnpool
