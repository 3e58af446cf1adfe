// Huge shapes: index arithmetic past 2³¹ and 2³² elements.
//  - Every function of the API table with row strides of 2³¹ + 9 elements,
//    so that element offsets pass 2³² (and 2³³) while only the rows are
//    touched (reserved address space, MAP_NORESERVE): cheap natively, run
//    by its own CTest entry (the sanitizer build's too).
//  - Hidden ([.huge], run by their own CTest entries on native, unsanitized
//    builds): Nadaraya–Watson through the fused kernel over 65600² > 2³²
//    pairs in bounded memory (a few seconds), and (~8.6 GB and ~10-20 s
//    each) the staged pipeline with
//    n·m = 46341² > 2³¹ weights, whose peak resident memory must be one n×m
//    workspace (a naive pipeline keeps several n×m matrices), and a distance
//    matrix of 46341² > 2³¹ entries whose rows lie 2¹⁷ elements apart, so
//    offsets reach 6·10⁹ > 2³².
#include <attnpool/attnpool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <new>
#include <random>
#include <vector>

#include "src/reference.h"
#include "tests/accuracy.h"
#include "tests/api_table.h"
#include "tests/test_data.h"

namespace attnpool_test {
namespace {

using attnpool::Distance;
using attnpool::Kernel;
using attnpool::Normalization;

constexpr size_t kHugeStride = (size_t{1} << 31) + 9;

template <typename T>
void HugeStrides() {
  Sizes sizes;
  sizes[kN] = 3;
  sizes[kM] = 5;
  sizes[kD] = 17;  // Gram form
  sizes[kDv] = 3;
  Layout layout;
  layout.padding = 0;
  layout.huge_stride = kHugeStride;
  uint64_t seed = kSeed + 700;
  for (const Api<T>& api : Apis<T>()) {
    INFO(api.name << (sizeof(T) == 4 ? " float" : " double"));
    std::unique_ptr<Workspace<T>> ws;
    try {
      ws = std::make_unique<Workspace<T>>(api, sizes, layout);
    } catch (const std::bad_alloc&) {
      WARN("cannot reserve the address space; skipped");
      return;
    }
    ws->FillRandom(++seed);
    if (api.uses_mask) {
      ws->UseBias();
      ws->UseValidLengths();
    }
    const auto before = ws->Clone();
    api.run(ws->args);
    REQUIRE(api.verify(before->args, ws->args) == "");
  }
}

// Hidden from plain runs (qemu-user tracks every page of the reserved
// address space: a minute there); CTest runs it natively (huge.strides…).
TEST_CASE("huge: element offsets past 2^32 in every function",
          "[.huge_strides]") {
  HugeStrides<float>();
  HugeStrides<double>();
}

// Views of no element but astronomically many rows (0 columns: a .npy
// header may claim 2⁶³ rows of nothing) are valid; every function of the
// API table must then finish in O(1) or refuse (an error naming the
// argument, or out of memory), never loop over the rows. A call that loops
// in a parallel loop is cancelled through Execution::progress after a
// second, and fails here (one that loops elsewhere, by CTest's timeout).
template <typename T>
void EmptyButHugeShapes() {
  constexpr size_t kHuge = size_t{1} << 63;
  // n, m, d, dv: every view either has 0 columns or 0 rows.
  const size_t shapes[][kDimCount] = {{kHuge, 0, 0, 0},    {0, kHuge, 0, 0},
                                      {kHuge, 0, 5, 0},    {kHuge, 3, 0, 0},
                                      {3, kHuge, 0, 0},    {SIZE_MAX, 0, 0, 0},
                                      {3, SIZE_MAX, 0, 0}, {SIZE_MAX, 3, 0, 0}};
  Sizes small;
  size_t returned = 0, refused = 0;
  for (const Api<T>& api : Apis<T>()) {
    Workspace<T> ws(api, small);
    ws.FillRandom(kSeed + 720);
    for (const auto& shape : shapes) {
      Sizes sizes;
      for (int dim = 0; dim < kDimCount; ++dim) sizes.size[dim] = shape[dim];
      INFO(api.name << (sizeof(T) == 4 ? " float" : " double")
                    << " n=" << sizes[kN] << " m=" << sizes[kM]
                    << " d=" << sizes[kD] << " dv=" << sizes[kDv]);
      Args<T> args = ws.args;
      for (size_t s = 0; s < api.slots.size(); ++s) {
        const SlotSpec& slot = api.slots[s];
        args.views[s] =
            attnpool::MatrixView<T>(ws.slot(s).data, sizes[slot.rows],
                                    sizes[slot.cols], sizes[slot.cols]);
      }
      if (api.setup) api.setup(args, sizes);
      struct Deadline {
        std::chrono::steady_clock::time_point end =
            std::chrono::steady_clock::now() + std::chrono::seconds(1);
        static int Poll(void* context, double) {
          return std::chrono::steady_clock::now() <
                 static_cast<Deadline*>(context)->end;
        }
      } deadline;
      args.execution.progress = &Deadline::Poll;
      args.execution.progress_context = &deadline;
      try {
        api.run(args);
        ++returned;
      } catch (const attnpool::Error&) {
        ++refused;  // (naming the argument)
      } catch (const std::bad_alloc&) {
        // (the keys' packed copy of astronomically many rows, refused at
        // once as out of memory)
        ++refused;
      } catch (const attnpool::Cancelled&) {
        FAIL_CHECK("looped over the rows for a second");
      }
    }
  }
  // Every call ended one way or the other, and both ways were taken.
  REQUIRE(returned + refused == Apis<T>().size() * std::size(shapes));
  REQUIRE(returned > 0);
  REQUIRE(refused > 0);
}

TEST_CASE("huge: shapes of no element but 2^63 rows finish at once", "[huge]") {
  EmptyButHugeShapes<float>();
  EmptyButHugeShapes<double>();
}

// Peak resident set of the process so far, in bytes.
size_t PeakResidentBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;
}

// Row i of a 1-D Nadaraya–Watson output (Gaussian of bandwidth h) against
// the formula in double, within the pooling's float bound.
void RequireGaussianRow(const std::vector<float>& queries,
                        const std::vector<float>& keys,
                        const std::vector<float>& values, double h,
                        const std::vector<float>& out, size_t i) {
  const size_t m = keys.size();
  double largest = -std::numeric_limits<double>::infinity();
  std::vector<double> logits(m);
  for (size_t j = 0; j < m; ++j) {
    const double r = double(queries[i]) - double(keys[j]);
    logits[j] = -r * r / (2 * h * h);
    largest = std::max(largest, logits[j]);
  }
  double sum = 0, weighted = 0, scale = 0;
  for (size_t j = 0; j < m; ++j) {
    const double w = std::exp(logits[j] - largest);
    sum += w;
    weighted += w * values[j];
    scale += w * std::fabs(values[j]);
  }
  const double u = kUnitRoundoff<float>;
  const double relative = (2 * m + 16) * u + 6e-7 + u * (8 * 200 + 6);
  INFO("row " << i << " got " << out[i] << " want " << weighted / sum);
  REQUIRE(std::fabs(out[i] - weighted / sum) <= relative * scale / sum + 1e-30);
}

constexpr size_t kSide = 46341;  // 46341² = 2³¹ + 4633

TEST_CASE("huge: staged pipeline over 46341^2 weights in one workspace",
          "[.huge]") {
  const size_t n = kSide, m = kSide;
  std::vector<float> queries(n), keys(m), values(m), out(n);
  std::mt19937_64 rng(kSeed + 800);
  std::uniform_real_distribution<float> unit(0, 1);
  for (auto& x : queries) x = unit(rng);
  for (size_t j = 0; j < m; ++j) {
    keys[j] = unit(rng);
    values[j] = std::sin(10.0f * keys[j]);
  }
  const double h = 0.05;
  const attnpool::PoolSpec spec{
      Distance::sqeuclidean, {Kernel::gaussian, h}, Normalization::sum};
  const size_t workspace = n * m * sizeof(float);
  const size_t peak_before = PeakResidentBytes();
  const auto start = std::chrono::steady_clock::now();
  attnpool::attention_pool_staged(spec, {queries.data(), n, 1},
                                  {keys.data(), m, 1}, {values.data(), m, 1},
                                  {out.data(), n, 1});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const size_t peak_after = PeakResidentBytes();
  const size_t growth = peak_after - peak_before;
  std::printf(
      "huge staged pipeline: n = m = %zu (n*m = %zu > 2^31), %.1f s; peak "
      "resident memory grew by %.3f GB for a workspace of %.3f GB\n",
      n, n * m, seconds, growth / 1e9, workspace / 1e9);
  // One n×m workspace (plus packed values, m × one vector, and slack), not
  // two: a second n×m matrix would add 8.6 GB.
  CHECK(growth >= workspace - workspace / 100);
  CHECK(growth <= workspace + (size_t{128} << 20));
  // Sample rows against the formula in double.
  for (size_t i : {size_t{0}, size_t{1}, n / 3, n / 2, n - 2, n - 1}) {
    RequireGaussianRow(queries, keys, values, h, out, i);
  }
}

// Nadaraya–Watson through the fused kernel over n·m = 65600² > 2³² pairs
// (d = 1): pair counters past 2³², and a weight matrix that would need
// 17 GB while the fused path may grow the peak resident set by the packed
// keys and values plus its per-thread blocks only (64 MiB allowed).
TEST_CASE("huge: fused pool over 65600^2 pairs in bounded memory", "[.huge]") {
  const size_t n = 65600, m = 65600;
  static_assert(size_t{65600} * 65600 > (size_t{1} << 32));
  std::vector<float> queries(n), keys(m), values(m), out(n);
  std::mt19937_64 rng(kSeed + 802);
  std::uniform_real_distribution<float> unit(0, 5);
  for (auto& x : queries) x = unit(rng);
  for (size_t j = 0; j < m; ++j) {
    keys[j] = unit(rng);
    values[j] = 2 * std::sin(keys[j]) + keys[j];
  }
  const double h = 0.02;
  const attnpool::PoolSpec spec{
      Distance::sqeuclidean, {Kernel::gaussian, h}, Normalization::sum};
  const size_t peak_before = PeakResidentBytes();
  const auto start = std::chrono::steady_clock::now();
  attnpool::attention_pool(spec, {queries.data(), n, 1}, {keys.data(), m, 1},
                           {values.data(), m, 1}, {out.data(), n, 1});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const size_t growth = PeakResidentBytes() - peak_before;
  std::printf(
      "huge fused pool: n = m = %zu (n*m = %zu > 2^32), %.1f s; peak resident "
      "memory grew by %.1f MB (the weights would take %.1f GB)\n",
      n, n * m, seconds, growth / 1e6, n * m * sizeof(float) / 1e9);
  CHECK(growth <= (size_t{64} << 20));
  for (size_t i : {size_t{0}, n / 2, n - 1}) {
    RequireGaussianRow(queries, keys, values, h, out, i);
  }
}

// Value rows of 2²² floats (16 MiB each) in bounded address space: per
// thread, the fused kernel keeps its query block's accumulators (rows × dv)
// and, reading the values in place, no copy of a key block's values (512
// keys × dv: 8 GiB here). The calls run with the address space limited to
// what the process maps plus 1 GiB.
TEST_CASE("huge: fused pool over wide value rows in bounded memory",
          "[.huge]") {
  const size_t m = 4, dv = size_t{1} << 22;
  const std::vector<float> keys{0.0f, 1.0f, 2.0f, 3.0f};
  std::vector<float> values(m * dv);
  for (size_t j = 0; j < m; ++j) {
    for (size_t c = 0; c < dv; ++c) values[j * dv + c] = float(j + c % 7);
  }
  struct Call {
    const char* path;
    size_t n;
    attnpool::PoolSpec spec;
  };
  const Call calls[] = {
      {"decode",
       1,
       {Distance::dot, {Kernel::exp, 1.0, 0.5}, Normalization::softmax}},
      {"tile",
       3,
       {Distance::sqeuclidean, {Kernel::gaussian, 1.0}, Normalization::sum}},
  };
  const std::vector<float> queries{1.2f, 2.7f, -0.4f};
  std::vector<float> out(3 * dv);
  // The threads start before the limit.
  attnpool::attention_pool(calls[1].spec, {queries.data(), 3, 1},
                           {keys.data(), m, 1}, {values.data(), m, 8},
                           {out.data(), 3, 8});
  for (const Call& call : calls) {
    INFO(call.path);
    std::fill(out.begin(), out.end(), -1.0f);
    rlimit before{};
    getrlimit(RLIMIT_AS, &before);
    size_t pages = 0;
    std::FILE* statm = std::fopen("/proc/self/statm", "r");
    REQUIRE(statm != nullptr);
    REQUIRE(std::fscanf(statm, "%zu", &pages) == 1);
    std::fclose(statm);
    rlimit limit = before;
    limit.rlim_cur = pages * sysconf(_SC_PAGESIZE) + (size_t{1} << 30);
    REQUIRE(setrlimit(RLIMIT_AS, &limit) == 0);
    bool threw = false;
    try {
      attnpool::attention_pool(call.spec, {queries.data(), call.n, 1},
                               {keys.data(), m, 1}, {values.data(), m, dv},
                               {out.data(), call.n, dv});
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    setrlimit(RLIMIT_AS, &before);
    REQUIRE_FALSE(threw);
    CHECK(attnpool::last_fused_path() == call.path);
    // Row i, column c: Σ w_j (j + c mod 7) / Σ w_j.
    for (size_t i = 0; i < call.n; ++i) {
      double sum = 0, mean = 0;
      for (size_t j = 0; j < m; ++j) {
        const double q = queries[i], k = keys[j];
        const double w = call.path[0] == 'd'
                             ? std::exp(0.5 * q * k)
                             : std::exp(-0.5 * (q - k) * (q - k));
        sum += w;
        mean += w * double(j);
      }
      mean /= sum;
      for (size_t c : {size_t{0}, size_t{5}, dv / 2 + 1, dv - 1}) {
        INFO("row " << i << " column " << c);
        CHECK(std::fabs(out[i * dv + c] - (mean + double(c % 7))) <= 1e-5);
      }
    }
  }
}

TEST_CASE("huge: distances with 46341^2 entries at offsets past 2^32",
          "[.huge]") {
  const size_t n = kSide, m = kSide, d = 2;
  const size_t stride = size_t{1} << 17;  // last row at 6.07e9 > 2^32
  const size_t bytes = ((n - 1) * stride + m) * sizeof(float);
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(memory != MAP_FAILED);
  float* out = static_cast<float*>(memory);
  std::vector<float> queries(n * d), keys(m * d);
  std::mt19937_64 rng(kSeed + 801);
  std::normal_distribution<float> normal;
  for (auto& x : queries) x = normal(rng);
  for (auto& x : keys) x = normal(rng);
  const auto start = std::chrono::steady_clock::now();
  attnpool::pairwise_distances(Distance::sqeuclidean, {queries.data(), n, d},
                               {keys.data(), m, d}, {out, n, m, stride});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf(
      "huge distances: %zu x %zu = %zu entries, last row at element %zu, "
      "%.1f s\n",
      n, m, n * m, (n - 1) * stride, seconds);
  const double u = kUnitRoundoff<float>;
  const auto check = [&](size_t i, size_t j) {
    double want = 0, norms = 0;
    for (size_t p = 0; p < d; ++p) {
      const double q = queries[i * d + p], k = keys[j * d + p];
      want += (q - k) * (q - k);
      norms += q * q + k * k;
    }
    const double got = out[i * stride + j];
    if (!(std::fabs(got - want) <= (2 * d + 8) * u * norms + 1e-30)) {
      FAIL("(" << i << ", " << j << ") got " << got << " want " << want);
    }
  };
  for (size_t i : {size_t{0}, n / 2, n - 1}) {
    for (size_t j = 0; j < m; ++j) check(i, j);
  }
  for (int sample = 0; sample < 200000; ++sample) check(rng() % n, rng() % m);
  munmap(memory, bytes);
}

}  // namespace
}  // namespace attnpool_test
