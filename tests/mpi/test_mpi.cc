// attnpool::mpi under mpirun (tests/CMakeLists.txt runs it on 1 to 4
// ranks): every rank builds the same whole problem from the seed, holds its
// shard of it, and checks the collective result against the single-process
// call on the whole problem. Only CHECKs (no REQUIRE): a rank that stopped
// a test case early would leave the others waiting in its collectives.
#define CATCH_CONFIG_RUNNER
#include <attnpool/element.h>
#include <attnpool/error.h>
#include <attnpool/mpi.h>
#include <attnpool/pool.h>
#include <attnpool/regression.h>
#include <catch2/catch.hpp>
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "src/sanitizers.h"
#include "tests/fenced.h"
#include "tests/mpi/world.h"

namespace {

using attnpool::ConstMatrixView;
using attnpool::Mask;
using attnpool::MatrixView;
using attnpool::PoolPartial;
using attnpool::PoolSpec;
namespace mpi = attnpool::mpi;

constexpr uint64_t kSeed = 20261127;

using attnpool_test::Rank;
using attnpool_test::Ranks;
using attnpool_test::SameOnEveryRank;

template <typename T>
std::vector<T> Random(size_t count, uint64_t seed, double low = -1,
                      double high = 1) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<T> data(count);
  for (T& x : data) x = static_cast<T>(uniform(engine));
  return data;
}

// Uneven shards of `total` rows: rank r gets a share ∝ r + 1, except for
// an empty shard: rank 1's when there are three ranks or more, or with
// `empty_first` rank 0's when there are two or more.
std::vector<size_t> ShardBegins(size_t total, int ranks,
                                bool empty_first = false) {
  std::vector<double> weight(ranks);
  for (int r = 0; r < ranks; ++r) {
    const bool empty =
        empty_first ? ranks >= 2 && r == 0 : ranks >= 3 && r == 1;
    weight[r] = empty ? 0 : r + 1;
  }
  double all = 0;
  for (double w : weight) all += w;
  std::vector<size_t> begin(ranks + 1, 0);
  double sum = 0;
  for (int r = 0; r < ranks; ++r) {
    sum += weight[r];
    begin[r + 1] = static_cast<size_t>(std::lround(total * sum / all));
  }
  begin[ranks] = total;
  return begin;
}

template <typename T>
ConstMatrixView<T> Rows(const std::vector<T>& data, size_t cols, size_t begin,
                        size_t end) {
  return {data.data() + begin * cols, end - begin, cols};
}

// Bitwise equality, NaN patterns included.
template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Elementwise within `tolerance` relative to the larger magnitude (and 1),
// NaN where the other has NaN.
template <typename T>
size_t Mismatches(const std::vector<T>& got, const std::vector<T>& want,
                  double tolerance) {
  size_t bad = got.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(g) || std::isnan(w)) {
      bad += std::isnan(g) != std::isnan(w);
      continue;
    }
    const double scale = std::max({1.0, std::fabs(g), std::fabs(w)});
    bad += !(std::fabs(g - w) <= tolerance * scale);
  }
  return bad;
}

template <typename T>
constexpr double kTolerance = sizeof(T) == 4 ? 2e-5 : 1e-12;

struct Case {
  const char* name;
  PoolSpec spec;
  bool causal = false, valid_lengths = false;
  std::optional<double> sink = std::nullopt;
  std::optional<size_t> window = std::nullopt;  // left, with causal
  double alibi = 0;
  std::optional<size_t> chunk = std::nullopt;
  bool alibi_symmetric = false;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  PoolSpec sdpa;
  sdpa.distance = attnpool::Distance::dot;
  sdpa.kernel.kernel = attnpool::Kernel::exp;
  cases.push_back({"scaled dot-product", sdpa});
  cases.push_back({"scaled dot-product, causal", sdpa, true});
  cases.push_back({"scaled dot-product, valid lengths", sdpa, false, true});
  // The sink counts once, however many shards start at key 0.
  cases.push_back({"scaled dot-product, sink", sdpa, false, false, 0.75});
  cases.push_back({"scaled dot-product, causal window of 40, ALiBi", sdpa, true,
                   false, std::nullopt, 40, 0.01});
  // Chunk boundaries inside shards and between them.
  cases.push_back({"scaled dot-product, causal chunks of 24, symmetric ALiBi",
                   sdpa, true, false, std::nullopt, std::nullopt, 0.01, 24,
                   true});
  PoolSpec gaussian;
  gaussian.kernel.bandwidth = 0.4;
  cases.push_back({"Nadaraya-Watson gaussian", gaussian});
  PoolSpec boxcar = gaussian;
  boxcar.kernel.kernel = attnpool::Kernel::epanechnikov;
  boxcar.kernel.bandwidth = 1.1;
  cases.push_back({"epanechnikov sum (weights state)", boxcar});
  PoolSpec argmax = sdpa;
  argmax.normalization = attnpool::Normalization::argmax;
  cases.push_back({"argmax", argmax});
  return cases;
}

