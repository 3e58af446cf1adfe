// Per-ISA cross-validation of Nadaraya–Watson regression (see
// include/attnpool/regression.h, cross_validate): for one query (a training
// point) at a time, every bandwidth's held-out sums
//   S_b = Σⱼ w_b(i, j),   P_b,c = Σⱼ w_b(i, j)·y(j, c)
// over the training points j not held out and inside the query's key window
// (arch/regression.h, KeyWindow: the points sorted along one coordinate, a
// contiguous run of them around the query), streaming over blocks of
// kCrossValidationKeyBlock points:
//   1. the block's squared distances r² into an L1 scratch, +inf for the
//      held-out points and the padding (so every kernel weighs them 0);
//   2. Gaussian: t = r² − r²ₘᵢₙ ≥ 0 (r²ₘᵢₙ from an outward search that
//      stops where the sorted coordinate alone exceeds it), so that every
//      weight is ≤ 1 and the nearest point's is 1;
//   3. powers path: bandwidth 0 alone (distance, w₀ = exp(−t·λ₀/2), sums,
//      all in registers) outside bandwidth 1's window; inside it, per
//      block, w₀ and q = exp(−t·Δ/2) into scratch, then chunks of
//      bandwidths [0, 2), then 2, 4 and kChunk wide, each over the window of
//      its first bandwidth (its accumulators in registers), w ← w·q + ε
//      along the chunk, the chunk's last w stored back as the next chunk's
//      start;
//      other paths: per bandwidth, over its window, the weights into
//      scratch, then the sums.
// Every bandwidth's accumulators are vectors that take the points in packed
// (sorted) order, two vectors at a time (S += w_a + w_b), reduced across
// lanes at the end of the query: the result depends only on the query, never
// on how queries are grouped into calls or threads, and skipping points
// changes no other point's contribution.
//
// Contract: lane types float and double; inputs validated by src/ (finite
// coordinates whose squared distances are finite, parameters > 0). Weights
// are 0 or normal numbers throughout: Exp returns 0 below the smallest
// normal number, the powers never fall below ε, and nothing subnormal is
// ever formed. Empty support (the compact kernels): S_b = 0, reported as
// NaN.

#if defined(ATTNPOOL_ARCH_REGRESSION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_REGRESSION_INL_H_
#undef ATTNPOOL_ARCH_REGRESSION_INL_H_
#else
#define ATTNPOOL_ARCH_REGRESSION_INL_H_
#endif

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "arch/kernel-inl.h"
#include "arch/math-inl.h"
#include "arch/regression.h"
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace regression {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kBlock = detail::kCrossValidationKeyBlock;

// Bandwidths per powers chunk: 2 accumulators each plus w, q, y and ε must
// fit the register file — 8 with 32 vector registers (AVX-512, NEON, SVE),
// 4 with 16 (AVX2, SSE4; the emulated targets do not care).
#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR || \
    (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3)
constexpr size_t kChunk = 4;
#else
constexpr size_t kChunk = 8;
#endif
static_assert(kBlock % (2 * HWY_MAX_BYTES / 4) == 0,
              "key blocks (and the arrays padded to them) hold whole pairs of "
              "vectors: windows are rounded to pairs, loops step by pairs");
static_assert(detail::kCrossValidationChunk % kChunk == 0,
              "accumulator padding must hold whole chunks");

using detail::CrossValidationPlan;
using detail::CrossValidationWeights;

// r²(query, j) for the N points from j (a multiple of N); +inf for the
// points held out from the query's fit and the padding (≥ count).
// Identical points get exactly 0.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> Distances(D d, const CrossValidationPlan<T>& plan,
                                size_t query, size_t j) {
  const size_t N = hn::Lanes(d);
  const auto infinity = hn::Set(d, std::numeric_limits<T>::infinity());
  const hn::RebindToUnsigned<D> du;
  using Fold = detail::FoldId<T>;
  auto sum = hn::Zero(d);
  for (size_t k = 0; k < plan.depth; ++k) {
    const T* HWY_RESTRICT row = plan.coordinates + k * plan.padded_count;
    const auto difference =
        hn::Sub(hn::Load(d, row + j), hn::Set(d, row[query]));
    sum = hn::MulAdd(difference, difference, sum);
  }
  if (plan.fold_ids != nullptr) {
    const auto held_out = hn::Eq(hn::Load(du, plan.fold_ids + j),
                                 hn::Set(du, plan.fold_ids[query]));
    sum = hn::IfThenElse(hn::RebindMask(d, held_out), infinity, sum);
  }
  if (HWY_UNLIKELY(query - j < N)) {  // (unsigned: query in [j, j + N))
    const auto self = hn::Eq(hn::Iota(du, 0), hn::Set(du, Fold(query - j)));
    sum = hn::IfThenElse(hn::RebindMask(d, self), infinity, sum);
  }
  if (HWY_UNLIKELY(j + N > plan.count)) {
    const size_t shown = j < plan.count ? plan.count - j : 0;
    sum = hn::IfThenElse(hn::FirstN(d, shown), sum, infinity);
  }
  return sum;
}

