// attention_pool and its shards over keys and values stored as bfloat16,
// binary16, int8 and float8 (element.h), on every target and every fused
// path:
// bitwise the float call on the values the narrow elements hold (widening
// is exact; int8's scale is applied as dequantize_rows does), but on the
// decode path with int8 rows, whose scales fold into their dots and
// weights (element.h): there within a rounding of each score. Narrow
// padding holds NaN patterns (or junk): it must never be read.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/each_target.h"
#include "tests/float8_rows.h"
#include "tests/require_rejected.h"
#include "tests/test_data.h"

namespace attnpool_test {
namespace {

using attnpool::ElementRows;
using attnpool::ElementType;
using attnpool::Mask;
using attnpool::PoolSpec;

// Rows stored as `type` (stride cols + 3, the padding NaN or junk) and the
// float values they hold.
struct StoredRows {
  ElementType type;
  size_t rows, cols, stride;
  std::vector<uint16_t> half;
  std::vector<int8_t> bytes;
  std::vector<uint8_t> octets;  // float8 patterns
  std::vector<float> scales, floats;
  TestMatrix<float> held;

  StoredRows(ElementType type_, const TestMatrix<float>& source)
      : type(type_),
        rows(source.rows()),
        cols(source.cols()),
        stride(source.cols() + 3),
        held(source.rows(), source.cols(), 2) {
    switch (type) {
      case ElementType::float32:
        floats.assign(rows * stride, std::numeric_limits<float>::quiet_NaN());
        for (size_t r = 0; r < rows; ++r) {
          for (size_t c = 0; c < cols; ++c)
            floats[r * stride + c] = source(r, c);
        }
        break;
      case ElementType::bfloat16:
      case ElementType::float16:
        half.assign(rows * stride,
                    type == ElementType::bfloat16 ? 0x7FC1 : 0x7E01);
        for (size_t r = 0; r < rows; ++r) {
          const float* row = &source.view().data[r * source.view().stride];
          if (type == ElementType::bfloat16) {
            attnpool::to_bfloat16(
                row, cols,
                reinterpret_cast<attnpool::bf16*>(&half[r * stride]));
          } else {
            attnpool::to_float16(
                row, cols, reinterpret_cast<attnpool::f16*>(&half[r * stride]));
          }
        }
        break;
      case ElementType::int8:
        bytes.assign(rows * stride, 111);
        scales.assign(rows, 0.0f);
        attnpool::quantize_rows(
            source.view(), {bytes.data(), rows, cols, stride}, scales.data());
        break;
      case ElementType::float8_e4m3fn:
      case ElementType::float8_e5m2:
        octets.assign(rows * stride, 0x7F);  // NaN (E4M3FN), inf (E5M2)
        scales.assign(rows, 0.0f);
        for (size_t r = 0; r < rows; ++r) {
          scales[r] = StoreFloat8Row(
              type, &source.view().data[r * source.view().stride], cols,
              &octets[r * stride]);
        }
        break;
    }
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) held(r, c) = Element(r, c);
    }
  }

  float Element(size_t r, size_t c) const {
    switch (type) {
      case ElementType::float32:
        return floats[r * stride + c];
      case ElementType::bfloat16: {
        float value;
        attnpool::to_float(
            reinterpret_cast<const attnpool::bf16*>(&half[r * stride + c]), 1,
            &value);
        return value;
      }
      case ElementType::float16: {
        float value;
        attnpool::to_float(
            reinterpret_cast<const attnpool::f16*>(&half[r * stride + c]), 1,
            &value);
        return value;
      }
      case ElementType::int8:
        return scales[r] * float(bytes[r * stride + c]);
      case ElementType::float8_e4m3fn:
      case ElementType::float8_e5m2:
        return HeldFloat8(type, octets[r * stride + c], scales[r]);
    }
    return 0;
  }

  template <typename S>
  attnpool::ScaledRows<S> Float8Rows(size_t begin, size_t count) const {
    return {{reinterpret_cast<const S*>(octets.data()) + begin * stride, count,
             cols, stride},
            scales.data() + begin};
  }

  // Rows [begin, end) as ElementRows.
  ElementRows Rows(size_t begin = 0, size_t end = size_t(-1)) const {
    end = std::min(end, rows);
    const size_t count = end - begin;
    switch (type) {
      case ElementType::float32:
        return attnpool::ConstMatrixView<float>(floats.data() + begin * stride,
                                                count, cols, stride);
      case ElementType::bfloat16:
        return attnpool::ConstMatrixView<attnpool::bf16>(
            reinterpret_cast<const attnpool::bf16*>(half.data()) +
                begin * stride,
            count, cols, stride);
      case ElementType::float16:
        return attnpool::ConstMatrixView<attnpool::f16>(
            reinterpret_cast<const attnpool::f16*>(half.data()) +
                begin * stride,
            count, cols, stride);
      case ElementType::int8:
        return attnpool::Int8Rows{
            {bytes.data() + begin * stride, count, cols, stride},
            scales.data() + begin};
      case ElementType::float8_e4m3fn:
        return Float8Rows<attnpool::fp8_e4m3fn>(begin, count);
      case ElementType::float8_e5m2:
        return Float8Rows<attnpool::fp8_e5m2>(begin, count);
    }
    return {};
  }
};

struct Case {
  const char* path;
  size_t n, m, d, dv;
  PoolSpec spec;
  bool sorted_keys;
  bool causal;
};

const Case kCases[] = {
    // More queries than one block of narrow-value rows (src/fused.cc), whose
    // blocks are twice the float calls': rows grouped differently, the
    // same bits.
    {"tile",
     230,
     300,
     16,
     8,
     {attnpool::Distance::dot,
      {attnpool::Kernel::exp},
      attnpool::Normalization::softmax},
     false,
     true},
    {"tile",
     50,
     300,
     20,
     7,
     {attnpool::Distance::dot,
      {attnpool::Kernel::exp},
      attnpool::Normalization::softmax},
     false,
     true},
    {"tile",
     30,
     200,
     9,
     16,
     {attnpool::Distance::sqeuclidean,
      {attnpool::Kernel::gaussian, 2.0},
      attnpool::Normalization::sum},
     false,
     false},
    {"tile",
     20,
     100,
     5,
     3,
     {attnpool::Distance::dot,
      {attnpool::Kernel::exp},
      attnpool::Normalization::argmax},
     false,
     false},
    {"decode",
     2,
     9000,
     64,
     64,
     {attnpool::Distance::dot,
      {attnpool::Kernel::exp},
      attnpool::Normalization::softmax},
     false,
     false},
    {"decode",
     3,
     500,
     13,
     5,
     {attnpool::Distance::dot,
      {attnpool::Kernel::exp},
      attnpool::Normalization::softmax},
     false,
     true},
    // One query over several key blocks: under a tuning that interleaves
    // (core/tuning.h), each block's dots beside the last block's values.
    {"decode",
     1,
     2600,
     64,
     64,
     {attnpool::Distance::dot,
      {attnpool::Kernel::exp},
      attnpool::Normalization::softmax},
     false,
     false},
    {"decode",
     1,
     1300,
     40,
     24,
     {attnpool::Distance::dot,
      {attnpool::Kernel::exp},
      attnpool::Normalization::softmax},
     false,
     true},
    {"small_depth",
     20,
     300,
     3,
     2,
     {attnpool::Distance::euclidean,
      {attnpool::Kernel::triangular, 2.0},
      attnpool::Normalization::sum,
      attnpool::EmptyRows::zero},
     false,
     false},
    {"gaussian_one_pass",
     20,
     300,
     1,
     1,
     {attnpool::Distance::sqeuclidean,
      {attnpool::Kernel::gaussian, 0.5},
      attnpool::Normalization::sum},
     false,
     false},
    {"sorted_window",
     20,
     300,
     1,
     2,
     {attnpool::Distance::manhattan,
      {attnpool::Kernel::epanechnikov, 0.3},
      attnpool::Normalization::sum,
      attnpool::EmptyRows::zero},
     true,
     false},
};

struct TypePair {
  ElementType keys, values;
};
const TypePair kTypePairs[] = {
    {ElementType::bfloat16, ElementType::bfloat16},
    {ElementType::float16, ElementType::float16},
    {ElementType::int8, ElementType::int8},
    {ElementType::bfloat16, ElementType::int8},
    {ElementType::float32, ElementType::float16},
    {ElementType::float8_e4m3fn, ElementType::float8_e4m3fn},
    {ElementType::float8_e5m2, ElementType::float8_e5m2},
};