// The whole problem of a split-keys case, and this rank's shard of it.
template <typename T>
struct Problem {
  size_t n, m, d, dv;
  std::vector<T> queries, keys, values;
  std::vector<size_t> lengths;
  std::vector<size_t> begin;  // shard boundaries
  Problem(size_t n_, size_t m_, size_t d_, size_t dv_, uint64_t seed,
          bool empty_first = false)
      : n(n_), m(m_), d(d_), dv(dv_) {
    queries = Random<T>(n * d, seed);
    keys = Random<T>(m * d, seed + 1);
    values = Random<T>(m * dv, seed + 2, -3, 3);
    for (size_t i = 0; i < n; ++i) lengths.push_back((i * 37 + 5) % (m + 1));
    begin = ShardBegins(m, Ranks(), empty_first);
  }
  Mask<T> MaskOf(const Case& c) const {
    Mask<T> mask;
    mask.causal = c.causal;
    mask.causal_offset = static_cast<std::ptrdiff_t>(m) - n;
    if (c.valid_lengths) mask.valid_lengths = lengths.data();
    if (c.sink) mask.sink = T(*c.sink);
    mask.window_left = c.window;
    if (c.alibi != 0) mask.alibi_slope = T(c.alibi);
    mask.chunk = c.chunk;
    mask.alibi_symmetric = c.alibi_symmetric;
    return mask;
  }
  ConstMatrixView<T> Queries() const { return {queries.data(), n, d}; }
  ConstMatrixView<T> KeysOf(int r) const {
    return Rows(keys, d, begin[r], begin[r + 1]);
  }
  ConstMatrixView<T> ValuesOf(int r) const {
    return Rows(values, dv, begin[r], begin[r + 1]);
  }
  std::vector<T> Whole(const Case& c) const {
    std::vector<T> out(n * dv);
    attnpool::attention_pool(c.spec, Queries(), {keys.data(), m, d},
                             {values.data(), m, dv}, {out.data(), n, dv},
                             MaskOf(c));
    return out;
  }
  // The shards merged in rank order by one process: what rank_order gives.
  std::vector<T> LocalFold(const Case& c) const {
    std::vector<T> acc(n * dv), part(n * dv), max(n), sum(n), part_max(n),
        part_sum(n);
    std::vector<size_t> best(n), part_best(n);
    const PoolPartial<T> into{
        {acc.data(), n, dv}, max.data(), sum.data(), best.data()};
    const PoolPartial<T> later{{part.data(), n, dv},
                               part_max.data(),
                               part_sum.data(),
                               part_best.data()};
    for (int r = 0; r < Ranks(); ++r) {
      // The sink in the first shard's state only (an empty first shard
      // leaves the second at key 0 too).
      Mask<T> mask = MaskOf(c);
      if (r > 0) mask.sink.reset();
      attnpool::attention_pool_partial(c.spec, Queries(), KeysOf(r),
                                       ValuesOf(r), begin[r],
                                       r == 0 ? into : later, mask);
      if (r > 0) attnpool::attention_pool_merge(c.spec, into, later);
    }
    std::vector<T> out(n * dv);
    attnpool::attention_pool_finish(c.spec, into, {out.data(), n, dv});
    return out;
  }
};

template <typename T>
void SplitKeysCases() {
  const int rank = Rank();
  for (const Case& c : Cases()) {
    for (size_t d : {3, 64}) {
      for (bool empty_first : {false, true}) {
        Problem<T> p(37, 301, d, 5, kSeed + d, empty_first);
        INFO(c.name << ", d = " << d << ", seed " << kSeed + d << ", rank "
                    << rank << " of " << Ranks() << ", empty first shard "
                    << empty_first);
        const std::vector<T> whole = p.Whole(c);
        for (auto reduction :
             {mpi::Reduction::tree, mpi::Reduction::rank_order}) {
          for (int root : {0, Ranks() - 1}) {
            INFO("reduction " << int(reduction) << ", root " << root);
            mpi::Options options;
            options.reduction = reduction;
            options.root = root;
            const T sentinel = T(-1234.5);
            std::vector<T> out(p.n * p.dv, sentinel);
            mpi::attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(),
                                p.KeysOf(rank), p.ValuesOf(rank),
                                {out.data(), p.n, p.dv}, p.MaskOf(c), options);
            if (rank == root) {
              CHECK(Mismatches(out, whole, kTolerance<T>) == 0);
              if (reduction == mpi::Reduction::rank_order) {
                CHECK(SameBits(out, p.LocalFold(c)));
              }
            } else {
              CHECK(out == std::vector<T>(p.n * p.dv, sentinel));
            }
            // Everywhere: the same bits on every rank.
            options.everywhere = true;
            std::vector<T> everywhere(p.n * p.dv);
            mpi::attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(),
                                p.KeysOf(rank), p.ValuesOf(rank),
                                {everywhere.data(), p.n, p.dv}, p.MaskOf(c),
                                options);
            CHECK(Mismatches(everywhere, whole, kTolerance<T>) == 0);
            CHECK(SameOnEveryRank(everywhere));
            if (reduction == mpi::Reduction::rank_order) {
              // The rank-order fold's bits, with the result on every rank.
              CHECK(SameBits(everywhere, p.LocalFold(c)));
            }
          }
        }
      }
    }
  }
}

