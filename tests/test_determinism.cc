// Determinism (docs/design.md §4): every function of the API table, and
// every attention layer of the layer table, gives bitwise the same outputs for
// 1, 2, 3 and 7 threads — set per call (Execution::threads) or through the
// OpenMP default (omp_set_num_threads, what OMP_NUM_THREADS sets) — and on
// repeated runs, on every target. CTest also runs this file's cases under
// OMP_NUM_THREADS=1, 2, 3, 7 (determinism.OMP_NUM_THREADS=…), where the default
// thread count is the environment's.
#include <attnpool/attnpool.h>
#include <omp.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/api_table.h"
#include "tests/each_target.h"
#include "tests/layer_table.h"
#include "tests/test_data.h"

namespace attnpool_test {
namespace {

// Shapes that split every stage into several blocks: n > 192 (weighted-sum
// row blocks) and > 96 (distance query blocks), d ≥ 16 (Gram form), and a
// short n with wide dv (the weighted sum then splits columns across
// threads).
std::vector<Sizes> DeterminismShapes() {
  Sizes tall, wide;
  tall[kN] = 203;
  tall[kM] = 131;
  tall[kD] = 19;
  tall[kDv] = 9;
  wide[kN] = 5;
  wide[kM] = 70;
  wide[kD] = 3;
  wide[kDv] = 150;
  return {tall, wide};
}

template <typename T>
std::vector<unsigned char> RunOnce(const Workspace<T>& prepared, int threads) {
  const auto ws = prepared.Clone();
  ws->args.execution.threads = threads;
  ws->api().run(ws->args);
  return OutputBytes(ws->api(), ws->args);
}

template <typename T>
void Determinism() {
  const int default_threads = omp_get_max_threads();
  uint64_t seed = kSeed + 300;
  for (const Api<T>& api : Apis<T>()) {
    for (const Sizes& sizes : DeterminismShapes()) {
      for (bool masked : {false, true}) {
        if (masked && !api.uses_mask) continue;
        Workspace<T> ws(api, sizes);
        ws.FillRandom(++seed);
        if (masked) {
          ws.UseValidLengths();
          ws.args.mask.causal = true;
          ws.args.mask.causal_offset = 60;
          ws.UseBias();
        }
        INFO(api.name << " n=" << sizes[kN] << " m=" << sizes[kM]
                      << " d=" << sizes[kD] << " dv=" << sizes[kDv]
                      << (masked ? " masked" : ""));
        const auto reference = RunOnce(ws, 1);
        RequireRanOnTarget();
        for (int threads : {1, 2, 3, 7}) {
          INFO("threads " << threads);
          REQUIRE(RunOnce(ws, threads) == reference);
          omp_set_num_threads(threads);
          const auto by_default = RunOnce(ws, 0);
          omp_set_num_threads(default_threads);
          REQUIRE(by_default == reference);
        }
        // The process default (OMP_NUM_THREADS under ctest's variants).
        REQUIRE(RunOnce(ws, 0) == reference);
      }
    }
  }
  for (const Layer& layer : Layers()) {
    for (int draw = 0; draw < 4; ++draw) {
      const auto call = MakeLayerCall<T>(layer, ++seed);
      INFO(layer.name << " seed " << seed);
      const auto reference = call->Fresh(1);
      RequireRanOnTarget();
      call->Run();  // (a call that wrote nothing would leave NaN canaries)
      REQUIRE(call->OutputFinite());
      for (int threads : {2, 3, 7}) {
        INFO("threads " << threads);
        REQUIRE(call->Fresh(threads) == reference);
        omp_set_num_threads(threads);
        const auto by_default = call->Fresh(0);
        omp_set_num_threads(default_threads);
        REQUIRE(by_default == reference);
      }
      REQUIRE(call->Fresh(0) == reference);
    }
  }
}

// Thread counts the machine cannot run (OpenMP would end the process when
// the OS refuses its threads) are clamped to 4 per processor: per call and
// through the OpenMP default, every function gives the bits of one thread.
TEST_CASE("determinism: thread counts past the machine's are clamped",
          "[determinism]") {
  const int default_threads = omp_get_max_threads();
  const int most = 4 * omp_get_num_procs();
  REQUIRE(attnpool::thread_count({1 << 30}) ==
          std::min(most, omp_get_thread_limit()));
  REQUIRE(attnpool::thread_count({3}) == std::min(3, most));
  uint64_t seed = kSeed + 310;
  for (const Api<float>& api : Apis<float>()) {
    INFO(api.name);
    Workspace<float> ws(api, DeterminismShapes()[0]);
    ws.FillRandom(++seed);
    const auto reference = RunOnce(ws, 1);
    REQUIRE(RunOnce(ws, std::numeric_limits<int>::max()) == reference);
    omp_set_num_threads(100000);
    const auto by_default = RunOnce(ws, 0);
    omp_set_num_threads(default_threads);
    REQUIRE(by_default == reference);
  }
}

// A progress callback that records its calls (all on the calling thread,
// with fractions in [0, 1]), returns 0 from its `stop_at`-th (0: never) and
// throws at its `throw_at`-th.
struct ProgressLog {
  std::thread::id caller = std::this_thread::get_id();
  int calls = 0, stop_at = 0, throw_at = 0;
  bool elsewhere = false, out_of_range = false;

