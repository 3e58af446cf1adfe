// Per-ISA cross-validation of Nadaraya–Watson regression (see
// include/attnpool/regression.h, cross_validate): for one query (a training
// point) at a time, every bandwidth's held-out sums
//   S_b = Σⱼ w_b(i, j),   P_b,c = Σⱼ w_b(i, j)·y(j, c)
// over the training points j not held out, streaming over blocks of
// kCrossValidationKeyBlock points:
//   1. the block's squared distances r² into an L1 scratch, +inf for the
//      held-out points and the padding (so every kernel weighs them 0);
//   2. Gaussian: t = r² − r²ₘᵢₙ ≥ 0 (r²ₘᵢₙ from a first pass over all
//      blocks), so that every weight is ≤ 1 and the nearest point's is 1;
//   3. powers path: w₀ = exp(−t·λ₀/2) and q = exp(−t·Δ/2) into scratch, then
//      per chunk of kChunk bandwidths (their 2·kChunk accumulators in
//      registers) w ← w·q + ε along the chunk, the chunk's last w stored
//      back as the next chunk's start;
//      other paths: per bandwidth, the block's weights into scratch, then
//      the sums.
// Accumulators are vectors summed over the points in index order, reduced
// across lanes at the end of the query: the result depends only on the
// query, never on how queries are grouped into calls or threads.
//
// Contract: lane types float and double; inputs validated by src/ (finite
// coordinates whose squared distances are finite, parameters > 0). Weights
// are 0 or normal numbers throughout: Exp returns 0 below the smallest
// normal number, the powers never fall below ε, and nothing subnormal is
// ever formed. Empty support (boxcar, triangular, epanechnikov): S_b = 0,
// reported as NaN.

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
static_assert(detail::kCrossValidationChunk % kChunk == 0,
              "accumulator padding must hold whole chunks");

using detail::CrossValidationPlan;
using detail::CrossValidationWeights;

// distances[j − key_begin] = r²(query, j) for the block's points j; +inf for
// the points held out from the query's fit (j ≡ query mod folds) and the
// padding (j ≥ count). Identical points get exactly 0.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void BlockDistances(D d, const CrossValidationPlan<T>& plan,
                               size_t query, size_t key_begin,
                               T* HWY_RESTRICT distances) {
  const size_t N = hn::Lanes(d);
  for (size_t j = 0; j < kBlock; j += N) {
    auto sum = hn::Zero(d);
    for (size_t k = 0; k < plan.depth; ++k) {
      const T* HWY_RESTRICT row = plan.coordinates + k * plan.padded_count;
      const auto difference =
          hn::Sub(hn::Load(d, row + key_begin + j), hn::Set(d, row[query]));
      sum = hn::MulAdd(difference, difference, sum);
    }
    hn::Store(sum, d, distances + j);
  }
  const T infinity = std::numeric_limits<T>::infinity();
  const size_t end = std::min(kBlock, plan.count - key_begin);
  for (size_t j = end; j < kBlock; ++j) distances[j] = infinity;
  const size_t folds = plan.folds;
  const size_t first_held_out =
      key_begin + (query % folds + folds - key_begin % folds) % folds;
  for (size_t j = first_held_out; j < key_begin + end; j += folds) {
    distances[j - key_begin] = infinity;
  }
}

// The least r² from the query to a point it is fitted on.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T NearestSquaredDistance(D d, const CrossValidationPlan<T>& plan,
                                    size_t query, T* HWY_RESTRICT distances) {
  const size_t N = hn::Lanes(d);
  auto nearest = hn::Set(d, std::numeric_limits<T>::infinity());
  for (size_t key_begin = 0; key_begin < plan.count; key_begin += kBlock) {
    BlockDistances(d, plan, query, key_begin, distances);
    for (size_t j = 0; j < kBlock; j += N) {
      nearest = hn::Min(nearest, hn::Load(d, distances + j));
    }
  }
  return hn::GetLane(hn::MinOfLanes(d, nearest));
}