// Argmax over keys that all score the same: the first key of the whole
// sequence wins, so a reduction that merged shards out of key order would
// show another value row.
TEST_CASE("mpi.split_keys.argmax_ties_keep_key_order") {
  const int rank = Rank();
  for (bool empty_first : {false, true}) {
    Problem<double> p(3, 41, 4, 2, kSeed + 61, empty_first);
    for (size_t j = 0; j < p.m; ++j) {
      for (size_t k = 0; k < p.d; ++k) p.keys[j * p.d + k] = 0.5;
      p.values[j * p.dv] = double(j), p.values[j * p.dv + 1] = -double(j);
    }
    Case c = Cases().back();
    REQUIRE(c.spec.normalization == attnpool::Normalization::argmax);
    for (auto reduction : {mpi::Reduction::tree, mpi::Reduction::rank_order}) {
      INFO("reduction " << int(reduction) << ", empty first " << empty_first
                        << ", rank " << rank);
      mpi::Options options;
      options.reduction = reduction;
      options.everywhere = true;
      std::vector<double> out(p.n * p.dv, -1);
      mpi::attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(), p.KeysOf(rank),
                          p.ValuesOf(rank), {out.data(), p.n, p.dv}, {},
                          options);
      CHECK(out == std::vector<double>(p.n * p.dv, 0.0));
    }
  }
}

TEST_CASE("mpi.split_keys.float") { SplitKeysCases<float>(); }
TEST_CASE("mpi.split_keys.double") { SplitKeysCases<double>(); }

TEST_CASE("mpi.split_keys.bfloat16_keys_int8_values") {
  const int rank = Rank();
  Problem<float> p(9, 203, 64, 16, kSeed + 7);
  // The narrow shards, and the whole problem on the values they hold.
  std::vector<attnpool::bf16> keys(p.m * p.d);
  attnpool::to_bfloat16(p.keys.data(), keys.size(), keys.data());
  std::vector<int8_t> values(p.m * p.dv);
  std::vector<float> scales(p.m);
  attnpool::quantize_rows({p.values.data(), p.m, p.dv},
                          {values.data(), p.m, p.dv}, scales.data());
  attnpool::to_float(keys.data(), keys.size(), p.keys.data());
  attnpool::dequantize_rows({{values.data(), p.m, p.dv}, scales.data()},
                            {p.values.data(), p.m, p.dv});
  const Case c = Cases()[1];  // causal dot-product attention
  const size_t b = p.begin[rank], e = p.begin[rank + 1];
  const ConstMatrixView<attnpool::bf16> shard_keys(keys.data() + b * p.d, e - b,
                                                   p.d);
  const attnpool::Int8Rows shard_values{{values.data() + b * p.dv, e - b, p.dv},
                                        scales.data() + b};
  for (auto reduction : {mpi::Reduction::tree, mpi::Reduction::rank_order}) {
    mpi::Options options;
    options.reduction = reduction;
    options.everywhere = true;
    std::vector<float> out(p.n * p.dv);
    mpi::attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(), shard_keys,
                        shard_values, {out.data(), p.n, p.dv}, p.MaskOf(c),
                        options);
    INFO("reduction " << int(reduction) << ", rank " << rank);
    CHECK(Mismatches(out, p.Whole(c), kTolerance<float>) == 0);
    // The narrow shards hold exactly the floats LocalFold reads.
    if (reduction == mpi::Reduction::rank_order) {
      CHECK(SameBits(out, p.LocalFold(c)));
    }
  }
}