  static int Poll(void* context, double done) {
    auto* log = static_cast<ProgressLog*>(context);
    log->elsewhere |= std::this_thread::get_id() != log->caller;
    log->out_of_range |= !(done >= 0 && done <= 1);
    if (++log->calls == log->throw_at) {
      throw std::runtime_error("from the callback");
    }
    return log->calls != log->stop_at;
  }
};

// One call with a ProgressLog stopping at `stop_at` or throwing at
// `throw_at`, checked: polled on the calling thread only; a call it lets
// run gives `reference`'s bytes (`bytes()`, its outputs'), one it stops
// or throws through leaves `before`'s (`after()`, every output byte,
// canaries and gaps included). `run(execution)` makes the call. Returns
// the polls the callback saw.
template <class Run, class Bytes, class After, class Before>
int CheckProgress(int threads, int stop_at, int throw_at, const Run& run,
                  const Bytes& bytes, const Before& before, const After& after,
                  const std::vector<unsigned char>& reference) {
  INFO("stop at " << stop_at << ", throw at " << throw_at);
  ProgressLog log;
  log.stop_at = stop_at;
  log.throw_at = throw_at;
  bool cancelled = false, threw = false;
  try {
    run(attnpool::Execution{threads, &ProgressLog::Poll, &log});
  } catch (const attnpool::Cancelled&) {
    cancelled = true;
  } catch (const std::runtime_error& error) {
    threw = std::string(error.what()) == "from the callback";
  }
  CHECK_FALSE(log.elsewhere);
  CHECK_FALSE(log.out_of_range);
  CHECK(log.calls >= 1);
  const bool stopped = stop_at != 0 && log.calls >= stop_at;
  const bool thrown = throw_at != 0 && log.calls >= throw_at;
  REQUIRE(cancelled == stopped);
  REQUIRE(threw == thrown);
  if (stopped || thrown) {
    // Not called again after it stopped the call.
    REQUIRE(log.calls == (stopped ? stop_at : throw_at));
    REQUIRE((after() == before));
  } else {
    REQUIRE((bytes() == reference));
  }
  return log.calls;
}

// Execution::progress, through every function of the API table and every
// layer on 1 and 3 threads: polled on the calling thread only, changing no
// bit while it goes on; returning 0 at a call throws Cancelled and is not
// called again, and so does an exception it throws. A call it stops
// writes nothing: every output byte as before, whether it stops the call
// at its first poll, its second or its last (after every block has
// written), or throws at its last.
TEST_CASE("determinism: a progress callback polls and cancels",
          "[determinism]") {
  uint64_t seed = kSeed + 320;
  for (const Api<float>& api : Apis<float>()) {
    for (int threads : {1, 3}) {
      INFO(api.name << " threads " << threads);
      Workspace<float> ws(api, DeterminismShapes()[0]);
      ws.FillRandom(++seed);
      const auto reference = RunOnce(ws, threads);
      const auto check = [&](int stop_at, int throw_at) {
        const auto run = ws.Clone();
        const auto before = run->Snapshot();
        return CheckProgress(
            threads, stop_at, throw_at,
            [&](const attnpool::Execution& how) {
              run->args.execution = how;
              run->api().run(run->args);
            },
            [&] { return OutputBytes(run->api(), run->args); }, before,
            [&] { return run->Snapshot(); }, reference);
      };
      const int polls = check(0, 0);
      for (int stop_at : {1, 2, polls}) check(stop_at, 0);
      check(0, polls);
    }
  }
  for (const Layer& layer : Layers()) {
    for (int threads : {1, 3}) {
      const auto call = MakeLayerCall<float>(layer, ++seed);
      INFO(layer.name << " seed " << seed << " threads " << threads);
      const auto reference = call->Fresh(threads);
      // (As Fresh's: NaN, which every row the call writes replaces.)
      const std::vector<float> fill(call->out.size(),
                                    std::numeric_limits<float>::quiet_NaN());
      const auto check = [&](int stop_at, int throw_at) {
        std::vector<float> out = fill;
        return CheckProgress(
            threads, stop_at, throw_at,
            [&](const attnpool::Execution& how) { call->Run(out, how); },
            [&] { return Bytes(out); }, Bytes(fill), [&] { return Bytes(out); },
            reference);
      };
      const int polls = check(0, 0);
      for (int stop_at : {1, 2, polls}) check(stop_at, 0);
      check(0, polls);
    }
  }
}

// The composite layers, additive and multi-head (projections, then the
// attention, then the output's): stopped at any of their polls, or thrown
// through at the last, they write nothing.
TEST_CASE("determinism: a stopped additive or multi-head call writes nothing",
          "[determinism]") {
  std::mt19937_64 rng(kSeed + 330);
  std::normal_distribution<float> normal;
  const auto random = [&](size_t count) {
    std::vector<float> values(count);
    for (float& x : values) x = normal(rng);
    return values;
  };
  constexpr size_t batch = 2, n = 24, m = 300, d = 8, heads = 2, hidden = 4;
  const auto q = random(batch * n * d), k = random(batch * m * d),
             w = random(2 * hidden * d + hidden), p = random(4 * d * d);
  const attnpool::TensorView<const float> queries{q.data(), batch, 1,     n,
                                                  d,        n * d, n * d, d},
      keys{k.data(), batch, 1, m, d, m * d, m * d, d};
  const attnpool::AdditiveWeights<float> additive{
      {w.data(), hidden, d},
      {w.data() + hidden * d, hidden, d},
      w.data() + 2 * hidden * d};
  attnpool::MultiHeadWeights<float> multi;
  multi.heads = heads;
  multi.w_q = {p.data(), d, d};
  multi.w_k = {p.data() + d * d, d, d};
  multi.w_v = {p.data() + 2 * d * d, d, d};
  multi.w_o = {p.data() + 3 * d * d, d, d};
  using Call =
      std::function<void(std::vector<float>&, const attnpool::Execution&)>;
  const std::pair<const char*, Call> calls[] = {
      {"additive",
       [&](std::vector<float>& out, const attnpool::Execution& how) {
         attnpool::additive_attention(
             additive, queries, keys, keys,
             {out.data(), batch, 1, n, d, n * d, n * d, d}, {},
             attnpool::EmptyRows::nan, how);
       }},
      {"multi-head",
       [&](std::vector<float>& out, const attnpool::Execution& how) {
         attnpool::multi_head_attention(
             multi, queries, keys, keys,
             {out.data(), batch, 1, n, d, n * d, n * d, d}, {},
             attnpool::EmptyRows::nan, how);
       }}};
  const std::vector<float> fill(batch * n * d, 7.0f);
  for (const auto& entry : calls) {
    // (Named, not bound: clang 14 captures no structured binding.)
    const char* const name = entry.first;
    const Call& call = entry.second;
    for (int threads : {1, 3}) {
      INFO(name << " threads " << threads);
      std::vector<float> out = fill;
      call(out, {threads});
      const auto reference = Bytes(out);
      const auto check = [&](int stop_at, int throw_at) {
        std::vector<float> into = fill;
        return CheckProgress(
            threads, stop_at, throw_at,
            [&](const attnpool::Execution& how) { call(into, how); },
            [&] { return Bytes(into); }, Bytes(fill),
            [&] { return Bytes(into); }, reference);
      };
      const int polls = check(0, 0);
      for (int stop_at = 1; stop_at <= polls; ++stop_at) check(stop_at, 0);
      check(0, polls);
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(DeterminismFloat, "determinism.float",
                          "[determinism]") {
  Determinism<float>();
}

ATTNPOOL_TEST_EACH_TARGET(DeterminismDouble, "determinism.double",
                          "[determinism]") {
  Determinism<double>();
}

}  // namespace
}  // namespace attnpool_test
