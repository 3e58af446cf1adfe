// bench/compare's measuring and reporting, shared by its workload files
// (compare_workloads.h): timing with the other processes' load beside it,
// RESULT rows, and CHECK lines against the baselines' outputs.
#pragma once

#include <attnpool/attnpool.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_data.h"

namespace attnpool_compare {

using attnpool_bench::AlignedFloats;
using attnpool_bench::Normal;

extern int g_reps;    // timed runs per measurement (REPS, --quick: 1)
extern bool g_quick;  // --quick: smaller samples, a smoke run

// Scaled dot-product attention as attention_pool's spec.
inline const attnpool::PoolSpec kSdpaSpec{attnpool::Distance::dot,
                                          {attnpool::Kernel::exp},
                                          attnpool::Normalization::softmax};

struct Timing {
  std::vector<double> seconds;  // sorted
  double background = 0;        // CPUs used by other processes
  double median() const {
    const size_t n = seconds.size();
    return n % 2 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
  }
};

// One untimed warm-up, then `reps` (0: g_reps) timed runs.
Timing Time(const std::function<void()>& run, int reps = 0);

// One untimed warm-up of each, then g_reps rounds that time each run once,
// in turn: runs compared on a machine whose memory bandwidth drifts over
// minutes see the same conditions.
std::vector<Timing> TimeInterleaved(
    const std::vector<std::function<void()>>& runs);

// Two arrays of `count` floats that a plain read loop sums (narrower
// elements: read as the floats of their bytes).
struct ReadArrays {
  const float* first;
  const float* second;
  size_t count;
};

// `others` timed in turn with each plain read loop (compare_probes.h) over
// each set of `reads` (each pair of arrays in 64 slices of each spread over
// `threads`); a set's read rate is its fastest loop's median (slightly
// optimistic: the best of kReadLoops medians).
struct ReadTimings {
  std::vector<Timing> others;
  std::vector<Timing> reads;       // per set of arrays
  std::vector<const char*> loops;  // the fastest loop of each
};
ReadTimings TimeWithReads(std::vector<std::function<void()>> others,
                          const std::vector<std::vector<ReadArrays>>& reads,
                          int threads);

struct Row {
  std::string group, name, unit;
  int threads;
  double value;    // median rate
  double seconds;  // median time
  // The row's ceiling in units of its summary line's limit, and its name
  // (empty: the limit itself).
  double ceiling = 1;
  std::string ceiling_name;
};
extern std::vector<Row> g_rows;

// Prints a RESULT line for `work` units per run and records the median rate.
void Report(const std::string& group, const std::string& name, int threads,
            const std::string& unit, double work, const Timing& timing,
            const std::string& note = "");

// The failures of Check, listed at the end of the run.
extern std::vector<std::string> g_check_failures;

// The scale of attention outputs over `values`: their mean magnitude.
double OutputScale(const AlignedFloats& values);

// attnpool's `ours` against a baseline's `theirs` (`count` outputs of the
// same inputs): the largest |ours − theirs| relative to `scale`
// (OutputScale); above `tolerance` (or NaN) the run fails.
void Check(const std::string& group, const std::string& baseline, int threads,
           const float* ours, const float* theirs, size_t count, double scale,
           double tolerance);

// Tolerances of Check, relative to the output's scale. Float: both sides
// compute in float, in other summation orders and with other exps; bf16:
// the baseline rounds the probabilities to bf16 (2⁻⁹ relative each) where
// attnpool keeps them in float.
constexpr double kFloatTolerance = 1e-5, kBfloat16Tolerance = 1e-2;

// The recorded row, or null.
const Row* Find(const std::string& group, const std::string& name,
                int threads);

// OpenBLAS's and OpenMP's threads for the baselines.
void SetBlasThreads(int threads);

}  // namespace attnpool_compare