// distances[j − begin] = Distances(j) for the points j in [begin, end)
// (multiples of N, end − begin ≤ kBlock).
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void BlockDistances(D d, const CrossValidationPlan<T>& plan,
                               size_t query, size_t begin, size_t end,
                               T* HWY_RESTRICT distances) {
  const size_t N = hn::Lanes(d);
  for (size_t j = begin; j < end; j += N) {
    hn::Store(Distances(d, plan, query, j), d, distances + (j - begin));
  }
}

// The least r² from the query to a point it is fitted on: blocks scanned
// outwards from the query, doubling up to kBlock points, until the sorted
// coordinate's squared difference (a lower bound of r², see KeyWindow)
// reaches the least r² found on both sides. Exact: the skipped points
// cannot be nearer.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T NearestSquaredDistance(D d, const CrossValidationPlan<T>& plan,
                                    size_t query, T* HWY_RESTRICT distances) {
  const size_t N = hn::Lanes(d);
  const T infinity = std::numeric_limits<T>::infinity();
  const T* x = plan.depth != 0
                   ? plan.coordinates + plan.sort_dimension * plan.padded_count
                   : nullptr;
  // Whether point j is at least `best` away along the sorted coordinate.
  const auto beyond = [&](size_t j, T best) {
    if (x == nullptr) return false;
    const T difference = x[j] - x[query];
    const T square = difference * difference;
    return square >= best;
  };
  auto nearest = hn::Set(d, infinity);
  const auto scan = [&](size_t begin, size_t end) {
    BlockDistances(d, plan, query, begin, end, distances);
    for (size_t j = 0; j < end - begin; j += N) {
      nearest = hn::Min(nearest, hn::Load(d, distances + j));
    }
  };
  // Visited: [low, high), multiples of 2N.
  size_t low = query / (2 * N) * (2 * N), high = low;
  size_t step = 2 * N;
  T best = infinity;
  bool left = true, right = true;
  while (left || right) {
    if (right) {
      const size_t end = std::min(high + step, plan.padded_count);
      scan(high, end);
      high = end;
    }
    if (left && low > 0) {
      const size_t begin = low > step ? low - step : 0;
      scan(begin, low);
      low = begin;
    }
    // (MinOfLanes of all-+inf lanes is not +inf on every target.)
    if (!hn::AllTrue(d, hn::Eq(nearest, hn::Set(d, infinity)))) {
      best = hn::GetLane(hn::MinOfLanes(d, nearest));
    }
    right = high < plan.count && !beyond(high, best);
    left = low > 0 && !beyond(low - 1, best);
    step = std::min(2 * step, kBlock);
  }
  return best;
}

