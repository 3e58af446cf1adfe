// Concurrency (include/attnpool/targets.h, "Thread safety"): every function
// may be called from many application threads at once, each call giving
// the bits of the same call made alone; the first calls of a process may
// race; last_run_target() is per thread. Forcing a target is process-global
// and is not safe while other threads call attnpool — what is promised is
// that calls made after force_target() returns (and synchronized with it)
// run on the forced target.
#include <attnpool/attnpool.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <omp.h>
#include <string>
#include <thread>
#include <vector>

#include "tests/api_table.h"
#include "tests/layer_table.h"
#include "tests/test_data.h"

namespace attnpool_test {
namespace {

// One prepared call and the outputs it gives when made alone.
struct Job {
  std::string name;
  std::function<std::vector<unsigned char>()> run;  // on a fresh copy
  std::vector<unsigned char> alone;
};

template <typename T>
void AddJobs(std::vector<Job>& jobs, uint64_t seed) {
  for (const Api<T>& api : Apis<T>()) {
    for (int variant = 0; variant < 2; ++variant) {
      Sizes sizes;
      sizes[kN] = 17 + 40 * variant + (seed % 7);
      sizes[kM] = 23 + 31 * variant;
      sizes[kD] = variant ? 18 : 3;
      sizes[kDv] = 6 + 9 * variant;
      auto ws = std::make_shared<Workspace<T>>(api, sizes);
      ws->FillRandom(seed++);
      ws->args.execution.threads = variant + 1;  // nested OpenMP teams too
      if (api.uses_kernel && variant) {
        ws->args.distance = attnpool::Distance::dot;
        ws->args.kernel = {attnpool::Kernel::exp};
      }
      if (api.uses_mask && variant) {
        ws->UseValidLengths();
        ws->UseBias();
      }
      Job job;
      job.name = std::string(api.name) +
                 (sizeof(T) == 4 ? "/float/" : "/double/") +
                 std::to_string(variant);
      job.run = [ws] {
        const auto copy = ws->Clone();
        copy->api().run(copy->args);
        return OutputBytes(copy->api(), copy->args);
      };
      jobs.push_back(std::move(job));
    }
  }
  for (const Layer& layer : Layers()) {
    for (int threads : {1, 2}) {
      std::shared_ptr<const LayerCall<T>> call =
          MakeLayerCall<T>(layer, seed++);
      Job job;
      job.name = std::string(layer.name) +
                 (sizeof(T) == 4 ? "/float/" : "/double/") +
                 std::to_string(threads);
      job.run = [call, threads] { return call->Fresh(threads); };
      jobs.push_back(std::move(job));
    }
  }
}

std::vector<Job> MakeJobs() {
  std::vector<Job> jobs;
  AddJobs<float>(jobs, kSeed + 500);
  AddJobs<double>(jobs, kSeed + 600);
  return jobs;
}

// Runs every job from `threads` application threads at once (each thread
// starting at a different job, all released together), `rounds` times
// each; returns the descriptions of the results that differ from `alone`.
std::vector<std::string> RunConcurrently(const std::vector<Job>& jobs,
                                         int threads, int rounds) {
  std::mutex mutex;
  std::condition_variable start;
  bool go = false;
  std::vector<std::string> failures;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      {
        std::unique_lock<std::mutex> lock(mutex);
        start.wait(lock, [&] { return go; });
      }
      for (int round = 0; round < rounds; ++round) {
        for (size_t k = 0; k < jobs.size(); ++k) {
          const Job& job = jobs[(k + t * 5) % jobs.size()];
          std::string problem;
          try {
            if (job.run() != job.alone) problem = "differs from alone";
            const std::string ran = attnpool::last_run_target();
            if (ran != attnpool::active_target()) {
              problem = "last_run_target " + ran;
            }
          } catch (const std::exception& error) {
            problem = error.what();
          }
          if (!problem.empty()) {
            std::lock_guard<std::mutex> lock(mutex);
            failures.push_back("thread " + std::to_string(t) + " " + job.name +
                               ": " + problem);
          }
        }
      }
    });
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    go = true;
  }
  start.notify_all();
  for (auto& thread : pool) thread.join();
  return failures;
}

TEST_CASE(
    "concurrency: many application threads get the results of calls alone",
    "[concurrency]") {
  auto jobs = MakeJobs();
  for (Job& job : jobs) job.alone = job.run();
  const auto failures = RunConcurrently(jobs, 8, 2);
  for (const auto& failure : failures) UNSCOPED_INFO(failure);
  REQUIRE(failures.empty());
}