// The ring never reads (nor sends) keys and values that the valid
// lengths, the causal mask or the window hide from every query of every
// rank: each rank's hidden rows lie in unreadable pages (tests/fenced.h).
// Rank r holds queries [5r, 5r + 5) and keys [7r, 7r + 7).
void RingHiddenShardCases() {
  const int rank = Rank(), ranks = Ranks();
  const size_t n = 5, m = 7, d = 4, dv = 3, all_n = n * ranks,
               all_m = m * ranks;
  const std::vector<float> queries = Random<float>(all_n * d, kSeed + 71),
                           keys = Random<float>(all_m * d, kSeed + 72),
                           values = Random<float>(all_m * dv, kSeed + 73);
  PoolSpec spec;
  spec.distance = attnpool::Distance::dot;
  spec.kernel.kernel = attnpool::Kernel::exp;
  struct Hidden {
    const char* name;
    Mask<float> mask;   // whole-sequence positions
    size_t begin, end;  // the keys some query sees
  };
  std::vector<Hidden> cases;
  // Every query sees the keys before the last rank's last four.
  const std::vector<size_t> lengths(n, all_m - 4);
  Mask<float> valid;
  valid.valid_lengths = lengths.data();
  cases.push_back({"valid lengths", valid, 0, all_m - 4});
  // The last query sits at key all_n − 1: later keys are hidden.
  Mask<float> causal;
  causal.causal = true;
  cases.push_back({"causal", causal, 0, all_n});
  // Query 0 at key 2m − 1 sees keys from 2m − 3 on.
  Mask<float> window;
  window.window_left = 2;
  window.causal_offset = ptrdiff_t(2 * m - 1);
  cases.push_back({"window", window, 2 * m - 3, all_m});
  // The sink joins at key 0, which no query sees.
  window.sink = 0.5f;
  cases.push_back({"window, sink", window, 2 * m - 3, all_m});
  for (const Hidden& c : cases) {
    INFO(c.name << ", rank " << rank << " of " << ranks);
    // This rank's rows outside [begin, end), on one side, cannot be read.
    const size_t first = m * rank;
    const bool head = c.begin > 0;
    const size_t boundary =
        head ? std::min(m, c.begin > first ? c.begin - first : 0)
             : std::min(m, c.end > first ? c.end - first : 0);
    attnpool_test::Fenced<float> fenced_keys(m, d, boundary, head),
        fenced_values(m, dv, boundary, head);
    const size_t readable_begin = head ? boundary : 0,
                 readable_end = head ? m : boundary;
    for (size_t j = readable_begin; j < readable_end; ++j) {
      std::copy_n(keys.data() + (first + j) * d, d, fenced_keys.view().row(j));
      std::copy_n(values.data() + (first + j) * dv, dv,
                  fenced_values.view().row(j));
    }
    Mask<float> mask = c.mask;
    if (mask.valid_lengths != nullptr) mask.valid_lengths = lengths.data();
    std::vector<float> out(n * dv);
    mpi::ring_attention_pool(
        MPI_COMM_WORLD, spec, Rows(queries, d, n * rank, n * (rank + 1)),
        fenced_keys.view(), fenced_values.view(), {out.data(), n, dv}, mask);
    // Against one process over the whole sequence.
    std::vector<float> whole(all_n * dv);
    std::vector<size_t> all_lengths(all_n, all_m - 4);
    Mask<float> whole_mask = c.mask;
    if (whole_mask.valid_lengths != nullptr) {
      whole_mask.valid_lengths = all_lengths.data();
    }
    attnpool::attention_pool(
        spec, {queries.data(), all_n, d}, {keys.data(), all_m, d},
        {values.data(), all_m, dv}, {whole.data(), all_n, dv}, whole_mask);
    CHECK(Mismatches(out,
                     std::vector<float>(whole.begin() + n * dv * rank,
                                        whole.begin() + n * dv * (rank + 1)),
                     kTolerance<float>) == 0);
  }
}

TEST_CASE("mpi.ring.never_reads_hidden_keys") { RingHiddenShardCases(); }

template <typename T>
void RingCases() {
  const int rank = Rank(), ranks = Ranks();
  for (const Case& c : Cases()) {
    // Valid lengths are per query; causal: both ways below.
    if (c.valid_lengths || (c.causal && !c.window && !c.chunk)) continue;
    for (bool empty_first : {false, true}) {
      Problem<T> p(203, 203, 16, 6, kSeed + 11, empty_first);  // self-attention
      const std::vector<size_t> query_begin = ShardBegins(p.n, ranks);
      // Queries sharded the other way round from the keys.
      std::vector<size_t> qb(ranks + 1, 0);
      for (int r = 0; r < ranks; ++r) {
        qb[r + 1] =
            qb[r] + (query_begin[ranks - r] - query_begin[ranks - r - 1]);
      }
      for (bool causal : {false, true}) {
        Case ring_case = c;
        ring_case.causal = causal;
        INFO(c.name << (causal ? ", causal" : "") << ", rank " << rank << " of "
                    << ranks << ", seed " << kSeed + 11);
        Mask<T> mask = p.MaskOf(ring_case);  // whole-sequence positions
        const size_t n_local = qb[rank + 1] - qb[rank];
        std::vector<T> out(n_local * p.dv);
        mpi::ring_attention_pool(MPI_COMM_WORLD, ring_case.spec,
                                 Rows(p.queries, p.d, qb[rank], qb[rank + 1]),
                                 p.KeysOf(rank), p.ValuesOf(rank),
                                 {out.data(), n_local, p.dv}, mask);
        const std::vector<T> whole = p.Whole(ring_case);
        const std::vector<T> mine(whole.begin() + qb[rank] * p.dv,
                                  whole.begin() + qb[rank + 1] * p.dv);
        CHECK(Mismatches(out, mine, kTolerance<T>) == 0);
        // The ring against split keys (all queries everywhere).
        mpi::Options everywhere;
        everywhere.everywhere = true;
        std::vector<T> split(p.n * p.dv);
        mpi::attention_pool(MPI_COMM_WORLD, ring_case.spec, p.Queries(),
                            p.KeysOf(rank), p.ValuesOf(rank),
                            {split.data(), p.n, p.dv}, mask, everywhere);
        const std::vector<T> split_mine(split.begin() + qb[rank] * p.dv,
                                        split.begin() + qb[rank + 1] * p.dv);
        CHECK(Mismatches(out, split_mine, kTolerance<T>) == 0);
      }
    }
  }
}

TEST_CASE("mpi.ring.float") { RingCases<float>(); }
TEST_CASE("mpi.ring.double") { RingCases<double>(); }

