// bench/compare: the workloads W1–W5 of docs/benchmarks.md through
// attnpool and, in the same process and run, the baselines a user would pick
// instead (a naive loop; OpenBLAS sgemm + softmax + sgemm; oneDNN matmul +
// softmax + matmul when built with it), plus probes of this machine's
// limits (FMA peak, exp rate, read bandwidth) and the fused kernel's peak
// memory on n = m = 65536, d = 64. For 1 and 2 threads.
//
// Prints RESULT|group|name|threads|unit|median|min|max|median_seconds|bg|note
// lines ("min"/"max" are the worst/best run, bg the CPUs other processes
// used meanwhile; rows with bg > 0.15 are not to be trusted), then a table
// of attnpool ÷ best baseline and of fractions of the machine's limits.
// Where attnpool is compared with OpenBLAS or oneDNN (W2, W4, W5, W2n's
// bf16), the outputs of the two are compared too, once, outside the timing:
// CHECK|group|baseline|threads|max_abs_difference|scale|relative|tolerance|
// ok lines (scale: the mean |value|); a difference beyond the tolerance fails
// the run (exit status 1, the failures listed at the end).
//
// usage: compare [--quick] [--no-memory]   env: REPS (default 5),
//   ATTNPOOL_BENCH_THREADS (default 1,2). --quick: REPS 1 and smaller
//   naive samples (a smoke run).
#include <attnpool/attnpool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <optional>
#include <vector>

#include "bench/bench_data.h"
#include "bench/compare_probes.h"
#include "bench/unfused_attention.h"
#include "hwy/aligned_allocator.h"
#include "src/math.h"

#if ATTNPOOL_BENCH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif
#include <omp.h>

