// Argument checks of the attention layers (attention.h): tensors, masks
// (and a mask cut into the Mask of one batch entry and head), scale.
#pragma once

#include <attnpool/attention.h>
#include <attnpool/error.h>
#include <attnpool/normalize.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "src/validate.h"

namespace attnpool {
namespace detail {

// The byte ranges a checked mask reads, for the output overlap checks.
struct MaskRanges {
  ByteRange valid_lengths, bias, visible, alibi_slopes, sinks;
};

template <typename U>
ByteRange CheckBroadcastTensor(const std::string& name,
                               const TensorView<U>& view, size_t batch,
                               size_t heads, size_t n, size_t m) {
  if (view.data == nullptr) return {};
  if (view.batch != 1 && view.batch != batch) {
    throw Error(name + ".batch", "is " + std::to_string(view.batch) +
                                     " but must be 1 or the batch (" +
                                     std::to_string(batch) + ")");
  }
  if (view.heads != 1 && view.heads != heads) {
    throw Error(name + ".heads", "is " + std::to_string(view.heads) +
                                     " but must be 1 or the query heads (" +
                                     std::to_string(heads) + ")");
  }
  CheckSize(name + ".rows", view.rows, n, "the number of queries");
  CheckSize(name + ".cols", view.cols, m, "the number of keys");
  return CheckTensor(name, view);
}

// Checks `mask` for `batch` entries of `heads` query heads, n queries and m
// keys: valid lengths ≤ m, bias and visible shapes (batch and heads each 1
// or full).
template <typename T>
MaskRanges CheckAttentionMask(const AttentionMask<T>& mask, size_t batch,
                              size_t heads, size_t n, size_t m) {
  MaskRanges ranges;
  if (mask.valid_lengths != nullptr) {
    const size_t count = mask.lengths_per_query ? batch * n : batch;
    CheckValidLengths(mask.valid_lengths, count, m, m);
    const auto begin = reinterpret_cast<uintptr_t>(mask.valid_lengths);
    ranges.valid_lengths = {begin, begin + count * sizeof(size_t)};
  }
  ranges.bias =
      CheckBroadcastTensor("mask.bias", mask.bias, batch, heads, n, m);
  ranges.visible =
      CheckBroadcastTensor("mask.visible", mask.visible, batch, heads, n, m);
  if (mask.softcap && !ValidSoftcap(*mask.softcap)) {
    throw Error("mask.softcap", "is " + std::to_string(*mask.softcap) +
                                    " but must be finite, > 0 and have a "
                                    "finite reciprocal");
  }
  // Per-head values: checked here, where their names are known.
  const auto per_head = [&](const char* name, const T* values, bool finite) {
    for (size_t h = 0; values != nullptr && h < heads; ++h) {
      if (finite ? !std::isfinite(values[h]) : std::isnan(values[h])) {
        throw Error(std::string(name) + "[" + std::to_string(h) + "]",
                    "is " + std::to_string(values[h]) + " but must be " +
                        (finite ? "finite" : "a number"));
      }
    }
    const auto begin = reinterpret_cast<uintptr_t>(values);
    return values == nullptr ? ByteRange{}
                             : ByteRange{begin, begin + heads * sizeof(T)};
  };
  ranges.alibi_slopes = per_head("mask.alibi_slopes", mask.alibi_slopes, true);
  ranges.sinks = per_head("mask.sinks", mask.sinks, false);
  return ranges;
}

inline void CheckEmptyRows(EmptyRows empty_rows) {
  if (static_cast<int>(empty_rows) < 0 || static_cast<int>(empty_rows) > 1) {
    throw Error("empty_rows", "invalid value");
  }
}

// Checks that `out` overlaps none of the mask's arrays.
inline void CheckMaskOverlap(const std::string& out_name, ByteRange out,
                             const MaskRanges& ranges) {
  CheckNoOverlap(out_name, out, "mask.valid_lengths", ranges.valid_lengths);
  CheckNoOverlap(out_name, out, "mask.bias", ranges.bias);
  CheckNoOverlap(out_name, out, "mask.visible", ranges.visible);
  CheckNoOverlap(out_name, out, "mask.alibi_slopes", ranges.alibi_slopes);
  CheckNoOverlap(out_name, out, "mask.sinks", ranges.sinks);
}

// The Mask of batch entry b, query head h (n queries); `lengths` holds the
// per-query copy of a per-batch valid length.
template <typename T>
Mask<T> HeadMask(const AttentionMask<T>& mask, size_t b, size_t h, size_t n,
                 std::vector<size_t>& lengths) {
  Mask<T> head;
  if (mask.valid_lengths != nullptr) {
    if (mask.lengths_per_query) {
      head.valid_lengths = mask.valid_lengths + b * n;
    } else {
      lengths.assign(n, mask.valid_lengths[b]);
      head.valid_lengths = lengths.data();
    }
  }
  head.causal = mask.causal;
  head.causal_offset = mask.causal_offset;
  head.window_left = mask.window_left;
  head.window_right = mask.window_right;
  if (mask.bias.data != nullptr) {
    head.bias = mask.bias.matrix(mask.bias.batch == 1 ? 0 : b,
                                 mask.bias.heads == 1 ? 0 : h);
  }
  if (mask.visible.data != nullptr) {
    head.visible = mask.visible.matrix(mask.visible.batch == 1 ? 0 : b,
                                       mask.visible.heads == 1 ? 0 : h);
  }
  head.softcap = mask.softcap;
  if (mask.alibi_slopes != nullptr) head.alibi_slope = mask.alibi_slopes[h];
  if (mask.sinks != nullptr) head.sink = mask.sinks[h];
  return head;
}

// The score scale, finite in the call's type T (a double past float's range
// would scale float scores by inf).
template <typename T>
void CheckScale(const std::optional<double>& scale) {
  if (scale && !std::isfinite(static_cast<T>(*scale))) {
    throw Error("scale", std::to_string(*scale) + " is not a finite " +
                             (sizeof(T) == 4 ? "float" : "double"));
  }
}

// The bytes of a bias vector of `count` entries (none when bias is null).
template <typename T>
ByteRange BiasRange(const T* bias, size_t count) {
  const auto begin = reinterpret_cast<uintptr_t>(bias);
  return bias == nullptr ? ByteRange{}
                         : ByteRange{begin, begin + count * sizeof(T)};
}

// Checked shapes of one attention call over (batch, heads) tensors.
struct SdpaShape {
  size_t batch, heads, kv_heads, n, m;
};

// Checks the tensors of an attention call (queries (B, Hq, n, dq), keys
// (B, Hkv, m, dk), values (B, Hkv, m, dv), out (B, Hq, n, dv), Hkv dividing
// Hq; dq = dk when same_depth), its mask and execution.
// Keys or values: a tensor of T, or of any element type (with int8's
// scales, whose bytes go to `scale_bytes`).
template <typename T>
ByteRange CheckInputTensor(const std::string& name,
                           const TensorView<const T>& view, ByteRange*) {
  return CheckTensor(name, view);
}
inline ByteRange CheckInputTensor(const std::string& name,
                                  const ElementTensor& tensor,
                                  ByteRange* scale_bytes) {
  return CheckTensor(name, tensor, scale_bytes);
}

template <typename T, typename KV = TensorView<const T>>
SdpaShape CheckSdpa(TensorView<const T> queries, const KV& keys,
                    const KV& values, TensorView<T> out,
                    const AttentionMask<T>& mask, const Execution& execution,
                    bool same_depth = true) {
  const std::string out_name = "out";
  ByteRange key_scales, value_scales;
  const auto q = CheckTensor("queries", queries);
  const auto k = CheckInputTensor("keys", keys, &key_scales);
  const auto v = CheckInputTensor("values", values, &value_scales);
  const auto o = CheckTensor(out_name, out, true);
  SdpaShape shape{queries.batch, queries.heads, keys.heads, queries.rows,
                  keys.rows};
  CheckSize("keys.batch", keys.batch, shape.batch, "queries.batch");
  CheckSize("values.batch", values.batch, shape.batch, "queries.batch");
  CheckSize(out_name + ".batch", out.batch, shape.batch, "queries.batch");
  CheckSize(out_name + ".heads", out.heads, shape.heads, "queries.heads");
  CheckSize("values.heads", values.heads, shape.kv_heads, "keys.heads");
  if (shape.kv_heads == 0 ? shape.heads != 0
                          : shape.heads % shape.kv_heads != 0) {
    throw Error("keys.heads", "is " + std::to_string(shape.kv_heads) +
                                  " but must divide queries.heads (" +
                                  std::to_string(shape.heads) + ")");
  }
  if (same_depth) {
    CheckSize("keys.cols", keys.cols, queries.cols, "queries.cols");
  }
  CheckSize("values.rows", values.rows, shape.m, "keys.rows");
  CheckSize(out_name + ".rows", out.rows, shape.n, "queries.rows");
  CheckSize(out_name + ".cols", out.cols, values.cols, "values.cols");
  const auto ranges =
      CheckAttentionMask(mask, shape.batch, shape.heads, shape.n, shape.m);
  CheckNoOverlap(out_name, o, "queries", q);
  CheckNoOverlap(out_name, o, "keys", k);
  CheckNoOverlap(out_name, o, "values", v);
  CheckNoOverlap(out_name, o, "keys.scales", key_scales);
  CheckNoOverlap(out_name, o, "values.scales", value_scales);
  CheckMaskOverlap(out_name, o, ranges);
  CheckExecution(execution);
  return shape;
}

}  // namespace detail
}  // namespace attnpool
