// Per-ISA small-depth paths of the fused kernel (arch/fused.h: FusedPath
// small_depth, gaussian_one_pass, sorted_window), run by FusedAccumulate
// (arch/fused-inl.h), compiled in TUs of their own (small_depth_f32.cc,
// small_depth_f64.cc).
//
// For d ≤ kFusedSmallDepth and dv ≤ kFusedSmallColumns (kernel regression)
// without element-wise masks: one query at a time against panels of 2N keys,
// the distance, kernel and weights in registers, Σp and Σp·v accumulated in
// vector lanes; no score block is stored (gaussian_one_pass: a chunk of
// logits in L1). Softmax rows take two passes (the max of the logits, then
// the exps), so each key costs one exp.

#if defined(ATTNPOOL_ARCH_FUSED_SMALL_DEPTH_INL_H_) == \
    defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_FUSED_SMALL_DEPTH_INL_H_
#undef ATTNPOOL_ARCH_FUSED_SMALL_DEPTH_INL_H_
#else
#define ATTNPOOL_ARCH_FUSED_SMALL_DEPTH_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "arch/cosine_scale.h"
#include "arch/distance-inl.h"
#include "arch/fused.h"
#include "arch/fused/parts-inl.h"
#include "arch/kernel-inl.h"
#include "arch/math-inl.h"
#include "arch/normalize-inl.h"
#include "arch/prefix_io-inl.h"
#include "core/visible_run.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace fused {
namespace hn = hwy::HWY_NAMESPACE;

using RowMode = detail::FusedRowMode;

// The distance vector of `query` (depth coordinates) and the half `half`
// (0 or 1) of packed panel `panel`.
template <class Step, class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> PanelDistance(D d, const detail::FusedPlan<T>& plan,
                                    const T* HWY_RESTRICT query, T query_factor,
                                    size_t panel, size_t half) {
  const size_t N = hn::Lanes(d);
  const size_t width = 2 * N, depth = plan.queries.cols;
  const T* HWY_RESTRICT keys =
      plan.packed.panels + panel * width * depth + half * N;
  auto sum = hn::Zero(d);
  for (size_t p = 0; p < depth; ++p) {
    sum = Step::Apply(hn::Set(d, query[p]), hn::Load(d, keys + p * width), sum);
  }
  switch (plan.distance) {
    case Distance::euclidean:
      return hn::Sqrt(sum);
    case Distance::cosine:
      return hn::Mul(
          hn::Mul(sum, hn::Set(d, query_factor)),
          hn::Load(d, plan.packed.key_factor + panel * width + half * N));
    case Distance::sqeuclidean:
    case Distance::manhattan:
    case Distance::dot:
      break;
  }
  return sum;
}

// Nadaraya–Watson with a Gaussian (ℓ = c·r² ≤ 0, softmax of the logits) in
// one pass: no logit exceeds 0, so exp(ℓ) cannot overflow and needs no max
// first. The weights are 2^t with t = ℓ·log2(e) folded into the factor.
// kChunkPanels panels at a time: their t (and the running max of t) into
// an L1 buffer, then from there the weights, Σp and Σp·v, two vector chains
// per panel. Split so, the exp's long dependency chains no longer hold the
// distances' µops back (docs/benchmarks.md, "Design evidence":
// GaussianRowOnePass). At the end Σp and Σp·v are scaled by 2^(−max) into
// the state's form (relative to the max). When
// the max is below kOnePassFloor (a query far from every key) the weights
// and products p·v that carry the result could leave the normal range:
// returns false, and the row takes the two-pass route, relative to its max.
// Above the floor, weights within 2^-24 (2^-53) of the largest stay normal,
// and so do their products with any |v| ≥ 2^-82 (2^-769). Runs only where
// OnePassLogitsFinite (no logit NaN: t ≤ 0 or −inf); other rows take the
// two-pass route. (NaN lanes are not tracked here: that was slower.) Keys past
// the visible limit have logit −inf and, in the panel across it, values read
// from a copy with their lanes 0: they contribute nothing
// (arch/contributions.h). kDepth: d at compile time (0: plan.queries.cols).
template <typename T>
constexpr T kOnePassFloor = sizeof(T) == 4 ? T(-20) : T(-200);