namespace {

using attnpool_bench::AlignedFloats;
using attnpool_bench::Normal;
#if ATTNPOOL_BENCH_OPENBLAS
using attnpool_bench::OpenblasHead;
#endif
using attnpool_bench::SoftmaxRows;

// Scaled dot-product attention as attention_pool's spec.
const attnpool::PoolSpec kSdpaSpec{attnpool::Distance::dot,
                                   {attnpool::Kernel::exp},
                                   attnpool::Normalization::softmax};

// ------------------------------------------------------------ measuring

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

struct Timing {
  std::vector<double> seconds;  // sorted
  double background = 0;        // CPUs used by other processes
  double median() const {
    const size_t n = seconds.size();
    return n % 2 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
  }
};

// One untimed warm-up, then g_reps timed runs.
Timing Time(const std::function<void()>& run, int reps = 0) {
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
std::vector<Row> g_rows;

// Prints a RESULT line for `work` units per run and records the median rate.
void Report(const std::string& group, const std::string& name, int threads,
            const std::string& unit, double work, const Timing& timing,
            const std::string& note = "") {
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

// Tolerances of Check, relative to the output's scale. Float: both sides
// compute in float, in other summation orders and with other exps (Zen 4:
// 2e-7–4e-7 of the scale); bf16: the baseline rounds the probabilities to
// bf16 (2⁻⁹ relative each) where attnpool keeps them in float (5e-4).
constexpr double kFloatTolerance = 1e-5, kBfloat16Tolerance = 1e-2;

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

// -------------------------------------------------------------- probes

void Probes(int threads) {
  const size_t iterations = g_quick ? 1u << 20 : 1u << 24;
  double flops = 0;
  const Timing fma = Time([&] {
    double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += attnpool_compare::FmaLoop(iterations);
    flops = total;
  });
  Report("P", "fma_peak", threads, "GFLOP/s", flops / 1e9, fma,
         attnpool::active_target());

  // exp on an L1-resident array through the library's own exp.
  const size_t count = 4096, rounds = g_quick ? 100 : 4000;
  const AlignedFloats inputs = Normal(count, 3, 5);
  const Timing exp_timing = Time([&] {
#pragma omp parallel num_threads(threads)
    {
      std::vector<float> outputs(count);
      for (size_t r = 0; r < rounds; ++r) {
        attnpool::detail::ExpArray(inputs.data(), outputs.data(), count);
      }
    }
  });
  Report("P", "exp_rate", threads, "G/s", threads * count * rounds / 1e9,
         exp_timing, "ExpArray, 4096 floats in L1");

  // Reading 1 GiB (each thread its share) with the strongest plain loop
  // (compare_probes.h: vector loads, eight sums; the fastest of four). Until
  // 2026-11 a loop of four scalar sums stood here: it was add-bound, not
  // memory-bound (Zen 5: 28.9 GB/s, which decode beat); then one loop of
  // the widest vectors, which Zen 4 reads at 0.8-0.87 of the best.
  // Vector-aligned: a misaligned 512-bit load touches two cache lines.
  const size_t floats = (g_quick ? 64u : 256u) << 20;
  const auto big = hwy::AllocateAligned<float>(floats);
  std::fill(big.get(), big.get() + floats, 1.0f);
  const ReadTimings read = TimeWithReads(
      {}, {{{big.get(), big.get() + floats / 2, floats / 2}}}, threads);
  Report("P", "read_bandwidth", threads, "GB/s", floats * 4 / 1e9,
         read.reads[0], std::string("the fastest loop: ") + read.loops[0]);
}

// --------------------------------------------------------------- W1: NW

void W1(int threads) {
  const size_t n = 20000, m = 20000;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> unit(0, 5);
  std::vector<float> x(m), y(m), queries(n), out(n);
  for (size_t j = 0; j < m; ++j) {
    x[j] = unit(rng);
    y[j] = 2 * std::sin(x[j]) + x[j];
  }
  for (float& q : queries) q = unit(rng);
  const attnpool::PoolSpec spec{attnpool::Distance::sqeuclidean,
                                {attnpool::Kernel::gaussian, 0.3},
                                attnpool::Normalization::sum};
  const Timing ours = Time([&] {
    attnpool::attention_pool(spec, {queries.data(), n, 1}, {x.data(), m, 1},
                             {y.data(), m, 1}, {out.data(), n, 1}, {},
                             {threads});
  });
  Report("W1", "attnpool_nadaraya_watson_20000x20000", threads, "Gpairs/s",
         n * m / 1e9, ours, attnpool::last_run_target());
  // The loop a user writes: weights by std::exp, then Σw·y / Σw (a sample
  // of the queries, rated per pair).
  const size_t sample = g_quick ? 200 : 2000;
  const Timing naive = Time([&] {
#pragma omp parallel for num_threads(threads)
    for (long i = 0; i < static_cast<long>(sample); ++i) {
      double sum = 0, weighted = 0;
      for (size_t j = 0; j < m; ++j) {
        const float r = queries[i] - x[j];
        const float w = std::exp(-r * r / (2 * 0.3f * 0.3f));
        sum += w;
        weighted += w * y[j];
      }
      out[i] = static_cast<float>(weighted / sum);
    }
  });
  Report("W1", "naive_loop", threads, "Gpairs/s", sample * m / 1e9, naive,
         "std::exp per pair");
}

// ------------------------------------------------- W2, W4: unfused SDPA

#if ATTNPOOL_BENCH_ONEDNN
// oneDNN's unfused attention of one head: q (n×d) · kᵀ (scaled by 1/√d)
// into f32 scores, a softmax, then · v (m×d) into out (f32). With `bf16`,
// q, k and v are bf16 and the probabilities are reordered to bf16 for the
// second matmul (as a bf16 pipeline runs it). On `threads` OpenMP threads.
Timing OnednnUnfusedSdpa(bool bf16, const void* q, const void* k, const void* v,
                         float* out, size_t n, size_t m, size_t d,
                         int threads) {
  SetBlasThreads(threads);
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  const dt input = bf16 ? dt::bf16 : dt::f32;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  std::vector<float> scores(n * m);
  std::vector<uint16_t> probabilities(bf16 ? n * m : 0);
  const memory::dim N = n, M = m, D = d;
  memory::desc q_md({N, D}, input, tag::ab), kt_md({D, M}, input, tag::ba),
      s_md({N, M}, dt::f32, tag::ab), p_md({N, M}, input, tag::ab),
      v_md({M, D}, input, tag::ab), o_md({N, D}, dt::f32, tag::ab);
  memory qm(q_md, eng, const_cast<void*>(q)),
      ktm(kt_md, eng, const_cast<void*>(k)), sm(s_md, eng, scores.data()),
      pm(p_md, eng,
         bf16 ? static_cast<void*>(probabilities.data())
              : static_cast<void*>(scores.data())),
      vm(v_md, eng, const_cast<void*>(v)), om(o_md, eng, out);
  primitive_attr attr;
  attr.set_output_scales(0, {1 / std::sqrt(float(d))});
  matmul first(
      matmul::primitive_desc(matmul::desc(q_md, kt_md, s_md), attr, eng));
  softmax_forward softmax(softmax_forward::primitive_desc(
      softmax_forward::desc(prop_kind::forward_inference, s_md, 1), eng));
  matmul second(matmul::primitive_desc(matmul::desc(p_md, v_md, o_md), eng));
  std::optional<reorder> to_bf16;
  if (bf16) to_bf16.emplace(sm, pm);
  return Time([&] {
    first.execute(
        strm,
        {{DNNL_ARG_SRC, qm}, {DNNL_ARG_WEIGHTS, ktm}, {DNNL_ARG_DST, sm}});
    softmax.execute(strm, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, sm}});
    if (to_bf16) to_bf16->execute(strm, sm, pm);
    second.execute(
        strm, {{DNNL_ARG_SRC, pm}, {DNNL_ARG_WEIGHTS, vm}, {DNNL_ARG_DST, om}});
    strm.wait();
  });
}
#endif

void W2(int threads) {
  const size_t n = 4096, m = 4096, d = 64;
  const auto q = Normal(n * d, 1, 1), k = Normal(m * d, 1, 2),
             v = Normal(m * d, 1, 3);
  std::vector<float> out(n * d);
  const double gflop = 4.0 * n * m * d / 1e9;
  const attnpool::PoolSpec spec = kSdpaSpec;
  const Timing ours = Time([&] {
    attnpool::attention_pool(spec, {q.data(), n, d}, {k.data(), m, d},
                             {v.data(), m, d}, {out.data(), n, d}, {},
                             {threads});
  });
  Report("W2", "attnpool_fused_sdpa_4096x4096x64", threads, "GFLOP/s", gflop,
         ours, attnpool::last_run_target());
  const std::vector<float> attnpool_out = out;
  SetBlasThreads(threads);
#if ATTNPOOL_BENCH_OPENBLAS
  {
    std::vector<float> scores(n * m);
    const Timing blas = Time([&] {
      OpenblasHead(q.data(), k.data(), v.data(), out.data(), n, m, d, d,
                   scores.data());
    });
    Report("W2", "openblas_unfused_sdpa", threads, "GFLOP/s", gflop, blas,
           "sgemm + softmax (std::exp) + sgemm");
    Check("W2", "openblas_unfused_sdpa", threads, attnpool_out.data(),
          out.data(), out.size(), OutputScale(v), kFloatTolerance);
  }
#endif
#if ATTNPOOL_BENCH_ONEDNN
  Report("W2", "onednn_unfused_sdpa", threads, "GFLOP/s", gflop,
         OnednnUnfusedSdpa(false, q.data(), k.data(), v.data(), out.data(), n,
                           m, d, threads),
         "matmul + softmax + matmul");
  Check("W2", "onednn_unfused_sdpa", threads, attnpool_out.data(), out.data(),
        out.size(), OutputScale(v), kFloatTolerance);
#endif
  // Three nested loops, on a sample of the queries.
  const size_t sample = g_quick ? 16 : 128;
  const Timing naive = Time([&] {
#pragma omp parallel num_threads(threads)
    {
      std::vector<float> row(m);
#pragma omp for
      for (long i = 0; i < static_cast<long>(sample); ++i) {
        for (size_t j = 0; j < m; ++j) {
          float dot = 0;
          for (size_t p = 0; p < d; ++p) dot += q[i * d + p] * k[j * d + p];
          row[j] = dot / 8;
        }
        SoftmaxRows(row.data(), 1, m);
        for (size_t c = 0; c < d; ++c) {
          float sum = 0;
          for (size_t j = 0; j < m; ++j) sum += row[j] * v[j * d + c];
          out[i * d + c] = sum;
        }
      }
    }
  });
  Report("W2", "naive_loop", threads, "GFLOP/s", 4.0 * sample * m * d / 1e9,
         naive);
}

// (batch 1, heads, n, d) dense tensors of one seed each.
void W4(int threads) {
  const size_t heads = 8, n = 1024, d = 64;
  const auto q = Normal(heads * n * d, 1, 4), k = Normal(heads * n * d, 1, 5),
             v = Normal(heads * n * d, 1, 6);
  std::vector<float> out(heads * n * d);
  const double gflop = heads * 4.0 * n * n * d / 1e9;
  const auto view = [&](const AlignedFloats& data) {
    return attnpool::dense_tensor<const float>(data.data(), 1, heads, n, d);
  };
  const Timing ours = Time([&] {
    attnpool::scaled_dot_product_attention(
        view(q), view(k), view(v),
        attnpool::dense_tensor(out.data(), 1, heads, n, d), {}, {},
        attnpool::EmptyRows::nan, {threads});
  });
  Report("W4", "attnpool_sdpa_8x1024x64", threads, "GFLOP/s", gflop, ours,
         attnpool::last_run_target());
#if ATTNPOOL_BENCH_OPENBLAS
  const std::vector<float> attnpool_out = out;
  SetBlasThreads(threads);
  std::vector<float> scores(n * n);
  const Timing blas = Time([&] {
    for (size_t h = 0; h < heads; ++h) {
      const size_t offset = h * n * d;
      OpenblasHead(q.data() + offset, k.data() + offset, v.data() + offset,
                   out.data() + offset, n, n, d, d, scores.data());
    }
  });
  Report("W4", "openblas_unfused_per_head", threads, "GFLOP/s", gflop, blas,
         "numpy's way: sgemm + softmax + sgemm per head");
  Check("W4", "openblas_unfused_per_head", threads, attnpool_out.data(),
        out.data(), out.size(), OutputScale(v), kFloatTolerance);
#endif
}

// ----------------------------------------------------------- W3: L2

void W3(int threads) {
  const size_t n = 4096, m = 4096, d = 128;
  const auto q = Normal(n * d, 1, 7), k = Normal(m * d, 1, 8);
  std::vector<float> out(n * m);
  const Timing ours = Time([&] {
    attnpool::pairwise_distances(attnpool::Distance::sqeuclidean,
                                 {q.data(), n, d}, {k.data(), m, d},
                                 {out.data(), n, m}, {threads});
  });
  Report("W3", "attnpool_sqeuclidean_4096x4096x128", threads, "Gpairs/s",
         n * m / 1e9, ours, attnpool::last_run_target());
#if ATTNPOOL_BENCH_OPENBLAS
  SetBlasThreads(threads);
  std::vector<float> q_norms(n), k_norms(m);
  const Timing blas = Time([&] {
    for (size_t i = 0; i < n; ++i)
      q_norms[i] = cblas_sdot(d, q.data() + i * d, 1, q.data() + i * d, 1);
    for (size_t j = 0; j < m; ++j)
      k_norms[j] = cblas_sdot(d, k.data() + j * d, 1, k.data() + j * d, 1);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, d, -2.0f,
                q.data(), d, k.data(), d, 0.0f, out.data(), m);
#pragma omp parallel for num_threads(threads)
    for (long i = 0; i < static_cast<long>(n); ++i) {
      for (size_t j = 0; j < m; ++j) {
        out[i * m + j] =
            std::max(0.0f, out[i * m + j] + q_norms[i] + k_norms[j]);
      }
    }
  });
  Report("W3", "openblas_norms_plus_sgemm", threads, "Gpairs/s", n * m / 1e9,
         blas, "FAISS's method, without its repair of cancellation");
#endif
}

