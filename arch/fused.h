// The fused attention-pooling kernel's interface between src/ and arch/.
#pragma once

#include <cstddef>
#include <cstdint>

#include <attnpool/distance.h>
#include <attnpool/matrix.h>

#include "arch/distance.h"
#include "arch/stages.h"

namespace attnpool {
namespace detail {

// Everything a block of queries needs, validated by src/. Keys are packed
// once for the whole call (PackDistanceKeys); everything else is read in
// place.
template <typename T>
struct FusedPlan {
  Distance distance = Distance::dot;
  KernelPlan<T> kernel;        // write_logits set for exponential kernels
  NormalizePlan<T> normalize;  // logits set likewise; the mask
  ConstMatrixView<T> queries, keys, values;
  PackedKeys<T> packed;
};

// out rows [row_begin, row_end): the whole pooling, streaming over key
// blocks with running max, sum and accumulator per query.
int64_t FusedRows(const FusedPlan<float>& plan, MatrixView<float> out,
                  size_t row_begin, size_t row_end);
int64_t FusedRows(const FusedPlan<double>& plan, MatrixView<double> out,
                  size_t row_begin, size_t row_end);

}  // namespace detail
}  // namespace attnpool
