// Names of the public enums and their checks (internal).
#pragma once

#include <attnpool/error.h>

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

template <typename Enum, int Count>
const char* EnumName(const char* argument, const char* const (&names)[Count],
                     Enum value) {
  CheckEnum(argument, static_cast<int>(value), Count);
  return names[static_cast<int>(value)];
}

template <typename Enum, int Count>
Enum EnumFromName(const char* argument, const char* const (&names)[Count],
                  const char* name) {
  for (int i = 0; i < Count; ++i) {
    if (name != nullptr && std::strcmp(name, names[i]) == 0) {
      return static_cast<Enum>(i);
    }
  }
  std::string known;
  for (const char* candidate : names)
    known += (known.empty() ? "" : ", ") + std::string(candidate);
  throw Error(argument, std::string("unknown name '") +
                            (name ? name : "(null)") + "' (known: " + known +
                            ")");
}

}  // namespace detail
}  // namespace attnpool
