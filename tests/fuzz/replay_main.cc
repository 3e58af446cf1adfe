// Runs the fuzz target without libFuzzer, so that every build (GCC, the
// aarch64 cross build under qemu) replays the corpus:
//   attnpool_fuzz_replay FILE_OR_DIRECTORY...
// or runs random inputs where libFuzzer is not at hand (under qemu):
//   attnpool_fuzz_replay --random SEED COUNT [FIRST]
// inputs FIRST, FIRST + 1, ... of SEED, each its bytes of random length
// (RandomInput, tests/fuzz/fuzz_common.h); each is named before it runs
// ("random SEED/i"), so that a failing one runs alone as --random SEED 1 i.
// No coverage feedback: the input layout (tests/fuzz/fuzz_api.cc) makes
// random bytes valid calls. It aborts on the first failing input, like the
// fuzzer would.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int RunRandom(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr,
                 "usage: attnpool_fuzz_replay --random SEED COUNT [FIRST]\n");
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const uint64_t count = std::strtoull(argv[3], nullptr, 10);
  const uint64_t first = argc == 5 ? std::strtoull(argv[4], nullptr, 10) : 0;
  for (uint64_t i = first; i < first + count; ++i) {
    const std::vector<uint8_t> bytes = attnpool_test::RandomInput(seed, i);
    std::fprintf(stderr, "random %llu/%llu\n",
                 static_cast<unsigned long long>(seed),
                 static_cast<unsigned long long>(i));
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("ran %llu random inputs of seed %llu: no failure\n",
              static_cast<unsigned long long>(count),
              static_cast<unsigned long long>(seed));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  if (argc > 1 && std::string(argv[1]) == "--random") {
    return RunRandom(argc, argv);
  }
  std::vector<std::filesystem::path> inputs;
  for (int k = 1; k < argc; ++k) {
    const std::filesystem::path path = argv[k];
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else {
      inputs.push_back(path);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const auto& path : inputs) {
    std::ifstream file(path, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                  std::istreambuf_iterator<char>());
    std::fprintf(stderr, "%s\n", path.filename().c_str());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                           bytes.size());
  }
  std::printf("replayed %zu inputs: no failure\n", inputs.size());
  return inputs.empty() ? 1 : 0;
}
