// bench/compare's attention workloads: W2 and W4 (SDPA against OpenBLAS
// and oneDNN matmul + softmax + matmul), W2n (narrow keys and values), W6
// (sliding window), W7 (score adjustments), W8 (variable-length batches).
#include <attnpool/attnpool.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
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

#if ATTNPOOL_BENCH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif
#include <omp.h>

namespace attnpool_compare {

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

}  // namespace attnpool_compare
