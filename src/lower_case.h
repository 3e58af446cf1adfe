// ASCII lower case for the case-insensitive names of targets, instructions
// and tuning profiles (internal).
#pragma once

#include <cctype>
#include <string>

namespace attnpool {
namespace detail {

inline std::string LowerCase(std::string text) {
  for (char& c : text) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return text;
}

}  // namespace detail
}  // namespace attnpool