// ---------------------------------------------------------- W5: decode

void W5(int threads) {
  const size_t heads = 8, m = 65536, d = 64;
  const auto q = Normal(heads * d, 1, 9), k = Normal(heads * m * d, 1, 10),
             v = Normal(heads * m * d, 1, 11);
  std::vector<float> out(heads * d);
  const double gigabytes = 2.0 * heads * m * d * sizeof(float) / 1e9;
  // The limit: the plain streaming read (the P probe's loops) of the same K
  // and V, timed in turn with the decode. Where an array lies in memory
  // moves the read rate (Zen 4: the P probe's own 1 GiB read 24-25 GB/s
  // while these arrays read at 17-20 in the same process).
  const size_t floats = heads * m * d;
  const ReadTimings timed = TimeWithReads(
      {[&] {
        attnpool::scaled_dot_product_attention(
            attnpool::dense_tensor<const float>(q.data(), 1, heads, 1, d),
            attnpool::dense_tensor<const float>(k.data(), 1, heads, m, d),
            attnpool::dense_tensor<const float>(v.data(), 1, heads, m, d),
            attnpool::dense_tensor(out.data(), 1, heads, 1, d), {}, {},
            attnpool::EmptyRows::nan, {threads});
      }},
      {{{k.data(), v.data(), floats}}}, threads);
  const Timing& ours = timed.others[0];
  const std::vector<float> attnpool_out = out;
  char note[96];
  std::snprintf(note, sizeof note, "%s, %.2f ms",
                attnpool::last_run_target().c_str(), ours.median() * 1e3);
  Report("W5", "attnpool_decode_8x65536x64", threads, "GB/s", gigabytes, ours,
         note);
  Report("W5", "read_same_bytes", threads, "GB/s", gigabytes, timed.reads[0],
         std::string("W5's K and V, in turn with the decode; the fastest "
                     "loop: ") +
             timed.loops[0]);
  // W5m: the same cache with a valid length of m/8, the rest padded with
  // NaN: only the visible eighth is read (README "Hidden keys").
  {
    const size_t length = m / 8;
    AlignedFloats padded_k = k, padded_v = v;
    for (size_t h = 0; h < heads; ++h) {
      std::fill(padded_k.begin() + (h * m + length) * d,
                padded_k.begin() + (h + 1) * m * d, NAN);
      std::fill(padded_v.begin() + (h * m + length) * d,
                padded_v.begin() + (h + 1) * m * d, NAN);
    }
    attnpool::AttentionMask<float> mask;
    mask.valid_lengths = &length;
    const Timing masked = Time([&] {
      attnpool::scaled_dot_product_attention(
          attnpool::dense_tensor<const float>(q.data(), 1, heads, 1, d),
          attnpool::dense_tensor<const float>(padded_k.data(), 1, heads, m, d),
          attnpool::dense_tensor<const float>(padded_v.data(), 1, heads, m, d),
          attnpool::dense_tensor(out.data(), 1, heads, 1, d), mask, {},
          attnpool::EmptyRows::nan, {threads});
    });
    std::snprintf(note, sizeof note,
                  "valid length m/8, NaN padding, timed apart: %.2f ms = "
                  "%.3f of W5's time",
                  masked.median() * 1e3, masked.median() / ours.median());
    Report("W5m", "attnpool_decode_valid_m/8", threads, "GB/s", gigabytes / 8,
           masked, note);
  }
  // W5g: grouped-query decode: 32 query heads, four to each of W5's key
  // heads, in one call (scaled_dot_product_attention runs a key head's
  // query heads as one call's rows), against the same heads a call each.
  {
    const size_t query_heads = 4 * heads;
    const auto grouped_q = Normal(query_heads * d, 1, 12);
    std::vector<float> grouped_out(query_heads * d);
    const Timing grouped = Time([&] {
      attnpool::scaled_dot_product_attention(
          attnpool::dense_tensor<const float>(grouped_q.data(), 1, query_heads,
                                              1, d),
          attnpool::dense_tensor<const float>(k.data(), 1, heads, m, d),
          attnpool::dense_tensor<const float>(v.data(), 1, heads, m, d),
          attnpool::dense_tensor(grouped_out.data(), 1, query_heads, 1, d), {},
          {}, attnpool::EmptyRows::nan, {threads});
    });
    std::snprintf(note, sizeof note, "%.2f ms, %.2f of W5's time",
                  grouped.median() * 1e3, grouped.median() / ours.median());
    Report("W5g", "attnpool_decode_32_heads_over_8", threads, "GB/s", gigabytes,
           grouped, note);
    const Timing apart = Time([&] {
      for (size_t h = 0; h < query_heads; ++h) {
        attnpool::scaled_dot_product_attention(
            attnpool::dense_tensor<const float>(grouped_q.data() + h * d, 1, 1,
                                                1, d),
            attnpool::dense_tensor<const float>(k.data() + h / 4 * m * d, 1, 1,
                                                m, d),
            attnpool::dense_tensor<const float>(v.data() + h / 4 * m * d, 1, 1,
                                                m, d),
            attnpool::dense_tensor(grouped_out.data() + h * d, 1, 1, 1, d), {},
            {}, attnpool::EmptyRows::nan, {threads});
      }
    });
    Report("W5g", "attnpool_decode_a_call_per_head", threads, "GB/s", gigabytes,
           apart, "the same heads, 32 calls");
  }
#if ATTNPOOL_BENCH_OPENBLAS
  SetBlasThreads(threads);
  std::vector<float> scores(m);
  const Timing blas = Time([&] {
    for (size_t h = 0; h < heads; ++h) {
      const float* keys = k.data() + h * m * d;
      const float* values = v.data() + h * m * d;
      cblas_sgemv(CblasRowMajor, CblasNoTrans, m, d, 0.125f, keys, d,
                  q.data() + h * d, 1, 0.0f, scores.data(), 1);
      SoftmaxRows(scores.data(), 1, m);
      cblas_sgemv(CblasRowMajor, CblasTrans, m, d, 1.0f, values, d,
                  scores.data(), 1, 0.0f, out.data() + h * d, 1);
    }
  });
  std::snprintf(note, sizeof note,
                "sgemv + softmax + sgemv, timed apart, %.2f ms",
                blas.median() * 1e3);
  Report("W5", "openblas_decode", threads, "GB/s", gigabytes, blas, note);
  Check("W5", "openblas_decode", threads, attnpool_out.data(), out.data(),
        out.size(), OutputScale(v), kFloatTolerance);
#endif
}

// ------------------------------------------------------ M1: peak memory

// Peak resident set so far, in bytes.
size_t PeakResident() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;
}

void M1(int threads) {
  const size_t n = 65536, m = 65536, d = 64;
  const auto q = Normal(n * d, 1, 12), k = Normal(m * d, 1, 13),
             v = Normal(m * d, 1, 14);
  std::vector<float> out(n * d, 0.0f);
  const size_t before = PeakResident();
  const attnpool::PoolSpec spec = kSdpaSpec;
  const Timing timing = Time(
      [&] {
        attnpool::attention_pool(spec, {q.data(), n, d}, {k.data(), m, d},
                                 {v.data(), m, d}, {out.data(), n, d}, {},
                                 {threads});
      },
      1);
  const double growth_mib = (PeakResident() - before) / 1048576.0;
  char note[128];
  std::snprintf(note, sizeof note,
                "peak RSS grew %.1f MiB over inputs+outputs (goal <= 64; "
                "the weights would be 16 GiB)",
                growth_mib);
  Report("M1", "attnpool_fused_65536x65536x64", threads, "GFLOP/s",
         4.0 * n * m * d / 1e9, timing, note);
  std::printf("M1 peak memory growth: %.1f MiB\n", growth_mib);
}

