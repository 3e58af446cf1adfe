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
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
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
// with fractions in [0, 1]) and returns 0 from its `stop_at`-th (0: never).
struct ProgressLog {
  std::thread::id caller = std::this_thread::get_id();
  int calls = 0, stop_at = 0;
  bool elsewhere = false, out_of_range = false;

  static int Poll(void* context, double done) {
    auto* log = static_cast<ProgressLog*>(context);
    log->elsewhere |= std::this_thread::get_id() != log->caller;
    log->out_of_range |= !(done >= 0 && done <= 1);
    return ++log->calls != log->stop_at;
  }
};

// Execution::progress, through every function of the API table and every
// layer on 1 and 3 threads: polled on the calling thread only, changing no
// bit while it goes on; returning 0 at its first or second call throws
// Cancelled and is not called again (a function that polls once finishes
// first); an exception it throws leaves the call. A call it stops writes
// nothing: every output byte (canaries and gaps included) as before.
TEST_CASE("determinism: a progress callback polls and cancels",
          "[determinism]") {
  uint64_t seed = kSeed + 320;
  for (const Api<float>& api : Apis<float>()) {
    for (int threads : {1, 3}) {
      INFO(api.name << " threads " << threads);
      Workspace<float> ws(api, DeterminismShapes()[0]);
      ws.FillRandom(++seed);
      const auto reference = RunOnce(ws, threads);
      for (int stop_at : {0, 1, 2}) {
        INFO("stop at " << stop_at);
        const auto run = ws.Clone();
        const auto before = run->Snapshot();
        ProgressLog log;
        log.stop_at = stop_at;
        run->args.execution = {threads, &ProgressLog::Poll, &log};
        bool cancelled = false;
        try {
          run->api().run(run->args);
        } catch (const attnpool::Cancelled&) {
          cancelled = true;
        }
        CHECK_FALSE(log.elsewhere);
        CHECK_FALSE(log.out_of_range);
        CHECK(log.calls >= 1);
        if (stop_at == 0 || log.calls < stop_at) {
          REQUIRE_FALSE(cancelled);
          REQUIRE(OutputBytes(run->api(), run->args) == reference);
        } else {
          REQUIRE(cancelled);
          REQUIRE(log.calls == stop_at);
          REQUIRE((run->Snapshot() == before));
        }
      }
      const auto run = ws.Clone();
      const auto before = run->Snapshot();
      run->args.execution.progress = [](void*, double) -> int {
        throw std::runtime_error("from the callback");
      };
      REQUIRE_THROWS_WITH(run->api().run(run->args), "from the callback");
      REQUIRE((run->Snapshot() == before));
    }
  }
  for (const Layer& layer : Layers()) {
    for (int threads : {1, 3}) {
      const auto call = MakeLayerCall<float>(layer, ++seed);
      INFO(layer.name << " seed " << seed << " threads " << threads);
      const auto reference = call->Fresh(threads);
      for (int stop_at : {0, 1, 2}) {
        INFO("stop at " << stop_at);
        // (As Fresh's: NaN, which every row the call writes replaces.)
        const std::vector<float> before(
            call->out.size(), std::numeric_limits<float>::quiet_NaN());
        std::vector<float> out = before;
        ProgressLog log;
        log.stop_at = stop_at;
        bool cancelled = false;
        try {
          call->Run(out, {threads, &ProgressLog::Poll, &log});
        } catch (const attnpool::Cancelled&) {
          cancelled = true;
        }
        CHECK_FALSE(log.elsewhere);
        const bool same = std::memcmp(out.data(), before.data(),
                                      out.size() * sizeof(float)) == 0;
        if (stop_at == 0 || log.calls < stop_at) {
          REQUIRE_FALSE(cancelled);
          REQUIRE(std::memcmp(out.data(), reference.data(), reference.size()) ==
                  0);
        } else {
          REQUIRE(cancelled);
          REQUIRE(same);
        }
      }
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
