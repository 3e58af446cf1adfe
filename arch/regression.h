// Cross-validation of Nadaraya–Watson regression: the interface between
// src/regression.cc and the per-ISA kernel (arch/regression-inl.h).
#pragma once

#include <attnpool/kernel.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace attnpool {
namespace detail {

// Training points per key block: the block's squared distances and weights
// (three arrays of this many elements) stay in L1. A multiple of every
// vector pair (2 vectors of the widest target), so packed arrays padded to
// it hold whole pairs.
constexpr size_t kCrossValidationKeyBlock = 512;
// Bandwidth accumulator arrays are padded to a multiple of this (the widest
// chunk of bandwidths a kernel keeps in registers).
constexpr size_t kCrossValidationChunk = 8;

// How held-out weights are formed from r² (squared distance).
enum class CrossValidationWeights {
  // exp(−t·λ_b/2), t = r² − r²ₘᵢₙ, as exp(−t·λ₀/2)·exp(−t·Δ/2)^b
  gaussian_powers,
  // exp(t · parameters[b]), parameters[b] = −λ_b/2
  gaussian_each,
  // The stage's formula of `kernel` (arch/kernel-inl.h, KernelFormula) of
  // its argument u = r·parameters[b] (parameters: 1/h) or u² =
  // r²·parameters[b] (1/h²), as the kernel's table line says.
  kernel_formula,
};

// The fold of each point (k-fold): unsigned lanes as wide as T's, so that
// they compare lane for lane with T vectors.
template <typename T>
using FoldId = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// Validated and packed by src/. Packed arrays are column-major ("SoA"):
// row k holds coordinate k (or output k) of every point, at
// array[k·padded_count + j], padded_count a multiple of
// kCrossValidationKeyBlock, zeros past `count`. The points are in
// ascending order of coordinate `sort_dimension` (when depth > 0), which
// bounds r² from below along a run of points: that makes each query's
// kernel window a contiguous range of points (see KeyWindow).
template <typename T>
struct CrossValidationPlan {
  CrossValidationWeights weights = CrossValidationWeights::gaussian_each;
  Kernel kernel = Kernel::gaussian;
  const T* coordinates = nullptr;  // depth × padded_count (already scaled)
  const T* targets = nullptr;      // outputs × padded_count
  size_t count = 0, padded_count = 0, depth = 0, outputs = 0;
  size_t sort_dimension = 0;
  // Point j is held out from query i's fit iff j = i (leave-one-out:
  // fold_ids is null) or fold_ids[j] = fold_ids[i] (k-fold; padded_count
  // entries).
  const FoldId<T>* fold_ids = nullptr;
  size_t bandwidth_count = 0;
  // gaussian_powers: λ₀/2 and Δ/2 (λ_b = λ₀ + b·Δ, Δ ≥ 0), times log₂e for
  // float (whose kernel takes 2^x), and ε, the floor added at each power
  // step (see cross_validate in regression.h).
  T half_lambda_first = 0, half_lambda_step = 0, floor = 0;
  // The other kinds: one per bandwidth, padded with copies of the last to a
  // multiple of kCrossValidationChunk.
  const T* parameters = nullptr;
  // Per bandwidth (bandwidth_count entries, the kernel's order): the key
  // window. Points whose squared distance along sort_dimension exceeds
  // extent_b (plus r²ₘᵢₙ for the Gaussian) are skipped; +inf: none.
  const T* window_extents = nullptr;
};

// The points [begin, end) around packed point `query` whose squared
// coordinate difference along plan.sort_dimension, fl(fl(x_j − x_q)²) in T,
// is ≤ extent, widened to multiples of `granule` (which divides
// padded_count). Every point outside has r² > extent: r² sums fl(diff²)
// with non-negative terms in monotone rounding, so it is never below the
// sorted coordinate's term, and that term is monotone along the sorted
// points on each side of the query. +inf (or NaN): every point.
template <typename T>
void KeyWindow(const CrossValidationPlan<T>& plan, size_t query, T extent,
               size_t granule, size_t& begin, size_t& end) {
  begin = 0, end = plan.count;
  if (plan.depth != 0 && extent < std::numeric_limits<T>::infinity()) {
    const T* x = plan.coordinates + plan.sort_dimension * plan.padded_count;
    const T center = x[query];
    const auto outside = [&](size_t j) {
      const T difference = x[j] - center;
      const T square = difference * difference;
      return square > extent;
    };
    // Left of the query: outside, then inside. Right: inside, then outside.
    size_t low = 0, high = query;
    while (low < high) {
      const size_t middle = low + (high - low) / 2;
      if (outside(middle)) {
        low = middle + 1;
      } else {
        high = middle;
      }
    }
    begin = low;
    low = query + 1, high = plan.count;
    while (low < high) {
      const size_t middle = low + (high - low) / 2;
      if (outside(middle)) {
        high = middle;
      } else {
        low = middle + 1;
      }
    }
    end = low;
  }
  begin = begin / granule * granule;
  end = std::min(plan.padded_count, (end + granule - 1) / granule * granule);
}

// For queries [row_begin, row_end) (packed positions): errors[i·
// bandwidth_count + b] = Σ_c (y(i, c) − ŷ₋ᵢ,b(c))², computed in T up to the
// final division, or NaN where query i has no held-out weight under
// bandwidth b; *formed = the number of (query, point, bandwidth) weights
// formed, whole vectors counted (held-out and padding lanes included).
// Returns the target that ran.
int64_t CrossValidationRows(const CrossValidationPlan<float>& plan,
                            size_t row_begin, size_t row_end, double* errors,
                            uint64_t* formed);
int64_t CrossValidationRows(const CrossValidationPlan<double>& plan,
                            size_t row_begin, size_t row_end, double* errors,
                            uint64_t* formed);

}  // namespace detail
}  // namespace attnpool
