#include "tests/each_target.h"

#include "tests/test_data.h"

#include <attnpool/attnpool.h>

#include <deque>

namespace attnpool_test {
namespace {

std::string& Current() {
  static std::string target;
  return target;
}

class ForcedTargetInvoker : public Catch::ITestInvoker {
 public:
  ForcedTargetInvoker(std::string target, TargetTestBody body)
      : target_(std::move(target)), body_(body) {}

  void invoke() const override {
    struct Reset {
      ~Reset() {
        attnpool::reset_target();
        Current().clear();
        FallbackSweep() = Sweep::full;
      }
    } reset;
    attnpool::force_target(target_);
    REQUIRE(attnpool::active_target() == target_);
    Current() = target_;
    const bool fallback = target_ == "SSE4" || target_ == "SSSE3" ||
                          target_ == "SSE2" || target_ == "EMU128" ||
                          target_ == "SCALAR";
    FallbackSweep() = fallback ? Sweep::thin : Sweep::full;
    body_();
  }

 private:
  std::string target_;
  TargetTestBody body_;
};

}  // namespace

int RegisterForEachTarget(const char* name, const char* tags,
                          TargetTestBody body, const char* file, size_t line) {
  // Catch keeps references to names and tags: they live as long as the process.
  static std::deque<std::string> storage;
  for (const std::string& target : attnpool::supported_targets()) {
    storage.push_back(std::string(name) + "/" + target);
    storage.push_back(std::string(tags) + "[" + target + "]");
    const std::string& full_name = storage[storage.size() - 2];
    const std::string& full_tags = storage.back();
    Catch::AutoReg(new ForcedTargetInvoker(target, body),
                   Catch::SourceLineInfo(file, line), "",
                   Catch::NameAndTags(full_name.c_str(), full_tags.c_str()));
  }
  return 0;
}

const std::string& CurrentTarget() { return Current(); }

void RequireRanOnTarget() { REQUIRE(attnpool::last_run_target() == Current()); }

}  // namespace attnpool_test