// One chunk of kChunk consecutive bandwidths of the powers path over a
// block: w starts at first[j] (the weight of the chunk's first bandwidth),
// each step adds w to the sums (kWithSum: only for the first output column)
// and w·y to the products, then w ← w·q + ε. With kStoreNext the w after the
// chunk (the next chunk's first weight) is stored back into first[j].
// Accumulators are named variables, never an array of vectors (sizeless SVE
// vectors cannot live in arrays).
template <bool kWithSum, bool kStoreNext, class D, typename T = hn::TFromD<D>>
HWY_INLINE void PowersChunk(D d, T* first, const T* HWY_RESTRICT ratio,
                            const T* HWY_RESTRICT target, T* HWY_RESTRICT sums,
                            T* HWY_RESTRICT products, T floor) {
  const size_t N = hn::Lanes(d);
  constexpr bool kWide = kChunk == 8;
  const auto zero = hn::Zero(d);
  auto s0 = kWithSum ? hn::Load(d, sums + 0 * N) : zero;
  auto s1 = kWithSum ? hn::Load(d, sums + 1 * N) : zero;
  auto s2 = kWithSum ? hn::Load(d, sums + 2 * N) : zero;
  auto s3 = kWithSum ? hn::Load(d, sums + 3 * N) : zero;
  auto s4 = kWithSum && kWide ? hn::Load(d, sums + 4 * N) : zero;
  auto s5 = kWithSum && kWide ? hn::Load(d, sums + 5 * N) : zero;
  auto s6 = kWithSum && kWide ? hn::Load(d, sums + 6 * N) : zero;
  auto s7 = kWithSum && kWide ? hn::Load(d, sums + 7 * N) : zero;
  auto p0 = hn::Load(d, products + 0 * N);
  auto p1 = hn::Load(d, products + 1 * N);
  auto p2 = hn::Load(d, products + 2 * N);
  auto p3 = hn::Load(d, products + 3 * N);
  auto p4 = kWide ? hn::Load(d, products + 4 * N) : zero;
  auto p5 = kWide ? hn::Load(d, products + 5 * N) : zero;
  auto p6 = kWide ? hn::Load(d, products + 6 * N) : zero;
  auto p7 = kWide ? hn::Load(d, products + 7 * N) : zero;
  const auto epsilon = hn::Set(d, floor);
  // w ≤ 1 and q ≤ 1 here; w·q + ε ≥ ε is normal, so no step ever forms a
  // subnormal number (which costs ~100 cycles per instruction on x86
  // without flush-to-zero).
  // Two key vectors per step: their power chains w ← w·q + ε are
  // independent, so one's multiply-add latency hides behind the other's.
  // (kBlock is a multiple of 2N on every target.)
#define ATTNPOOL_CV_STEP(k)                            \
  if (kWithSum) s##k = hn::Add(s##k, hn::Add(wa, wb)); \
  p##k = hn::MulAdd(wb, yb, hn::MulAdd(wa, ya, p##k)); \
  wa = hn::MulAdd(wa, qa, epsilon);                    \
  wb = hn::MulAdd(wb, qb, epsilon);
  static_assert(kBlock % (2 * (HWY_MAX_BYTES / sizeof(T))) == 0,
                "key blocks hold whole pairs of vectors");
  for (size_t j = 0; j < kBlock; j += 2 * N) {
    auto wa = hn::Load(d, first + j), wb = hn::Load(d, first + j + N);
    const auto qa = hn::Load(d, ratio + j), qb = hn::Load(d, ratio + j + N);
    const auto ya = hn::Load(d, target + j), yb = hn::Load(d, target + j + N);
    ATTNPOOL_CV_STEP(0)
    ATTNPOOL_CV_STEP(1)
    ATTNPOOL_CV_STEP(2)
    ATTNPOOL_CV_STEP(3)
    if (kWide) {
      ATTNPOOL_CV_STEP(4)
      ATTNPOOL_CV_STEP(5)
      ATTNPOOL_CV_STEP(6)
      ATTNPOOL_CV_STEP(7)
    }
    if (kStoreNext) {
      hn::Store(wa, d, first + j);
      hn::Store(wb, d, first + j + N);
    }
  }
#undef ATTNPOOL_CV_STEP
  if (kWithSum) {
    hn::Store(s0, d, sums + 0 * N);
    hn::Store(s1, d, sums + 1 * N);
    hn::Store(s2, d, sums + 2 * N);
    hn::Store(s3, d, sums + 3 * N);
    if (kWide) {
      hn::Store(s4, d, sums + 4 * N);
      hn::Store(s5, d, sums + 5 * N);
      hn::Store(s6, d, sums + 6 * N);
      hn::Store(s7, d, sums + 7 * N);
    }
  }
  hn::Store(p0, d, products + 0 * N);
  hn::Store(p1, d, products + 1 * N);
  hn::Store(p2, d, products + 2 * N);
  hn::Store(p3, d, products + 3 * N);
  if (kWide) {
    hn::Store(p4, d, products + 4 * N);
    hn::Store(p5, d, products + 5 * N);
    hn::Store(p6, d, products + 6 * N);
    hn::Store(p7, d, products + 7 * N);
  }
}

