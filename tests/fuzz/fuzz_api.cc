// libFuzzer target over the API table (tests/api_table.h): the input bytes
// are decoded into a function, an element type, shapes, a layout (padding,
// misalignment), a spec, a mask, a thread count and the values; the call
// runs on every target this CPU supports and each result must
//  - agree with the scalar reference (the row's verify: tolerances of the
//    headers, and the same outputs NaN),
//  - leave inputs, padding and guards untouched,
//  - be bitwise the result of the same call on one thread (checked on one
//    target per input, in turn),
//  - report the target it ran on;
// and attention_pool's keys, cut into two shards whose states
// (attention_pool_partial) are merged and finished, must agree with the
// reference too (on one target per input, in turn). Any failure prints
// what was decoded and aborts (a crash for libFuzzer).
//
// Input layout (missing bytes read as 0):
//   [0] function (index into the table, or past it one of
//       kFunctionsPastTheTable, each with its own layout after [1]:
//       "attention_layers" (tests/fuzz/fuzz_layers.cc), "cross_validate"
//       (tests/fuzz/fuzz_regression.cc); ATTNPOOL_FUZZ_API=<name> fixes
//       it, ATTNPOOL_FUZZ_API=list prints the names)
//   [1] flags: 1 double, 2 NaN/±inf values, 4 valid lengths, 8 causal,
//       16 bias, 32 visible, 64 empty rows → zero, 128 large (with [6], [7])
//   [2..5] n, m, d, dv    (b < 224: b % 25, else 25 + 9·(b − 224)), then
//       the largest of n, m halved until n·m·(d + dv + 1) is at most 2¹²,
//       or 2¹⁶ for large inputs (bit 128 of [1], [6] and [7]): most inputs
//       are small and cheap to check, an eighth of random ones are large
//   [6] layout: padding b % 4, offset b / 4 % 4; 128: large (above); 64:
//       the size class — after the checks above, one of the hostile
//       test's size cases (tests/hostile_sizes.h: a size symbol at 2^62,
//       2^63 or SIZE_MAX, or two whose product overflows; the case
//       ([7] ^ [1]) % count) planted into this call, which must be
//       refused with an attnpool::Error naming one of the case's arguments
//       or a mask's, nothing written (where a view with a huge size has
//       elements; other cases are empty calls, not run)
//   [7] threads: 0 (default), 1, 2, 3 (b % 4); 128: large (above); the
//       tuning profile (b / 4 % 32): this CPU's choice below 16, else it
//       forced with small blocks and other decode parameters (Tuning())
//   [8] distance  [9] kernel  [10] bandwidth  [11] scale  [12] normalization
//   [13] causal offset (int8 % 8): query i's key position i + offset
//   [14] mask extras (masked functions; each made valid or dropped): 1
//       window left, 2 window right, 4 soft-cap, 8 ALiBi, 16 sink, 32
//       chunk, 64 ALiBi symmetric
//   [15] window sides: left b % 8, right b / 8 % 8; chunk {1, 3, 8,
//       64}[b / 64]
//   [16] adjustments: cap {0.25, 1, 3, 50}[b % 4], ALiBi slope {0.5,
//       −0.25, 1/32, 3}[b / 4 % 4], sink {−1, 0, 2.5, +inf}[b / 16 % 4]
//   [17] element types of keys (b % 4) and values (b / 4 % 4), ElementType
//       (attention_pool on float; int8 dropped for non-finite rows): the
//       inputs are rounded to what the type holds, checked as above, and
//       the call on the narrow rows must give the float call's bits (but
//       on the decode path with int8 rows, whose scales fold: element.h;
//       there it is checked against the reference, its dots' roundings
//       counted); with bf16 keys, bit 16 stores the queries as bf16 too: on
//       the bf16 dot-product tile (pool.h "tile_bf16") the result is
//       checked against the reference instead
//   then per matrix (inputs in slot order, then the bias): a scale byte
//   (2^(b % 17 − 8)) and one byte per element ((b − 125)/16 × scale, or with
//   flag 2 and b ≥ 250 one of NaN, +inf, −inf, 0, −0, 1); then one byte per
//   valid length (b % (m + 1)); then the visibility bits.
#include <attnpool/attnpool.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tests/api_oracles.h"
#include "tests/api_table.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_decode.h"
#include "tests/fuzz/fuzz_layers.h"
#include "tests/fuzz/fuzz_regression.h"
#include "tests/hostile_sizes.h"