// --------------------------------------- W2n: W2 over narrow keys and values

// W2's shape with keys and values in bfloat16, binary16 and int8 beside
// float (queries float), in GFLOP/s; and oneDNN's bf16 matmul + softmax +
// matmul (bf16 Q, K, V and probabilities; f32 scores) where it runs.
void W2n(int threads) {
  const size_t n = 4096, m = 4096, d = 64;
  const auto q = Normal(n * d, 1, 1), k = Normal(m * d, 1, 2),
             v = Normal(m * d, 1, 3);
  std::vector<float> out(n * d);
  const double gflop = 4.0 * n * m * d / 1e9;
  const auto run = [&](const char* name, const attnpool::ElementRows& keys,
                       const attnpool::ElementRows& values) {
    const Timing timing = Time([&] {
      attnpool::attention_pool(kSdpaSpec, {q.data(), n, d}, keys, values,
                               {out.data(), n, d}, {}, {threads});
    });
    Report("W2n", name, threads, "GFLOP/s", gflop, timing,
           attnpool::last_run_target());
  };
  run("attnpool_sdpa_float", attnpool::ConstMatrixView<float>(k.data(), m, d),
      attnpool::ConstMatrixView<float>(v.data(), m, d));
  std::vector<attnpool::bf16> qb(q.size()), kb(k.size()), vb(v.size());
  attnpool::to_bfloat16(q.data(), q.size(), qb.data());
  attnpool::to_bfloat16(k.data(), k.size(), kb.data());
  attnpool::to_bfloat16(v.data(), v.size(), vb.data());
  run("attnpool_sdpa_bfloat16",
      attnpool::ConstMatrixView<attnpool::bf16>(kb.data(), m, d),
      attnpool::ConstMatrixView<attnpool::bf16>(vb.data(), m, d));
  // bf16 queries too: the tile on this CPU's choice of bf16 dot-product
  // instruction (the unsuffixed row; maybe none: the float tile) and on each
  // other instruction it runs, forced.
  attnpool::force_bf16_dot_instruction("");
  const std::string chosen = attnpool::bf16_dot_instruction();
  std::vector<std::string> instructions{""};
  for (const std::string& other : attnpool::supported_bf16_dot_instructions()) {
    if (other != chosen) instructions.push_back(other);
  }
  // Each row's output, for the check against oneDNN's bf16 pipeline.
  std::vector<std::pair<std::string, std::vector<float>>> bf16_outputs;
  for (const std::string& instruction : instructions) {
    attnpool::force_bf16_dot_instruction(instruction);
    const Timing timing = Time([&] {
      attnpool::attention_pool(
          kSdpaSpec, attnpool::ConstMatrixView<attnpool::bf16>(qb.data(), n, d),
          attnpool::ConstMatrixView<attnpool::bf16>(kb.data(), m, d),
          attnpool::ConstMatrixView<attnpool::bf16>(vb.data(), m, d),
          {out.data(), n, d}, {}, {threads});
    });
    const std::string name = instruction.empty()
                                 ? std::string("attnpool_sdpa_bfloat16_qkv")
                                 : "attnpool_sdpa_bfloat16_qkv_" + instruction;
    const std::string path = attnpool::last_fused_path();
    const std::string used =
        path == "tile_bf16" ? attnpool::bf16_dot_instruction() : "";
    Report("W2n", name, threads, "GFLOP/s", gflop, timing,
           attnpool::last_run_target() + ", " + path + ", " + used);
    bf16_outputs.emplace_back(name, out);
    // The ceiling: half the FLOPs (the scores) on the instruction used, half
    // (the value products) on float FMAs. vdpbf16ps and BFDOT do two
    // products a float lane, at the FMA's rate: F/2 at 2P and F/2 at P take
    // 3F/(4P), a ceiling of 4/3 of the FMA peak P. AMX's tiles are many
    // times faster: the value products alone bound it, 2P. Without one (the
    // float tile), P.
    if (used == "AMX_BF16") {
      g_rows.back().ceiling = 2;
      g_rows.back().ceiling_name = "2x fma_peak (AMX_BF16 scores)";
    } else if (!used.empty()) {
      g_rows.back().ceiling = 4.0 / 3;
      g_rows.back().ceiling_name = "4/3 fma_peak (" + used + " scores)";
    }
  }
  attnpool::force_bf16_dot_instruction("");
  {
    std::vector<attnpool::f16> kh(k.size()), vh(v.size());
    attnpool::to_float16(k.data(), k.size(), kh.data());
    attnpool::to_float16(v.data(), v.size(), vh.data());
    run("attnpool_sdpa_float16",
        attnpool::ConstMatrixView<attnpool::f16>(kh.data(), m, d),
        attnpool::ConstMatrixView<attnpool::f16>(vh.data(), m, d));
  }
  {
    std::vector<int8_t> k8(k.size()), v8(v.size());
    std::vector<float> k_scales(m), v_scales(m);
    attnpool::quantize_rows({k.data(), m, d}, {k8.data(), m, d},
                            k_scales.data());
    attnpool::quantize_rows({v.data(), m, d}, {v8.data(), m, d},
                            v_scales.data());
    run("attnpool_sdpa_int8",
        attnpool::Int8Rows{{k8.data(), m, d}, k_scales.data()},
        attnpool::Int8Rows{{v8.data(), m, d}, v_scales.data()});
  }
#if ATTNPOOL_BENCH_ONEDNN
  try {
    Report("W2n", "onednn_unfused_sdpa_bf16", threads, "GFLOP/s", gflop,
           OnednnUnfusedSdpa(true, qb.data(), kb.data(), vb.data(), out.data(),
                             n, m, d, threads),
           "bf16 matmul + f32 softmax + bf16 matmul");
    for (const auto& [name, output] : bf16_outputs) {
      Check("W2n", "onednn_unfused_sdpa_bf16 (" + name + ")", threads,
            output.data(), out.data(), out.size(), OutputScale(v),
            kBfloat16Tolerance);
    }
  } catch (const std::exception& error) {
    std::printf("# W2n: oneDNN bf16 unavailable here: %s\n", error.what());
  }
#endif
}

// ----------------------------------------- W5n: decode, narrow K/V caches

