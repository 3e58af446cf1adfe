// The tuning profiles' table, this CPU's choice among them, and forcing.
#include "core/tuning.h"

#include <attnpool/error.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "src/lower_case.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <cpuid.h>
#define ATTNPOOL_TUNING_CPUID 1
#else
#define ATTNPOOL_TUNING_CPUID 0
#endif

namespace attnpool {
namespace detail {
namespace {

// One row per profile. Block sizes were measured flat over the range tried
// (docs/benchmarks.md, Design evidence: kTunings); what differs is
// measured where it is chosen, except small_l2's.
constexpr Tuning kTunings[] = {
    // name, chosen_on,
    //   query_rows, key_block_bytes, decode_stretch, decode_key_prefetch_rows,
    //   decode_load_bytes, decode_interleave
    {"generic",
     "every CPU not chosen for another profile; tuned on AMD Zen 5 (family "
     "1Ah), where prefetching strided decode's keys 64 rows ahead took W5 "
     "from 0.76-0.84 to 0.83-0.90 of a plain read",
     96, 2048, 4, 64, 0, 0},
    {"zen4",
     "AMD Zen 4 (family 19h with AVX-512): its hardware prefetchers keep up "
     "with strided float-key decode alone: without the software prefetch "
     "of the keys W5 ran 7-13% faster (1 and 2 threads, paired runs); "
     "its 512-bit loads are two 256-bit ones, and W5 read in 256-bit "
     "vectors ran 3-5% faster at one thread; interleaving a one-query "
     "decode's keys and values (two streams) took W5 from 0.86-0.89 to "
     "0.93-0.94 of a plain read at one thread, bf16 decode 1.07-1.10x "
     "faster (paired runs), int8 decode 1.07x (calls alternated in one "
     "process)",
     96, 2048, 4, 0, 32, 1},
    {"small_l2",
     "CPUs whose CPU 0 has an L2 under 1 MiB (sysfs): half the query rows "
     "and key blocks, so that a block's scores and values fit in 256 KiB; "
     "not measured on such a CPU (it costs Zen 4 at most 3% on W2 and W4)",
     48, 1024, 4, 64, 0, 0},
};
constexpr int kTuningCount = int(sizeof kTunings / sizeof kTunings[0]);

// One line per parameter, in the order tuning_parameters() prints them:
// its name, its member, and its largest valid value (beyond, a block or a
// prefetch distance only costs memory).
struct Parameter {
  const char* name;
  size_t Tuning::*member;
  size_t most;
};
constexpr Parameter kParameters[] = {
    {"query_rows", &Tuning::query_rows, 1536},
    {"key_block_bytes", &Tuning::key_block_bytes, size_t{1} << 20},
    {"decode_stretch", &Tuning::decode_stretch, 64},
    {"decode_key_prefetch_rows", &Tuning::decode_key_prefetch_rows, 4096},
    {"decode_load_bytes", &Tuning::decode_load_bytes, 32},
    {"decode_interleave", &Tuning::decode_interleave, 1},
};

constexpr bool Valid(const Tuning& tuning) {
  for (const Parameter& parameter : kParameters) {
    if (tuning.*parameter.member > parameter.most) return false;
  }
  return tuning.query_rows > 0 && tuning.query_rows % 24 == 0 &&
         tuning.key_block_bytes > 0 && tuning.decode_stretch > 0 &&
         (tuning.decode_load_bytes == 0 || tuning.decode_load_bytes == 32);
}
constexpr bool AllValid() {
  for (const Tuning& tuning : kTunings) {
    if (!Valid(tuning)) return false;
  }
  return true;
}
static_assert(AllValid(), "src/tuning.cc: a profile breaks Valid()'s rule");

// Valid()'s rule in words.
std::string ValidRule() {
  std::string rule =
      "query_rows a multiple of 24, key_block_bytes and decode_stretch at "
      "least 1, decode_load_bytes 0 or 32; at most";
  for (const Parameter& parameter : kParameters) {
    rule += std::string(&parameter == kParameters ? " " : ", ") +
            parameter.name + " " + std::to_string(parameter.most);
  }
  return rule;
}

constexpr bool SameName(const char* a, const char* b) {
  for (; *a != '\0' && *a == *b; ++a, ++b) {
  }
  return *a == *b;
}
// The row named `name` (exactly); a missing one fails to compile.
constexpr int Row(const char* name) {
  for (int i = 0; i < kTuningCount; ++i) {
    if (SameName(kTunings[i].name, name)) return i;
  }
  throw "no tuning profile of that name";
}

// AMD family 19h (Zen 3 and Zen 4) with AVX-512F: Zen 4.
bool IsZen4() {
#if ATTNPOOL_TUNING_CPUID
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  // "AuthenticAMD" in EBX, EDX, ECX.
  if (ebx != 0x68747541 || edx != 0x69746e65 || ecx != 0x444d4163) {
    return false;
  }
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned family = ((eax >> 8) & 0xF) + ((eax >> 20) & 0xFF);
  if (family != 0x19) return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (ebx >> 16) & 1;  // AVX512F
#else
  return false;
#endif
}

// Bytes of CPU 0's level-2 cache as Linux lists it (shared with its SMT
// siblings, and on some designs with a cluster of cores), 0 where unknown.
size_t L2Bytes() {
  for (int index = 0; index < 8; ++index) {
    const std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level"), size_file(dir + "/size");
    int level = 0;
    std::string size;
    if (!(level_file >> level)) break;
    if (level != 2 || !(size_file >> size) || size.empty()) continue;
    const size_t number = std::strtoull(size.c_str(), nullptr, 10);
    const char unit = size.back();
    return unit == 'K' ? number << 10 : unit == 'M' ? number << 20 : number;
  }
  return 0;
}

int ChosenIndex() {
  constexpr int kZen4 = Row("zen4"), kSmallL2 = Row("small_l2"),
                kGeneric = Row("generic");
  if (IsZen4()) return kZen4;
  const size_t l2 = L2Bytes();
  if (l2 != 0 && l2 < (size_t{1} << 20)) return kSmallL2;
  return kGeneric;
}

int IndexNamed(const std::string& name) {
  for (int i = 0; i < kTuningCount; ++i) {
    if (LowerCase(kTunings[i].name) == LowerCase(name)) return i;
  }
  return -1;
}

// A profile forced with parameters of its own: `tuning` (its name pointing
// into `label`) and its text, a profile's name and the parameters set.
struct Custom {
  Tuning tuning;
  std::string label;
};

// Parses `text`: a profile's name, then any of kParameters as name=value
// (whitespace apart, case-insensitive), e.g. "generic query_rows=192".
// Returns the error message, or "" with *custom set.
std::string Parse(const std::string& text, Custom* custom) {
  const auto space = [](char c) { return std::isspace((unsigned char)c); };
  std::istringstream words(LowerCase(text));
  std::string name;
  words >> name;
  const int index = IndexNamed(name);
  if (index >= 0 && (space(text.front()) || space(text.back()))) {
    return "'" + text +
           "': whitespace before the profile's name or after "
           "its last parameter";
  }
  if (index < 0) {
    std::string message = "'" + text + "' is not a tuning profile (profiles:";
    for (const Tuning& tuning : kTunings)
      message += std::string(" ") + tuning.name;
    return message + "; parameters may follow the name as name=value)";
  }
  Custom result{kTunings[index], kTunings[index].name};
  for (std::string word; words >> word;) {
    const size_t equals = word.find('=');
    const std::string key = word.substr(0, equals);
    const Parameter* parameter = nullptr;
    for (const Parameter& candidate : kParameters) {
      if (key == candidate.name) parameter = &candidate;
    }
    if (parameter == nullptr || equals == std::string::npos) {
      std::string message = "'" + word + "' in '" + text +
                            "' is not a tuning parameter as name=value "
                            "(parameters:";
      for (const Parameter& candidate : kParameters)
        message += std::string(" ") + candidate.name;
      return message + ")";
    }
    const std::string digits = word.substr(equals + 1);
    size_t value = 0;
    bool number = !digits.empty();
    for (const char c : digits) {
      number = number && c >= '0' && c <= '9' && value < 100000000;
      value = value * 10 + size_t(c - '0');
    }
    if (!number) {
      return "'" + word + "' in '" + text +
             "': the value is not a whole number below 10^9";
    }
    result.tuning.*parameter->member = value;
    result.label += " " + key + "=" + std::to_string(value);
  }
  if (!Valid(result.tuning)) {
    return "'" + text + "' breaks the parameters' rule: " + ValidRule();
  }
  result.tuning.chosen_on = "forced with parameters";
  *custom = std::move(result);
  return std::string();
}

// The forced profile: its index in kTunings, kTuningCount for
// ForcedCustom(), -1 for this CPU's choice. ForcedCustom() changes only
// while forcing, which is not thread-safe (targets.h).
std::atomic<int> forced{-1};
Custom& ForcedCustom() {
  static Custom custom;  // (constructed at its first use, whenever that is)
  return custom;
}

void Force(Custom&& parsed) {
  const int index = IndexNamed(parsed.label);
  if (index >= 0) {
    forced.store(index, std::memory_order_relaxed);
    return;
  }
  Custom& custom = ForcedCustom();
  custom = std::move(parsed);
  custom.tuning.name = custom.label.c_str();
  forced.store(kTuningCount, std::memory_order_relaxed);
}

// Applies ATTNPOOL_TUNING once, before any forcing; returns its error text.
const std::string& ApplyEnvironmentOnce() {
  static const std::string error = [] {
    const char* requested = std::getenv("ATTNPOOL_TUNING");
    if (requested == nullptr || *requested == '\0') return std::string();
    Custom parsed;
    std::string message = Parse(requested, &parsed);
    if (message.empty()) Force(std::move(parsed));
    return message;
  }();
  return error;
}

}  // namespace

const Tuning& ChosenTuning() {
  static const int index = ChosenIndex();  // CPUID and sysfs once
  return kTunings[index];
}

const Tuning& ActiveTuning() {
  const std::string& error = ApplyEnvironmentOnce();
  if (!error.empty()) throw Error("ATTNPOOL_TUNING", error);
  const int index = forced.load(std::memory_order_relaxed);
  return index < 0              ? ChosenTuning()
         : index < kTuningCount ? kTunings[index]
                                : ForcedCustom().tuning;
}

const Tuning* Tunings(size_t* count) {
  *count = kTuningCount;
  return kTunings;
}

void ForceTuning(const std::string& name) {
  ApplyEnvironmentOnce();  // first, so that it cannot undo this
  if (name.empty()) {
    forced.store(-1, std::memory_order_relaxed);
    return;
  }
  Custom parsed;
  const std::string message = Parse(name, &parsed);
  if (!message.empty()) throw Error("tuning", message);
  Force(std::move(parsed));
}

std::string TuningParameters(const Tuning& tuning) {
  std::string text;
  for (const Parameter& parameter : kParameters) {
    text += std::string(text.empty() ? "" : " ") + parameter.name + "=" +
            std::to_string(tuning.*parameter.member);
  }
  return text;
}

}  // namespace detail
}  // namespace attnpool
