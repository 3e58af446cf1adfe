// Pooling specs that cover every normalization, every kernel family and
// every distance kind, shared by the pipeline and fused tests.
#pragma once

#include <attnpool/pool.h>

#include <algorithm>
#include <vector>

namespace attnpool_test {

// Whether a zero weight still counts in the pooled sum of `spec` (0·NaN
// reaches the output): everywhere but the weights of non-exponential kernels
// under none and sum, which contribute nothing where they are 0 (README
// "Non-finite data").
inline bool ZeroWeightsCount(const attnpool::PoolSpec& spec) {
  return attnpool::is_exponential(spec.kernel.kernel) ||
         attnpool::normalizes_scores(spec.normalization);
}

// Kernels by their argument (kernel.h's table): exp's score (it takes a
// scale), constant's nothing (NaN weighs 1).
inline bool TakesScore(attnpool::Kernel kernel) {
  return attnpool::kernel_properties(kernel).argument ==
         attnpool::KernelArgument::score;
}
inline bool TakesNothing(attnpool::Kernel kernel) {
  return attnpool::kernel_properties(kernel).argument ==
         attnpool::KernelArgument::none;
}

// The specs below, then one for each kernel they lack (a kernel added to
// kernel.h's table is tested without a line here): distance kernels with a
// distance and normalization in turn, the others on dot products.
inline std::vector<attnpool::PoolSpec> WithEveryKernel(
    std::vector<attnpool::PoolSpec> specs) {
  using attnpool::Distance;
  using attnpool::Normalization;
  const Distance distances[] = {Distance::euclidean, Distance::sqeuclidean,
                                Distance::manhattan};
  const Normalization normalizations[] = {
      Normalization::sum, Normalization::softmax, Normalization::none};
  size_t added = 0;
  for (const attnpool::KernelProperties& kernel : attnpool::kKernels) {
    if (std::any_of(specs.begin(), specs.end(), [&](const auto& spec) {
          return spec.kernel.kernel == kernel.kernel;
        })) {
      continue;
    }
    attnpool::PoolSpec spec;
    spec.kernel = {kernel.kernel, 4.0};
    spec.distance = attnpool::needs_distance(kernel.kernel)
                        ? distances[added % 3]
                        : Distance::dot;
    spec.normalization = normalizations[added % 3];
    spec.empty_rows = attnpool::EmptyRows::zero;
    specs.push_back(spec);
    ++added;
  }
  return specs;
}

inline const std::vector<attnpool::PoolSpec> kPoolSpecs = WithEveryKernel({
    {attnpool::Distance::sqeuclidean,
     {attnpool::Kernel::gaussian, 2.0},
     attnpool::Normalization::sum},
    {attnpool::Distance::euclidean,
     {attnpool::Kernel::boxcar, 4.5},
     attnpool::Normalization::sum},
    {attnpool::Distance::manhattan,
     {attnpool::Kernel::triangular, 9.0},
     attnpool::Normalization::sum,
     attnpool::EmptyRows::zero},
    {attnpool::Distance::sqeuclidean,
     {attnpool::Kernel::epanechnikov, 4.0},
     attnpool::Normalization::none,
     attnpool::EmptyRows::zero},
    {attnpool::Distance::dot,
     {attnpool::Kernel::exp},
     attnpool::Normalization::sum},
    {attnpool::Distance::dot,
     {attnpool::Kernel::exp, 1.0, 0.3},
     attnpool::Normalization::softmax},
    {attnpool::Distance::cosine,
     {attnpool::Kernel::exp, 1.0, 2.0},
     attnpool::Normalization::argmax},
    {attnpool::Distance::euclidean,
     {attnpool::Kernel::constant},
     attnpool::Normalization::sum},
    {attnpool::Distance::sqeuclidean,
     {attnpool::Kernel::gaussian, 0.5},
     attnpool::Normalization::argmax},
    {attnpool::Distance::dot,
     {attnpool::Kernel::exp},
     attnpool::Normalization::none},
    {attnpool::Distance::euclidean,
     {attnpool::Kernel::triangular, 3.0},
     attnpool::Normalization::softmax},
});

// Whether `spec` accepts an additive bias (it is added to scores).
inline bool TakesBias(const attnpool::PoolSpec& spec) {
  return attnpool::is_exponential(spec.kernel.kernel) ||
         attnpool::normalizes_scores(spec.normalization);
}

// Whether its normalization is a softmax (which a sink may join).
inline bool TakesSink(const attnpool::PoolSpec& spec) {
  return spec.normalization == attnpool::Normalization::softmax ||
         (attnpool::is_exponential(spec.kernel.kernel) &&
          spec.normalization == attnpool::Normalization::sum);
}

}  // namespace attnpool_test