// W5's decode with the cache in bfloat16, binary16 and int8 (one scale per
// row), beside the float cache, in keys per second: the ratio to the float
// row is the speed-up (the goal: bf16 and f16 ≥ 1/0.55, int8 ≥ 1/0.35).
// The four are timed in turn (TimeInterleaved): one after the other, the
// host's memory bandwidth drifting between them moved the int8 ratio from
// 0.34 to 0.52 in two runs minutes apart (Zen 4, one thread). Each narrow
// cache's limit, as W5's: the plain read loops over its own bytes (keys,
// values and int8's scales), timed in turn with the decodes
// (read_same_bytes_<type>).
void W5n(int threads) {
  const size_t heads = 8, m = 65536, d = 64, rows = heads * m;
  const auto q = Normal(heads * d, 1, 9), k = Normal(rows * d, 1, 10),
             v = Normal(rows * d, 1, 11);
  std::vector<float> out(heads * d);
  const auto queries =
      attnpool::dense_tensor<const float>(q.data(), 1, heads, 1, d);
  const auto output = attnpool::dense_tensor(out.data(), 1, heads, 1, d);
  std::vector<attnpool::bf16> kb(k.size()), vb(v.size());
  attnpool::to_bfloat16(k.data(), k.size(), kb.data());
  attnpool::to_bfloat16(v.data(), v.size(), vb.data());
  std::vector<attnpool::f16> kh(k.size()), vh(v.size());
  attnpool::to_float16(k.data(), k.size(), kh.data());
  attnpool::to_float16(v.data(), v.size(), vh.data());
  std::vector<int8_t> k8(k.size()), v8(v.size());
  std::vector<float> k_scales(rows), v_scales(rows);
  attnpool::quantize_rows({k.data(), rows, d}, {k8.data(), rows, d},
                          k_scales.data());
  attnpool::quantize_rows({v.data(), rows, d}, {v8.data(), rows, d},
                          v_scales.data());
  const auto int8 = [&](const std::vector<int8_t>& data,
                        const std::vector<float>& scales) {
    return attnpool::Int8Tensor{
        attnpool::dense_tensor<const int8_t>(data.data(), 1, heads, m, d),
        attnpool::dense_tensor<const float>(scales.data(), 1, heads, m, 1)};
  };
  struct Cache {
    const char* name;
    attnpool::ElementTensor keys, values;
  };
  const Cache caches[] = {
      {"attnpool_decode_float",
       attnpool::dense_tensor<const float>(k.data(), 1, heads, m, d),
       attnpool::dense_tensor<const float>(v.data(), 1, heads, m, d)},
      {"attnpool_decode_bfloat16",
       attnpool::dense_tensor<const attnpool::bf16>(kb.data(), 1, heads, m, d),
       attnpool::dense_tensor<const attnpool::bf16>(vb.data(), 1, heads, m, d)},
      {"attnpool_decode_float16",
       attnpool::dense_tensor<const attnpool::f16>(kh.data(), 1, heads, m, d),
       attnpool::dense_tensor<const attnpool::f16>(vh.data(), 1, heads, m, d)},
      {"attnpool_decode_int8", int8(k8, k_scales), int8(v8, v_scales)},
  };
  std::vector<std::function<void()>> runs;
  std::vector<std::string> targets;
  for (const Cache& cache : caches) {
    runs.push_back([&] {
      attnpool::scaled_dot_product_attention(
          queries, cache.keys, cache.values, output, {}, {},
          attnpool::EmptyRows::nan, {threads});
    });
    runs.back()();  // (untimed: the target it ran on)
    targets.push_back(attnpool::last_run_target());
  }
  const auto as_floats = [](const void* data) {
    return static_cast<const float*>(data);
  };
  // The narrow caches' bytes, as floats (rows·d is a multiple of 4).
  struct Bytes {
    const char* name;
    std::vector<ReadArrays> arrays;
    double bytes;
  };
  const Bytes reads[] = {
      {"read_same_bytes_bfloat16",
       {{as_floats(kb.data()), as_floats(vb.data()), rows * d / 2}},
       2.0 * rows * d * 2},
      {"read_same_bytes_float16",
       {{as_floats(kh.data()), as_floats(vh.data()), rows * d / 2}},
       2.0 * rows * d * 2},
      {"read_same_bytes_int8",
       {{as_floats(k8.data()), as_floats(v8.data()), rows * d / 4},
        {k_scales.data(), v_scales.data(), rows}},
       2.0 * rows * (d + 4)},
  };
  std::vector<std::vector<ReadArrays>> read_sets;
  for (const Bytes& read : reads) read_sets.push_back(read.arrays);
  const ReadTimings timed = TimeWithReads(runs, read_sets, threads);
  for (size_t i = 0; i < runs.size(); ++i) {
    char note[96];
    std::snprintf(note, sizeof note, "%s, %.2f ms", targets[i].c_str(),
                  timed.others[i].median() * 1e3);
    Report("W5n", caches[i].name, threads, "Gkeys/s", double(rows) / 1e9,
           timed.others[i], note);
  }
  for (size_t i = 0; i < read_sets.size(); ++i) {
    Report("W5n", reads[i].name, threads, "GB/s", reads[i].bytes / 1e9,
           timed.reads[i],
           std::string("the cache's bytes, in turn with the decodes; the "
                       "fastest loop: ") +
               timed.loops[i]);
  }
}

// ------------------------------------------------- W6: sliding window

// Causal attention of n = m queries and keys whose window holds the last
// `window` keys up to each query (Mistral's), against dense attention of
// the same queries over `window` keys. Query i sees min(i + 1, window) keys:
// n·window − window·(window − 1)/2 pairs against dense's n·window, each
// credited 4·d FLOPs. The goal (issue #15) is a time ratio: the window's
// time at most 1.1 of dense's.
void W6(int threads) {
  const size_t n = g_quick ? 4096 : 16384, window = 512, d = 64;
  const auto q = Normal(n * d, 1, 12), k = Normal(n * d, 1, 13),
             v = Normal(n * d, 1, 14);
  std::vector<float> out(n * d);
  const double pairs = double(n) * window - window * (window - 1) / 2.0;
  const double dense_pairs = double(n) * window;
  const attnpool::PoolSpec spec = kSdpaSpec;
  attnpool::Mask<float> mask;
  mask.causal = true;
  mask.window_left = window - 1;
  const Timing ours = Time([&] {
    attnpool::attention_pool(spec, {q.data(), n, d}, {k.data(), n, d},
                             {v.data(), n, d}, {out.data(), n, d}, mask,
                             {threads});
  });
  char note[128];
  std::snprintf(note, sizeof note, "%s, %zux%zux%zu, window %zu: %.0f pairs",
                attnpool::last_run_target().c_str(), n, n, d, window, pairs);
  Report("W6", "attnpool_sliding_window", threads, "GFLOP/s",
         4.0 * pairs * d / 1e9, ours, note);
  const Timing dense = Time([&] {
    attnpool::attention_pool(spec, {q.data(), n, d}, {k.data(), window, d},
                             {v.data(), window, d}, {out.data(), n, d}, {},
                             {threads});
  });
  std::snprintf(note, sizeof note,
                "%zu queries over %zu keys, no mask; window time / this "
                "time: %.3f (goal <= 1.1)",
                n, window, ours.median() / dense.median());
  Report("W6", "attnpool_dense_n_x_512", threads, "GFLOP/s",
         4.0 * dense_pairs * d / 1e9, dense, note);
}

// ---------------------------------------- W7: score adjustments on W2

// W2's attention with Gemma 2's logit soft-cap (50; and, for information,
// 1, which most logits reach), then with ALiBi (slope 2^-4, the 4th of 16
// heads' standard slopes), each against the same call without it, in the
// same process.
void W7(int threads) {
  const size_t n = 4096, m = 4096, d = 64;
  const auto q = Normal(n * d, 1, 15), k = Normal(m * d, 1, 16),
             v = Normal(m * d, 1, 17);
  std::vector<float> out(n * d);
  const double gflop = 4.0 * n * m * d / 1e9;
  const auto run = [&](const attnpool::Mask<float>& mask) {
    return Time([&] {
      attnpool::attention_pool(kSdpaSpec, {q.data(), n, d}, {k.data(), m, d},
                               {v.data(), m, d}, {out.data(), n, d}, mask,
                               {threads});
    });
  };
  attnpool::Mask<float> softcap, alibi;
  softcap.softcap = 50.0f;
  alibi.alibi_slope = 0.0625f;
  const Timing plain = run({});
  const std::string target = attnpool::last_run_target();
  Report("W7c", "attnpool_softcap_50", threads, "GFLOP/s", gflop, run(softcap),
         target);
  Report("W7c", "attnpool_uncapped", threads, "GFLOP/s", gflop, plain, target);
  // A cap within the logits' spread: tanh's full path for most vectors.
  softcap.softcap = 1.0f;
  Report("W7c", "attnpool_softcap_1", threads, "GFLOP/s", gflop, run(softcap),
         "a cap inside the logits' spread");
  Report("W7a", "attnpool_alibi", threads, "GFLOP/s", gflop, run(alibi),
         target);
  Report("W7a", "attnpool_no_alibi", threads, "GFLOP/s", gflop, plain, target);
}