bool SameBits(const TestMatrix<float>& a, const TestMatrix<float>& b) {
  return std::memcmp(a.storage().data(), b.storage().data(),
                     a.storage().size() * sizeof(float)) == 0;
}

// `narrow` (the bf16 tile's, or a decode's of int8 rows, their scales
// folded: element.h) is within what a rounding of each score (2·(d + 2)·u·
// Σ|q·k|/√d, which covers int8's two roundings more) moves the float
// call's `held` (scaled_dot_product_attention's scale; the pairs of every
// query and key row): twice that per weight, times the largest value (and
// 1e-6 of it, over the u·Σ|w·v| of int8's weights times scales); NaN and
// ±inf where `held` is.
void RequireWithinScoreRounding(const TestMatrix<float>& narrow,
                                const TestMatrix<float>& held,
                                const TestMatrix<float>& queries,
                                const TestMatrix<float>& keys,
                                const TestMatrix<float>& values) {
  const size_t d = queries.cols();
  double largest = 0, score_error = 0;
  for (size_t j = 0; j < keys.rows(); ++j) {
    for (size_t c = 0; c < values.cols(); ++c) {
      largest = std::max(largest, double(std::fabs(values(j, c))));
    }
    for (size_t i = 0; i < queries.rows(); ++i) {
      double abs_dot = 0;
      for (size_t p = 0; p < d; ++p) {
        abs_dot += std::fabs(double(queries(i, p)) * keys(j, p));
      }
      score_error = std::max(
          score_error, 2 * (d + 2) * 0x1p-24 * abs_dot / std::sqrt(double(d)));
    }
  }
  for (size_t i = 0; i < narrow.rows(); ++i) {
    for (size_t c = 0; c < narrow.cols(); ++c) {
      if (std::isnan(held(i, c))) {
        REQUIRE(std::isnan(narrow(i, c)));
      } else if (std::isinf(held(i, c))) {
        REQUIRE(narrow(i, c) == held(i, c));
      } else {
        REQUIRE(std::fabs(narrow(i, c) - held(i, c)) <=
                (4 * score_error + 1e-6) * largest);
      }
    }
  }
}

// Whether `types` has int8 rows; on the decode path their scales fold.
bool HasInt8(const TypePair& types) {
  return types.keys == ElementType::int8 || types.values == ElementType::int8;
}

// `narrow` against the float call on the held values: bitwise, or where
// int8 scales may fold (`folded`) within a score rounding.
void RequireHeld(bool folded, const TestMatrix<float>& narrow,
                 const TestMatrix<float>& held,
                 const TestMatrix<float>& queries,
                 const TestMatrix<float>& keys,
                 const TestMatrix<float>& values) {
  if (folded) {
    RequireWithinScoreRounding(narrow, held, queries, keys, values);
  } else {
    REQUIRE(SameBits(narrow, held));
  }
}

ATTNPOOL_TEST_EACH_TARGET(NarrowPaths, "narrow_kv.paths", "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 90);
  INFO("seed " << kSeed + 90);
  for (size_t case_index = 0; case_index < std::size(kCases); ++case_index) {
    const Case& c = kCases[case_index];
    TestMatrix<float> queries(c.n, c.d), keys(c.m, c.d), values(c.m, c.dv);
    queries.FillRandom(rng, 1);
    keys.FillRandom(rng, 0);
    values.FillRandom(rng, 1);
    if (c.sorted_keys) {
      std::vector<float> column(c.m);
      for (size_t j = 0; j < c.m; ++j) column[j] = keys(j, 0);
      std::sort(column.begin(), column.end());
      for (size_t j = 0; j < c.m; ++j) keys(j, 0) = column[j];
    }
    Mask<float> mask;
    std::vector<size_t> lengths(c.n);
    for (size_t i = 0; i < c.n; ++i) lengths[i] = c.m - (i * 7) % (c.m / 2);
    if (c.causal) {
      mask.causal = true;
      mask.causal_offset = std::ptrdiff_t(c.m - c.n);
      mask.valid_lengths = lengths.data();
    }
    for (size_t t = 0; t < std::size(kTypePairs); ++t) {
      // Thinned: a third of the pairs, rotating with the case.
      if (!InSweep(t, case_index)) continue;
      const TypePair& types = kTypePairs[t];
      const StoredRows stored_keys(types.keys, keys),
          stored_values(types.values, values);
      INFO(c.path << " n=" << c.n << " m=" << c.m << " d=" << c.d << " dv="
                  << c.dv << " keys " << attnpool::element_type_name(types.keys)
                  << " values " << attnpool::element_type_name(types.values)
                  << " on " << CurrentTarget());
      TestMatrix<float> narrow(c.n, c.dv, 1, 2), held(c.n, c.dv, 1, 2);
      attnpool::attention_pool(c.spec, queries.view(), stored_keys.Rows(),
                               stored_values.Rows(), narrow.view(), mask);
      RequireRanOnTarget();
      REQUIRE(attnpool::last_fused_path() == c.path);
      attnpool::attention_pool(c.spec, queries.view(), stored_keys.held.view(),
                               stored_values.held.view(), held.view(), mask);
      const bool folded = HasInt8(types) && std::string(c.path) == "decode";
      RequireHeld(folded, narrow, held, queries, stored_keys.held,
                  stored_values.held);
      // Two shards, merged: the same as the float shards on the held values
      // (folded: their results within a score rounding).
      const size_t split = c.m / 3;
      TestMatrix<float> acc_narrow(c.n, c.dv), acc_later(c.n, c.dv),
          acc_held(c.n, c.dv), acc_held_later(c.n, c.dv);
      std::vector<float> max(4 * c.n), sum(4 * c.n);
      std::vector<size_t> best(4 * c.n);
      const auto state = [&](TestMatrix<float>& acc, size_t k) {
        return attnpool::PoolPartial<float>{acc.view(), &max[k * c.n],
                                            &sum[k * c.n], &best[k * c.n]};
      };
      Mask<float> first_mask = mask, later_mask = mask;
      attnpool::attention_pool_partial(
          c.spec, queries.view(), stored_keys.Rows(0, split),
          stored_values.Rows(0, split), 0, state(acc_narrow, 0), first_mask);
      attnpool::attention_pool_partial(
          c.spec, queries.view(), stored_keys.Rows(split),
          stored_values.Rows(split), split, state(acc_later, 1), later_mask);
      attnpool::attention_pool_merge(c.spec, state(acc_narrow, 0),
                                     state(acc_later, 1));
      const auto held_rows = [&](const TestMatrix<float>& m, size_t begin,
                                 size_t end) {
        return attnpool::ConstMatrixView<float>(
            &m.view().data[begin * m.view().stride], end - begin, m.cols(),
            m.view().stride);
      };
      attnpool::attention_pool_partial(c.spec, queries.view(),
                                       held_rows(stored_keys.held, 0, split),
                                       held_rows(stored_values.held, 0, split),
                                       0, state(acc_held, 2), first_mask);
      attnpool::attention_pool_partial(
          c.spec, queries.view(), held_rows(stored_keys.held, split, c.m),
          held_rows(stored_values.held, split, c.m), split,
          state(acc_held_later, 3), later_mask);
      attnpool::attention_pool_merge(c.spec, state(acc_held, 2),
                                     state(acc_held_later, 3));
      if (folded) {
        TestMatrix<float> merged(c.n, c.dv), merged_held(c.n, c.dv);
        attnpool::attention_pool_finish(c.spec, state(acc_narrow, 0),
                                        merged.view());
        attnpool::attention_pool_finish(c.spec, state(acc_held, 2),
                                        merged_held.view());
        RequireWithinScoreRounding(merged, merged_held, queries,
                                   stored_keys.held, stored_values.held);
        continue;
      }
      REQUIRE(SameBits(acc_narrow, acc_held));
      REQUIRE(std::memcmp(max.data(), &max[2 * c.n], c.n * sizeof(float)) == 0);
      REQUIRE(std::memcmp(sum.data(), &sum[2 * c.n], c.n * sizeof(float)) == 0);
    }
  }
}

