// bench/compare: the workloads of docs/benchmarks.md through
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
//
// This file: the probes, W1, W3, M1, the summary and main; the others in
// compare_workloads.h.
#include <attnpool/attnpool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_data.h"
#include "bench/compare_measure.h"
#include "bench/compare_probes.h"
#include "bench/compare_workloads.h"
#include "bench/unfused_attention.h"
#include "hwy/aligned_allocator.h"
#include "src/math.h"

#if ATTNPOOL_BENCH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif
#include <omp.h>

namespace attnpool_compare {

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
      {"W5n",
       "attnpool_decode_float8_e4m3fn",
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
      "\n| workload | variant | threads | attnpool | best baseline | "
      "attnpool ÷ it | fraction of limit | 2 threads ÷ 1 |\n"
      "|---|---|---|---|---|---|---|---|\n");
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
      // The variant: attnpool's row, its element type for W2n and W5n.
      const std::string variant =
          std::string(line.ours).substr(std::strlen("attnpool_"));
      std::printf("| %s | %s | %d | %.3g %s | %s | %s | %s | %s |\n",
                  line.group, variant.c_str(), threads, ours->value,
                  ours->unit.c_str(), best_text, ratio, fraction, scaling);
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

}  // namespace attnpool_compare

int main(int argc, char** argv) {
  using namespace attnpool_compare;  // NOLINT(build/namespaces)
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