// ------------------------------------- W8: variable-length batches

// 64 sequences of n = m drawn from 1 to 2048 (seed 18), packed (Σn, 1, 64),
// against W2's one 4096² sequence, in GFLOP/s of Σ 4·n·m·d.
void W8(int threads) {
  const size_t count = 64, d = 64;
  std::mt19937 rng(18);
  std::uniform_int_distribution<size_t> length(1, 2048);
  std::vector<size_t> offsets = {0};
  double work = 0;
  for (size_t b = 0; b < count; ++b) {
    const size_t n = length(rng);
    offsets.push_back(offsets.back() + n);
    work += 4.0 * n * n * d;
  }
  const size_t total = offsets.back();
  const auto q = Normal(total * d, 1, 19), k = Normal(total * d, 1, 20),
             v = Normal(total * d, 1, 21);
  std::vector<float> out(total * d);
  const attnpool::PackedSequences sequences{count, offsets.data(),
                                            offsets.data()};
  const Timing varlen = Time([&] {
    attnpool::scaled_dot_product_attention_varlen(
        attnpool::dense_tensor<const float>(q.data(), 1, 1, total, d),
        attnpool::dense_tensor<const float>(k.data(), 1, 1, total, d),
        attnpool::dense_tensor<const float>(v.data(), 1, 1, total, d),
        attnpool::dense_tensor(out.data(), 1, 1, total, d), sequences, {}, {},
        attnpool::EmptyRows::nan, {threads});
  });
  char note[64];
  std::snprintf(note, sizeof note, "%s, %zu queries in all",
                attnpool::last_run_target().c_str(), total);
  Report("W8", "attnpool_varlen_64_sequences", threads, "GFLOP/s", work / 1e9,
         varlen, note);
  const size_t n = 4096;
  const Timing dense = Time([&] {
    attnpool::attention_pool(kSdpaSpec, {q.data(), n, d}, {k.data(), n, d},
                             {v.data(), n, d}, {out.data(), n, d}, {},
                             {threads});
  });
  Report("W8", "attnpool_one_4096x4096", threads, "GFLOP/s",
         4.0 * n * n * d / 1e9, dense, "W2's shape");
}

// ------------------------------------------- W9: paged decode

// `values` copied to memory the kernel is asked to back with 2 MiB pages
// (madvise; where it may not, 4 KiB pages), as an inference engine
// allocates its KV cache: scattered 4 KiB blocks then cost no TLB walk.
template <typename E = float>
struct PageBuffer {
  std::unique_ptr<E, decltype(&std::free)> data{nullptr, &std::free};
  template <class Values>
  PageBuffer(const Values& values, bool huge) {
    const size_t align = size_t{2} << 20;
    const size_t bytes =
        (values.size() * sizeof(E) + align - 1) / align * align;
    data.reset(static_cast<E*>(std::aligned_alloc(align, bytes)));
    if (huge) madvise(data.get(), bytes, MADV_HUGEPAGE);
    std::copy(values.begin(), values.end(), data.get());
  }
};

