// The structural masks (valid length, causal, sliding window, chunk) as one
// run of keys per query: keys [VisibleStart, VisibleLimit) of the query pass
// them. Apart from per-query valid lengths, both ends never decrease from a
// query to the next (callers rely on it to bound blocks of rows by their
// first and last).
// Target-independent: the per-ISA stages and src/ share it, with the
// per-key position arithmetic of ALiBi. (Cuts of a whole mask: core/mask.h.)
#pragma once

#include <attnpool/mask.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

namespace attnpool {
namespace detail {

// Query `row`'s key position p = row + causal_offset (normalize.h), exact:
// positions and the window's bounds are compared in 128-bit arithmetic, as
// the reference does.
template <typename T>
__int128 KeyPosition(const Mask<T>& mask, size_t row) {
  return static_cast<__int128>(row) + mask.causal_offset;
}

// The first key position of the chunk of query `row` (a multiple of
// mask.chunk, rounded toward −∞): its chunk is [start, start + chunk).
template <typename T>
__int128 ChunkStart(const Mask<T>& mask, size_t row) {
  const __int128 position = KeyPosition(mask, row);
  const __int128 chunk = *mask.chunk;
  const __int128 quotient = position / chunk;
  return (quotient - (position % chunk < 0 ? 1 : 0)) * chunk;
}

// The end of the keys query `row` sees: keys j ≥ limit are hidden (valid
// length, causal, the window's right side, the end of its chunk);
// key_count bounds it.
template <typename T>
size_t VisibleLimit(const Mask<T>& mask, size_t row, size_t key_count) {
  size_t limit = key_count;
  if (mask.valid_lengths != nullptr) {
    limit = std::min(limit, mask.valid_lengths[row]);
  }
  // Keys j ≤ last are visible.
  const auto bound_after = [&](__int128 last) {
    if (last < 0) {
      limit = 0;
    } else if (last < static_cast<__int128>(limit)) {
      limit = static_cast<size_t>(last) + 1;
    }
  };
  if (mask.causal) bound_after(KeyPosition(mask, row));
  if (mask.window_right) {
    bound_after(KeyPosition(mask, row) + __int128(*mask.window_right));
  }
  if (mask.chunk) bound_after(ChunkStart(mask, row) + __int128(*mask.chunk) - 1);
  return limit;
}

// The start of the keys query `row` sees: keys j < start are hidden (the
// window's left side, the start of its chunk); 0 without one, SIZE_MAX
// past every key.
template <typename T>
size_t VisibleStart(const Mask<T>& mask, size_t row) {
  __int128 first = 0;
  if (mask.window_left) {
    first = KeyPosition(mask, row) - __int128(*mask.window_left);
  }
  if (mask.chunk) first = std::max(first, ChunkStart(mask, row));
  if (first <= 0) return 0;
  return first >= static_cast<__int128>(std::numeric_limits<size_t>::max())
             ? std::numeric_limits<size_t>::max()
             : static_cast<size_t>(first);
}

// Query `row`'s visible keys among keys [key_offset, key_offset +
// key_count) of the sequence (a shard, or a chunk of one), counted from
// key_offset: [start, limit) with start ≤ limit ≤ key_count.
struct KeyRun {
  size_t start, limit;
};
template <typename T>
KeyRun VisibleRun(const Mask<T>& mask, size_t row, size_t key_offset,
                  size_t key_count) {
  const auto relative = [&](size_t position) {
    return std::min(key_count,
                    position > key_offset ? position - key_offset : size_t{0});
  };
  const size_t limit =
      relative(VisibleLimit(mask, row, key_offset + key_count));
  return {std::min(relative(VisibleStart(mask, row)), limit), limit};
}

// `mask` with every query's position moved by `shift` (p = i +
// causal_offset + shift), exactly for keys at positions below PTRDIFF_MAX:
// where the offset passes the type's range, it stops at the end and the
// window's side that still binds takes up the rest (left past the top,
// right past the bottom; either one's 0 there hides every such key, as the
// exact position would). ALiBi's distances then differ by that rest, the
// same for every key of a row: far below a float logit's resolution at
// such positions. A chunk is taken at the stopped position: both hide
// every key where the rows and keys stay below 2^62 (chunks are at most
// 2^62, mask_fields.h).
template <typename T>
Mask<T> ShiftPositions(Mask<T> mask, __int128 shift) {
  const __int128 offset = mask.causal_offset + shift;
  const __int128 top = std::numeric_limits<std::ptrdiff_t>::max();
  const __int128 bottom = std::numeric_limits<std::ptrdiff_t>::min();
  const auto take_up = [](std::optional<size_t>& side, __int128 rest) {
    if (side) *side = *side >= rest ? static_cast<size_t>(*side - rest) : 0;
  };
  if (offset > top) {
    take_up(mask.window_left, offset - top);
  } else if (offset < bottom) {
    take_up(mask.window_right, bottom - offset);
  }
  mask.causal_offset =
      static_cast<std::ptrdiff_t>(std::max(bottom, std::min(top, offset)));
  return mask;
}

// Key `key`'s offset from query `row`'s position, key − p (ALiBi's factor),
// clamped to the range of int64_t (far beyond any slope·distance a float
// logit can hold), so that keys after it add in one instruction.
template <typename T>
int64_t KeyDistance(const Mask<T>& mask, size_t row, size_t key) {
  const __int128 distance = static_cast<__int128>(key) - KeyPosition(mask, row);
  const __int128 most = std::numeric_limits<int64_t>::max() / 2;
  return static_cast<int64_t>(std::max(-most, std::min(most, distance)));
}

// Whether the mask adjusts scores by position or soft-capping (normalize.h;
// the sink is not a per-key adjustment).
template <typename T>
bool AdjustsScores(const Mask<T>& mask) {
  return mask.softcap.has_value() || mask.alibi_slope.value_or(T(0)) != T(0);
}

// Whether a sink joins the softmax (a sink of −inf weighs nothing: none).
template <typename T>
bool HasSink(const Mask<T>& mask) {
  return mask.sink.has_value() &&
         *mask.sink > -std::numeric_limits<T>::infinity();
}

// Whether the structural masks bound a query's keys from below.
template <typename T>
bool HasVisibleStart(const Mask<T>& mask) {
  return mask.window_left.has_value() || mask.chunk.has_value();
}

// Whether queries `first` to `last` (first ≤ last) over `key_count` keys
// all see keys [0, key_count) under the structural masks other than valid
// lengths: none of them binds there.
template <typename T>
bool PositionsSeeAll(Mask<T> mask, size_t first, size_t last,
                     size_t key_count) {
  mask.valid_lengths = nullptr;
  return VisibleStart(mask, last) == 0 &&
         VisibleLimit(mask, first, key_count) == key_count;
}

}  // namespace detail
}  // namespace attnpool
