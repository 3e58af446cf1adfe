// Cross-validation of Nadaraya–Watson regression: the interface between
// src/regression.cc and the per-ISA kernel (arch/regression-inl.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace attnpool {
namespace detail {

// Training points per key block: the block's squared distances and weights
// (three arrays of this many elements) stay in L1. A multiple of every
// vector length, so packed arrays padded to it hold whole vectors.
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
  boxcar,        // 1 if r²·parameters[b] < 1 (parameters: 1/h²)
  triangular,    // max(1 − r·parameters[b], 0) (parameters: 1/h)
  epanechnikov,  // max(1 − r²·parameters[b], 0) (parameters: 1/h²)
};

// Validated and packed by src/. Packed arrays are column-major ("SoA"):
// row k holds coordinate k (or output k) of every point, at
// array[k·padded_count + j], padded_count a multiple of
// kCrossValidationKeyBlock, zeros past `count`.
template <typename T>
struct CrossValidationPlan {
  CrossValidationWeights weights = CrossValidationWeights::gaussian_each;
  const T* coordinates = nullptr;  // depth × padded_count (already scaled)
  const T* targets = nullptr;      // outputs × padded_count
  size_t count = 0, padded_count = 0, depth = 0, outputs = 0;
  // Point j is held out from query i's fit iff j mod folds = i mod folds
  // (folds = count: leave-one-out).
  size_t folds = 0;
  size_t bandwidth_count = 0;
  // gaussian_powers: λ₀/2 and Δ/2 (λ_b = λ₀ + b·Δ, Δ ≥ 0), and ε, the floor
  // added at each power step (see cross_validate in regression.h).
  T half_lambda_first = 0, half_lambda_step = 0, floor = 0;
  // The other kinds: one per bandwidth, padded with copies of the last to a
  // multiple of kCrossValidationChunk.
  const T* parameters = nullptr;
};

// For queries [row_begin, row_end): errors[i·bandwidth_count + b] = Σ_c
// (y(i, c) − ŷ₋ᵢ,b(c))², computed in T up to the final division, or NaN where
// query i has no held-out weight under bandwidth b.
int64_t CrossValidationRows(const CrossValidationPlan<float>& plan,
                            size_t row_begin, size_t row_end, double* errors);
int64_t CrossValidationRows(const CrossValidationPlan<double>& plan,
                            size_t row_begin, size_t row_end, double* errors);

}  // namespace detail
}  // namespace attnpool