// One chunk of kWidth consecutive bandwidths of the powers path over
// `count` points (a multiple of 2N): w starts at first[j] (the weight of the
// chunk's first bandwidth), each step adds w to the sums (kWithSum: only for
// the first output column) and w·y to the products, then w ← w·q + ε. With
// kStoreNext the w after the chunk (the next chunk's first weight) is stored
// back into first[j]; q is read only where a step needs it (kWidth > 1 or
// kStoreNext). Accumulators are named variables, never an array of vectors
// (sizeless SVE vectors cannot live in arrays).
template <size_t kWidth, bool kWithSum, bool kStoreNext, class D,
          typename T = hn::TFromD<D>>
HWY_INLINE void PowersChunk(D d, T* first, const T* HWY_RESTRICT ratio,
                            const T* HWY_RESTRICT target, size_t count,
                            T* HWY_RESTRICT sums, T* HWY_RESTRICT products,
                            T floor) {
  static_assert(kWidth == 1 || kWidth == 2 || kWidth == 4 || kWidth == 8,
                "chunks of 1, 2, 4 or 8 bandwidths");
  const size_t N = hn::Lanes(d);
  const auto zero = hn::Zero(d);
#define ATTNPOOL_CV_LOAD(k)                                              \
  auto s##k = kWithSum && kWidth > k ? hn::Load(d, sums + k * N) : zero; \
  auto p##k = kWidth > k ? hn::Load(d, products + k * N) : zero;
  ATTNPOOL_CV_LOAD(0)
  ATTNPOOL_CV_LOAD(1)
  ATTNPOOL_CV_LOAD(2)
  ATTNPOOL_CV_LOAD(3)
  ATTNPOOL_CV_LOAD(4)
  ATTNPOOL_CV_LOAD(5)
  ATTNPOOL_CV_LOAD(6)
  ATTNPOOL_CV_LOAD(7)
#undef ATTNPOOL_CV_LOAD
  const auto epsilon = hn::Set(d, floor);
  // w ≤ 1 and q ≤ 1 here; w·q + ε ≥ ε is normal, so no step ever forms a
  // subnormal number (which costs ~100 cycles per instruction on x86
  // without flush-to-zero).
  // Two key vectors per step: their power chains w ← w·q + ε are
  // independent, so one's multiply-add latency hides behind the other's.
  constexpr bool kAdvance = kStoreNext || kWidth > 1;
#define ATTNPOOL_CV_STEP(k)                              \
  if (kWidth > k) {                                      \
    if (kWithSum) s##k = hn::Add(s##k, hn::Add(wa, wb)); \
    p##k = hn::MulAdd(wb, yb, hn::MulAdd(wa, ya, p##k)); \
    if (kStoreNext || kWidth > k + 1) {                  \
      wa = hn::MulAdd(wa, qa, epsilon);                  \
      wb = hn::MulAdd(wb, qb, epsilon);                  \
    }                                                    \
  }
  for (size_t j = 0; j < count; j += 2 * N) {
    auto wa = hn::Load(d, first + j), wb = hn::Load(d, first + j + N);
    const auto qa = kAdvance ? hn::Load(d, ratio + j) : zero;
    const auto qb = kAdvance ? hn::Load(d, ratio + j + N) : zero;
    const auto ya = hn::Load(d, target + j), yb = hn::Load(d, target + j + N);
    ATTNPOOL_CV_STEP(0)
    ATTNPOOL_CV_STEP(1)
    ATTNPOOL_CV_STEP(2)
    ATTNPOOL_CV_STEP(3)
    ATTNPOOL_CV_STEP(4)
    ATTNPOOL_CV_STEP(5)
    ATTNPOOL_CV_STEP(6)
    ATTNPOOL_CV_STEP(7)
    if (kStoreNext) {
      hn::Store(wa, d, first + j);
      hn::Store(wb, d, first + j + N);
    }
  }
#undef ATTNPOOL_CV_STEP
#define ATTNPOOL_CV_SAVE(k)                                     \
  if (kWithSum && kWidth > k) hn::Store(s##k, d, sums + k * N); \
  if (kWidth > k) hn::Store(p##k, d, products + k * N);
  ATTNPOOL_CV_SAVE(0)
  ATTNPOOL_CV_SAVE(1)
  ATTNPOOL_CV_SAVE(2)
  ATTNPOOL_CV_SAVE(3)
  ATTNPOOL_CV_SAVE(4)
  ATTNPOOL_CV_SAVE(5)
  ATTNPOOL_CV_SAVE(6)
  ATTNPOOL_CV_SAVE(7)
#undef ATTNPOOL_CV_SAVE
}

// PowersChunk for a run-time width (1, 2, 4 or 8) and flags.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void RunPowersChunk(D d, size_t width, bool with_sum,
                               bool store_next, T* first,
                               const T* HWY_RESTRICT ratio,
                               const T* HWY_RESTRICT target, size_t count,
                               T* HWY_RESTRICT sums, T* HWY_RESTRICT products,
                               T floor) {
#define ATTNPOOL_CV_WIDTH(w)                                               \
  if constexpr (w <= kChunk) {                                             \
    if (width == w) {                                                      \
      if (with_sum && store_next) {                                        \
        PowersChunk<w, true, true>(d, first, ratio, target, count, sums,   \
                                   products, floor);                       \
      } else if (with_sum) {                                               \
        PowersChunk<w, true, false>(d, first, ratio, target, count, sums,  \
                                    products, floor);                      \
      } else if (store_next) {                                             \
        PowersChunk<w, false, true>(d, first, ratio, target, count, sums,  \
                                    products, floor);                      \
      } else {                                                             \
        PowersChunk<w, false, false>(d, first, ratio, target, count, sums, \
                                     products, floor);                     \
      }                                                                    \
      return;                                                              \
    }                                                                      \
  }
  ATTNPOOL_CV_WIDTH(1)
  ATTNPOOL_CV_WIDTH(2)
  ATTNPOOL_CV_WIDTH(4)
  ATTNPOOL_CV_WIDTH(8)
#undef ATTNPOOL_CV_WIDTH
  HWY_ABORT("no powers chunk of width %zu", width);
}

// The powers path's chunks: chunk c covers bandwidths [starts[c],
// starts[c + 1]): [0, 2) first, then widths the largest power of 2 ≤
// min(start, kChunk, the bandwidths left): 2, 2, 4, 8, 8, … Narrow chunks
// first because the first bandwidths (the widest) have the widest key
// windows, and a chunk runs over the window of its first bandwidth (the
// first chunk: of bandwidth 1; bandwidth 0 alone covers the rest of its own
// window).
inline std::vector<size_t> PowersChunkStarts(size_t bandwidths) {
  std::vector<size_t> starts = {0};
  for (size_t b = std::min<size_t>(2, bandwidths); b < bandwidths;) {
    starts.push_back(b);
    const size_t limit = std::min(std::min(b, kChunk), bandwidths - b);
    size_t width = 1;
    while (2 * width <= limit) width *= 2;
    b += width;
  }
  starts.push_back(bandwidths);
  return starts;
}

// The weights of one bandwidth (parameter p, see CrossValidationWeights)
// from the block's transformed distances: t for gaussian_each, otherwise r
// or r² as the kernel's argument asks. +inf gives weight 0.
template <class D, class V = hn::Vec<D>, typename T = hn::TFromD<D>>
HWY_INLINE V Weights(D d, const CrossValidationPlan<T>& plan, V value,
                     T parameter) {
  const V scaled = hn::Mul(value, hn::Set(d, parameter));
  // gaussian_each: t ≥ 0 and parameter < 0, the weight ≤ 1.
  if (plan.weights == CrossValidationWeights::gaussian_each) {
    return attnpool::HWY_NAMESPACE::ExpOfFinite(d, scaled);
  }
  // kernel_formula: the non-exponential kernels (src/cross_validation.cc).
  return KernelFormula(d, plan.kernel, scaled);
}

// Scratch and accumulators of one CrossValidationRows call.
template <typename T>
struct Workspace {
  T* distances;  // kBlock: r², then t or r
  T* first;      // kBlock: weights (powers: the current chunk's first)
  T* ratio;      // kBlock: q (powers)
  T* sums;       // padded bandwidths × N
  T* products;   // outputs × padded bandwidths × N
  size_t padded_bandwidths;
};

// exp(−(r² − r²ₘᵢₙ)·factor) with factor = λ₀/2 or Δ/2 as the plan holds it
// (see CrossValidationPlan: times log₂e for float, whose 2^x is cheaper
// than e^x); r² = +inf gives 0. Arguments ≤ 0 or −inf (never NaN: the data
// are finite), often below exp's range in unpredictable lanes: the
// branch-free exps.
template <class D, class V = hn::Vec<D>, typename T = hn::TFromD<D>>
HWY_INLINE V PowersExp(D d, V shift, V distances, T factor) {
  const V argument = hn::Mul(hn::Sub(distances, shift), hn::Set(d, -factor));
  if constexpr (sizeof(T) == 4) {
    return attnpool::HWY_NAMESPACE::Exp2OfFinite(d, argument);
  } else {
    return attnpool::HWY_NAMESPACE::ExpOfFinite(d, argument);
  }
}

// The powers path for one query over its key window (see the top of this
// file). windows[0, 1]: bandwidth 0's; windows[2c + 2, 2c + 3]: chunk c's
// (nested: later chunks have larger λ; empty with one bandwidth). Returns
// the number of weights formed.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE size_t PowersQuery(D d, const CrossValidationPlan<T>& plan,
                              size_t query, T nearest,
                              const std::vector<size_t>& starts,
                              const size_t* windows, const Workspace<T>& work) {
  const size_t N = hn::Lanes(d);
  const size_t chunks = starts.size() - 1, outputs = plan.outputs;
  const auto shift = hn::Set(d, nearest);
  size_t formed = 0;
  // Bandwidths [b, b + width) over the block's points [begin, end) (block
  // offset `offset`), every output column.
  const auto run = [&](size_t b, size_t width, size_t begin, size_t end,
                       size_t offset, bool store_next) {
    formed += (end - begin) * width;
    for (size_t column = 0; column < outputs; ++column) {
      RunPowersChunk(d, width, column == 0, store_next && column + 1 == outputs,
                     work.first + (begin - offset),
                     work.ratio + (begin - offset),
                     plan.targets + column * plan.padded_count + begin,
                     end - begin, work.sums + b * N,
                     work.products + (column * work.padded_bandwidths + b) * N,
                     plan.floor);
    }
  };
  // Bandwidth 0 alone over [begin, end): one output column in registers,
  // exp and sums fused, the same operations as PowersChunk<1> on the same
  // lanes; more columns through the block scratch.
  const auto first_alone = [&](size_t begin, size_t end) {
    if (outputs == 1) {
      formed += end - begin;
      const T* HWY_RESTRICT target = plan.targets;
      auto sum = hn::Load(d, work.sums), product = hn::Load(d, work.products);
      for (size_t j = begin; j < end; j += 2 * N) {
        const auto wa = PowersExp(d, shift, Distances(d, plan, query, j),
                                  plan.half_lambda_first);
        const auto wb = PowersExp(d, shift, Distances(d, plan, query, j + N),
                                  plan.half_lambda_first);
        sum = hn::Add(sum, hn::Add(wa, wb));
        product = hn::MulAdd(wb, hn::Load(d, target + j + N),
                             hn::MulAdd(wa, hn::Load(d, target + j), product));
      }
      hn::Store(sum, d, work.sums);
      hn::Store(product, d, work.products);
      return;
    }
    for (size_t block = begin; block < end; block += kBlock) {
      const size_t stop = std::min(block + kBlock, end);
      for (size_t j = block; j < stop; j += N) {
        hn::Store(PowersExp(d, shift, Distances(d, plan, query, j),
                            plan.half_lambda_first),
                  d, work.first + (j - block));
      }
      run(0, 1, block, stop, block, false);
    }
  };
  // In packed order: bandwidth 0 alone left of bandwidth 1's window, the
  // chunks inside it, bandwidth 0 alone right of it.
  const size_t inner_begin = windows[2], inner_end = windows[3];
  first_alone(windows[0], std::max(windows[0], inner_begin));
  for (size_t block = inner_begin; block < inner_end; block += kBlock) {
    const size_t end = std::min(block + kBlock, inner_end);
    BlockDistances(d, plan, query, block, end, work.distances);
    for (size_t j = 0; j < end - block; j += N) {
      const auto r2 = hn::Load(d, work.distances + j);
      hn::Store(PowersExp(d, shift, r2, plan.half_lambda_first), d,
                work.first + j);
      hn::Store(PowersExp(d, shift, r2, plan.half_lambda_step), d,
                work.ratio + j);
    }
    for (size_t c = 0; c < chunks; ++c) {
      const size_t begin = std::max(block, windows[2 * c + 2]);
      const size_t stop = std::min(end, windows[2 * c + 3]);
      if (begin >= stop) break;  // (later windows are inside this one)
      run(starts[c], starts[c + 1] - starts[c], begin, stop, block,
          c + 1 < chunks);
    }
  }
  first_alone(std::max(windows[0], inner_end), windows[1]);
  return formed;
}

