// The fused kernel's parts compiled in translation units of their own
// (arch/fused/*.cc, each once per target), declared for the walker
// (arch/fused-inl.h) that calls them: one TU per part keeps every compile
// short, the sanitized build's among them, and lets a build run them side
// by side. The calls cross no inlining the kernel relied on: each part was
// already a function of its own.

#if defined(ATTNPOOL_ARCH_FUSED_PARTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_FUSED_PARTS_INL_H_
#undef ATTNPOOL_ARCH_FUSED_PARTS_INL_H_
#else
#define ATTNPOOL_ARCH_FUSED_PARTS_INL_H_
#endif

#include <cstddef>

#include <attnpool/matrix.h>

#include "arch/fused.h"
#include "arch/row_list.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace fused {
namespace hn = hwy::HWY_NAMESPACE;

// Keys whose dots a narrow weighted sum computes beside its values, one
// key a value row (int8: a group of Lanes keys every Lanes value rows;
// NarrowWeightedSum): keys [first, first + count) of `keys`, rows one
// stride apart, of the values' element type, into `scores`, prefetched
// below `ahead_limit` as NarrowKeyDots does.
template <typename T>
struct KeysBeside {
  const detail::RowList<T>* keys = nullptr;
  size_t first = 0, count = 0, ahead_limit = 0;
  const T* query = nullptr;
  T* scores = nullptr;
};

// Narrow keys' dots (arch/fused/narrow_decode-inl.h).
template <typename T>
void NarrowDots(const detail::RowList<T>& keys, size_t j, size_t count,
                size_t rows, const T* HWY_RESTRICT query, size_t query_stride,
                T* HWY_RESTRICT scores, size_t score_stride,
                size_t ahead_limit = 0, const char* values = nullptr,
                size_t value_stride = 0, size_t value_bytes = 0);

// Narrow values' weighted sum (arch/fused/narrow_decode-inl.h).
template <typename T>
void NarrowWeightedSum(const ConstMatrixView<T>& weights,
                       const detail::RowList<T>& values, size_t at,
                       const MatrixView<T>& sums, size_t ahead_limit,
                       bool softmax_weights, const KeysBeside<T>& beside = {});

// The small-depth paths (arch/fused/small_depth-inl.h): small_depth,
// gaussian_one_pass, sorted_window.
template <typename T>
void SmallDepthAccumulate(const detail::FusedPlan<T>& plan,
                          const detail::FusedState<T>& state, size_t row_begin,
                          size_t row_end, size_t key_begin, size_t key_end);

}  // namespace fused
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_FUSED_PARTS_INL_H_