// The weights of one bandwidth (parameter p, see CrossValidationWeights)
// from the block's transformed distances: t for gaussian_each, r for
// triangular, r² otherwise. +inf gives weight 0.
template <class D, class V = hn::Vec<D>, typename T = hn::TFromD<D>>
HWY_INLINE V Weights(D d, CrossValidationWeights kind, V value, T parameter) {
  const V one = hn::Set(d, T(1));
  const V scale = hn::Set(d, parameter);
  switch (kind) {
    case CrossValidationWeights::gaussian_each:
      // t ≥ 0 and parameter < 0: the argument is ≤ 0, the weight ≤ 1.
      return attnpool::HWY_NAMESPACE::ExpOfFinite(d, hn::Mul(value, scale));
    case CrossValidationWeights::boxcar:
      return hn::IfThenElseZero(hn::Lt(hn::Mul(value, scale), one), one);
    case CrossValidationWeights::triangular:
    case CrossValidationWeights::epanechnikov:
    case CrossValidationWeights::gaussian_powers:  // not used here
      break;
  }
  return hn::Max(hn::NegMulAdd(value, scale, one), hn::Zero(d));
}

// The held-out squared errors of queries [row_begin, row_end); see
// arch/regression.h.
template <typename T>
void CrossValidationRows(const CrossValidationPlan<T>& plan, size_t row_begin,
                         size_t row_end, double* HWY_RESTRICT errors) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const size_t bandwidths = plan.bandwidth_count, outputs = plan.outputs;
  const size_t padded_bandwidths =
      (bandwidths + detail::kCrossValidationChunk - 1) /
      detail::kCrossValidationChunk * detail::kCrossValidationChunk;
  const size_t sums_size = padded_bandwidths * N;
  const size_t products_size = padded_bandwidths * outputs * N;
  auto scratch =
      hwy::AllocateAligned<T>(3 * kBlock + sums_size + products_size);
  if (!scratch) throw std::bad_alloc();
  T* HWY_RESTRICT distances = scratch.get();
  T* HWY_RESTRICT first = distances + kBlock;
  T* HWY_RESTRICT ratio = first + kBlock;
  T* HWY_RESTRICT sums = ratio + kBlock;
  T* HWY_RESTRICT products = sums + sums_size;
  const CrossValidationWeights kind = plan.weights;
  const bool gaussian = kind == CrossValidationWeights::gaussian_powers ||
                        kind == CrossValidationWeights::gaussian_each;

  for (size_t query = row_begin; query < row_end; ++query) {
    const T nearest =
        gaussian ? NearestSquaredDistance(d, plan, query, distances) : T(0);
    std::fill(sums, sums + sums_size + products_size, T(0));
    for (size_t key_begin = 0; key_begin < plan.count; key_begin += kBlock) {
      BlockDistances(d, plan, query, key_begin, distances);
      const auto shift = hn::Set(d, nearest);
      if (kind == CrossValidationWeights::gaussian_powers) {
        const auto first_factor = hn::Set(d, -plan.half_lambda_first);
        const auto ratio_factor = hn::Set(d, -plan.half_lambda_step);
        for (size_t j = 0; j < kBlock; j += N) {
          // t ≥ 0 (+inf for held-out points: both weights 0).
          const auto t = hn::Sub(hn::Load(d, distances + j), shift);
          // Arguments ≤ 0 or −inf (never NaN: the data are finite), often
          // below exp's range in unpredictable lanes: the branch-free exp.
          hn::Store(
              attnpool::HWY_NAMESPACE::ExpOfFinite(d, hn::Mul(t, first_factor)),
              d, first + j);
          hn::Store(
              attnpool::HWY_NAMESPACE::ExpOfFinite(d, hn::Mul(t, ratio_factor)),
              d, ratio + j);
        }
        for (size_t b = 0; b < padded_bandwidths; b += kChunk) {
          for (size_t c = 0; c < outputs; ++c) {
            const T* target = plan.targets + c * plan.padded_count + key_begin;
            T* chunk_products = products + (c * padded_bandwidths + b) * N;
            const bool last = c + 1 == outputs;
            if (c == 0 && last) {
              PowersChunk<true, true>(d, first, ratio, target, sums + b * N,
                                      chunk_products, plan.floor);
            } else if (c == 0) {
              PowersChunk<true, false>(d, first, ratio, target, sums + b * N,
                                       chunk_products, plan.floor);
            } else if (last) {
              PowersChunk<false, true>(d, first, ratio, target, sums + b * N,
                                       chunk_products, plan.floor);
            } else {
              PowersChunk<false, false>(d, first, ratio, target, sums + b * N,
                                        chunk_products, plan.floor);
            }
          }
        }
        continue;
      }
      // One bandwidth at a time: distances → t (Gaussian) or r
      // (triangular), then per bandwidth the weights into `first`.
      if (kind == CrossValidationWeights::gaussian_each) {
        for (size_t j = 0; j < kBlock; j += N) {
          hn::Store(hn::Sub(hn::Load(d, distances + j), shift), d,
                    distances + j);
        }
      } else if (kind == CrossValidationWeights::triangular) {
        for (size_t j = 0; j < kBlock; j += N) {
          hn::Store(hn::Sqrt(hn::Load(d, distances + j)), d, distances + j);
        }
      }
      for (size_t b = 0; b < bandwidths; ++b) {
        const T parameter = plan.parameters[b];
        auto sum = hn::Load(d, sums + b * N);
        for (size_t j = 0; j < kBlock; j += N) {
          const auto w =
              Weights(d, kind, hn::Load(d, distances + j), parameter);
          sum = hn::Add(sum, w);
          hn::Store(w, d, first + j);
        }
        hn::Store(sum, d, sums + b * N);
        for (size_t c = 0; c < outputs; ++c) {
          const T* target = plan.targets + c * plan.padded_count + key_begin;
          T* product_row = products + (c * padded_bandwidths + b) * N;
          auto product = hn::Load(d, product_row);
          for (size_t j = 0; j < kBlock; j += N) {
            product = hn::MulAdd(hn::Load(d, first + j),
                                 hn::Load(d, target + j), product);
          }
          hn::Store(product, d, product_row);
        }
      }
    }
    // ŷ_b(c) = P_b,c / S_b; the error in double from there.
    for (size_t b = 0; b < bandwidths; ++b) {
      const T sum = hn::GetLane(hn::SumOfLanes(d, hn::Load(d, sums + b * N)));
      double error = 0;
      if (!(sum > T(0))) {
        error = std::numeric_limits<double>::quiet_NaN();
      } else {
        for (size_t c = 0; c < outputs; ++c) {
          const T product = hn::GetLane(hn::SumOfLanes(
              d, hn::Load(d, products + (c * padded_bandwidths + b) * N)));
          const double difference =
              double(plan.targets[c * plan.padded_count + query]) -
              double(product) / double(sum);
          error += difference * difference;
        }
      }
      errors[query * bandwidths + b] = error;
    }
  }
}

}  // namespace regression
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_REGRESSION_INL_H_