// The other paths for one query: per block of its key window, the
// distances transformed once, then per bandwidth over that bandwidth's
// window windows[2b], windows[2b + 1]. Returns the number of weights
// formed.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE size_t EachQuery(D d, const CrossValidationPlan<T>& plan,
                            size_t query, T nearest, const size_t* windows,
                            const Workspace<T>& work) {
  const size_t N = hn::Lanes(d);
  const size_t bandwidths = plan.bandwidth_count;
  const CrossValidationWeights kind = plan.weights;
  const bool of_u =
      kind == CrossValidationWeights::kernel_formula &&
      kernel_properties(plan.kernel).argument == KernelArgument::u;
  size_t window_begin = plan.padded_count, window_end = 0;
  for (size_t b = 0; b < bandwidths; ++b) {
    window_begin = std::min(window_begin, windows[2 * b]);
    window_end = std::max(window_end, windows[2 * b + 1]);
  }
  const auto shift = hn::Set(d, nearest);
  size_t formed = 0;
  for (size_t block = window_begin; block < window_end; block += kBlock) {
    const size_t end = std::min(block + kBlock, window_end);
    BlockDistances(d, plan, query, block, end, work.distances);
    // distances → t (Gaussian) or r (kernels of u).
    for (size_t j = 0; j < end - block; j += N) {
      const auto r2 = hn::Load(d, work.distances + j);
      if (kind == CrossValidationWeights::gaussian_each) {
        hn::Store(hn::Sub(r2, shift), d, work.distances + j);
      } else if (of_u) {
        hn::Store(hn::Sqrt(r2), d, work.distances + j);
      }
    }
    for (size_t b = 0; b < bandwidths; ++b) {
      const size_t begin = std::max(block, windows[2 * b]);
      const size_t stop = std::min(end, windows[2 * b + 1]);
      if (begin >= stop) continue;
      formed += stop - begin;
      const T parameter = plan.parameters[b];
      T* HWY_RESTRICT weights = work.first + (begin - block);
      const T* HWY_RESTRICT values = work.distances + (begin - block);
      auto sum = hn::Load(d, work.sums + b * N);
      for (size_t j = 0; j < stop - begin; j += N) {
        const auto w = Weights(d, plan, hn::Load(d, values + j), parameter);
        sum = hn::Add(sum, w);
        hn::Store(w, d, weights + j);
      }
      hn::Store(sum, d, work.sums + b * N);
      for (size_t c = 0; c < plan.outputs; ++c) {
        const T* HWY_RESTRICT target =
            plan.targets + c * plan.padded_count + begin;
        T* product_row = work.products + (c * work.padded_bandwidths + b) * N;
        auto product = hn::Load(d, product_row);
        for (size_t j = 0; j < stop - begin; j += N) {
          product = hn::MulAdd(hn::Load(d, weights + j),
                               hn::Load(d, target + j), product);
        }
        hn::Store(product, d, product_row);
      }
    }
  }
  return formed;
}