// Decode under every tuning profile (their decode load widths differ):
// bitwise the float decode on the held values under the same profile (int8:
// within a score rounding).
ATTNPOOL_TEST_EACH_TARGET(NarrowDecodeProfiles, "narrow_kv.decode_profiles",
                          "[narrow_kv]") {
  struct Reset {
    ~Reset() { attnpool::force_tuning(""); }
  } reset;
  std::mt19937_64 rng(kSeed + 95);
  INFO("seed " << kSeed + 95);
  for (const Case& c : kCases) {
    if (std::string(c.path) != "decode") continue;
    TestMatrix<float> queries(c.n, c.d), keys(c.m, c.d), values(c.m, c.dv);
    queries.FillRandom(rng, 1);
    keys.FillRandom(rng, 0);
    values.FillRandom(rng, 1);
    const std::vector<std::string> profiles = attnpool::tunings();
    for (size_t p = 0; p < profiles.size(); ++p) {
      const std::string& profile = profiles[p];
      attnpool::force_tuning(profile);
      for (size_t t = 0; t < std::size(kTypePairs); ++t) {
        // Thinned: a third of the pairs, rotating with the profile.
        if (!InSweep(t, p)) continue;
        const TypePair& types = kTypePairs[t];
        const StoredRows stored_keys(types.keys, keys),
            stored_values(types.values, values);
        INFO("tuning " << profile << " n=" << c.n << " m=" << c.m
                       << " d=" << c.d << " dv=" << c.dv << " keys "
                       << attnpool::element_type_name(types.keys) << " values "
                       << attnpool::element_type_name(types.values));
        TestMatrix<float> narrow(c.n, c.dv, 1, 2), held(c.n, c.dv, 1, 2);
        attnpool::attention_pool(c.spec, queries.view(), stored_keys.Rows(),
                                 stored_values.Rows(), narrow.view());
        RequireRanOnTarget();
        REQUIRE(attnpool::last_fused_path() == "decode");
        attnpool::attention_pool(c.spec, queries.view(),
                                 stored_keys.held.view(),
                                 stored_values.held.view(), held.view());
        RequireHeld(HasInt8(types), narrow, held, queries, stored_keys.held,
                    stored_values.held);
      }
    }
  }
}

// What a profile sets beside its block sizes (decode stretch, key
// prefetch, load width, interleaving: each block's dots beside the last
// block's values, int8 keys a group at a time) changes no bit of a narrow
// decode: one query over keys of several blocks (the last ending inside a
// group of int8 keys), with every int8 scale and the query folding, with a
// key's and a value's scale that do not (that key's group taken key by
// key; the values summed again by key), and with a query that does not.
ATTNPOOL_TEST_EACH_TARGET(NarrowDecodeTuningBits,
                          "narrow_kv.decode_tuning_bits", "[narrow_kv]") {
  struct Reset {
    ~Reset() { attnpool::force_tuning(""); }
  } reset;
  std::mt19937_64 rng(kSeed + 97);
  INFO("seed " << kSeed + 97 << " on " << CurrentTarget());
  const char* const settings[] = {
      " decode_interleave=0 decode_stretch=1 decode_key_prefetch_rows=0"
      " decode_load_bytes=0",
      " decode_interleave=1 decode_stretch=1 decode_key_prefetch_rows=0"
      " decode_load_bytes=0",
      " decode_interleave=1 decode_stretch=3 decode_key_prefetch_rows=7"
      " decode_load_bytes=32",
      " decode_interleave=0 decode_stretch=5 decode_key_prefetch_rows=64"
      " decode_load_bytes=32"};
  // Softmax weights, and weights that are not a softmax's (int8 values
  // scaled per element, in the one pass by key).
  const PoolSpec specs[] = {{attnpool::Distance::dot,
                             {attnpool::Kernel::exp},
                             attnpool::Normalization::softmax},
                            {attnpool::Distance::dot,
                             {attnpool::Kernel::exp, 1.0, 1e-3},
                             attnpool::Normalization::none}};
  for (const size_t d : {64, 40}) {
    const size_t m = 2603, dv = d == 64 ? 64 : 24;
    TestMatrix<float> q(1, d), k(m, d), v(m, dv);
    for (auto* a : {&q, &k, &v}) a->FillRandom(rng, 1);
    for (size_t t = 0; t < std::size(kTypePairs); ++t) {
      // Thinned: half the pairs, rotating with d.
      if (!InSweep(t, d == 64 ? 0 : 1, 2)) continue;
      const TypePair& types = kTypePairs[t];
      const StoredRows stored_keys(types.keys, k),
          stored_values(types.values, v);
      for (const char* variant : {"folding", "scales apart", "query apart"}) {
        const std::string what = variant;
        if (what != "folding" && !HasInt8(types)) continue;
        // (Scales below 2^-50: rows that weigh little, so that no row
        // hides the others' bits.)
        StoredRows keys = stored_keys, values = stored_values;
        if (what == "scales apart") {
          if (keys.type == ElementType::int8) keys.scales[1300] = 0x1p-60f;
          if (values.type == ElementType::int8) values.scales[700] = 0x1p-60f;
        }
        TestMatrix<float> query = q;
        if (what == "query apart") query(0, 3) = 1e-30f;
        for (const PoolSpec& spec : specs) {
          for (const std::string& profile : attnpool::tunings()) {
            TestMatrix<float> reference(1, dv, 1, 2), out(1, dv, 1, 2);
            attnpool::force_tuning(profile + settings[0]);
            attnpool::attention_pool(spec, query.view(), keys.Rows(),
                                     values.Rows(), reference.view());
            RequireRanOnTarget();
            REQUIRE(attnpool::last_fused_path() == "decode");
            for (const char* setting : settings) {
              INFO(profile << setting << " d=" << d << " dv=" << dv << " keys "
                           << attnpool::element_type_name(types.keys)
                           << " values "
                           << attnpool::element_type_name(types.values) << ", "
                           << what << ", "
                           << attnpool::normalization_name(spec.normalization));
              attnpool::force_tuning(profile + setting);
              attnpool::attention_pool(spec, query.view(), keys.Rows(),
                                       values.Rows(), out.view());
              REQUIRE(SameBits(out, reference));
            }
          }
        }
      }
    }
  }
}

// Rows of `stored` from row `first` as a (batch, heads, rows, cols) tensor
// whose strides count rows (int8 scales: the same strides over the scales).
attnpool::ElementTensor RowsTensor(const StoredRows& stored, size_t first,
                                   size_t batch, size_t heads, size_t rows,
                                   size_t batch_stride, size_t head_stride,
                                   size_t row_stride) {
  const ElementRows all = stored.Rows(first);
  attnpool::ElementTensor t;
  t.type = all.type;
  t.data = all.data;
  t.batch = batch;
  t.heads = heads;
  t.rows = rows;
  t.cols = stored.cols;
  t.batch_stride = batch_stride * stored.stride;
  t.head_stride = head_stride * stored.stride;
  t.row_stride = row_stride * stored.stride;
  if (attnpool::element_properties(stored.type).scaled) {
    t.scales = {stored.scales.data() + first,
                batch,
                heads,
                rows,
                1,
                batch_stride,
                head_stride,
                row_stride};
  }
  return t;
}

// A (blocks, Hkv, rows, d) tensor over rows stored as (blocks, rows, Hkv,
// d): row (p, r, g) is stored row (p·rows + r)·Hkv + g (int8 scales in a
// (blocks, rows, Hkv) array); and the same over the values they hold.
attnpool::ElementTensor InterleavedHeads(const StoredRows& stored,
                                         size_t blocks, size_t kv_heads,
                                         size_t rows) {
  return RowsTensor(stored, 0, blocks, kv_heads, rows, rows * kv_heads, 1,
                    kv_heads);
}
attnpool::TensorView<const float> InterleavedHeldHeads(const StoredRows& stored,
                                                       size_t blocks,
                                                       size_t kv_heads,
                                                       size_t rows) {
  const auto view = stored.held.view();
  return {view.data,   blocks,
          kv_heads,    rows,
          stored.cols, rows * kv_heads * view.stride,
          view.stride, kv_heads * view.stride};
}

