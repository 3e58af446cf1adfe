// Target lists, forcing, and the dispatch initialization of the library.
#include "arch/target_policy.h"  // first: fixes HWY_TARGETS

#include <attnpool/error.h>
#include <attnpool/targets.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "arch/bf16_dot.h"
#include "arch/target_probe.h"
#include "hwy/targets.h"
#include "src/dispatch.h"
#include "src/lower_case.h"
#include "core/tuning.h"

namespace attnpool {
namespace {

// Targets compiled into every arch/ TU (they all include target_policy.h).
constexpr int64_t kCompiledTargets = HWY_TARGETS;

// Real CPU support, read once before any forcing replaces what
// hwy::SupportedTargets() reports.
int64_t SupportedMask() {
  static const int64_t mask = hwy::SupportedTargets() & kCompiledTargets;
  return mask;
}

// Target bits of `mask`, best (lowest bit) first.
std::vector<std::string> Names(int64_t mask) {
  std::vector<std::string> names;
  for (int bit = 0; bit < 64; ++bit) {
    const int64_t target = int64_t{1} << bit;
    if (mask & target) names.emplace_back(hwy::TargetName(target));
  }
  return names;
}

bool IsFallback(int64_t target) {
  return target == HWY_SCALAR || target == HWY_EMU128;
}

// The compiled target named `name` (case-insensitive), or 0. "avx512" names
// AVX3; "scalar" and "emu128" both name the portable fallback, whichever of
// the two Highway compiled.
int64_t CompiledTargetNamed(const std::string& name) {
  const std::string wanted = detail::LowerCase(name);
  for (int bit = 0; bit < 64; ++bit) {
    const int64_t target = int64_t{1} << bit;
    if ((kCompiledTargets & target) == 0) continue;
    if (detail::LowerCase(hwy::TargetName(target)) == wanted ||
        (wanted == "avx512" && target == HWY_AVX3) ||
        ((wanted == "scalar" || wanted == "emu128") && IsFallback(target))) {
      return target;
    }
  }
  return 0;
}

void Join(std::string& out, const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
}

// The check behind force_target and ATTNPOOL_ISA; returns the target bit.
int64_t ResolveForced(const std::string& argument, const std::string& name) {
  const int64_t target = CompiledTargetNamed(name);
  std::string message;
  if (target == 0) {
    message = "'" + name + "' is not a compiled target (compiled: ";
    Join(message, Names(kCompiledTargets));
    throw Error(argument, message + ")");
  }
  if ((SupportedMask() & target) == 0) {
    message = "'" + name +
              "' is compiled but this CPU does not support it (supported: ";
    Join(message, Names(SupportedMask()));
    throw Error(argument, message + ")");
  }
  return target;
}

void Force(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
  hwy::GetChosenTarget().Update(target);
}

thread_local int64_t last_run = 0;

std::string Bf16DotName(detail::Bf16DotInstruction instruction) {
  switch (instruction) {
    case detail::Bf16DotInstruction::none:
      return "";
    case detail::Bf16DotInstruction::vector:
      return HWY_ARCH_X86 ? "AVX512_BF16" : "BF16";
    case detail::Bf16DotInstruction::amx:
      return "AMX_BF16";
  }
  return "";
}

}  // namespace

namespace detail {

void EnsureDispatchReady() {
  // The error text of a bad ATTNPOOL_ISA, computed once; every call rethrows.
  static const std::string environment_error = [] {
    SupportedMask();  // before any forcing
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    const char* requested = std::getenv("ATTNPOOL_ISA");
    if (requested == nullptr || *requested == '\0') return std::string();
    try {
      Force(ResolveForced("ATTNPOOL_ISA", requested));
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  }();
  if (!environment_error.empty()) {
    const std::string prefix = "attnpool: ATTNPOOL_ISA: ";
    throw Error("ATTNPOOL_ISA", environment_error.substr(prefix.size()));
  }
  ActiveTuning();  // applies ATTNPOOL_TUNING, or throws for a bad one
}

void RecordRunTarget(int64_t target) { last_run = target; }

}  // namespace detail

std::vector<std::string> compiled_targets() { return Names(kCompiledTargets); }

std::vector<std::string> supported_targets() { return Names(SupportedMask()); }

std::string active_target() {
  detail::EnsureDispatchReady();
  return hwy::TargetName(detail::DispatchedTarget());
}

void force_target(const std::string& name) {
  detail::EnsureDispatchReady();
  Force(ResolveForced("target", name));
}

void reset_target() {
  detail::EnsureDispatchReady();
  hwy::SetSupportedTargetsForTest(0);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  detail::ResetBf16DotInstruction();
  detail::ForceTuning("");
}

std::string bf16_dot_instruction() {
  detail::EnsureDispatchReady();
  return Bf16DotName(detail::ActiveBf16DotInstruction());
}

std::vector<std::string> supported_bf16_dot_instructions() {
  std::vector<std::string> names;
  for (const auto instruction : detail::SupportedBf16DotInstructions()) {
    names.push_back(Bf16DotName(instruction));
  }
  return names;
}

void force_bf16_dot_instruction(const std::string& name) {
  detail::EnsureDispatchReady();
  if (name.empty()) return detail::ResetBf16DotInstruction();
  for (const auto instruction : detail::SupportedBf16DotInstructions()) {
    if (detail::LowerCase(Bf16DotName(instruction)) ==
        detail::LowerCase(name)) {
      detail::ForceBf16DotInstruction(instruction);
      return;
    }
  }
  std::string message = "'" + name +
                        "' is not a bf16 dot-product instruction this CPU "
                        "runs (supported: ";
  const auto supported = supported_bf16_dot_instructions();
  Join(message,
       supported.empty() ? std::vector<std::string>{"none"} : supported);
  throw Error("instruction", message + ")");
}

std::string tuning() {
  detail::EnsureDispatchReady();
  return detail::ActiveTuning().name;
}

std::string tuning_parameters() {
  detail::EnsureDispatchReady();
  return detail::TuningParameters(detail::ActiveTuning());
}

std::vector<std::string> tunings() {
  std::vector<std::string> names = {detail::ChosenTuning().name};
  size_t count = 0;
  const detail::Tuning* table = detail::Tunings(&count);
  for (size_t i = 0; i < count; ++i) {
    if (table[i].name != names[0]) names.push_back(table[i].name);
  }
  return names;
}

void force_tuning(const std::string& name) {
  detail::EnsureDispatchReady();
  detail::ForceTuning(name);
}

std::string last_run_target() {
  return last_run == 0 ? std::string() : hwy::TargetName(last_run);
}

}  // namespace attnpool
