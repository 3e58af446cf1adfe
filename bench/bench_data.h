// Inputs, names and the naive baseline loop that the benchmark programs
// share (bench/compare and the Google Benchmark binaries alike).
#pragma once

#include <cstddef>
#include <new>
#include <random>
#include <string>
#include <vector>

namespace attnpool_bench {

// An allocator of 64-byte-aligned storage: inputs start on a cache line, as
// inference engines' tensors and KV caches do (a large std::vector's data
// from glibc's malloc lies 16 bytes past a page, so that every 64-byte load
// of it straddles two lines).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT
  T* allocate(size_t count) {
    return static_cast<T*>(
        ::operator new(count * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const {
    return false;
  }
};

// Floats starting on a cache line.
using AlignedFloats = std::vector<float, CacheLineAllocator<float>>;

// `count` draws of N(0, sigma²), the same for the same seed.
inline AlignedFloats Normal(size_t count, float sigma, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, sigma);
  AlignedFloats v(count);
  for (float& x : v) x = normal(rng);
  return v;
}

// "<a>x<b>x<c>": the shape part of a benchmark's name.
inline std::string ShapeName(size_t a, size_t b, size_t c) {
  return std::to_string(a) + "x" + std::to_string(b) + "x" + std::to_string(c);
}

// What a user writes without a library: out[i·cols + j] = Σ_p term(i, j, p)
// for p = 0 … depth − 1, one float sum per output, in order.
template <class Term>
void NaiveSums(size_t rows, size_t cols, size_t depth, float* out,
               const Term& term) {
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) {
      float sum = 0;
      for (size_t p = 0; p < depth; ++p) sum += term(i, j, p);
      out[i * cols + j] = sum;
    }
  }
}

}  // namespace attnpool_bench
