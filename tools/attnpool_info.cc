// attnpool-info: what this build and this machine offer.
#include <attnpool/attnpool.h>
#include <omp.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : " ") + name;
  return text;
}

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    // x86: "model name"; ARM kernels report "CPU part" and friends instead.
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

}  // namespace

int main() {
  try {
    std::printf("compiled targets:  %s\n",
                Join(attnpool::compiled_targets()).c_str());
    std::printf("supported targets: %s\n",
                Join(attnpool::supported_targets()).c_str());
    std::printf("active target:     %s\n", attnpool::active_target().c_str());
    std::printf("tuning:            %s (%s)\n", attnpool::tuning().c_str(),
                attnpool::tuning_parameters().c_str());
    const std::string bf16_dot = attnpool::bf16_dot_instruction();
    const auto bf16_supported = attnpool::supported_bf16_dot_instructions();
    std::printf("bf16 dot tile:     %s (supported: %s)\n",
                bf16_dot.empty() ? "none" : bf16_dot.c_str(),
                bf16_supported.empty() ? "none" : Join(bf16_supported).c_str());
    std::printf("OpenMP threads:    %d\n", omp_get_max_threads());
    std::printf("CPU model:         %s\n", CpuModel().c_str());
  } catch (const attnpool::Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 2;
  }
  return 0;
}
