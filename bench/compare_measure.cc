// bench/compare's timing, reporting and checking (compare_measure.h).
#include "bench/compare_measure.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/compare_probes.h"

#include <omp.h>

#if ATTNPOOL_BENCH_OPENBLAS
extern "C" void openblas_set_num_threads(int);
#endif

namespace attnpool_compare {

int g_reps = 5;
bool g_quick = false;

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU seconds of every process (/proc/stat) and of this one.
double BusySeconds() {
  unsigned long long v[7] = {0};
  if (FILE* f = std::fopen("/proc/stat", "r")) {
    if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                    &v[2], &v[3], &v[4], &v[5], &v[6]) != 7) {
      v[0] = 0;
    }
    std::fclose(f);
  }
  return (v[0] + v[1] + v[2] + v[5] + v[6]) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}
double SelfSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}


// One untimed warm-up, then g_reps timed runs.
Timing Time(const std::function<void()>& run, int reps) {
  if (reps == 0) reps = g_reps;
  run();
  Timing timing;
  const double busy = BusySeconds(), self = SelfSeconds(), start = Now();
  for (int r = 0; r < reps; ++r) {
    const double t = Now();
    run();
    timing.seconds.push_back(Now() - t);
  }
  const double wall = Now() - start;
  timing.background =
      std::max(0.0, ((BusySeconds() - busy) - (SelfSeconds() - self)) / wall);
  std::sort(timing.seconds.begin(), timing.seconds.end());
  return timing;
}

// One untimed warm-up of each, then g_reps rounds that time each run once,
// in turn: runs compared on a machine whose memory bandwidth drifts over
// minutes see the same conditions (Zen 4: 18-34 GB/s within a quarter of
// an hour).
std::vector<Timing> TimeInterleaved(
    const std::vector<std::function<void()>>& runs) {
  for (const auto& run : runs) run();
  std::vector<Timing> timings(runs.size());
  const double busy = BusySeconds(), self = SelfSeconds(), start = Now();
  for (int r = 0; r < g_reps; ++r) {
    for (size_t i = 0; i < runs.size(); ++i) {
      const double t = Now();
      runs[i]();
      timings[i].seconds.push_back(Now() - t);
    }
  }
  const double wall = Now() - start;
  const double background =
      std::max(0.0, ((BusySeconds() - busy) - (SelfSeconds() - self)) / wall);
  for (Timing& timing : timings) {
    timing.background = background;
    std::sort(timing.seconds.begin(), timing.seconds.end());
  }
  return timings;
}

ReadTimings TimeWithReads(std::vector<std::function<void()>> others,
                          const std::vector<std::vector<ReadArrays>>& reads,
                          int threads) {
  const size_t first = others.size();
  for (const std::vector<ReadArrays>& set : reads) {
    for (int loop = 0; loop < attnpool_compare::kReadLoops; ++loop) {
      others.push_back([=] {
        double total = 0;
        for (const ReadArrays& arrays : set) {
          const size_t count = arrays.count, slice = count / 64;
#pragma omp parallel for num_threads(threads) reduction(+ : total)
          for (long s = 0; s < 64; ++s) {
            total += attnpool_compare::ReadSum(
                arrays.first + s * slice, arrays.second + s * slice,
                s == 63 ? count - 63 * slice : slice, loop);
          }
        }
        if (total == 42) std::printf("\n");
      });
    }
  }
  auto timings = TimeInterleaved(others);
  ReadTimings result;
  for (size_t set = 0; set < reads.size(); ++set) {
    const size_t at = first + set * attnpool_compare::kReadLoops;
    int best = 0;
    for (int loop = 1; loop < attnpool_compare::kReadLoops; ++loop) {
      if (timings[at + loop].median() < timings[at + best].median()) {
        best = loop;
      }
    }
    result.reads.push_back(timings[at + best]);
    result.loops.push_back(attnpool_compare::ReadLoopName(best));
  }
  timings.resize(first);
  result.others = std::move(timings);
  return result;
}

std::vector<Row> g_rows;

// Prints a RESULT line for `work` units per run and records the median rate.
void Report(const std::string& group, const std::string& name, int threads,
            const std::string& unit, double work, const Timing& timing,
            const std::string& note) {
  const double median = timing.median();
  std::printf("RESULT|%s|%s|%d|%s|%.4g|%.4g|%.4g|%.4g|%.2f|%s\n", group.c_str(),
              name.c_str(), threads, unit.c_str(), work / median,
              work / timing.seconds.back(), work / timing.seconds.front(),
              median, timing.background, note.c_str());
  std::fflush(stdout);
  g_rows.push_back({group, name, unit, threads, work / median, median});
}

// The failures of Check, listed at the end of the run.
std::vector<std::string> g_check_failures;

// The scale of attention outputs over `values`: their mean magnitude. An
// output is a convex combination Σⱼ pⱼ·vⱼ of value rows, computed with
// errors relative to Σⱼ pⱼ·|vⱼ|, which is near the mean |v| for these
// random inputs, however small the output (W5's 65536 keys average to
// outputs of 0.02 where the values are of 1).
double OutputScale(const AlignedFloats& values) {
  double sum = 0;
  for (const float v : values) sum += std::fabs(v);
  return sum / values.size();
}

// attnpool's `ours` against a baseline's `theirs` (`count` outputs of the
// same inputs): the largest |ours − theirs| relative to `scale`
// (OutputScale); above `tolerance` (or NaN) the run fails.
void Check(const std::string& group, const std::string& baseline, int threads,
           const float* ours, const float* theirs, size_t count, double scale,
           double tolerance) {
  double difference = 0;
  for (size_t i = 0; i < count; ++i) {
    difference = std::max(difference, std::fabs(double(ours[i]) - theirs[i]));
    if (std::isnan(ours[i]) || std::isnan(theirs[i])) difference = NAN;
  }
  const double relative = difference / scale;
  const bool ok = relative <= tolerance;
  std::printf("CHECK|%s|%s|%d|%.3g|%.3g|%.3g|%.0e|%s\n", group.c_str(),
              baseline.c_str(), threads, difference, scale, relative, tolerance,
              ok ? "ok" : "FAILED");
  std::fflush(stdout);
  if (!ok) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "%s, %d thread(s): attnpool's output differs from %s's by "
                  "%.3g of its scale %.3g (tolerance %.0e)",
                  group.c_str(), threads, baseline.c_str(), relative, scale,
                  tolerance);
    g_check_failures.push_back(text);
  }
}


const Row* Find(const std::string& group, const std::string& name,
                int threads) {
  for (const Row& row : g_rows) {
    if (row.group == group && row.name == name && row.threads == threads) {
      return &row;
    }
  }
  return nullptr;
}

void SetBlasThreads(int threads) {
#if ATTNPOOL_BENCH_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  omp_set_num_threads(threads);
}

}  // namespace attnpool_compare
