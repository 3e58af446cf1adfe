// attnpool targets: the instruction sets compiled, supported and active.
#include <attnpool/attnpool.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tools/cli/commands.h"

namespace attnpool_cli {

int Targets() {
  const auto join = [](const std::vector<std::string>& names) {
    std::string text;
    for (const auto& name : names) text += (text.empty() ? "" : " ") + name;
    return text;
  };
  std::printf("compiled:  %s\n", join(attnpool::compiled_targets()).c_str());
  std::printf("supported: %s\n", join(attnpool::supported_targets()).c_str());
  std::printf("active:    %s\n", attnpool::active_target().c_str());
  // The instruction bf16 query-key dot products run on beside it (this
  // CPU's choice among those it has).
  const std::string bf16_dot = attnpool::bf16_dot_instruction();
  const auto bf16_supported = attnpool::supported_bf16_dot_instructions();
  std::printf("bf16 dot:  %s (supported: %s)\n",
              bf16_dot.empty() ? "none" : bf16_dot.c_str(),
              bf16_supported.empty() ? "none" : join(bf16_supported).c_str());
  return 0;
}

}  // namespace attnpool_cli
