// Names of the public enums and their checks (internal).
#pragma once

#include <attnpool/error.h>

#include <cstddef>
#include <cstring>
#include <string>

namespace attnpool {
namespace detail {

// Throws Error(argument) unless 0 ≤ value < count.
inline void CheckEnum(const char* argument, int value, int count) {
  if (value < 0 || value >= count) {
    throw Error(argument, "invalid value " + std::to_string(value));
  }
}

// The name of `value` in one of the public tables (kKernels, kDistances,
// kNormalizations: entries with a `name`, entry k describing value k);
// throws Error(argument) for a value outside it.
template <typename Enum, typename Entry, size_t Count>
const char* EnumName(const char* argument, const Entry (&table)[Count],
                     Enum value) {
  CheckEnum(argument, static_cast<int>(value), static_cast<int>(Count));
  return table[static_cast<int>(value)].name;
}

// The value named `name` in such a table; throws Error(argument) listing
// the known names.
template <typename Enum, typename Entry, size_t Count>
Enum EnumFromName(const char* argument, const Entry (&table)[Count],
                  const char* name) {
  for (size_t i = 0; i < Count; ++i) {
    if (name != nullptr && std::strcmp(name, table[i].name) == 0) {
      return static_cast<Enum>(i);
    }
  }
  std::string known;
  for (const Entry& entry : table) {
    known += (known.empty() ? "" : ", ") + std::string(entry.name);
  }
  throw Error(argument, std::string("unknown name '") +
                            (name ? name : "(null)") + "' (known: " + known +
                            ")");
}

}  // namespace detail
}  // namespace attnpool

// Defines the public `lower`_name and `lower`_from_name of `Enum` from its
// properties table; errors name the argument `lower`.
#define ATTNPOOL_DEFINE_ENUM_NAMES(Enum, lower, table)      \
  const char* lower##_name(Enum value) {                    \
    return detail::EnumName(#lower, table, value);          \
  }                                                         \
  Enum lower##_from_name(const char* name) {                \
    return detail::EnumFromName<Enum>(#lower, table, name); \
  }