// Whether a row's logits c·r² over its visible keys [key_begin, limit) can
// never be NaN: the query and those keys finite (r² finite or +inf) and the
// factor negative, not 0 (a bandwidth so wide that c underflows makes
// 0·inf).
template <typename T>
bool OnePassLogitsFinite(const detail::FusedPlan<T>& plan,
                         const T* HWY_RESTRICT query, size_t key_begin,
                         size_t limit, T factor) {
  const size_t depth = plan.queries.cols;
  return static_cast<T>(double(factor) * 1.4426950408889634) < 0 &&
         plan.nonfinite_keys != nullptr &&
         plan.nonfinite_keys[std::max(key_begin, limit)] ==
             plan.nonfinite_keys[key_begin] &&
         std::all_of(query, query + depth,
                     [](T x) { return std::isfinite(x); });
}

template <size_t kDepth, class D, typename T = hn::TFromD<D>>
HWY_INLINE bool GaussianRowOnePass(D d, const detail::FusedPlan<T>& plan,
                                   const T* HWY_RESTRICT query,
                                   size_t panel_begin, size_t panel_end,
                                   size_t limit, T factor, T* HWY_RESTRICT acc,
                                   T* max_out, T* sum_out) {
  const size_t N = hn::Lanes(d);
  const size_t width = 2 * N;
  const size_t depth = kDepth != 0 ? kDepth : plan.queries.cols;
  const size_t columns = plan.values.cols;
  const T infinity = std::numeric_limits<T>::infinity();
  // Logits in base 2, t = ℓ·log2(e) = r²·c: weights 2^t.
  const auto c = hn::Set(
      d, static_cast<T>(std::max<double>(factor * 1.4426950408889634,
                                         std::numeric_limits<T>::lowest())));
  auto max_lo = hn::Set(d, -infinity), max_hi = max_lo;
  auto sum_lo = hn::Zero(d), sum_hi = hn::Zero(d);
  auto a0_lo = hn::Zero(d), a0_hi = hn::Zero(d), a1_lo = hn::Zero(d),
       a1_hi = hn::Zero(d), a2_lo = hn::Zero(d), a2_hi = hn::Zero(d),
       a3_lo = hn::Zero(d), a3_hi = hn::Zero(d);
  HWY_ALIGN T boundary_values[detail::kFusedSmallColumns * 2 * HWY_MAX_BYTES /
                              sizeof(T)];
  constexpr size_t kChunkPanels = 16;
  HWY_ALIGN T logits[kChunkPanels * 2 * HWY_MAX_BYTES / sizeof(T)];
  for (size_t chunk = panel_begin; chunk < panel_end; chunk += kChunkPanels) {
    const size_t chunk_end = std::min(panel_end, chunk + kChunkPanels);
    for (size_t panel = chunk; panel < chunk_end; ++panel) {
      const T* HWY_RESTRICT keys = plan.packed.panels + panel * width * depth;
      auto r_lo = hn::Zero(d), r_hi = hn::Zero(d);
      for (size_t p = 0; p < depth; ++p) {
        const auto q = hn::Set(d, query[p]);
        const auto diff_lo = hn::Sub(q, hn::Load(d, keys + p * width));
        const auto diff_hi = hn::Sub(q, hn::Load(d, keys + p * width + N));
        r_lo = hn::MulAdd(diff_lo, diff_lo, r_lo);
        r_hi = hn::MulAdd(diff_hi, diff_hi, r_hi);
      }
      auto l_lo = hn::Mul(r_lo, c), l_hi = hn::Mul(r_hi, c);
      const size_t first = panel * width;
      if (limit < first + width) {  // keys past the visible limit
        const size_t shown = limit > first ? limit - first : 0;
        l_lo =
            hn::IfThenElse(hn::FirstN(d, shown), l_lo, hn::Set(d, -infinity));
        l_hi = hn::IfThenElse(hn::FirstN(d, shown > N ? shown - N : 0), l_hi,
                              hn::Set(d, -infinity));
      }
      max_lo = hn::Max(max_lo, l_lo);
      max_hi = hn::Max(max_hi, l_hi);
      hn::Store(l_lo, d, logits + (panel - chunk) * width);
      hn::Store(l_hi, d, logits + (panel - chunk) * width + N);
    }
    for (size_t panel = chunk; panel < chunk_end; ++panel) {
      const size_t first = panel * width;
      const T* HWY_RESTRICT v =
          plan.packed_values.panels + panel * width * columns;
      if (limit < first + width) {
        // Their values multiply nothing (arch/contributions.h): a copy of
        // the panel's values with those lanes 0.
        const size_t shown = limit > first ? limit - first : 0;
        const auto shown_lo = hn::FirstN(d, shown);
        const auto shown_hi = hn::FirstN(d, shown > N ? shown - N : 0);
        for (size_t c = 0; c < columns; ++c) {
          hn::Store(hn::IfThenElseZero(shown_lo, hn::Load(d, v + c * width)), d,
                    boundary_values + c * width);
          hn::Store(
              hn::IfThenElseZero(shown_hi, hn::Load(d, v + c * width + N)), d,
              boundary_values + c * width + N);
        }
        v = boundary_values;
      }
      const auto p_lo = attnpool::HWY_NAMESPACE::Exp2OfFinite(
          d, hn::Load(d, logits + (panel - chunk) * width));
      const auto p_hi = attnpool::HWY_NAMESPACE::Exp2OfFinite(
          d, hn::Load(d, logits + (panel - chunk) * width + N));
      sum_lo = hn::Add(sum_lo, p_lo);
      sum_hi = hn::Add(sum_hi, p_hi);
      a0_lo = hn::MulAdd(p_lo, hn::Load(d, v), a0_lo);
      a0_hi = hn::MulAdd(p_hi, hn::Load(d, v + N), a0_hi);
      if (columns > 1) {
        a1_lo = hn::MulAdd(p_lo, hn::Load(d, v + width), a1_lo);
        a1_hi = hn::MulAdd(p_hi, hn::Load(d, v + width + N), a1_hi);
      }
      if (columns > 2) {
        a2_lo = hn::MulAdd(p_lo, hn::Load(d, v + 2 * width), a2_lo);
        a2_hi = hn::MulAdd(p_hi, hn::Load(d, v + 2 * width + N), a2_hi);
      }
      if (columns > 3) {
        a3_lo = hn::MulAdd(p_lo, hn::Load(d, v + 3 * width), a3_lo);
        a3_hi = hn::MulAdd(p_hi, hn::Load(d, v + 3 * width + N), a3_hi);
      }
    }
  }
  const T sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(sum_lo, sum_hi)));
  const auto write_acc = [&](T scale) HWY_ATTR {
    acc[0] = hn::GetLane(hn::SumOfLanes(d, hn::Add(a0_lo, a0_hi))) * scale;
    if (columns > 1)
      acc[1] = hn::GetLane(hn::SumOfLanes(d, hn::Add(a1_lo, a1_hi))) * scale;
    if (columns > 2)
      acc[2] = hn::GetLane(hn::SumOfLanes(d, hn::Add(a2_lo, a2_hi))) * scale;
    if (columns > 3)
      acc[3] = hn::GetLane(hn::SumOfLanes(d, hn::Add(a3_lo, a3_hi))) * scale;
  };
  const auto both = hn::Max(max_lo, max_hi);
  // EMU128/SCALAR MaxOfLanes cannot return −inf (normalize-inl.h).
  const T maximum = hn::AllTrue(d, hn::Eq(both, hn::Set(d, -infinity)))
                        ? -infinity
                        : hn::GetLane(hn::MaxOfLanes(d, both));
  if (maximum == -infinity) {  // nothing visible: an empty row (the caller
    *max_out = maximum;        // zeroes its accumulator)
    *sum_out = 0;
    write_acc(T(1));
    return true;
  }
  if (!(maximum >= kOnePassFloor<T>)) return false;
  const T scale = static_cast<T>(std::exp2(-static_cast<double>(maximum)));
  *max_out = static_cast<T>(maximum * 0.6931471805599453);  // ℓ = t·ln2
  *sum_out = sum * scale;
  write_acc(scale);
  return true;
}