// The held-out squared errors of queries [row_begin, row_end); see
// arch/regression.h.
template <typename T>
uint64_t CrossValidationRows(const CrossValidationPlan<T>& plan,
                             size_t row_begin, size_t row_end,
                             double* HWY_RESTRICT errors) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const size_t bandwidths = plan.bandwidth_count, outputs = plan.outputs;
  Workspace<T> work;
  work.padded_bandwidths = (bandwidths + detail::kCrossValidationChunk - 1) /
                           detail::kCrossValidationChunk *
                           detail::kCrossValidationChunk;
  const size_t sums_size = work.padded_bandwidths * N;
  const size_t products_size = work.padded_bandwidths * outputs * N;
  auto scratch =
      hwy::AllocateAligned<T>(3 * kBlock + sums_size + products_size);
  if (!scratch) throw std::bad_alloc();
  work.distances = scratch.get();
  work.first = work.distances + kBlock;
  work.ratio = work.first + kBlock;
  work.sums = work.ratio + kBlock;
  work.products = work.sums + sums_size;
  const CrossValidationWeights kind = plan.weights;
  const bool powers = kind == CrossValidationWeights::gaussian_powers;
  const bool gaussian = powers || kind == CrossValidationWeights::gaussian_each;
  // The powers path's chunks, or one window per bandwidth.
  const std::vector<size_t> starts =
      powers ? PowersChunkStarts(bandwidths) : std::vector<size_t>();
  // Powers: bandwidth 0's, then each chunk's (see PowersQuery).
  const size_t window_count = powers ? starts.size() : bandwidths;
  std::vector<size_t> windows(2 * window_count);
  uint64_t formed = 0;

  for (size_t query = row_begin; query < row_end; ++query) {
    const T nearest =
        gaussian ? NearestSquaredDistance(d, plan, query, work.distances)
                 : T(0);
    for (size_t w = 0; w < window_count; ++w) {
      // (Powers: chunk 0 runs over bandwidth 1's window.)
      const size_t b = !powers ? w : w <= 1 ? w : starts[w - 1];
      if (b >= bandwidths) {  // one bandwidth: no chunk runs
        windows[2 * w] = windows[2 * w + 1] = 0;
        continue;
      }
      KeyWindow(plan, query, T(nearest + plan.window_extents[b]), 2 * N,
                windows[2 * w], windows[2 * w + 1]);
    }
    std::fill(work.sums, work.sums + sums_size + products_size, T(0));
    formed += powers ? PowersQuery(d, plan, query, nearest, starts,
                                   windows.data(), work)
                     : EachQuery(d, plan, query, nearest, windows.data(), work);
    // ŷ_b(c) = P_b,c / S_b; the error in double from there.
    for (size_t b = 0; b < bandwidths; ++b) {
      const T sum =
          hn::GetLane(hn::SumOfLanes(d, hn::Load(d, work.sums + b * N)));
      double error = 0;
      if (!(sum > T(0))) {
        error = std::numeric_limits<double>::quiet_NaN();
      } else {
        for (size_t c = 0; c < outputs; ++c) {
          const T product = hn::GetLane(hn::SumOfLanes(
              d, hn::Load(
                     d, work.products + (c * work.padded_bandwidths + b) * N)));
          const double difference =
              double(plan.targets[c * plan.padded_count + query]) -
              double(product) / double(sum);
          error += difference * difference;
        }
      }
      errors[query * bandwidths + b] = error;
    }
  }
  return formed;
}

}  // namespace regression
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_REGRESSION_INL_H_