// Batched decode of 8 sequences (one query each, 32768 keys, d = dv = 64)
// whose keys and values lie in blocks of 16 rows scattered through a pool
// (a random block table, seed 22), against the same rows contiguous
// (scaled_dot_product_attention_varlen), in keys per second; both on 2 MiB
// pages, and (for information) the paged pool on 4 KiB pages; then the same
// cache in bfloat16 (W9n), paged against contiguous.
void W9(int threads) {
  const size_t count = 8, m = 32768, d = 64, block_size = 16;
  const size_t blocks = count * m / block_size;
  const auto keys = Normal(count * m * d, 1, 23),
             values = Normal(count * m * d, 1, 24),
             queries = Normal(count * d, 1, 25);
  std::vector<int32_t> table(blocks);
  for (size_t p = 0; p < blocks; ++p) table[p] = static_cast<int32_t>(p);
  std::shuffle(table.begin(), table.end(), std::mt19937(22));
  // The pool: block table[p] holds rows [16p, 16p + 16) of the sequences'
  // concatenated rows (sequence b's blocks are table[b·2048, ...)).
  std::vector<float> key_pool(keys.size()), value_pool(values.size());
  for (size_t p = 0; p < blocks; ++p) {
    const size_t from = p * block_size * d, to = table[p] * block_size * d;
    std::copy_n(keys.begin() + from, block_size * d, key_pool.begin() + to);
    std::copy_n(values.begin() + from, block_size * d, value_pool.begin() + to);
  }
  std::vector<size_t> query_offsets(count + 1), key_offsets(count + 1),
      lengths(count, m);
  for (size_t b = 0; b <= count; ++b) {
    query_offsets[b] = b;
    key_offsets[b] = b * m;
  }
  std::vector<float> out(count * d);
  const auto q =
      attnpool::dense_tensor<const float>(queries.data(), 1, 1, count, d);
  const auto o = attnpool::dense_tensor(out.data(), 1, 1, count, d);
  const double work = double(count * m) / 1e9;
  // The memory system's own rate for these blocks: the pool's keys and
  // values read together, row by row in block-table order (on `threads`
  // threads, a sequence each at a time), by a plain loop
  // that prefetches, beside each row's loads, the key and value rows
  // `ahead` rows further on (in keys/s), into the first-level cache or the
  // second; the fastest median of four distances and the two levels (a
  // slightly optimistic rate). On Zen 5 the best into L1 is 12 rows
  // (3.95 ms; 4.8, 4.3, 4.3 and 4.9 ms for 8, 16, 24 and 64 rows; 6.4 ms
  // for a loop that prefetches the next whole block before reading one,
  // this row until 2026-11-27). On Zen 4 the loop reads 1.3-1.5x faster
  // prefetching into L2 (0.44 of the contiguous rate into L1, 0.60-0.67
  // into L2, a standalone loop, one thread).
  {
    const PageBuffer<> key_pages(key_pool, true), value_pages(value_pool, true);
    const float* key_base = key_pages.data.get();
    const float* value_base = value_pages.data.get();
    // Row r of the sequences' concatenated rows, in the pool.
    const auto pool_row = [&](const float* base, size_t r) {
      return base +
             (size_t(table[r / block_size]) * block_size + r % block_size) * d;
    };
    // A line into L2 (x86 prefetcht1, Arm PLDL2KEEP) or L1.
    const auto prefetch = [](const char* line, bool l2) {
      if (l2) {
        __builtin_prefetch(line, 0, 2);
      } else {
        __builtin_prefetch(line);
      }
    };
    Timing best;
    size_t best_ahead = 0;
    bool best_l2 = false;
    for (const bool l2 : {false, true})
      for (const size_t ahead : {8, 12, 16, 24}) {
        const Timing scattered = Time([&] {
          float total = 0;
          // Each thread its sequences, as the decode splits them.
#pragma omp parallel for num_threads(threads) reduction(+ : total)
          for (size_t b = 0; b < count; ++b) {
            float sums[16] = {};
            for (size_t r = b * m; r < (b + 1) * m; ++r) {
              if (r + ahead < (b + 1) * m) {
                const char* key_ahead = reinterpret_cast<const char*>(
                    pool_row(key_base, r + ahead));
                const char* value_ahead = reinterpret_cast<const char*>(
                    pool_row(value_base, r + ahead));
                for (size_t byte = 0; byte < d * sizeof(float); byte += 64) {
                  prefetch(key_ahead + byte, l2);
                  prefetch(value_ahead + byte, l2);
                }
              }
              const float* key_row = pool_row(key_base, r);
              const float* value_row = pool_row(value_base, r);
              for (size_t i = 0; i < d; i += 16) {
                for (size_t l = 0; l < 16; ++l) {
                  sums[l] += key_row[i + l] + value_row[i + l];
                }
              }
            }
            for (float sum : sums) total += sum;
          }
          if (total == 42) std::printf("\n");
        });
        if (best.seconds.empty() || scattered.median() < best.median()) {
          best = scattered;
          best_ahead = ahead;
          best_l2 = l2;
        }
      }
    char note[120];
    std::snprintf(note, sizeof note,
                  "the pool read row by row, %zu rows ahead prefetched into "
                  "L%d: the memory's rate",
                  best_ahead, best_l2 ? 2 : 1);
    Report("W9", "read_scattered_blocks", threads, "Gkeys/s", work, best, note);
    // The same rows in a decode's two passes over each block of 512 keys
    // (its softmax needs the block's scores before any value): the keys,
    // each key's row 12 rows ahead and its value prefetched; then the
    // values, each prefetching the next block's key and value (the best
    // such loop found on Zen 5: 1.15-1.25x the time of the one-pass loop),
    // all into L2, as the paged decode prefetches.
    const size_t block_keys = 512;
    const Timing two_pass = Time([&] {
      float total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total)
      for (size_t b = 0; b < count; ++b) {
        float sums[16] = {};
        const size_t end = (b + 1) * m;
        const auto add_row = [&](const float* row) {
          for (size_t i = 0; i < d; i += 16) {
            for (size_t l = 0; l < 16; ++l) sums[l] += row[i + l];
          }
        };
        const auto prefetch_row = [&](const float* row) {
          const char* bytes = reinterpret_cast<const char*>(row);
          for (size_t byte = 0; byte < d * sizeof(float); byte += 64) {
            prefetch(bytes + byte, true);
          }
        };
        for (size_t at = b * m; at < end; at += block_keys) {
          const size_t block_end = std::min(end, at + block_keys);
          for (size_t r = at; r < block_end; ++r) {
            if (r + 12 < end) prefetch_row(pool_row(key_base, r + 12));
            prefetch_row(pool_row(value_base, r));
            add_row(pool_row(key_base, r));
          }
          for (size_t r = at; r < block_end; ++r) {
            const size_t next = r + block_keys;
            if (next + 12 < end) prefetch_row(pool_row(key_base, next + 12));
            if (next < end) prefetch_row(pool_row(value_base, next));
            add_row(pool_row(value_base, r));
          }
        }
        for (float sum : sums) total += sum;
      }
      if (total == 42) std::printf("\n");
    });
    Report("W9", "read_scattered_two_passes", threads, "Gkeys/s", work,
           two_pass, "the pool read in a decode's two passes per block");
  }
  for (bool huge : {true, false}) {
    const PageBuffer<> key_pages(key_pool, huge), value_pages(value_pool, huge);
    attnpool::PagedKVCache<float> cache;
    cache.keys = attnpool::dense_tensor<const float>(key_pages.data.get(),
                                                     blocks, 1, block_size, d);
    cache.values = attnpool::dense_tensor<const float>(
        value_pages.data.get(), blocks, 1, block_size, d);
    cache.block_table = table.data();
    cache.block_table_stride = m / block_size;
    cache.lengths = lengths.data();
    const Timing paged = Time([&] {
      attnpool::scaled_dot_product_attention_paged(
          q, cache, o, count, query_offsets.data(), {}, {},
          attnpool::EmptyRows::nan, {threads});
    });
    Report("W9", huge ? "attnpool_paged_decode" : "attnpool_paged_4k_pages",
           threads, "Gkeys/s", work, paged,
           attnpool::last_run_target() + ", blocks of 16 scattered");
  }
  const PageBuffer<> key_rows(keys, true), value_rows(values, true);
  const Timing contiguous = Time([&] {
    attnpool::scaled_dot_product_attention_varlen(
        q,
        attnpool::dense_tensor<const float>(key_rows.data.get(), 1, 1,
                                            count * m, d),
        attnpool::dense_tensor<const float>(value_rows.data.get(), 1, 1,
                                            count * m, d),
        o, {count, query_offsets.data(), key_offsets.data()}, {}, {},
        attnpool::EmptyRows::nan, {threads});
  });
  Report("W9", "attnpool_contiguous_decode", threads, "Gkeys/s", work,
         contiguous, "the same rows in order");
  // The same rows through a block table that lists the blocks in order:
  // the cost of paging itself.
  std::vector<int32_t> in_order(blocks);
  for (size_t p = 0; p < blocks; ++p) in_order[p] = static_cast<int32_t>(p);
  attnpool::PagedKVCache<float> cache;
  cache.keys = attnpool::dense_tensor<const float>(key_rows.data.get(), blocks,
                                                   1, block_size, d);
  cache.values = attnpool::dense_tensor<const float>(value_rows.data.get(),
                                                     blocks, 1, block_size, d);
  cache.block_table = in_order.data();
  cache.block_table_stride = m / block_size;
  cache.lengths = lengths.data();
  const Timing ordered = Time([&] {
    attnpool::scaled_dot_product_attention_paged(
        q, cache, o, count, query_offsets.data(), {}, {},
        attnpool::EmptyRows::nan, {threads});
  });
  Report("W9", "attnpool_paged_in_order", threads, "Gkeys/s", work, ordered,
         "blocks listed in memory order");

  // W9n: the cache in bfloat16, read in place and widened in registers.
  const auto to_bf16 = [](const auto& from) {
    std::vector<attnpool::bf16> bits(from.size());
    attnpool::to_bfloat16(from.data(), from.size(), bits.data());
    return bits;
  };
  const PageBuffer<attnpool::bf16> key_pool16(to_bf16(key_pool), true),
      value_pool16(to_bf16(value_pool), true), key_rows16(to_bf16(keys), true),
      value_rows16(to_bf16(values), true);
  attnpool::PagedElementCache narrow_cache;
  narrow_cache.keys = attnpool::dense_tensor<const attnpool::bf16>(
      key_pool16.data.get(), blocks, 1, block_size, d);
  narrow_cache.values = attnpool::dense_tensor<const attnpool::bf16>(
      value_pool16.data.get(), blocks, 1, block_size, d);
  narrow_cache.block_table = table.data();
  narrow_cache.block_table_stride = m / block_size;
  narrow_cache.lengths = lengths.data();
  const Timing paged16 = Time([&] {
    attnpool::scaled_dot_product_attention_paged(
        q, narrow_cache, o, count, query_offsets.data(), {}, {},
        attnpool::EmptyRows::nan, {threads});
  });
  Report("W9n", "attnpool_paged_decode_bfloat16", threads, "Gkeys/s", work,
         paged16, attnpool::last_run_target() + ", blocks of 16 scattered");
  const Timing contiguous16 = Time([&] {
    attnpool::scaled_dot_product_attention_varlen(
        q,
        attnpool::dense_tensor<const attnpool::bf16>(key_rows16.data.get(), 1,
                                                     1, count * m, d),
        attnpool::dense_tensor<const attnpool::bf16>(value_rows16.data.get(), 1,
                                                     1, count * m, d),
        o, {count, query_offsets.data(), key_offsets.data()}, {}, {},
        attnpool::EmptyRows::nan, {threads});
  });
  Report("W9n", "attnpool_contiguous_decode_bfloat16", threads, "Gkeys/s", work,
         contiguous16, "the same bfloat16 rows in order");
}

// ------------------------------------------------------------- summary

