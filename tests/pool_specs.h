// Pooling specs that cover every normalization, every kernel family and
// every distance kind, shared by the pipeline and fused tests.
#pragma once

#include <attnpool/pool.h>

namespace attnpool_test {

// Whether a zero weight still counts in the pooled sum of `spec` (0·NaN
// reaches the output): everywhere but the weights of non-exponential kernels
// under none and sum, which contribute nothing where they are 0 (README
// "Non-finite data").
inline bool ZeroWeightsCount(const attnpool::PoolSpec& spec) {
  return attnpool::is_exponential(spec.kernel.kernel) ||
         (spec.normalization != attnpool::Normalization::none &&
          spec.normalization != attnpool::Normalization::sum);
}

inline const attnpool::PoolSpec kPoolSpecs[] = {
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
};

// Whether `spec` accepts an additive bias (it is added to scores).
inline bool TakesBias(const attnpool::PoolSpec& spec) {
  return attnpool::is_exponential(spec.kernel.kernel) ||
         spec.normalization == attnpool::Normalization::softmax ||
         spec.normalization == attnpool::Normalization::argmax;
}

}  // namespace attnpool_test