template <typename T>
void RegressionCases() {
  const int rank = Rank();
  const size_t n = 401, d = 2, dy = 3, queries = 57;
  const std::vector<T> x = Random<T>(n * d, kSeed + 21, 0, 5);
  const std::vector<T> y = Random<T>(n * dy, kSeed + 22);
  const std::vector<T> q = Random<T>(queries * d, kSeed + 23, -0.5, 5.5);
  const std::vector<size_t> begin = ShardBegins(n, Ranks());
  const size_t b = begin[rank], e = begin[rank + 1];
  for (attnpool::Kernel kernel :
       {attnpool::Kernel::gaussian, attnpool::Kernel::epanechnikov}) {
    for (bool per_dimension : {false, true}) {
      INFO("kernel " << int(kernel) << ", per-dimension " << per_dimension
                     << ", rank " << rank << ", seed " << kSeed + 21);
      const std::vector<double> widths = {0.3, 0.5};
      const auto fit = [&](ConstMatrixView<T> xs, ConstMatrixView<T> ys) {
        return per_dimension
                   ? attnpool::NadarayaWatson<T>(kernel, widths, xs, ys)
                   : attnpool::NadarayaWatson<T>(kernel, 0.3, xs, ys);
      };
      const auto whole_fit = fit({x.data(), n, d}, {y.data(), n, dy});
      std::vector<T> want(queries * dy);
      whole_fit.predict({q.data(), queries, d}, {want.data(), queries, dy});
      const ConstMatrixView<T> xs = Rows(x, d, b, e), ys = Rows(y, dy, b, e);
      const auto distributed = per_dimension
                                   ? mpi::DistributedNadarayaWatson<T>(
                                         MPI_COMM_WORLD, kernel, widths, xs, ys)
                                   : mpi::DistributedNadarayaWatson<T>(
                                         MPI_COMM_WORLD, kernel, 0.3, xs, ys);
      CHECK(distributed.size() == n);
      CHECK(distributed.offset() == b);
      for (auto reduction :
           {mpi::Reduction::tree, mpi::Reduction::rank_order}) {
        mpi::Options options;
        options.reduction = reduction;
        options.everywhere = true;
        std::vector<T> got(queries * dy);
        distributed.predict({q.data(), queries, d}, {got.data(), queries, dy},
                            options);
        CHECK(Mismatches(got, want, kTolerance<T>) == 0);
        if (reduction == mpi::Reduction::tree) continue;
        // rank_order: the per-shard fits' states merged in order, bitwise.
        std::vector<T> acc(queries * dy), part(queries * dy), mx(queries),
            sm(queries), pmx(queries), psm(queries);
        std::vector<size_t> best(queries), pbest(queries);
        const PoolPartial<T> into{
            {acc.data(), queries, dy}, mx.data(), sm.data(), best.data()};
        const PoolPartial<T> later{
            {part.data(), queries, dy}, pmx.data(), psm.data(), pbest.data()};
        bool started = false;
        for (int r = 0; r < Ranks(); ++r) {
          if (begin[r] == begin[r + 1]) continue;
          const auto shard = fit(Rows(x, d, begin[r], begin[r + 1]),
                                 Rows(y, dy, begin[r], begin[r + 1]));
          shard.predict_partial({q.data(), queries, d}, begin[r],
                                started ? later : into);
          if (started)
            attnpool::attention_pool_merge(shard.pool_spec(), into, later);
          started = true;
        }
        std::vector<T> fold(queries * dy);
        attnpool::attention_pool_finish(whole_fit.pool_spec(), into,
                                        {fold.data(), queries, dy});
        CHECK(SameBits(got, fold));
      }
    }
  }
}

TEST_CASE("mpi.nadaraya_watson.float") { RegressionCases<float>(); }
TEST_CASE("mpi.nadaraya_watson.double") { RegressionCases<double>(); }

template <typename T>
void CrossValidationCases() {
  const int rank = Rank();
  const size_t n = 301, d = 2, dy = 2;
  const std::vector<T> x = Random<T>(n * d, kSeed + 41, 0, 5);
  std::vector<T> y = Random<T>(n * dy, kSeed + 42, -0.2, 0.2);
  for (size_t i = 0; i < n; ++i) y[i * dy] += std::sin(x[i * d]);
  const std::vector<size_t> begin = ShardBegins(n, Ranks());
  const size_t b = begin[rank], e = begin[rank + 1];
  const std::vector<double> grid = {0.05, 0.1, 0.2, 0.4, 0.8, 1.6};
  for (attnpool::Kernel kernel :
       {attnpool::Kernel::gaussian, attnpool::Kernel::epanechnikov}) {
    for (size_t folds : {size_t(0), size_t(2), size_t(7)}) {
      for (bool scaled : {false, true}) {
        INFO("kernel " << int(kernel) << ", folds " << folds << ", scales "
                       << scaled << ", rank " << rank << " of " << Ranks()
                       << ", seed " << kSeed + 41);
        attnpool::CrossValidationOptions options;
        options.folds = folds;
        if (scaled) options.scales = {1.5, 0.75};
        // One process, every pair and one exp per pair and bandwidth.
        attnpool::CrossValidationOptions exhaustive = options;
        exhaustive.allow_powers = false;
        exhaustive.skip_distant = false;
        const auto want = attnpool::cross_validate(
            kernel, ConstMatrixView<T>(x.data(), n, d),
            ConstMatrixView<T>(y.data(), n, dy), grid, exhaustive);
        const auto got =
            mpi::cross_validate(MPI_COMM_WORLD, kernel, Rows(x, d, b, e),
                                Rows(y, dy, b, e), grid, options);
        CHECK(got.unpredictable == want.unpredictable);
        CHECK(got.best == want.best);
        CHECK(Mismatches(got.scores, want.scores,
                         sizeof(T) == 4 ? 1e-4 : 1e-10) == 0);
        CHECK(SameOnEveryRank(got.scores));
        // Every pair but the held-out ones, for every bandwidth.
        const size_t held_out = folds == 0 ? n : [&] {
          size_t pairs = 0;
          for (size_t f = 0; f < folds; ++f) {
            const size_t in_fold = (n - f + folds - 1) / folds;
            pairs += in_fold * in_fold;
          }
          return pairs;
        }();
        CHECK(got.weights_formed == (n * n - held_out) * grid.size());
      }
    }
  }
}

