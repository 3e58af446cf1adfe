// The tuning profiles' table, this CPU's choice among them, and forcing.
#include "src/tuning.h"

#include <attnpool/error.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>

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

// One row per profile. Block sizes were measured flat on Zen 4 (W2, W4
// within 3% for 48–192 query rows and 1–4 KiB key blocks); what differs is
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
     "0.93-0.94 of a plain read at one thread, and bf16 decode 1.07-1.10x "
     "faster (paired runs)",
     96, 2048, 4, 0, 32, 1},
    {"small_l2",
     "CPUs whose CPU 0 has an L2 under 1 MiB (sysfs): half the query rows "
     "and key blocks, so that a block's scores and values fit in 256 KiB; "
     "not measured on such a CPU (it costs Zen 4 at most 3% on W2 and W4)",
     48, 1024, 4, 64, 0, 0},
};
constexpr int kTuningCount = int(sizeof kTunings / sizeof kTunings[0]);

constexpr bool Valid(const Tuning& tuning) {
  return tuning.query_rows > 0 && tuning.query_rows % 24 == 0 &&
         tuning.key_block_bytes > 0 && tuning.decode_stretch > 0 &&
         (tuning.decode_load_bytes == 0 || tuning.decode_load_bytes == 32) &&
         tuning.decode_interleave <= 1;
}
constexpr bool AllValid() {
  for (const Tuning& tuning : kTunings) {
    if (!Valid(tuning)) return false;
  }
  return true;
}
static_assert(AllValid(),
              "src/tuning.h: query_rows a multiple of 24, blocks not empty, "
              "decode_load_bytes 0 or 32, decode_interleave 0 or 1");

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

std::string UnknownMessage(const std::string& name) {
  std::string message = "'" + name + "' is not a tuning profile (profiles:";
  for (const Tuning& tuning : kTunings)
    message += std::string(" ") + tuning.name;
  return message + ")";
}

// The forced profile's index; -1: this CPU's choice.
std::atomic<int> forced{-1};

// Applies ATTNPOOL_TUNING once, before any forcing; returns its error text.
const std::string& ApplyEnvironmentOnce() {
  static const std::string error = [] {
    const char* requested = std::getenv("ATTNPOOL_TUNING");
    if (requested == nullptr || *requested == '\0') return std::string();
    const int index = IndexNamed(requested);
    if (index < 0) return UnknownMessage(requested);
    forced.store(index, std::memory_order_relaxed);
    return std::string();
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
  return index < 0 ? ChosenTuning() : kTunings[index];
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
  const int index = IndexNamed(name);
  if (index < 0) throw Error("tuning", UnknownMessage(name));
  forced.store(index, std::memory_order_relaxed);
}

std::string TuningParameters(const Tuning& tuning) {
  return "query_rows=" + std::to_string(tuning.query_rows) +
         " key_block_bytes=" + std::to_string(tuning.key_block_bytes) +
         " decode_stretch=" + std::to_string(tuning.decode_stretch) +
         " decode_key_prefetch_rows=" +
         std::to_string(tuning.decode_key_prefetch_rows) +
         " decode_load_bytes=" + std::to_string(tuning.decode_load_bytes) +
         " decode_interleave=" + std::to_string(tuning.decode_interleave);
}

}  // namespace detail
}  // namespace attnpool
