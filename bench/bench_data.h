// Inputs, names and the naive baseline loop that the benchmark programs
// share (bench/compare and the Google Benchmark binaries alike).
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <vector>

namespace attnpool_bench {

// `count` draws of N(0, sigma²), the same for the same seed.
inline std::vector<float> Normal(size_t count, float sigma, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, sigma);
  std::vector<float> v(count);
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