void Summary(const std::vector<int>& thread_counts) {
  struct Line {
    const char* group;
    const char* ours;
    std::vector<const char*> baselines;
    const char* limit;              // probe this workload is bound by
    double limit_per_unit;          // limit units per workload unit
    const char* limit_group = "P";  // where the probe's row is
  };
  const Line lines[] = {
      {"W1",
       "attnpool_nadaraya_watson_20000x20000",
       {"naive_loop"},
       "exp_rate",
       1.0},
      {"W2",
       "attnpool_fused_sdpa_4096x4096x64",
       {"onednn_unfused_sdpa", "openblas_unfused_sdpa", "naive_loop"},
       "fma_peak",
       1.0},
      {"W3",
       "attnpool_sqeuclidean_4096x4096x128",
       {"openblas_norms_plus_sgemm"},
       "fma_peak",
       2.0 * 128},
      {"W4",
       "attnpool_sdpa_8x1024x64",
       {"openblas_unfused_per_head"},
       "fma_peak",
       1.0},
      {"W5",
       "attnpool_decode_8x65536x64",
       {"openblas_decode"},
       "read_same_bytes",
       1.0,
       "W5"},
      {"W5m", "attnpool_decode_valid_m/8", {}, "read_same_bytes", 1.0, "W5"},
      {"W5g",
       "attnpool_decode_32_heads_over_8",
       {"attnpool_decode_a_call_per_head"},
       "read_same_bytes",
       1.0,
       "W5"},
      {"W2n",
       "attnpool_sdpa_bfloat16",
       {"attnpool_sdpa_float"},
       "fma_peak",
       1.0},
      {"W2n",
       "attnpool_sdpa_bfloat16_qkv",
       {"attnpool_sdpa_float"},
       "fma_peak",
       1.0},
      {"W2n",
       "attnpool_sdpa_bfloat16_qkv",
       {"attnpool_sdpa_bfloat16_qkv_AVX512_BF16"},
       "fma_peak",
       1.0},
      {"W2n",
       "attnpool_sdpa_bfloat16_qkv",
       {"onednn_unfused_sdpa_bf16"},
       "fma_peak",
       1.0},
      {"W2n",
       "attnpool_sdpa_float16",
       {"attnpool_sdpa_float"},
       "fma_peak",
       1.0},
      {"W2n", "attnpool_sdpa_int8", {"attnpool_sdpa_float"}, "fma_peak", 1.0},
      {"W5n",
       "attnpool_decode_bfloat16",
       {"attnpool_decode_float"},
       "read_same_bytes_bfloat16",
       2.0 * 64 * 2,
       "W5n"},
      {"W5n",
       "attnpool_decode_float16",
       {"attnpool_decode_float"},
       "read_same_bytes_float16",
       2.0 * 64 * 2,
       "W5n"},
      {"W5n",
       "attnpool_decode_int8",
       {"attnpool_decode_float"},
       "read_same_bytes_int8",
       2.0 * (64 + 4),
       "W5n"},
      {"W6",
       "attnpool_sliding_window",
       {"attnpool_dense_n_x_512"},
       "fma_peak",
       1.0},
      {"W7c", "attnpool_softcap_50", {"attnpool_uncapped"}, "fma_peak", 1.0},
      {"W7a", "attnpool_alibi", {"attnpool_no_alibi"}, "fma_peak", 1.0},
      {"W8",
       "attnpool_varlen_64_sequences",
       {"attnpool_one_4096x4096"},
       "fma_peak",
       1.0},
      {"W9",
       "attnpool_paged_decode",
       {"attnpool_contiguous_decode"},
       "read_scattered_blocks",
       1.0,
       "W9"},
  };
  std::printf(
      "\n| workload | threads | attnpool | best baseline | attnpool ÷ it | "
      "fraction of limit | 2 threads ÷ 1 |\n|---|---|---|---|---|---|---|\n");
  for (const Line& line : lines) {
    for (int threads : thread_counts) {
      const Row* ours = Find(line.group, line.ours, threads);
      if (!ours) continue;
      const Row* best = nullptr;
      for (const char* name : line.baselines) {
        const Row* row = Find(line.group, name, threads);
        if (row && (!best || row->value > best->value)) best = row;
      }
      const Row* limit = Find(line.limit_group, line.limit, threads);
      const Row* one = Find(line.group, line.ours, 1);
      char best_text[96] = "-", ratio[32] = "-", fraction[96] = "-",
           scaling[32] = "-";
      if (best) {
        std::snprintf(best_text, sizeof best_text, "%s %.3g",
                      best->name.c_str(), best->value);
        std::snprintf(ratio, sizeof ratio, "%.2f", ours->value / best->value);
      }
      if (limit) {
        std::snprintf(
            fraction, sizeof fraction, "%.2f of %s",
            ours->value * line.limit_per_unit / (limit->value * ours->ceiling),
            ours->ceiling_name.empty() ? line.limit
                                       : ours->ceiling_name.c_str());
      }
      if (one && threads != 1) {
        std::snprintf(scaling, sizeof scaling, "%.2f",
                      ours->value / one->value);
      }
      std::printf("| %s | %d | %.3g %s | %s | %s | %s | %s |\n", line.group,
                  threads, ours->value, ours->unit.c_str(), best_text, ratio,
                  fraction, scaling);
    }
  }
  // W6's goal is a time ratio; its rates above count each side's own pairs.
  for (int threads : thread_counts) {
    const Row* window = Find("W6", "attnpool_sliding_window", threads);
    const Row* dense = Find("W6", "attnpool_dense_n_x_512", threads);
    if (window && dense) {
      std::printf(
          "W6, %d thread(s): sliding window time / dense time over n x 512 "
          "pairs = %.3f (goal <= 1.1)\n",
          threads, window->seconds / dense->seconds);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool memory = true;
  std::string only;
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--quick")) {
      g_quick = true;
      g_reps = 1;
    } else if (!std::strcmp(argv[a], "--no-memory")) {
      memory = false;
    } else if (!std::strcmp(argv[a], "--only") && a + 1 < argc) {
      only = argv[++a];  // workloads, comma-separated: P,W2,W7
      memory = false;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--no-memory] [--only P,W1,...]\n",
                   argv[0]);
      return 2;
    }
  }
  if (const char* reps = std::getenv("REPS"))
    g_reps = std::max(1, std::atoi(reps));
  std::vector<int> thread_counts = {1, 2};
  if (const char* list = std::getenv("ATTNPOOL_BENCH_THREADS")) {
    thread_counts.clear();
    for (const char* p = list; *p;) {
      thread_counts.push_back(std::max(1, std::atoi(p)));
      while (*p && *p != ',') ++p;
      if (*p == ',') ++p;
    }
  }
  std::printf("# attnpool bench/compare: %d repetitions, threads", g_reps);
  for (int t : thread_counts) std::printf(" %d", t);
  std::printf("; target %s, tuning %s (%s)\n",
              attnpool::active_target().c_str(), attnpool::tuning().c_str(),
              attnpool::tuning_parameters().c_str());
  // First, while the process's peak resident set is still its inputs'.
  if (memory && !g_quick) M1(thread_counts.back());
  const std::pair<const char*, void (*)(int)> workloads[] = {
      {"P", Probes}, {"W1", W1}, {"W2", W2}, {"W2n", W2n},
      {"W3", W3},    {"W4", W4}, {"W5", W5}, {"W5n", W5n},
      {"W6", W6},    {"W7", W7}, {"W8", W8}, {"W9", W9}};
  for (int threads : thread_counts) {
    for (const auto& [name, run] : workloads) {
      if (only.empty() ||
          ("," + only + ",").find(std::string(",") + name + ",") !=
              std::string::npos) {
        run(threads);
      }
    }
  }
  Summary(thread_counts);
  if (!g_check_failures.empty()) {
    std::fprintf(stderr,
                 "compare: FAILED: attnpool's output differs from a "
                 "baseline's beyond the tolerance:\n");
    for (const std::string& failure : g_check_failures) {
      std::fprintf(stderr, "  %s\n", failure.c_str());
    }
    return 1;
  }
  return 0;
}
