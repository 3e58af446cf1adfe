// Prefetching a decode's rows (arch/fused-inl.h,
// arch/fused/narrow_decode-inl.h): the distance ahead, whole rows of a list
// into the second-level cache, and rows taken one at a time.

#if defined(ATTNPOOL_ARCH_FUSED_ROW_PREFETCH_INL_H_) == \
    defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_FUSED_ROW_PREFETCH_INL_H_
#undef ATTNPOOL_ARCH_FUSED_ROW_PREFETCH_INL_H_
#else
#define ATTNPOOL_ARCH_FUSED_ROW_PREFETCH_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <attnpool/element.h>

#include "arch/prefetch_lines-inl.h"
#include "arch/row_list.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace fused {
namespace hn = hwy::HWY_NAMESPACE;

// Rows a decode prefetches its keys ahead: of runs shorter than this (a
// paged cache's scattered pages) each key's lines, with its value's; of
// longer runs (rows one stride apart) of narrow keys the key's lines (float
// keys: the tuning's decode_key_prefetch_rows; float values are not
// prefetched a run ahead in the weighted sum, slower so (docs/benchmarks.md,
// "Design evidence": kPrefetchRows); narrow values are prefetched:
// NarrowDots, NarrowWeightedSum).
constexpr size_t kPrefetchRows = 64;

// Prefetches `count` rows of a list from row j into the second-level
// cache (each cache line of each; the loop written out: through
// PrefetchLines it was slower). A paged decode's rows, prefetched so, are
// read a block of keys later (its values: 512 keys, 128 KiB of float
// values on), more than the first level holds: prefetched into it, they
// were evicted before they were read (docs/benchmarks.md, "Design
// evidence": PrefetchRows).
template <typename T>
HWY_INLINE void PrefetchRows(const detail::RowList<T>& list, size_t j,
                             size_t count) {
  const size_t element =
      list.is_narrow() ? kElementTypes[int(list.element)].bytes : sizeof(T);
  const char* base = list.is_narrow()
                         ? static_cast<const char*>(list.narrow)
                         : reinterpret_cast<const char*>(list.data);
  const size_t bytes = list.cols * element;
  for (size_t end = std::min(list.rows, j + count); j < end;) {
    const size_t run = list.Run(j, end - j);
    const char* row = base + list.Offset(j) * element;
    for (size_t r = 0; r < run; ++r, row += list.stride * element) {
      // Every line the row touches, from the one it starts in.
      const size_t skew = reinterpret_cast<uintptr_t>(row) % 64;
      for (size_t byte = 0; byte < bytes + skew; byte += 64) {
        PrefetchLine(row - skew + byte, PrefetchTo::l2);
      }
    }
    j += run;
  }
}

// PrefetchRows for rows taken one at a time in increasing order (into the
// second-level cache too, as PrefetchRows says): a row's page is found
// (RowList::Offset divides) only where a run of rows one stride apart
// ends. Paged bf16 decode is faster so, paged float decode slower: it
// keeps PrefetchRows (docs/benchmarks.md, "Design evidence":
// RowPrefetcher).
template <typename T>
class RowPrefetcher {
 public:
  explicit RowPrefetcher(const detail::RowList<T>& list)
      : list_(list),
        element_(list.is_narrow() ? kElementTypes[int(list.element)].bytes
                                  : sizeof(T)),
        base_(list.is_narrow() ? static_cast<const char*>(list.narrow)
                               : reinterpret_cast<const char*>(list.data)) {}

  void Row(size_t j) {
    if (j != next_ || left_ == 0) {
      left_ = list_.Run(j, list_.rows - j);
      row_ = base_ + list_.Offset(j) * element_;
    }
    PrefetchLines(row_, list_.cols * element_, PrefetchTo::l2);
    row_ += list_.stride * element_;
    --left_;
    next_ = j + 1;
  }

 private:
  const detail::RowList<T>& list_;
  const size_t element_;
  const char* const base_;
  const char* row_ = nullptr;
  size_t next_ = 0, left_ = 0;
};

}  // namespace fused
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_FUSED_ROW_PREFETCH_INL_H_