// Data and grid of any magnitude T holds: the scores of the same data near
// 1, as one process's (scaled into T's range alike).
template <typename T>
void CrossValidationMagnitudes() {
  const int rank = Rank();
  const size_t n = 151, d = 2;
  const std::vector<T> x = Random<T>(n * d, kSeed + 43, 0, 5);
  const std::vector<T> y = Random<T>(n, kSeed + 44, -1, 1);
  const std::vector<size_t> begin = ShardBegins(n, Ranks());
  const size_t b = begin[rank], e = begin[rank + 1];
  const std::vector<double> grid = {0.1, 0.2, 0.4, 0.8};
  const auto want = attnpool::cross_validate(
      attnpool::Kernel::gaussian, ConstMatrixView<T>(x.data(), n, d),
      ConstMatrixView<T>(y.data(), n, 1), grid);
  for (double magnitude :
       {sizeof(T) == 4 ? 1e-30 : 1e-300, sizeof(T) == 4 ? 1e30 : 1e300}) {
    INFO("data and grid times " << magnitude << ", rank " << rank);
    std::vector<T> scaled_x(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      scaled_x[i] = T(double(x[i]) * magnitude);
    }
    std::vector<double> scaled_grid = grid;
    for (double& h : scaled_grid) h *= magnitude;
    const auto got = mpi::cross_validate(
        MPI_COMM_WORLD, attnpool::Kernel::gaussian, Rows(scaled_x, d, b, e),
        ConstMatrixView<T>(y.data() + b, e - b, 1), scaled_grid);
    CHECK(got.best == want.best);
    CHECK(Mismatches(got.scores, want.scores, sizeof(T) == 4 ? 1e-3 : 1e-9) ==
          0);
  }
}

TEST_CASE("mpi.cross_validate.magnitudes") {
  CrossValidationMagnitudes<float>();
  CrossValidationMagnitudes<double>();
}

TEST_CASE("mpi.cross_validate.float") { CrossValidationCases<float>(); }
TEST_CASE("mpi.cross_validate.double") { CrossValidationCases<double>(); }

// What a rank caught from a collective call.
struct Caught {
  std::string argument, message;
};
template <typename Call>
Caught CatchError(Call&& call) {
  try {
    call();
  } catch (const attnpool::Error& error) {
    return {error.argument(), error.what()};
  }
  return {"(nothing thrown)", ""};
}