namespace attnpool_test {
namespace {

int forced_api = -1;  // ATTNPOOL_FUZZ_API

// The functions past the API table, in order: each decodes the input after
// its flags byte itself.
struct FunctionPastTheTable {
  const char* name;
  void (*fuzz)(Bytes& bytes, uint8_t flags);
};
constexpr FunctionPastTheTable kFunctionsPastTheTable[] = {
    {kLayersName, FuzzLayers}, {kRegressionName, FuzzRegression}};
constexpr size_t kFunctionsPastTheTableCount =
    std::size(kFunctionsPastTheTable);

template <typename T>
void FuzzOne(const Api<T>& api, Bytes& bytes, uint8_t flags) {
  const DecodedCall<T> decoded = DecodeCall(api, bytes, flags);
  const Workspace<T>& ws = *decoded.ws;
  const Args<T>& args = ws.args;
  const std::string& tuning = decoded.tuning;
  const bool narrow = decoded.narrow;
  const NarrowRows &query_rows = decoded.query_rows,
                   &key_rows = decoded.key_rows,
                   &value_rows = decoded.value_rows;

  struct Reset {
    ~Reset() { attnpool::reset_target(); }  // the tuning too
  } reset;
  attnpool::force_tuning(tuning);
  const std::vector<std::string> targets = attnpool::supported_targets();
  // The rerun on one thread on one target per input, each in turn as the
  // inputs vary (every target's determinism is also a Catch2 test).
  const size_t rerun_target =
      (flags ^ decoded.layout_byte ^ (decoded.threads_byte >> 2)) %
      targets.size();
  for (size_t t = 0; t < targets.size(); ++t) {
    const std::string& target = targets[t];
    attnpool::force_target(target);
    const auto where = [&] {
      return decoded.Describe(api) + " target=" + target;
    };
    auto run = ws.Clone();
    const auto snapshot = run->Snapshot();
    try {
      api.run(run->args);
    } catch (const std::exception& error) {
      Fail(std::string("unexpected exception: ") + error.what(), where());
    }
    const std::string ran = attnpool::last_run_target();
    if (!ran.empty() && ran != target) Fail("ran on " + ran, where());
    const std::string report = api.verify(ws.args, run->args);
    if (!report.empty()) Fail("differs from the reference: " + report, where());
    if (!run->Untouched(snapshot)) {
      Fail("wrote outside its outputs (or into an input)", where());
    }
    if constexpr (std::is_same<T, float>::value) {
      if (narrow) {
        const auto out = run->args.views[3];
        std::vector<float> narrow_out(out.rows * out.cols + 1);
        const attnpool::MatrixView<float> o(narrow_out.data(), out.rows,
                                            out.cols);
        const bool narrow_queries =
            query_rows.type != attnpool::ElementType::float32;
        if (narrow_queries) {
          attnpool::attention_pool(run->args.spec(), query_rows.Rows(),
                                   key_rows.Rows(), value_rows.Rows(), o,
                                   run->args.mask, run->args.execution);
        } else {
          attnpool::attention_pool(run->args.spec(), run->args.views[0],
                                   key_rows.Rows(), value_rows.Rows(), o,
                                   run->args.mask, run->args.execution);
        }
        const std::string path = attnpool::last_fused_path();
        const bool int8 = key_rows.type == attnpool::ElementType::int8 ||
                          value_rows.type == attnpool::ElementType::int8;
        if (narrow_queries && path == "tile_bf16") {
          // Its own order of the products' sums: the float call's bound.
          const std::string tile_report =
              oracles::VerifyFused<float>(ws.args, o);
          if (!tile_report.empty()) {
            Fail("the bf16 dot-product tile differs from the reference: " +
                     tile_report,
                 where());
          }
        } else if (int8 && path == "decode") {
          // int8 scales folded into the dots and weights (element.h).
          const std::string decode_report =
              oracles::VerifyFused<float>(ws.args, o, decoded.ExtraDotUnits());
          if (!decode_report.empty()) {
            Fail("an int8 decode differs from the reference: " + decode_report,
                 where());
          }
        } else if (!SameBits<float>(o, out)) {
          Fail(
              "narrow keys/values differ from the float call on the values "
              "they hold",
              where());
        }
      }
    }
    if (std::strcmp(api.name, "attention_pool") == 0 && t == rerun_target) {
      // Its keys in two shards (cut where the layout and thread bytes say),
      // their states merged and finished: within the same bound (on one
      // target per input, in turn, as the rerun on one thread).
      const size_t m = ws.sizes()[kM];
      const KeyShards<T> shards{
          decoded,
          {0, (decoded.layout_byte ^ decoded.threads_byte) % (m + 1), m}};
      const std::vector<T> merged = shards.Merged();
      const std::string shard_report = oracles::VerifyFused<T>(
          ws.args,
          attnpool::ConstMatrixView<T>(merged.data(), ws.sizes()[kN],
                                       ws.sizes()[kDv]),
          decoded.ExtraDotUnits());
      if (!shard_report.empty()) {
        Fail("its keys in two shards, merged, differ from the reference: " +
                 shard_report,
             where() + " shards at " + std::to_string(shards.begin[1]));
      }
    }
    if (args.execution.threads != 1 && t == rerun_target) {
      auto single = ws.Clone();
      single->args.execution.threads = 1;
      api.run(single->args);
      if (OutputBytes(api, single->args) != OutputBytes(api, run->args)) {
        Fail("differs from the same call on one thread", where());
      }
    }
  }
  if (decoded.layout_byte & 64) {
    auto planted = ws.Clone();
    const Cases<T> cases = SizeOverflow(api, *planted);
    if (cases.empty()) return;
    const HostileCase<T>& size_case =
        cases[(decoded.threads_byte ^ flags) % cases.size()];
    size_case.mutate(*planted);
    // A view with no element addresses nothing, whatever its other size
    // (n = 0 queries over 2^62 keys is an empty call, which the library
    // may run): refusal is owed where a view with a huge size has
    // elements. Other cases are not run (the rows' scratch, as
    // attention_pool_partial's state, is sized for calls that fit).
    bool owed = false;
    for (const auto& view : planted->args.views) {
      owed |= view.rows != 0 && view.cols != 0 &&
              std::max(view.rows, view.cols) > (size_t{1} << 32);
    }
    if (!owed) return;
    const auto snapshot = planted->Snapshot();
    std::string problem = "no error";
    try {
      api.run(planted->args);
    } catch (const attnpool::Error& error) {
      // The case's names, or the mask's matrices, whose shapes follow n, m.
      const std::string argument = error.argument();
      const auto& accepted = size_case.accepted;
      problem = std::find(accepted.begin(), accepted.end(), argument) !=
                            accepted.end() ||
                        argument.rfind("mask.", 0) == 0
                    ? ""
                    : "an error naming " + argument;
    } catch (const std::exception& error) {
      problem = std::string("unexpected exception: ") + error.what();
    }
    if (!problem.empty() || planted->Snapshot() != snapshot) {
      Fail((problem.empty() ? "wrote while refusing" : problem) +
               " for the size case " + size_case.what,
           decoded.Describe(api));
    }
  }
}

}  // namespace
}  // namespace attnpool_test

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace attnpool_test;
  const auto& apis = Apis<float>();
  std::vector<const char*> names;
  for (const auto& api : apis) names.push_back(api.name);
  for (const FunctionPastTheTable& function : kFunctionsPastTheTable) {
    names.push_back(function.name);
  }
  const char* name = std::getenv("ATTNPOOL_FUZZ_API");
  if (name != nullptr && std::strcmp(name, "list") == 0) {
    for (const char* known : names) std::printf("%s\n", known);
    std::exit(0);
  }
  if (name != nullptr && *name != '\0') {
    for (size_t k = 0; k < names.size(); ++k) {
      if (std::strcmp(names[k], name) == 0) forced_api = static_cast<int>(k);
    }
    if (forced_api < 0) {
      std::fprintf(stderr,
                   "ATTNPOOL_FUZZ_API=%s: no such function; known:", name);
      for (const char* known : names) std::fprintf(stderr, " %s", known);
      std::fprintf(stderr, "\n");
      std::exit(2);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnpool_test;
  Bytes bytes(data, size);
  const size_t count = Apis<float>().size();
  const uint8_t which = bytes.Next();
  const size_t index = forced_api >= 0
                           ? static_cast<size_t>(forced_api)
                           : which % (count + kFunctionsPastTheTableCount);
  const uint8_t flags = bytes.Next();
  if (index >= count) {
    kFunctionsPastTheTable[index - count].fuzz(bytes, flags);
  } else if (flags & 1) {
    FuzzOne(Apis<double>()[index], bytes, flags);
  } else {
    FuzzOne(Apis<float>()[index], bytes, flags);
  }
  return 0;
}
