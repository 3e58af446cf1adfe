// Several fused poolings as one parallel loop (internal): the heads of an
// attention layer, whose query blocks alone would leave threads idle.
#pragma once

#include <attnpool/execution.h>
#include <attnpool/matrix.h>
#include <attnpool/normalize.h>
#include <attnpool/pool.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "arch/row_list.h"

namespace attnpool {
namespace detail {

// The arguments of one attention_pool call. Keys and values are strided,
// or a paged cache's rows (arch/row_list.h), which the caller has checked:
// attention_pool's checks see their shape only.
// The queries as bfloat16, when they came so (for the bf16 dot-product
// tile): row i at data + i·stride; data null otherwise.
struct Bf16Queries {
  const uint16_t* data = nullptr;
  size_t stride = 0;
};

template <typename T>
struct PoolCall {
  ConstMatrixView<T> queries;
  RowList<T> keys, values;
  MatrixView<T> out;
  Mask<T> mask;
  Bf16Queries bf16_queries;
};

// attention_pool(spec, call…, execution) for every call, their work items
// (query blocks × key chunks) in one parallel loop, a group of calls at a
// time (a group holds the packed copies of its keys: at most about 64 MiB
// beyond its first call). Every output is bitwise what attention_pool gives
// for its call alone. Every call is checked before any output is written.
template <typename T>
void AttentionPoolBatch(const PoolSpec& spec,
                        const std::vector<PoolCall<T>>& calls,
                        const Execution& execution);

}  // namespace detail
}  // namespace attnpool