// SDPA with grouped-query heads over (B, m, Hkv, d) narrow caches (int8
// scales in a (B, m, Hkv) array: row stride Hkv), decode and prefill,
// causal: bitwise the float call on the held values (int8 decode: within a
// score rounding).
ATTNPOOL_TEST_EACH_TARGET(NarrowSdpa, "narrow_kv.sdpa", "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 91);
  INFO("seed " << kSeed + 91);
  const size_t batch = 2, heads = 4, kv_heads = 2, m = 300, d = 32;
  for (size_t n : {1u, 3u, 40u}) {
    TestMatrix<float> q(batch * heads * n, d), kv(batch * m * kv_heads, d),
        v(batch * m * kv_heads, d);
    q.FillRandom(rng, 1);
    kv.FillRandom(rng, 0);
    v.FillRandom(rng, 1);
    // Row (b, j, g) of the caches is row (b·m + j)·Hkv + g.
    attnpool::AttentionMask<float> mask;
    mask.causal = true;
    mask.causal_offset = std::ptrdiff_t(m - n);
    for (const TypePair& types : kTypePairs) {
      const StoredRows keys(types.keys, kv), values(types.values, v);
      INFO("n=" << n << " keys " << attnpool::element_type_name(types.keys)
                << " values " << attnpool::element_type_name(types.values)
                << " on " << CurrentTarget());
      TestMatrix<float> narrow(batch * heads * n, d, 1, 2),
          held(batch * heads * n, d, 1, 2);
      const auto out_tensor = [&](TestMatrix<float>& out) {
        return attnpool::TensorView<float>{
            out.data(),          batch,       heads, n, d,
            heads * n * (d + 1), n * (d + 1), d + 1};
      };
      const attnpool::TensorView<const float> queries{
          q.data(), batch, heads, n, d, heads * n * d, n * d, d};
      attnpool::scaled_dot_product_attention(
          queries, InterleavedHeads(keys, batch, kv_heads, m),
          InterleavedHeads(values, batch, kv_heads, m), out_tensor(narrow),
          mask);
      RequireRanOnTarget();
      attnpool::scaled_dot_product_attention(
          queries, InterleavedHeldHeads(keys, batch, kv_heads, m),
          InterleavedHeldHeads(values, batch, kv_heads, m), out_tensor(held),
          mask);
      RequireHeld(HasInt8(types) && n <= 4, narrow, held, q, keys.held,
                  values.held);
    }
  }
}

// Decode with grouped-query heads (3 and 6 query heads a key head: rows
// that share their keys, up to four at a time: 3, then 4 and 2) over
// narrow caches of depth 64, 128 and 40 (whole groups of vectors and not),
// int8 rows among them too small for their scales to fold: bitwise each
// query head alone over its key head (a row's dots and sums are the ones
// it computes alone, with int8 too).
ATTNPOOL_TEST_EACH_TARGET(NarrowGroupedDecode, "narrow_kv.grouped_decode",
                          "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 95);
  INFO("seed " << kSeed + 95);
  const size_t batch = 2, kv_heads = 2, m = 300;
  size_t shape_index = 0;
  for (size_t group : {3u, 6u}) {
    for (size_t d : {64u, 128u, 40u}) {
      ++shape_index;
      const size_t heads = kv_heads * group;
      // Row (b, g, j) of the caches is row (b·Hkv + g)·m + j.
      TestMatrix<float> q(batch * heads, d), kv(batch * kv_heads * m, d),
          v(batch * kv_heads * m, d);
      q.FillRandom(rng, 1);
      kv.FillRandom(rng, 0);
      v.FillRandom(rng, 1);
      for (size_t j = 5; j + 1 < kv.rows(); j += 37) {  // int8 scales < 2^-100
        for (size_t c = 0; c < d; ++c) {
          kv(j, c) *= 1e-33f;
          v(j + 1, c) *= 1e-33f;
        }
      }
      for (size_t t = 0; t < std::size(kTypePairs); ++t) {
        // Thinned: a third of the pairs, rotating with the shape.
        if (!InSweep(t, shape_index)) continue;
        const TypePair& types = kTypePairs[t];
        INFO("group " << group << " d " << d << " keys "
                      << attnpool::element_type_name(types.keys) << " values "
                      << attnpool::element_type_name(types.values) << " on "
                      << CurrentTarget());
        const StoredRows keys(types.keys, kv), values(types.values, v);
        // Key heads [head, head + count) of batches [b, b + batches).
        const auto tensor = [&](const StoredRows& rows, size_t b,
                                size_t batches, size_t head, size_t count) {
          return RowsTensor(rows, (b * kv_heads + head) * m, batches, count, m,
                            kv_heads * m, m, 1);
        };
        // Query heads [head, head + count) of batches [b, b + batches).
        const auto queries = [&](size_t b, size_t batches, size_t head,
                                 size_t count) {
          return attnpool::TensorView<const float>{
              q.data() + (b * heads + head) * d,
              batches,
              count,
              1,
              d,
              heads * d,
              d,
              d};
        };
        TestMatrix<float> grouped(batch * heads, d), alone(batch * heads, d);
        const auto out = [&](TestMatrix<float>& o, size_t b, size_t batches,
                             size_t head, size_t count) {
          return attnpool::TensorView<float>{o.data() + (b * heads + head) * d,
                                             batches,
                                             count,
                                             1,
                                             d,
                                             heads * d,
                                             d,
                                             d};
        };
        attnpool::scaled_dot_product_attention(
            queries(0, batch, 0, heads), tensor(keys, 0, batch, 0, kv_heads),
            tensor(values, 0, batch, 0, kv_heads),
            out(grouped, 0, batch, 0, heads));
        RequireRanOnTarget();
        for (size_t b = 0; b < batch; ++b) {
          for (size_t h = 0; h < heads; ++h) {
            attnpool::scaled_dot_product_attention(
                queries(b, 1, h, 1), tensor(keys, b, 1, h / group, 1),
                tensor(values, b, 1, h / group, 1), out(alone, b, 1, h, 1));
          }
        }
        REQUIRE(SameBits(grouped, alone));
      }
    }
  }
}

