// bench/compare's decode workloads: W5 (one query per head over a long
// cache, against OpenBLAS sgemv and the plain read), W5n (narrow caches),
// W9 (paged caches).
#include <attnpool/attnpool.h>
#include <sys/mman.h>

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

// ----------------------------------------- W5n: decode, narrow K/V caches

// W5's decode with the cache in bfloat16, binary16, int8 and float8 E4M3FN
// (one scale per row), beside the float cache, in keys per second: the
// ratio to the float row is the speed-up (the goal: bf16 and f16 ≥ 1/0.55,
// int8 and float8 ≥ 1/0.35; float8's limit is int8's read, the same bytes).
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
  // E4M3FN rows as vLLM keeps an fp8 cache: scale max|row| / 448, each
  // element the nearest pattern (its values, increasing with the bits to
  // 0x7E, read back through widen_rows).
  std::vector<float> e4m3(0x7F);
  {
    std::vector<attnpool::fp8_e4m3fn> patterns(e4m3.size());
    for (size_t b = 0; b < patterns.size(); ++b) patterns[b].bits = uint8_t(b);
    const float one = 1.0f;
    attnpool::widen_rows(
        attnpool::ScaledRows<attnpool::fp8_e4m3fn>{
            {patterns.data(), 1, e4m3.size()}, &one, 0},
        {e4m3.data(), 1, e4m3.size()});
  }
  const auto to_e4m3 = [&](const auto& x,
                           std::vector<attnpool::fp8_e4m3fn>& out,
                           std::vector<float>& scales) {
    out.resize(x.size());
    scales.resize(rows);
    for (size_t r = 0; r < rows; ++r) {
      float largest = 0;
      for (size_t c = 0; c < d; ++c) {
        largest = std::max(largest, std::fabs(x[r * d + c]));
      }
      scales[r] = largest > 0 ? largest / 448 : 1;
      for (size_t c = 0; c < d; ++c) {
        const float ratio = std::fabs(x[r * d + c]) / scales[r];
        const size_t above = std::min<size_t>(
            std::lower_bound(e4m3.begin(), e4m3.end(), ratio) - e4m3.begin(),
            e4m3.size() - 1);
        const size_t nearest =
            above > 0 && ratio - e4m3[above - 1] < e4m3[above] - ratio
                ? above - 1
                : above;
        out[r * d + c].bits =
            uint8_t(nearest | (std::signbit(x[r * d + c]) ? 0x80 : 0));
      }
    }
  };
  std::vector<attnpool::fp8_e4m3fn> k_fp8, v_fp8;
  std::vector<float> k_fp8_scales, v_fp8_scales;
  to_e4m3(k, k_fp8, k_fp8_scales);
  to_e4m3(v, v_fp8, v_fp8_scales);
  const auto fp8 = [&](const std::vector<attnpool::fp8_e4m3fn>& data,
                       const std::vector<float>& scales) {
    return attnpool::ScaledTensor<attnpool::fp8_e4m3fn>{
        attnpool::dense_tensor<const attnpool::fp8_e4m3fn>(data.data(), 1,
                                                           heads, m, d),
        attnpool::dense_tensor<const float>(scales.data(), 1, heads, m, 1)};
  };
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
      {"attnpool_decode_float8_e4m3fn", fp8(k_fp8, k_fp8_scales),
       fp8(v_fp8, v_fp8_scales)},
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

}  // namespace attnpool_compare
