// attnpool::Error — the one exception type of the library.
#pragma once

#include <stdexcept>
#include <string>

namespace attnpool {

// Thrown by every public function whose arguments are invalid. It is thrown
// before any output is written: outputs are untouched when it escapes.
// `argument()` names the offending argument ("queries", "out.stride",
// "ATTNPOOL_ISA", ...), so callers and tests can tell which check fired.
class Error : public std::invalid_argument {
 public:
  Error(const std::string& argument, const std::string& message)
      : std::invalid_argument("attnpool: " + argument + ": " + message),
        argument_(argument) {}

  const std::string& argument() const noexcept { return argument_; }

 private:
  std::string argument_;
};

}  // namespace attnpool