// int8 rows on the decode path whose scales must not fold (element.h):
// zero, below 2^-50 or above 2^50 (1e37: the held elements overflow),
// ±inf, NaN; a query with an element whose products with the integers
// would overflow (3e37); values under weights that are not a softmax's
// (normalization none, weights up to e^80: weight·scale overflows where
// the held values are 0). Each among ordinary rows, keys and values in
// turn: within a score rounding of the float call on the held values, NaN
// and ±inf exactly where it has them.
ATTNPOOL_TEST_EACH_TARGET(NarrowInt8Edges, "narrow_kv.int8_scales_at_the_edges",
                          "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 96);
  INFO("seed " << kSeed + 96);
  const float specials[] = {0.0f,
                            0x1p-110f,
                            0x1p110f,
                            1e37f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  const PoolSpec softmax{attnpool::Distance::dot,
                         {attnpool::Kernel::exp},
                         attnpool::Normalization::softmax};
  for (size_t d : {64u, 13u}) {
    const size_t n = 2, m = 300, dv = d;
    TestMatrix<float> queries(n, d), keys(m, d), values(m, dv);
    queries.FillRandom(rng, 0);
    keys.FillRandom(rng, 0);
    values.FillRandom(rng, 0);
    StoredRows stored_keys(ElementType::int8, keys),
        stored_values(ElementType::int8, values);
    // Row `row`'s held floats again, after its bytes or scale changed.
    const auto hold = [](StoredRows& rows, size_t row) {
      for (size_t c = 0; c < rows.cols; ++c) {
        rows.held(row, c) = rows.Element(row, c);
      }
    };
    for (int row : {0, 17, 299}) {  // a zero: held 0 under finite scales
      stored_keys.bytes[row * stored_keys.stride + 3] = 0;
      stored_values.bytes[row * stored_values.stride + 3] = 0;
      hold(stored_keys, row);
      hold(stored_values, row);
    }
    // Within a score rounding of the held call, or (`close`: held finite,
    // its weights far from where a score's rounding moves them) within
    // 1e-5 of each element.
    const auto run = [&](const char* what, const PoolSpec& spec,
                         const TestMatrix<float>& q, bool close) {
      INFO(what << ", d=" << d << " on " << CurrentTarget());
      TestMatrix<float> narrow(n, dv, 1, 2), held(n, dv, 1, 2);
      attnpool::attention_pool(spec, q.view(), stored_keys.Rows(),
                               stored_values.Rows(), narrow.view());
      RequireRanOnTarget();
      REQUIRE(attnpool::last_fused_path() == "decode");
      attnpool::attention_pool(spec, q.view(), stored_keys.held.view(),
                               stored_values.held.view(), held.view());
      if (!close) {
        RequireWithinScoreRounding(narrow, held, q, stored_keys.held,
                                   stored_values.held);
        return;
      }
      for (size_t i = 0; i < n; ++i) {
        for (size_t c = 0; c < dv; ++c) {
          INFO("out (" << i << ", " << c << ") " << narrow(i, c) << ", held "
                       << held(i, c));
          REQUIRE(std::isfinite(held(i, c)));
          REQUIRE(std::fabs(narrow(i, c) - held(i, c)) <=
                  1e-5 * std::fabs(held(i, c)) + 1e-30);
        }
      }
    };
    run("ordinary scales", softmax, queries, false);
    // Key 17 at scale +inf, its integers of the sign opposite to the
    // query's (one query, twice): held, a score of −inf, weight 0 — the
    // vector tail's padding (d = 13) must not add 0·inf.
    {
      const std::vector<int8_t> saved(
          stored_keys.bytes.begin() + 17 * stored_keys.stride,
          stored_keys.bytes.begin() + 18 * stored_keys.stride);
      const float saved_scale = stored_keys.scales[17];
      TestMatrix<float> twice(n, d);
      for (size_t i = 0; i < n; ++i) {
        for (size_t p = 0; p < d; ++p) twice(i, p) = queries(0, p);
      }
      for (size_t p = 0; p < d; ++p) {
        stored_keys.bytes[17 * stored_keys.stride + p] =
            int8_t(queries(0, p) > 0 ? -5 : 5);
      }
      stored_keys.scales[17] = std::numeric_limits<float>::infinity();
      hold(stored_keys, 17);
      run("a key of scale +inf scoring -inf", softmax, twice, false);
      // Query elements and a scale of 2^100: held, 2^100·(2^100·127) and
      // its negative overflow to inf − inf; the integers' dot is 0.
      TestMatrix<float> high(n, d);
      for (size_t i = 0; i < n; ++i) {
        for (size_t p = 0; p < d; ++p) high(i, p) = p < 2 ? 0x1p100f : 0.0f;
      }
      for (size_t p = 0; p < d; ++p) {
        stored_keys.bytes[17 * stored_keys.stride + p] = int8_t(p == 0   ? 127
                                                                : p == 1 ? -127
                                                                         : 0);
      }
      stored_keys.scales[17] = 0x1p100f;
      hold(stored_keys, 17);
      run("held products past the largest float", softmax, high, false);
      std::copy(saved.begin(), saved.end(),
                stored_keys.bytes.begin() + 17 * stored_keys.stride);
      stored_keys.scales[17] = saved_scale;
      hold(stored_keys, 17);
    }
    for (StoredRows* rows : {&stored_keys, &stored_values}) {
      for (float special : specials) {
        for (int row : {0, 17, 299}) {
          const float scale = rows->scales[row];
          rows->scales[row] = special;
          hold(*rows, row);
          INFO((rows == &stored_keys ? "key" : "value")
               << " row " << row << " scale " << special);
          run("special scale", softmax, queries, false);
          rows->scales[row] = scale;
          hold(*rows, row);
        }
      }
    }
    // The element's column 0 in every key but rows 17 and 18, 127 and 64
    // there: held, row 17's score is finite and the largest by far (a
    // weight of 1, the others' 0); the integers' products overflow in both.
    TestMatrix<float> huge = queries;
    for (size_t i = 0; i < n; ++i) huge(i, d / 2) = 3e37f;
    stored_keys.scales[18] = stored_keys.scales[17];
    for (size_t j = 0; j < m; ++j) {
      const int8_t byte = j == 17 ? 127 : j == 18 ? 64 : 0;
      stored_keys.bytes[j * stored_keys.stride + d / 2] = byte;
      hold(stored_keys, j);
    }
    run("a query element of 3e37", softmax, huge, true);
    // Weights e^score up to e^80: the key of the largest |first element|
    // scores 80, the others less; its value row all 0 under a scale of
    // 1e10 (held: 0; its weight times that scale overflows).
    size_t top = 0;
    for (size_t j = 0; j < m; ++j) {
      if (std::fabs(stored_keys.held(j, 0)) >
          std::fabs(stored_keys.held(top, 0))) {
        top = j;
      }
    }
    TestMatrix<float> steep(n, d);
    for (size_t i = 0; i < n; ++i) {
      for (size_t p = 0; p < d; ++p) steep(i, p) = 0;
      steep(i, 0) = 80 * std::sqrt(float(d)) / stored_keys.held(top, 0);
    }
    const float value_scale = stored_values.scales[top];
    const std::vector<int8_t> value_bytes(
        stored_values.bytes.begin() + top * stored_values.stride,
        stored_values.bytes.begin() + top * stored_values.stride + dv);
    stored_values.scales[top] = 1e10f;
    for (size_t c = 0; c < dv; ++c) {
      stored_values.bytes[top * stored_values.stride + c] = 0;
    }
    hold(stored_values, top);
    const PoolSpec none{attnpool::Distance::dot,
                        {attnpool::Kernel::exp},
                        attnpool::Normalization::none};
    run("weights up to e^80 under none", none, steep, true);
    stored_values.scales[top] = value_scale;
    std::copy(value_bytes.begin(), value_bytes.end(),
              stored_values.bytes.begin() + top * stored_values.stride);
    hold(stored_values, top);
  }
}

// Packed sequences (varlen) and a paged cache of narrow keys and values,
// grouped heads, prefill and batched decode, causal (with and without a
// window, which starts each sequence's rows past its first), at the tile
// depth and the small one: bitwise the float calls on the held values (with
// int8 rows, whose decodes fold their scales, within a score rounding). The
// long sequence (70 keys, past the decode path's prefetch distance) has
// scattered blocks and a run of abutting ones.
ATTNPOOL_TEST_EACH_TARGET(NarrowPacked, "narrow_kv.varlen_and_paged",
                          "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 93);
  INFO("seed " << kSeed + 93);
  const size_t heads = 4, kv_heads = 2, block = 4, blocks = 40, stride = 18;
  const std::vector<size_t> lengths = {7, 70, 1};
  std::vector<int32_t> table(3 * stride, -1);
  table[0] = 5, table[1] = 2;
  const int32_t long_blocks[4] = {0, 9, 10, 11};  // then 20 … 33
  for (size_t p = 0; p < stride; ++p) {
    table[stride + p] = p < 4 ? long_blocks[p] : int32_t(16 + p);
  }
  table[2 * stride] = 7;
  const std::vector<size_t> key_offsets = {0, 7, 77, 78};
  const size_t total_keys = key_offsets.back();
  for (const auto& depths : {std::pair<size_t, size_t>{16, 16}, {4, 3}}) {
    // (Named copies: clang 14 lambdas cannot capture structured bindings.)
    const size_t d = depths.first, dv = depths.second;
    for (const std::vector<size_t>& query_offsets :
         {std::vector<size_t>{0, 3, 8, 9}, std::vector<size_t>{0, 1, 2, 3}}) {
      const size_t n = query_offsets.back();
      TestMatrix<float> q(heads * n, d), pool_k(blocks * block * kv_heads, d),
          pool_v(blocks * block * kv_heads, dv),
          packed_k(total_keys * kv_heads, d),
          packed_v(total_keys * kv_heads, dv);
      for (auto* m : {&q, &pool_k, &pool_v, &packed_k, &packed_v}) {
        m->FillRandom(rng, 1);
      }
      const attnpool::TensorView<const float> queries{
          q.data(), 1, heads, n, d, heads * n * d, n * d, d};
      const auto out_tensor = [&](TestMatrix<float>& out) {
        return attnpool::TensorView<float>{
            out.data(),   1,     heads, n, dv, heads * n * (dv + 1),
            n * (dv + 1), dv + 1};
      };
      for (const std::optional<size_t> window :
           {std::optional<size_t>(), std::optional<size_t>(5)}) {
        attnpool::AttentionMask<float> mask;
        mask.causal = true;
        mask.window_left = window;
        for (const TypePair& types : kTypePairs) {
          INFO("d=" << d << " dv=" << dv << " n=" << n << " window "
                    << (window ? int(*window) : -1) << " keys "
                    << attnpool::element_type_name(types.keys) << " values "
                    << attnpool::element_type_name(types.values) << " on "
                    << CurrentTarget());
          // Packed sequences.
          {
            const StoredRows keys(types.keys, packed_k),
                values(types.values, packed_v);
            const attnpool::PackedSequences sequences{3, query_offsets.data(),
                                                      key_offsets.data()};
            TestMatrix<float> narrow(heads * n, dv, 1, 2),
                held(heads * n, dv, 1, 2);
            attnpool::scaled_dot_product_attention_varlen(
                queries, InterleavedHeads(keys, 1, kv_heads, total_keys),
                InterleavedHeads(values, 1, kv_heads, total_keys),
                out_tensor(narrow), sequences, mask);
            RequireRanOnTarget();
            attnpool::scaled_dot_product_attention_varlen(
                queries, InterleavedHeldHeads(keys, 1, kv_heads, total_keys),
                InterleavedHeldHeads(values, 1, kv_heads, total_keys),
                out_tensor(held), sequences, mask);
            RequireHeld(HasInt8(types), narrow, held, q, keys.held,
                        values.held);
          }
          // A paged cache.
          {
            const StoredRows keys(types.keys, pool_k),
                values(types.values, pool_v);
            attnpool::PagedElementCache cache;
            cache.keys = InterleavedHeads(keys, blocks, kv_heads, block);
            cache.values = InterleavedHeads(values, blocks, kv_heads, block);
            cache.block_table = table.data();
            cache.block_table_stride = stride;
            cache.lengths = lengths.data();
            attnpool::PagedKVCache<float> held_cache;
            held_cache.keys =
                InterleavedHeldHeads(keys, blocks, kv_heads, block);
            held_cache.values =
                InterleavedHeldHeads(values, blocks, kv_heads, block);
            held_cache.block_table = table.data();
            held_cache.block_table_stride = stride;
            held_cache.lengths = lengths.data();
            TestMatrix<float> narrow(heads * n, dv, 1, 2),
                held(heads * n, dv, 1, 2);
            attnpool::scaled_dot_product_attention_paged(
                queries, cache, out_tensor(narrow), 3, query_offsets.data(),
                mask);
            RequireRanOnTarget();
            attnpool::scaled_dot_product_attention_paged(
                queries, held_cache, out_tensor(held), 3, query_offsets.data(),
                mask);
            RequireHeld(HasInt8(types), narrow, held, q, keys.held,
                        values.held);
          }
        }
      }
    }
  }
}

// A paged int8 decode whose rows' blocks abut (one run of 48 rows) while
// their scales' blocks abut too, or lie apart (padded; the padding scales
// that fold, so that one read in a row's place gives a wrong score, not
// the per-key path): bitwise the same rows contiguous, so that a run's
// scales are read as one only where they are one.
ATTNPOOL_TEST_EACH_TARGET(NarrowPagedScales, "narrow_kv.paged_scales_apart",
                          "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 94);
  INFO("seed " << kSeed + 94);
  const size_t d = 64, page = 8, blocks = 10, length = 64, pad = 5;
  const std::vector<int32_t> table = {2, 3, 4, 5, 6, 7, 0, 9};
  TestMatrix<float> q(1, d), pool_k(blocks * page, d), pool_v(blocks * page, d),
      packed_k(length, d), packed_v(length, d);
  for (auto* m : {&q, &pool_k, &pool_v}) m->FillRandom(rng, 1);
  for (size_t r = 0; r < length; ++r) {
    const size_t from = size_t(table[r / page]) * page + r % page;
    for (size_t c = 0; c < d; ++c) {
      packed_k(r, c) = pool_k(from, c);
      packed_v(r, c) = pool_v(from, c);
    }
  }
  const StoredRows keys(ElementType::int8, pool_k),
      values(ElementType::int8, pool_v),
      contiguous_keys(ElementType::int8, packed_k),
      contiguous_values(ElementType::int8, packed_v);
  const attnpool::TensorView<const float> queries{q.data(), 1, 1, 1,
                                                  d,        d, d, d};
  const auto out_tensor = [&](std::vector<float>& out) {
    return attnpool::TensorView<float>{out.data(), 1, 1, 1, d, d, d, d};
  };
  std::vector<float> expected(d), got(d);
  attnpool::scaled_dot_product_attention(
      queries, InterleavedHeads(contiguous_keys, 1, 1, length),
      InterleavedHeads(contiguous_values, 1, 1, length), out_tensor(expected));
  RequireRanOnTarget();
  // Each row's scale `pad` apart more per block than the rows' own.
  const auto padded = [&](const StoredRows& stored) {
    std::vector<float> scales(blocks * (page + pad), 0.5f);
    for (size_t r = 0; r < blocks * page; ++r) {
      scales[r / page * (page + pad) + r % page] = stored.scales[r];
    }
    return scales;
  };
  const std::vector<float> key_scales = padded(keys),
                           value_scales = padded(values);
  const size_t query_offsets[2] = {0, 1};
  for (const bool apart : {false, true}) {
    INFO((apart ? "scales apart" : "scales abut") << " on " << CurrentTarget());
    attnpool::PagedElementCache cache;
    cache.keys = InterleavedHeads(keys, blocks, 1, page);
    cache.values = InterleavedHeads(values, blocks, 1, page);
    if (apart) {
      cache.keys.scales = {key_scales.data(), blocks, 1, page, 1,
                           page + pad,        1,      1};
      cache.values.scales = {value_scales.data(), blocks, 1, page, 1,
                             page + pad,          1,      1};
    }
    cache.block_table = table.data();
    cache.block_table_stride = table.size();
    cache.lengths = &length;
    std::fill(got.begin(), got.end(), -1.0f);
    attnpool::scaled_dot_product_attention_paged(
        queries, cache, out_tensor(got), 1, query_offsets);
    RequireRanOnTarget();
    for (size_t c = 0; c < d; ++c) {
      INFO("column " << c);
      REQUIRE(std::memcmp(&got[c], &expected[c], sizeof(float)) == 0);
    }
  }
}

// A decode over an int8 cache kept (m, heads, d), its scales (m, heads):
// each head's scales `heads` apart, gathered sixteen keys at a time where
// the target has fixed-width vectors (NarrowKeyDots::FoldedGroup), is
// bitwise the decode over the same rows heads first, scales contiguous;
// among them a scale that does not fold (below 2^-50), and a tail of keys.
ATTNPOOL_TEST_EACH_TARGET(NarrowStridedScales, "narrow_kv.strided_scales",
                          "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 93);
  INFO("seed " << kSeed + 93 << " on " << CurrentTarget());
  const size_t d = 64, heads = 3, m = 150;
  TestMatrix<float> q(heads, d), interleaved_k(m * heads, d),
      interleaved_v(m * heads, d), heads_first_k(m * heads, d),
      heads_first_v(m * heads, d);
  for (auto* a : {&q, &interleaved_k, &interleaved_v}) a->FillRandom(rng, 1);
  for (size_t c = 0; c < d; ++c) interleaved_k(20 * heads + 1, c) *= 1e-33f;
  for (size_t j = 0; j < m; ++j) {
    for (size_t h = 0; h < heads; ++h) {
      for (size_t c = 0; c < d; ++c) {
        heads_first_k(h * m + j, c) = interleaved_k(j * heads + h, c);
        heads_first_v(h * m + j, c) = interleaved_v(j * heads + h, c);
      }
    }
  }
  const StoredRows keys(ElementType::int8, interleaved_k),
      values(ElementType::int8, interleaved_v),
      dense_keys(ElementType::int8, heads_first_k),
      dense_values(ElementType::int8, heads_first_v);
  const attnpool::TensorView<const float> queries{q.data(), 1, heads, 1,
                                                  d,        0, d,     d};
  TestMatrix<float> strided(heads, d), dense(heads, d);
  const auto out = [&](TestMatrix<float>& o) {
    return attnpool::TensorView<float>{o.data(), 1, heads, 1, d, 0, d, d};
  };
  attnpool::scaled_dot_product_attention(
      queries, InterleavedHeads(keys, 1, heads, m),
      InterleavedHeads(values, 1, heads, m), out(strided));
  RequireRanOnTarget();
  REQUIRE(attnpool::last_fused_path() == "decode");
  attnpool::scaled_dot_product_attention(
      queries, RowsTensor(dense_keys, 0, 1, heads, m, 0, m, 1),
      RowsTensor(dense_values, 0, 1, heads, m, 0, m, 1), out(dense));
  REQUIRE(SameBits(strided, dense));
}

// A grouped int8 decode (query heads sharing a key head, read once for
// all): each head's query decides for itself whether the scales fold
// (FoldsQuery: head 1's has an element of 1e-30, below 2^-50, head 3's
// one of 3e37, above 2^50; heads 0 and 2 fold), bitwise as the head alone.
ATTNPOOL_TEST_EACH_TARGET(NarrowGroupedFolds, "narrow_kv.grouped_query_folds",
                          "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 92);
  INFO("seed " << kSeed + 92 << " on " << CurrentTarget());
  const size_t heads = 4, m = 100, d = 64, dv = 16;
  TestMatrix<float> q(heads, d), k(m, d), v(m, dv);
  for (auto* a : {&q, &k, &v}) a->FillRandom(rng, 1);
  q(1, 5) = 1e-30f;
  q(3, 0) = 3e37f;
  const StoredRows keys(ElementType::int8, k), values(ElementType::int8, v);
  const auto key_heads = RowsTensor(keys, 0, 1, 1, m, 0, m, 1);
  const auto value_heads = RowsTensor(values, 0, 1, 1, m, 0, m, 1);
  TestMatrix<float> grouped(heads, dv), alone(1, dv);
  attnpool::scaled_dot_product_attention(
      attnpool::TensorView<const float>{q.data(), 1, heads, 1, d, 0, d, d},
      key_heads, value_heads,
      attnpool::TensorView<float>{grouped.data(), 1, heads, 1, dv, 0, dv, dv});
  RequireRanOnTarget();
  REQUIRE(attnpool::last_fused_path() == "decode");
  for (size_t h = 0; h < heads; ++h) {
    INFO("head " << h);
    attnpool::scaled_dot_product_attention(
        attnpool::TensorView<const float>{q.data() + h * d, 1, 1, 1, d, 0, d,
                                          d},
        key_heads, value_heads,
        attnpool::TensorView<float>{alone.data(), 1, 1, 1, dv, 0, dv, dv});
    REQUIRE(std::memcmp(alone.data(), grouped.data() + h * dv,
                        dv * sizeof(float)) == 0);
  }
}

// pairwise_distances to narrow keys: bitwise the float call on the values
// they hold, every distance (the repair of cancelling pairs included).
ATTNPOOL_TEST_EACH_TARGET(NarrowDistances, "narrow_kv.distances",
                          "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 92);
  INFO("seed " << kSeed + 92);
  TestMatrix<float> queries(37, 11), keys(53, 11);
  queries.FillRandom(rng, 1);
  keys.FillRandom(rng, 1);
  for (size_t c = 0; c < 11; ++c) queries(0, c) = keys(0, c);  // cancelling
  for (const TypePair& types : kTypePairs) {
    const StoredRows stored(types.keys, keys);
    // The first query equals the first key as stored.
    for (size_t c = 0; c < 11; ++c) queries(0, c) = stored.held(0, c);
    for (const auto& distance : attnpool::kDistances) {
      INFO(distance.name << " keys " << attnpool::element_type_name(types.keys)
                         << " on " << CurrentTarget());
      TestMatrix<float> narrow(37, 53, 1, 2), held(37, 53, 1, 2);
      attnpool::pairwise_distances(distance.distance, queries.view(),
                                   stored.Rows(), narrow.view());
      RequireRanOnTarget();
      attnpool::pairwise_distances(distance.distance, queries.view(),
                                   stored.held.view(), held.view());
      REQUIRE(SameBits(narrow, held));
    }
  }
}

// bf16 queries too: the "tile_bf16" path where the CPU has the bf16
// dot-product instruction beside the forced target (AVX3; ARM NEON and SVE
// under qemu's max CPU, BFDOT rounding to odd; another order of the products'
// sum: within what a rounding of each score moves the result), else bitwise the
// float call on the held values.
void NarrowQueriesOn(const std::string& instruction);

ATTNPOOL_TEST_EACH_TARGET(NarrowQueries, "narrow_kv.bf16_queries",
                          "[narrow_kv]") {
  // Each instruction the CPU runs the tile on, forced (reported beside the
  // family's targets); then "", which restores this CPU's choice: run again
  // only where that is none of them (the float tile).
  const auto supported = attnpool::supported_bf16_dot_instructions();
  // Whether the forced target is of the instructions' family: then each
  // forced one is reported, else none.
  bool family = false;
  for (const std::string& instruction : supported) {
    attnpool::force_bf16_dot_instruction(instruction);
    if (instruction == supported.front()) {
      family = !attnpool::bf16_dot_instruction().empty();
    }
    REQUIRE(attnpool::bf16_dot_instruction() == (family ? instruction : ""));
    NarrowQueriesOn(instruction);
  }
  attnpool::force_bf16_dot_instruction("");
  if (supported.empty() || attnpool::bf16_dot_instruction().empty()) {
    NarrowQueriesOn("");
  }
}

void NarrowQueriesOn(const std::string& instruction) {
  std::mt19937_64 rng(kSeed + 93);
  INFO("seed " << kSeed + 93 << ", instruction '" << instruction << "'");
  const bool dot_instruction = !attnpool::bf16_dot_instruction().empty();
  for (size_t d : {64u, 13u, 1u}) {
    for (size_t n : {40u, 3u}) {
      const size_t m = 300, dv = 16;
      TestMatrix<float> queries(n, d), keys(m, d), values(m, dv);
      queries.FillRandom(rng, 0);
      keys.FillRandom(rng, 0);
      values.FillRandom(rng, 1);
      const StoredRows q(ElementType::bfloat16, queries),
          k(ElementType::bfloat16, keys), v(ElementType::bfloat16, values);
      const PoolSpec spec{attnpool::Distance::dot,
                          {attnpool::Kernel::exp},
                          attnpool::Normalization::softmax};
      Mask<float> mask;
      mask.causal = true;
      mask.causal_offset = std::ptrdiff_t(m - n);
      TestMatrix<float> narrow(n, dv, 1, 2), held(n, dv, 1, 2);
      attnpool::attention_pool(spec, q.Rows(), k.Rows(), v.Rows(),
                               narrow.view(), mask);
      RequireRanOnTarget();
      const std::string path = attnpool::last_fused_path();
      attnpool::attention_pool(spec, q.held.view(), k.held.view(),
                               v.held.view(), held.view(), mask);
      INFO("n=" << n << " d=" << d << " path " << path << " on "
                << CurrentTarget());
      if (path != "tile_bf16") {
        REQUIRE(SameBits(narrow, held));
        REQUIRE((n <= 4 || !dot_instruction));  // decode: no tile
        continue;
      }
      REQUIRE(dot_instruction);
      RequireWithinScoreRounding(narrow, held, q.held, k.held, v.held);
    }
  }
}

// SDPA with bf16 (and int8) queries over bf16 keys and values, grouped
// heads: the bf16 tile's result within a score rounding of the float call
// on the held values where it runs, bitwise elsewhere.
ATTNPOOL_TEST_EACH_TARGET(NarrowSdpaQueries, "narrow_kv.sdpa_queries",
                          "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 94);
  INFO("seed " << kSeed + 94);
  const size_t heads = 4, kv_heads = 2, n = 40, m = 200, d = 32;
  TestMatrix<float> q(heads * n, d), k(kv_heads * m, d), v(kv_heads * m, d);
  q.FillRandom(rng, 0);
  k.FillRandom(rng, 0);
  v.FillRandom(rng, 1);
  const StoredRows keys(ElementType::bfloat16, k),
      values(ElementType::bfloat16, v);
  for (ElementType query_type :
       {ElementType::bfloat16, ElementType::int8, ElementType::float8_e4m3fn}) {
    const StoredRows queries(query_type, q);
    INFO("queries " << attnpool::element_type_name(query_type) << " on "
                    << CurrentTarget());
    const auto tensor = [&](const StoredRows& rows, size_t h) {
      const ElementRows all = rows.Rows();
      attnpool::ElementTensor t;
      t.type = all.type;
      t.data = all.data;
      t.batch = 1;
      t.heads = h;
      t.rows = rows.rows / h;
      t.cols = d;
      t.batch_stride = rows.rows * rows.stride;
      t.head_stride = t.rows * rows.stride;
      t.row_stride = rows.stride;
      if (attnpool::element_properties(rows.type).scaled) {
        t.scales = {rows.scales.data(), 1, h, t.rows, 1, rows.rows, t.rows, 1};
      }
      return t;
    };
    const auto held_tensor = [&](const StoredRows& rows, size_t h) {
      const auto view = rows.held.view();
      return attnpool::TensorView<const float>{view.data,
                                               1,
                                               h,
                                               rows.rows / h,
                                               d,
                                               rows.rows * view.stride,
                                               rows.rows / h * view.stride,
                                               view.stride};
    };
    TestMatrix<float> narrow(heads * n, d), held(heads * n, d);
    const auto out = [&](TestMatrix<float>& o) {
      return attnpool::dense_tensor(o.data(), 1, heads, n, d);
    };
    attnpool::AttentionMask<float> mask;
    mask.causal = true;
    mask.causal_offset = std::ptrdiff_t(m - n);
    attnpool::scaled_dot_product_attention(
        tensor(queries, heads), tensor(keys, kv_heads),
        tensor(values, kv_heads), out(narrow), mask);
    RequireRanOnTarget();
    const std::string path = attnpool::last_fused_path();
    attnpool::scaled_dot_product_attention(
        held_tensor(queries, heads), held_tensor(keys, kv_heads),
        held_tensor(values, kv_heads), out(held), mask);
    const bool dot_instruction = !attnpool::bf16_dot_instruction().empty();
    if (query_type == ElementType::bfloat16 && dot_instruction) {
      REQUIRE(path == "tile_bf16");
      for (size_t h = 0; h < heads; ++h) {
        // Head h's rows against its key head's.
        TestMatrix<float> nh(n, d), hh(n, d), qh(n, d), kh(m, d), vh(m, d);
        for (size_t i = 0; i < n; ++i) {
          for (size_t c = 0; c < d; ++c) {
            nh(i, c) = narrow(h * n + i, c);
            hh(i, c) = held(h * n + i, c);
            qh(i, c) = queries.held(h * n + i, c);
          }
        }
        const size_t g = h / (heads / kv_heads);
        for (size_t j = 0; j < m; ++j) {
          for (size_t c = 0; c < d; ++c) {
            kh(j, c) = keys.held(g * m + j, c);
            vh(j, c) = values.held(g * m + j, c);
          }
        }
        RequireWithinScoreRounding(nh, hh, qh, kh, vh);
      }
    } else {
      REQUIRE(path == "tile");
      REQUIRE(SameBits(narrow, held));
    }
  }
}

TEST_CASE("narrow_kv: bad element rows are named", "[narrow_kv]") {
  const PoolSpec spec{attnpool::Distance::dot,
                      {attnpool::Kernel::exp},
                      attnpool::Normalization::softmax};
  std::vector<float> q(8, 1.0f), out(8, 5.0f);
  std::vector<int8_t> k(8, 1);
  std::vector<float> scales(2, 1.0f);
  const attnpool::Int8Rows no_scales{{k.data(), 2, 4}, nullptr};
  const attnpool::Int8Rows rows{{k.data(), 2, 4}, scales.data()};
  RequireRejected("keys.scales", out, [&] {
    attnpool::attention_pool(spec, {q.data(), 2, 4}, no_scales, rows,
                             {out.data(), 2, 4});
  });
  RequireRejected("values.stride", out, [&] {
    attnpool::attention_pool(
        spec, {q.data(), 2, 4}, rows,
        attnpool::Int8Rows{{k.data(), 2, 4, 2}, scales.data()},
        {out.data(), 2, 4});
  });
  ElementRows bad = rows;
  bad.type = static_cast<ElementType>(9);
  RequireRejected("keys.type", out, [&] {
    attnpool::attention_pool(spec, {q.data(), 2, 4}, bad, rows,
                             {out.data(), 2, 4});
  });
  // The output over the keys' scales, or the values'.
  std::vector<float> shared(8, 3.0f);
  const attnpool::Int8Rows scaled_inside{{k.data(), 2, 4}, shared.data() + 1};
  RequireRejected("out", shared, [&] {
    attnpool::attention_pool(spec, {q.data(), 2, 4}, scaled_inside, rows,
                             {shared.data(), 2, 4});
  });
  RequireRejected("out", shared, [&] {
    attnpool::attention_pool(spec, {q.data(), 2, 4}, rows, scaled_inside,
                             {shared.data(), 2, 4});
  });
  const attnpool::Int8Tensor tensor_rows{{k.data(), 1, 1, 2, 4, 8, 8, 4},
                                         {scales.data(), 1, 1, 2, 1, 2, 2, 1}};
  const attnpool::Int8Tensor tensor_inside{
      {k.data(), 1, 1, 2, 4, 8, 8, 4},
      {shared.data() + 1, 1, 1, 2, 1, 2, 2, 1}};
  const attnpool::TensorView<const float> two_queries{q.data(), 1, 1, 2,
                                                      4,        8, 8, 4};
  for (const bool keys_inside : {true, false}) {
    RequireRejected("out", shared, [&] {
      attnpool::scaled_dot_product_attention(
          two_queries, keys_inside ? tensor_inside : tensor_rows,
          keys_inside ? tensor_rows : tensor_inside,
          attnpool::TensorView<float>{shared.data(), 1, 1, 2, 4, 8, 8, 4});
    });
  }
  // A paged int8 cache without scales; its output over the value scales.
  const attnpool::TensorView<const int8_t> pool{k.data(), 2, 1, 1, 4, 4, 4, 4};
  const attnpool::TensorView<const float> pool_scales{
      scales.data(), 2, 1, 1, 1, 1, 1, 1};
  const int32_t table[2] = {1, 0};
  const size_t length = 2, offsets[2] = {0, 1};
  attnpool::PagedElementCache cache;
  cache.keys = attnpool::Int8Tensor{pool, {}};
  cache.values = attnpool::Int8Tensor{pool, pool_scales};
  cache.block_table = table;
  cache.block_table_stride = 2;
  cache.lengths = &length;
  const attnpool::TensorView<const float> query{q.data(), 1, 1, 1, 4, 4, 4, 4};
  RequireRejected("cache.keys.scales.batch", out, [&] {
    attnpool::scaled_dot_product_attention_paged(
        query, cache, {out.data(), 1, 1, 1, 4, 4, 4, 4}, 1, offsets);
  });
  std::vector<float> scales_and_out(8, 2.0f);
  cache.keys = cache.values =
      attnpool::Int8Tensor{pool, {scales_and_out.data(), 2, 1, 1, 1, 1, 1, 1}};
  RequireRejected("out", scales_and_out, [&] {
    attnpool::scaled_dot_product_attention_paged(
        query, cache, {scales_and_out.data() + 1, 1, 1, 1, 4, 4, 4, 4}, 1,
        offsets);
  });
}

// A per-tensor scale: float8 keys and values whose scales tensors have
// zero strides (one scale for all), and rows whose scale_stride is 0: the
// float call on scale · value, bitwise, decode and tile; widen_rows gives
// the held values.
ATTNPOOL_TEST_EACH_TARGET(NarrowPerTensorScale, "narrow_kv.per_tensor_scale",
                          "[narrow_kv]") {
  std::mt19937_64 rng(kSeed + 120);
  INFO("seed " << kSeed + 120);
  const size_t heads = 2, m = 70, d = 16;
  std::uniform_int_distribution<int> pattern(0, 0x7D);  // finite E4M3FN
  std::vector<attnpool::fp8_e4m3fn> k(heads * m * d), v(heads * m * d);
  for (auto& e : k) e.bits = uint8_t(pattern(rng) | (rng() & 0x80));
  for (auto& e : v) e.bits = uint8_t(pattern(rng) | (rng() & 0x80));
  const float scale = 0.037f;
  std::vector<float> held_k(k.size()), held_v(v.size());
  using Rows = attnpool::ScaledRows<attnpool::fp8_e4m3fn>;
  attnpool::widen_rows(Rows{{k.data(), heads * m, d}, &scale, 0},
                       {held_k.data(), heads * m, d});
  attnpool::widen_rows(Rows{{v.data(), heads * m, d}, &scale, 0},
                       {held_v.data(), heads * m, d});
  REQUIRE(held_k[5] == scale * float(attnpool::reference::element_value(
                                   ElementType::float8_e4m3fn, k[5].bits)));
  const attnpool::TensorView<const float> one{&scale, 1, heads, m, 1, 0, 0, 0};
  const auto stored = [&](const std::vector<attnpool::fp8_e4m3fn>& x) {
    return attnpool::ScaledTensor<attnpool::fp8_e4m3fn>{
        attnpool::dense_tensor<const attnpool::fp8_e4m3fn>(x.data(), 1, heads,
                                                           m, d),
        one};
  };
  for (const size_t n : {size_t{1}, size_t{40}}) {  // decode, tile
    TestMatrix<float> q(heads * n, d);
    q.FillRandom(rng, 1);
    std::vector<float> out(heads * n * d), expected(out.size());
    std::vector<float> dense_q(heads * n * d);
    for (size_t r = 0; r < heads * n; ++r) {
      for (size_t c = 0; c < d; ++c) dense_q[r * d + c] = q(r, c);
    }
    const auto queries =
        attnpool::dense_tensor<const float>(dense_q.data(), 1, heads, n, d);
    attnpool::scaled_dot_product_attention(
        queries, stored(k), stored(v),
        attnpool::dense_tensor(out.data(), 1, heads, n, d));
    RequireRanOnTarget();
    attnpool::scaled_dot_product_attention(
        queries,
        attnpool::dense_tensor<const float>(held_k.data(), 1, heads, m, d),
        attnpool::dense_tensor<const float>(held_v.data(), 1, heads, m, d),
        attnpool::dense_tensor(expected.data(), 1, heads, n, d));
    INFO("n " << n << " on " << CurrentTarget());
    REQUIRE(std::memcmp(out.data(), expected.data(),
                        out.size() * sizeof(float)) == 0);
  }
}

}  // namespace
}  // namespace attnpool_test