// The application's threads may be an OpenMP team of its own, whose thread
// numbers are not attnpool's: a call on one thread (execution.threads 1, or
// a single block) must not take them for slots of its own scratch.
TEST_CASE("concurrency: calls from the threads of an application's OpenMP team",
          "[concurrency]") {
  auto jobs = MakeJobs();
  for (Job& job : jobs) job.alone = job.run();
  constexpr int kTeam = 4;
  std::vector<std::string> failures[kTeam];
#pragma omp parallel num_threads(kTeam)
  {
    const int t = omp_get_thread_num();
    for (size_t k = 0; k < jobs.size(); ++k) {
      const Job& job = jobs[(k + t * 5) % jobs.size()];
      try {
        if (job.run() != job.alone) {
          failures[t].push_back(job.name + ": differs from alone");
        }
      } catch (const std::exception& error) {
        failures[t].push_back(job.name + ": " + error.what());
      }
    }
  }
  for (int t = 0; t < kTeam; ++t) {
    for (const auto& failure : failures[t]) {
      UNSCOPED_INFO("team thread " << t << " " << failure);
    }
    CHECK(failures[t].empty());
  }
  // Additive attention keeps a block of scores per thread: over 4096 keys,
  // a slot taken from the team's numbers would write 256 KiB and more past
  // them (a crash or other results without the sanitizers too).
  constexpr size_t n = 20, m = 4096, d = 3, hidden = 4;
  std::mt19937_64 rng(kSeed + 41);
  std::normal_distribution<float> normal;
  std::vector<float> q(n * d), k(m * d), w(2 * hidden * d + hidden);
  for (auto* v : {&q, &k, &w}) {
    for (float& x : *v) x = normal(rng);
  }
  const attnpool::TensorView<const float> queries{q.data(), 1, 1, n,
                                                  d,        0, 0, d},
      keys{k.data(), 1, 1, m, d, 0, 0, d};
  const attnpool::AdditiveWeights<float> weights{
      {w.data(), hidden, d},
      {w.data() + hidden * d, hidden, d},
      w.data() + 2 * hidden * d};
  const auto additive = [&] {
    std::vector<float> out(n * d);
    attnpool::additive_attention(weights, queries, keys, keys,
                                 {out.data(), 1, 1, n, d, 0, 0, d}, {},
                                 attnpool::EmptyRows::nan, {1});
    return out;
  };
  const std::vector<float> alone = additive();
  int differ = 0;
#pragma omp parallel num_threads(kTeam) reduction(+ : differ)
  differ += additive() != alone;
  CHECK(differ == 0);
}

// Under ctest each case is a process of its own: here the threads make the
// process's first attnpool calls (dispatch initialization) together.
TEST_CASE("concurrency: the first calls of a process may race",
          "[concurrency]") {
  auto jobs = MakeJobs();  // prepares data only; no attnpool call yet
  std::vector<std::vector<unsigned char>> first(jobs.size());
  {
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (size_t k = 0; k < jobs.size(); ++k) {
      pool.emplace_back([&, k] {
        while (!go.load()) std::this_thread::yield();
        first[k] = jobs[k].run();
      });
    }
    go = true;
    for (auto& thread : pool) thread.join();
  }
  for (size_t k = 0; k < jobs.size(); ++k) {
    INFO(jobs[k].name);
    REQUIRE(first[k] == jobs[k].run());
  }
}

TEST_CASE("concurrency: a target forced before the threads start is theirs",
          "[concurrency]") {
  struct Reset {
    ~Reset() { attnpool::reset_target(); }
  } reset;
  const auto supported = attnpool::supported_targets();
  auto jobs = MakeJobs();
  for (const std::string& target : {supported.back(), supported.front()}) {
    attnpool::force_target(target);
    for (Job& job : jobs) job.alone = job.run();
    std::string seen_before_call = "unset";
    std::thread idle([&] { seen_before_call = attnpool::last_run_target(); });
    idle.join();
    REQUIRE(seen_before_call.empty());  // per thread: this one ran nothing
    const auto failures = RunConcurrently(jobs, 4, 1);
    for (const auto& failure : failures) UNSCOPED_INFO(failure);
    CHECK(failures.empty());
    REQUIRE(attnpool::active_target() == target);
  }
}

}  // namespace
}  // namespace attnpool_test