TEST_CASE("mpi.errors") {
  const int rank = Rank(), ranks = Ranks();
  const int failing = ranks - 1;  // rank 0 alone when there is one
  Problem<float> p(5, 40, 4, 3, kSeed + 31);
  const Case c = Cases()[0];
  std::vector<float> out(p.n * p.dv, 7.0f);
  const std::vector<float> untouched = out;
  INFO("rank " << rank << " of " << ranks);

  // One rank's keys have the wrong depth: every rank throws, naming it.
  const Caught bad_keys = CatchError([&] {
    ConstMatrixView<float> keys = p.KeysOf(rank);
    if (rank == failing) keys.cols = keys.stride = p.d - 1;
    mpi::Options options;
    options.everywhere = true;
    mpi::attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(), keys,
                        p.ValuesOf(rank), {out.data(), p.n, p.dv}, {}, options);
  });
  CHECK(bad_keys.argument == "keys.cols");
  if (rank != failing) {
    CHECK(bad_keys.message.find("on rank " + std::to_string(failing)) !=
          std::string::npos);
  }
  CHECK(out == untouched);

  // Replicated arguments that differ: named, with two ranks' values.
  if (ranks > 1) {
    const Caught mismatch = CatchError([&] {
      PoolSpec spec = c.spec;
      if (rank == failing) spec.kernel.kernel = attnpool::Kernel::gaussian;
      mpi::attention_pool(MPI_COMM_WORLD, spec, p.Queries(), p.KeysOf(rank),
                          p.ValuesOf(rank), {out.data(), p.n, p.dv});
    });
    CHECK(mismatch.argument == "spec.kernel.kernel");
    CHECK(mismatch.message.find("differs across ranks") != std::string::npos);
    // Numbers named as numbers (not their bits); −0 means +0.
    const Caught width = CatchError([&] {
      PoolSpec spec = c.spec;
      spec.kernel.bandwidth = rank == failing ? 2.0 : 0.5;
      mpi::attention_pool(MPI_COMM_WORLD, spec, p.Queries(), p.KeysOf(rank),
                          p.ValuesOf(rank), {out.data(), p.n, p.dv});
    });
    CHECK(width.argument == "spec.kernel.bandwidth");
    CHECK(width.message.find("differs across ranks: 0.5 on rank 0, 2 on") !=
          std::string::npos);
    const Caught zero_slope = CatchError([&] {
      Mask<float> mask;
      mask.alibi_slope = rank == failing ? -0.0f : 0.0f;
      mpi::attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(), p.KeysOf(rank),
                          p.ValuesOf(rank), {out.data(), p.n, p.dv}, mask);
    });
    CHECK(zero_slope.argument == "(nothing thrown)");
    // A ring rank without queries has no valid lengths to give.
    const std::vector<size_t> lengths(p.n, 40);
    const Caught no_queries = CatchError([&] {
      Mask<float> mask;
      const size_t n = rank == failing ? 0 : p.n;
      mask.valid_lengths = n == 0 ? nullptr : lengths.data();
      mpi::ring_attention_pool(MPI_COMM_WORLD, c.spec,
                               {p.queries.data(), n, p.d}, p.KeysOf(rank),
                               p.ValuesOf(rank), {out.data(), n, p.dv}, mask);
    });
    CHECK(no_queries.argument == "(nothing thrown)");
    out = untouched;

    const Caught rows = CatchError([&] {
      const ConstMatrixView<float> queries{p.queries.data(),
                                           rank == 0 ? p.n : p.n - 1, p.d};
      mpi::attention_pool(MPI_COMM_WORLD, c.spec, queries, p.KeysOf(rank),
                          p.ValuesOf(rank), {out.data(), queries.rows, p.dv});
    });
    CHECK(rows.argument == "queries.rows");
  }
  // Valid lengths within the whole sequence (40 keys over all ranks), as
  // attention_pool's, for split keys and the ring.
  {
    std::vector<size_t> past(p.n, 40);
    past[p.n - 1] = 41;
    Mask<float> mask;
    mask.valid_lengths = past.data();
    const Caught split = CatchError([&] {
      mpi::attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(), p.KeysOf(rank),
                          p.ValuesOf(rank), {out.data(), p.n, p.dv}, mask);
    });
    CHECK(split.argument == "mask.valid_lengths");
    const Caught ring = CatchError([&] {
      mpi::ring_attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(),
                               p.KeysOf(rank), p.ValuesOf(rank),
                               {out.data(), p.n, p.dv}, mask);
    });
    CHECK(ring.argument == "mask.valid_lengths");
    CHECK(out == untouched);
  }
  // A root outside the communicator; a ring with a bias matrix.
  const Caught root = CatchError([&] {
    mpi::Options options;
    options.root = ranks;
    mpi::attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(), p.KeysOf(rank),
                        p.ValuesOf(rank), {out.data(), p.n, p.dv}, {}, options);
  });
  CHECK(root.argument == "options.root");
  std::vector<float> bias(p.n * 40);
  const Caught ring_bias = CatchError([&] {
    Mask<float> mask;
    mask.bias = {bias.data(), p.n, p.KeysOf(rank).rows};
    mpi::ring_attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(),
                             p.KeysOf(rank), p.ValuesOf(rank),
                             {out.data(), p.n, p.dv}, mask);
  });
  CHECK(ring_bias.argument == "mask.bias");
  // A ring rank whose out is too small.
  const Caught ring_out = CatchError([&] {
    const size_t rows = rank == failing ? p.n - 1 : p.n;
    mpi::ring_attention_pool(MPI_COMM_WORLD, c.spec, p.Queries(),
                             p.KeysOf(rank), p.ValuesOf(rank),
                             {out.data(), rows, p.dv});
  });
  CHECK(ring_out.argument == "out.rows");
  CHECK(out == untouched);
  // Regression: no training point anywhere.
  const Caught empty = CatchError([&] {
    mpi::DistributedNadarayaWatson<double>(
        MPI_COMM_WORLD, attnpool::Kernel::gaussian, 1.0,
        ConstMatrixView<double>(nullptr, 0, 2),
        ConstMatrixView<double>(nullptr, 0, 1));
  });
  CHECK(empty.argument == "x.rows");
  // A bad thread count on a rank whose shard of training points is empty.
  if (ranks > 1) {
    const std::vector<double> xs = Random<double>(6, kSeed + 52);
    const size_t points = rank == failing ? 0 : 3;
    const mpi::DistributedNadarayaWatson<double> fit(
        MPI_COMM_WORLD, attnpool::Kernel::gaussian, 1.0,
        ConstMatrixView<double>(xs.data(), points, 1),
        ConstMatrixView<double>(xs.data() + 3, points, 1));
    std::vector<double> predicted(2);
    const Caught threads = CatchError([&] {
      attnpool::Execution execution;
      execution.threads = rank == failing ? -1 : 1;
      fit.predict(ConstMatrixView<double>(xs.data(), 2, 1),
                  {predicted.data(), 2, 1}, {}, execution);
    });
    CHECK(threads.argument == "execution.threads");
  }
  // Cross-validation: more folds than points in all; folds that differ.
  const std::vector<double> xs = Random<double>(4, kSeed + 51);
  const Caught folds = CatchError([&] {
    attnpool::CrossValidationOptions options;
    options.folds = 4 * ranks + 1;
    mpi::cross_validate(MPI_COMM_WORLD, attnpool::Kernel::gaussian,
                        ConstMatrixView<double>(xs.data(), 4, 1),
                        ConstMatrixView<double>(xs.data(), 4, 1), {0.5},
                        options);
  });
  CHECK(folds.argument == "options.folds");
  if (ranks > 1) {
    const Caught differ = CatchError([&] {
      attnpool::CrossValidationOptions options;
      options.folds = rank == failing ? 3 : 2;
      mpi::cross_validate(MPI_COMM_WORLD, attnpool::Kernel::gaussian,
                          ConstMatrixView<double>(xs.data(), 4, 1),
                          ConstMatrixView<double>(xs.data(), 4, 1), {0.5},
                          options);
    });
    CHECK(differ.argument == "options.folds");
    CHECK(differ.message.find("differs across ranks") != std::string::npos);
  }
}