// The accumulator of a softmax row whose visible keys [key_begin, limit)
// all have logits of −inf: Σ 0·v, 0 or NaN where a value is not finite
// (arch/fused-inl.h keeps the same, for a sink or a later shard).
template <typename T>
void ZeroWeightSums(const detail::FusedPlan<T>& plan, size_t key_begin,
                    size_t limit, T* HWY_RESTRICT acc) {
  const size_t columns = plan.values.cols;
  std::fill(acc, acc + columns, T(0));
  for (size_t key = key_begin; key < limit; ++key) {
    for (size_t c = 0; c < columns; ++c) acc[c] += T(0) * plan.values(key, c);
  }
}

// Sorted 1-D keys under a compact kernel (FusedPath::sorted_window): narrows
// the panels [*panel_begin, *panel_end) over keys [key_begin, limit) to
// those holding keys within support·h of `query` (kernel.h's support
// column; a relative margin of 1e-5 covers the rounding of r). The other
// panels' weights are all 0, and skipping them changes no bit (every
// accumulator lane sees the same keys; FMA with a 0 weight returns its
// addend, and zero weights contribute nothing, whatever their values) —
// unless the query is NaN: then nothing is skipped.
template <typename T>
void SortedKeyWindow(const detail::FusedPlan<T>& plan, T query,
                     size_t key_begin, size_t limit, size_t* panel_begin,
                     size_t* panel_end) {
  if (!(query == query)) return;
  const size_t width = plan.packed.panel_width;
  const double h = 1.0 / double(plan.kernel.inverse_bandwidth);
  const double reach =
      kernel_properties(plan.kernel.kernel).support * h * (1 + 1e-5);
  const double low = double(query) - reach, high = double(query) + reach;
  // First key ≥ low, first key > high, in [key_begin, limit).
  size_t lo = key_begin, hi = limit;
  for (size_t count = limit - key_begin; count > 0;) {
    const size_t half = count / 2;
    if (double(plan.keys(lo + half, 0)) < low) {
      lo += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  size_t first = lo;
  for (size_t count = limit - lo; count > 0;) {
    const size_t half = count / 2;
    if (!(double(plan.keys(first + half, 0)) > high)) {
      first += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  hi = first;
  const size_t begin = std::max(*panel_begin, lo / width);
  const size_t end = std::min(*panel_end, (hi + width - 1) / width);
  *panel_begin = begin;
  *panel_end = std::max(begin, end);
}

template <class Step, bool kGaussianOfSquares, typename T>
void SmallDepthRows(const detail::FusedPlan<T>& plan,
                    const detail::FusedState<T>& state, size_t row_begin,
                    size_t row_end, size_t key_begin, size_t key_end) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const size_t width = 2 * N, depth = plan.queries.cols;
  const size_t columns = plan.values.cols;
  const RowMode mode = detail::FusedModeOf(plan.normalize);
  const bool exponentiate = mode == RowMode::weights && plan.normalize.logits;
  const T infinity = std::numeric_limits<T>::infinity();
  const T* HWY_RESTRICT value_panels = plan.packed_values.panels;
  T scaled_query[detail::kFusedSmallDepth];
  for (size_t row = row_begin; row < row_end; ++row) {
    const T* HWY_RESTRICT query = plan.queries.row(row);
    T query_factor = 0;
    if (plan.distance == Distance::cosine) {
      // A query far from 1 scaled by a power of two (arch/cosine_scale.h).
      const int exponent = detail::CosineExponent(query, depth);
      if (exponent != 0) {
        detail::ScaleRow(query, depth, 1, exponent, scaled_query);
        query = scaled_query;
      }
      T squares = 0;
      for (size_t p = 0; p < depth; ++p) squares += query[p] * query[p];
      query_factor = squares > 0 ? T(1) / std::sqrt(squares) : T(0);
    }
    const size_t global =
        VisibleLimit(plan.normalize.mask, row, plan.key_offset + key_end);
    const size_t limit = std::max(
        key_begin, global > plan.key_offset ? global - plan.key_offset : 0);
    // The kernel value of keys [panel·width + half·N, +N), −inf (softmax) or
    // 0 (weights) past the visible limit.
    // Gaussian of squared distances (Nadaraya–Watson): ℓ = c·r² with
    // c = −1/(2h²), one multiply instead of the general kernel. For tiny h
    // c is the lowest finite value, not −inf, so that an exact match (r² = 0)
    // keeps logit 0 rather than 0·(−inf) = NaN.
    const T gaussian_factor = static_cast<T>(
        std::max<double>(-0.5 * double(plan.kernel.inverse_bandwidth) *
                             double(plan.kernel.inverse_bandwidth),
                         std::numeric_limits<T>::lowest()));
    const auto kernel_of = [&](size_t panel, size_t half, T hidden) HWY_ATTR {
      const size_t first = panel * width + half * N;
      const auto distance =
          PanelDistance<Step>(d, plan, query, query_factor, panel, half);
      const auto v = kGaussianOfSquares
                         ? hn::Mul(distance, hn::Set(d, gaussian_factor))
                         : KernelWeights(d, plan.kernel, distance);
      if (limit >= first + N) return v;
      const size_t shown = limit > first ? limit - first : 0;
      return hn::IfThenElse(hn::FirstN(d, shown), v, hn::Set(d, hidden));
    };
    size_t panel_begin = key_begin / width;
    size_t panel_end = (limit + width - 1) / width;
    if (plan.path == detail::FusedPath::sorted_window &&
        panel_begin < panel_end) {
      SortedKeyWindow(plan, query[0], key_begin, limit, &panel_begin,
                      &panel_end);
    }
    if (kGaussianOfSquares &&
        plan.path == detail::FusedPath::gaussian_one_pass &&
        OnePassLogitsFinite(plan, query, key_begin, limit, gaussian_factor)) {
      T* HWY_RESTRICT acc = state.accumulator.row(row);
      std::fill(acc, acc + columns, T(0));
      bool done = false;
      switch (depth) {
        case 1:
          done = GaussianRowOnePass<1>(d, plan, query, panel_begin, panel_end,
                                       limit, gaussian_factor, acc,
                                       state.max + row, state.sum + row);
          break;
        case 2:
          done = GaussianRowOnePass<2>(d, plan, query, panel_begin, panel_end,
                                       limit, gaussian_factor, acc,
                                       state.max + row, state.sum + row);
          break;
        default:
          done = GaussianRowOnePass<0>(d, plan, query, panel_begin, panel_end,
                                       limit, gaussian_factor, acc,
                                       state.max + row, state.sum + row);
          break;
      }
      if (done) {
        if (state.max[row] == -infinity) {
          ZeroWeightSums(plan, key_begin, limit, acc);
        }
        state.best[row] = 0;
        continue;
      }
    }
    T maximum = -infinity;
    bool nan = false;
    if (mode == RowMode::softmax && panel_begin < panel_end) {
      auto low_max = hn::Set(d, -infinity), high_max = low_max;
      auto nan_lanes = hn::FirstN(d, 0);
      for (size_t panel = panel_begin; panel < panel_end; ++panel) {
        const auto low = kernel_of(panel, 0, -infinity);
        const auto high = kernel_of(panel, 1, -infinity);
        low_max = hn::Max(low_max, low);
        high_max = hn::Max(high_max, high);
        nan_lanes = hn::Or(nan_lanes, hn::Or(hn::Not(hn::Eq(low, low)),
                                             hn::Not(hn::Eq(high, high))));
      }
      nan = !hn::AllFalse(d, nan_lanes);
      const auto both = hn::Max(low_max, high_max);
      maximum = hn::AllTrue(d, hn::Eq(both, hn::Set(d, -infinity)))
                    ? -infinity
                    : hn::GetLane(hn::MaxOfLanes(d, both));
    }
    T* HWY_RESTRICT acc_out = state.accumulator.row(row);
    T sum_out = 0;
    std::fill(acc_out, acc_out + columns, T(0));
    if (mode == RowMode::weights ||
        (maximum > -infinity && maximum < infinity)) {
      const auto shift = hn::Set(d, mode == RowMode::softmax ? maximum : T(0));
      const T hidden = mode == RowMode::softmax ? -infinity : T(0);
      // Σp and Σp·v. Keys past the limit multiply 0 instead of their values,
      // and with `exact` so do the zero weights of non-exponential kernels:
      // keys that contribute nothing (arch/contributions.h).
      const bool zero_weights_skip = mode == RowMode::weights && !exponentiate;
      const auto accumulate = [&](auto exact) HWY_ATTR {
        auto sum = hn::Zero(d);
        auto acc0 = hn::Zero(d), acc1 = hn::Zero(d), acc2 = hn::Zero(d),
             acc3 = hn::Zero(d);
        for (size_t panel = panel_begin; panel < panel_end; ++panel) {
          const T* HWY_RESTRICT v = value_panels + panel * width * columns;
          for (size_t half = 0; half < 2; ++half) {
            const size_t first = panel * width + half * N;
            const auto shown = hn::FirstN(d, limit > first ? limit - first : 0);
            auto p = kernel_of(panel, half, hidden);
            if (mode == RowMode::softmax) {
              p = attnpool::HWY_NAMESPACE::Exp(d, hn::Sub(p, shift));
            } else if (exponentiate) {
              // Hidden keys: exp(0), masked here.
              p = hn::IfThenElseZero(shown, attnpool::HWY_NAMESPACE::Exp(d, p));
            }
            sum = hn::Add(sum, p);
            const T* HWY_RESTRICT vh = v + half * N;
            const bool boundary = limit < first + N;
            const auto contributes = decltype(exact)::value && zero_weights_skip
                                         ? hn::Not(hn::Eq(p, hn::Zero(d)))
                                         : shown;
            const auto value = [&](size_t c) HWY_ATTR {
              const auto loaded = hn::Load(d, vh + c * width);
              return decltype(exact)::value || boundary
                         ? hn::IfThenElseZero(contributes, loaded)
                         : loaded;
            };
            acc0 = hn::MulAdd(p, value(0), acc0);
            if (columns > 1) acc1 = hn::MulAdd(p, value(1), acc1);
            if (columns > 2) acc2 = hn::MulAdd(p, value(2), acc2);
            if (columns > 3) acc3 = hn::MulAdd(p, value(3), acc3);
          }
        }
        sum_out = hn::GetLane(hn::SumOfLanes(d, sum));
        acc_out[0] = hn::GetLane(hn::SumOfLanes(d, acc0));
        if (columns > 1) acc_out[1] = hn::GetLane(hn::SumOfLanes(d, acc1));
        if (columns > 2) acc_out[2] = hn::GetLane(hn::SumOfLanes(d, acc2));
        if (columns > 3) acc_out[3] = hn::GetLane(hn::SumOfLanes(d, acc3));
      };
      accumulate(std::false_type());
      // A value that is not finite made a sum NaN or ±inf: again, exactly.
      if (zero_weights_skip &&
          !std::all_of(acc_out, acc_out + columns,
                       [](T x) { return std::isfinite(x); })) {
        accumulate(std::true_type());
      }
    } else if (maximum == infinity) {
      // The +inf logits share all the weight: count them and sum their
      // values; every other visible key has weight 0 (0·v: NaN where v is
      // not finite, as in the staged W·V).
      for (size_t key = key_begin; key < limit; ++key) {
        const size_t panel = key / width, lane = key % width;
        HWY_ALIGN T logits[kMaxLanesBytes / sizeof(T)];
        hn::Store(kernel_of(panel, lane / N, -infinity), d, logits);
        const T weight = detail::SoftmaxWeight(logits[lane % N], infinity);
        sum_out += weight;
        for (size_t c = 0; c < columns; ++c) {
          acc_out[c] += weight * plan.values(key, c);
        }
      }
    }
    // (A weights row of Σ 0 keeps its exact Σ 0·v, as arch/fused-inl.h's.)
    if (nan) {
      std::fill(acc_out, acc_out + columns, T(0));  // finished as NaN
    } else if (mode == RowMode::softmax && maximum == -infinity) {
      ZeroWeightSums(plan, key_begin, limit, acc_out);
    }
    const T nan_value = std::numeric_limits<T>::quiet_NaN();
    state.max[row] = nan ? nan_value : maximum;
    state.sum[row] = nan ? nan_value : sum_out;
    state.best[row] = 0;
  }
}

// The entry point (arch/fused/parts-inl.h): the distance's step, and the
// Gaussian of squared distances under a softmax of its logits in one pass.
template <typename T>
void SmallDepthAccumulate(const detail::FusedPlan<T>& plan,
                          const detail::FusedState<T>& state, size_t row_begin,
                          size_t row_end, size_t key_begin, size_t key_end) {
  switch (plan.distance) {
    case Distance::sqeuclidean:
      if (plan.kernel.kernel == Kernel::gaussian && plan.kernel.write_logits) {
        return SmallDepthRows<SquaredDifferenceStep, true>(
            plan, state, row_begin, row_end, key_begin, key_end);
      }
      return SmallDepthRows<SquaredDifferenceStep, false>(
          plan, state, row_begin, row_end, key_begin, key_end);
    case Distance::euclidean:
      return SmallDepthRows<SquaredDifferenceStep, false>(
          plan, state, row_begin, row_end, key_begin, key_end);
    case Distance::manhattan:
      return SmallDepthRows<AbsoluteDifferenceStep, false>(
          plan, state, row_begin, row_end, key_begin, key_end);
    case Distance::dot:
    case Distance::cosine:
      return SmallDepthRows<DotStep, false>(plan, state, row_begin, row_end,
                                            key_begin, key_end);
  }
}

}  // namespace fused
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_FUSED_SMALL_DEPTH_INL_H_
