// bench/tuning_sweep: tuning profiles (targets.h force_tuning: a profile's
// name, with any of its parameters after it) alternating call by call on one
// workload of docs/benchmarks.md, so that each meets the same machine
// state; prints each one's median rate and its median time ÷ the first
// profile's. For choosing a machine's profile (src/tuning.cc) without
// rebuilding.
//
//   tuning_sweep W2|W4|W5|W5n [--threads T] [--reps R] PROFILE...
//
//   W2   4096 queries × 4096 keys, d = 64, softmax (the tile path)
//   W4   8 heads × 1024² × 64 (the tile path, a call per head)
//   W5   decode: 8 heads × 65536 float keys × 64 (the decode path)
//   W5n  W5 over bfloat16 keys and values
//
// e.g. tuning_sweep W5 --threads 2 zen4 "zen4 decode_interleave=0" generic
#include <attnpool/attnpool.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_data.h"

namespace {

using attnpool_bench::AlignedFloats;
using attnpool_bench::Normal;

const attnpool::PoolSpec kSdpa{attnpool::Distance::dot,
                               {attnpool::Kernel::exp},
                               attnpool::Normalization::softmax};

struct Workload {
  std::function<void()> run;
  double work;  // in `unit`s per call
  const char* unit;
};

// The workload's call, which holds its inputs and outputs.
Workload Make(const std::string& name, int threads) {
  const size_t d = 64;
  const attnpool::Execution execution{threads};
  if (name == "W2") {
    const size_t n = 4096;
    auto data = std::make_shared<std::vector<AlignedFloats>>();
    for (unsigned seed = 1; seed <= 4; ++seed) {
      data->push_back(Normal(n * d, 1, seed));
    }
    return {[=] {
              auto& a = *data;
              attnpool::attention_pool(kSdpa, {a[0].data(), n, d},
                                       {a[1].data(), n, d}, {a[2].data(), n, d},
                                       {a[3].data(), n, d}, {}, execution);
            },
            4.0 * n * n * d / 1e9, "GFLOP/s"};
  }
  if (name == "W4" || name == "W5" || name == "W5n") {
    const bool decode = name != "W4";
    const size_t heads = 8, n = decode ? 1 : 1024, m = decode ? 65536 : 1024;
    auto q = std::make_shared<AlignedFloats>(Normal(heads * n * d, 1, 1));
    auto k = std::make_shared<AlignedFloats>(Normal(heads * m * d, 1, 2));
    auto v = std::make_shared<AlignedFloats>(Normal(heads * m * d, 1, 3));
    auto out = std::make_shared<AlignedFloats>(heads * n * d);
    const auto tensor = [=](const float* data, size_t rows) {
      return attnpool::dense_tensor<const float>(data, 1, heads, rows, d);
    };
    const auto outputs = [=] {
      return attnpool::dense_tensor(out->data(), 1, heads, n, d);
    };
    if (name == "W5n") {
      using Bf16s =
          std::vector<attnpool::bf16,
                      attnpool_bench::CacheLineAllocator<attnpool::bf16>>;
      auto kb = std::make_shared<Bf16s>(k->size());
      auto vb = std::make_shared<Bf16s>(v->size());
      attnpool::to_bfloat16(k->data(), k->size(), kb->data());
      attnpool::to_bfloat16(v->data(), v->size(), vb->data());
      const auto narrow = [=](const attnpool::bf16* data) {
        return attnpool::dense_tensor<const attnpool::bf16>(data, 1, heads, m,
                                                            d);
      };
      return {[=] {
                attnpool::scaled_dot_product_attention(
                    tensor(q->data(), n), narrow(kb->data()),
                    narrow(vb->data()), outputs(), {}, {},
                    attnpool::EmptyRows::nan, execution);
              },
              2.0 * heads * m * d * sizeof(attnpool::bf16) / 1e9, "GB/s"};
    }
    return {[=] {
              attnpool::scaled_dot_product_attention(
                  tensor(q->data(), n), tensor(k->data(), m),
                  tensor(v->data(), m), outputs(), {}, {},
                  attnpool::EmptyRows::nan, execution);
            },
            decode ? 2.0 * heads * m * d * sizeof(float) / 1e9
                   : heads * 4.0 * n * m * d / 1e9,
            decode ? "GB/s" : "GFLOP/s"};
  }
  return {nullptr, 0, nullptr};
}

int Usage() {
  std::fprintf(stderr,
               "usage: tuning_sweep W2|W4|W5|W5n [--threads T] [--reps R] "
               "PROFILE...\n(PROFILE: a name of attnpool::tunings(), with "
               "any parameters after it: \"generic query_rows=192\")\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string workload_name = argv[1];
  int threads = 1, reps = 11;
  std::vector<std::string> profiles;
  for (int i = 2; i < argc; ++i) {
    const std::string argument = argv[i];
    if ((argument == "--threads" || argument == "--reps") && i + 1 < argc) {
      (argument == "--threads" ? threads : reps) = std::atoi(argv[++i]);
    } else {
      profiles.push_back(argument);
    }
  }
  if (profiles.empty() || threads < 1 || reps < 1) return Usage();
  const Workload workload = Make(workload_name, threads);
  if (!workload.run) return Usage();
  try {
    for (const std::string& profile : profiles) {  // refused names first
      attnpool::force_tuning(profile);
    }
    std::printf("# tuning_sweep %s, %d thread(s), %d repetitions, target %s\n",
                workload_name.c_str(), threads, reps,
                attnpool::active_target().c_str());
    std::vector<std::vector<double>> seconds(profiles.size());
    for (int rep = -1; rep < reps; ++rep) {  // -1: warm-up
      for (size_t p = 0; p < profiles.size(); ++p) {
        attnpool::force_tuning(profiles[p]);
        const auto start = std::chrono::steady_clock::now();
        workload.run();
        const std::chrono::duration<double> elapsed =
            std::chrono::steady_clock::now() - start;
        if (rep >= 0) seconds[p].push_back(elapsed.count());
      }
    }
    double first = 0;
    for (size_t p = 0; p < profiles.size(); ++p) {
      attnpool::force_tuning(profiles[p]);
      std::vector<double>& t = seconds[p];
      std::sort(t.begin(), t.end());
      const size_t half = t.size() / 2;
      const double median =
          t.size() % 2 ? t[half] : 0.5 * (t[half - 1] + t[half]);
      if (p == 0) first = median;
      std::printf(
          "%-48s %8.2f %s (quartiles %.2f-%.2f)  time / first %.3f\n  %s\n",
          profiles[p].c_str(), workload.work / median, workload.unit,
          workload.work / t[t.size() * 3 / 4], workload.work / t[t.size() / 4],
          median / first, attnpool::tuning_parameters().c_str());
    }
  } catch (const attnpool::Error& error) {
    std::fprintf(stderr, "tuning_sweep: %s\n", error.what());
    return 1;
  }
  return 0;
}