// What `call` threw: "std::bad_alloc", "Error(<argument>)", or "(nothing
// thrown)".
template <typename Call>
std::string WhatThrew(Call&& call) {
  try {
    call();
  } catch (const std::bad_alloc&) {
    return "std::bad_alloc";
  } catch (const attnpool::Error& error) {
    return "Error(" + std::string(error.argument()) + ")";
  }
  return "(nothing thrown)";
}

// WhatThrew(call), run where `limited` with the address space limited to
// what the process maps now plus `headroom` bytes (restored after).
template <typename Call>
std::string WhatThrewLimited(bool limited, size_t headroom, Call&& call) {
  rlimit before{};
  getrlimit(RLIMIT_AS, &before);
  if (limited) {
    size_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    rlimit tight = before;
    tight.rlim_cur = pages * sysconf(_SC_PAGESIZE) + headroom;
    setrlimit(RLIMIT_AS, &tight);
  }
  const std::string threw = WhatThrew(call);
  setrlimit(RLIMIT_AS, &before);
  return threw;
}

// A rank that runs out of memory throws on every rank: none is left
// waiting in a collective for it (the test's timeout turns a hang into a
// failure). The last rank gets 8 MiB to spare; each call needs more than
// 16 MiB beyond its arguments (the state of 2²² queries, or the scaled
// copy of 2²¹ coordinates), allocated before its first transfer.
TEST_CASE("mpi.out_of_memory_on_one_rank_throws_on_every_rank") {
  const int rank = Rank(), ranks = Ranks();
  // (ASan's allocator aborts where malloc would fail.)
  if (ranks < 2 || attnpool::detail::kAddressSanitizer) return;
  const bool limited = rank == ranks - 1;
  constexpr size_t kHeadroom = size_t(8) << 20, kMany = size_t(1) << 22;
  INFO("rank " << rank << " of " << ranks);
  const std::vector<float> many = Random<float>(kMany, kSeed + 61),
                           point{0.25f * float(rank)};
  std::vector<float> out(kMany, 7.0f);
  const ConstMatrixView<float> queries(many.data(), kMany, 1),
      key(point.data(), 1, 1);
  const MatrixView<float> out_view(out.data(), kMany, 1);
  attnpool::Execution execution;
  execution.threads = 1;  // (no thread to start under the limit)
  const PoolSpec spec;
  const std::string failed =
      limited ? "std::bad_alloc"
              : "Error(rank " + std::to_string(ranks - 1) + ")";
  const auto limit = [&](auto call) {
    return WhatThrewLimited(limited, kHeadroom, call);
  };

  const auto split_keys = [&] {
    mpi::attention_pool(MPI_COMM_WORLD, spec, queries, key, key, out_view, {},
                        {}, execution);
  };
  const auto ring = [&] {
    mpi::ring_attention_pool(MPI_COMM_WORLD, spec, queries, key, key, out_view,
                             {}, execution);
  };
  const mpi::DistributedNadarayaWatson<float> fit(
      MPI_COMM_WORLD, attnpool::Kernel::gaussian, 1.0, key, key);
  const auto predict = [&] { fit.predict(queries, out_view, {}, execution); };
  // Two points of 2²¹ coordinates on each rank.
  const auto cross_validate = [&] {
    mpi::cross_validate(MPI_COMM_WORLD, attnpool::Kernel::gaussian,
                        {many.data(), 2, kMany / 2}, {many.data(), 2, 1}, {0.5},
                        {}, execution);
  };
  // Each works without the limit...
  CHECK(WhatThrew(split_keys) == "(nothing thrown)");
  CHECK(WhatThrew(ring) == "(nothing thrown)");
  CHECK(WhatThrew(predict) == "(nothing thrown)");
  CHECK(WhatThrew(cross_validate) == "(nothing thrown)");
  // ... and throws on every rank with it, writing nothing.
  out.assign(kMany, 7.0f);
  CHECK(limit(split_keys) == failed);
  CHECK(limit(ring) == failed);
  CHECK(limit(predict) == failed);
  CHECK(limit(cross_validate) == failed);
  CHECK(out == std::vector<float>(kMany, 7.0f));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  // Every rank reports its own failures; the exit status is the worst.
  const int result = Catch::Session().run(argc, argv);
  int worst = result;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
