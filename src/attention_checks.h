// Argument checks of the attention layers (attention.h): tensors, scale
// (masks: core/mask.h).
#pragma once

#include <attnpool/attention.h>
#include <attnpool/error.h>
#include <attnpool/normalize.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/mask.h"
#include "core/validate.h"

namespace attnpool {
namespace detail {

inline void CheckEmptyRows(EmptyRows empty_rows) {
  if (static_cast<int>(empty_rows) < 0 || static_cast<int>(empty_rows) > 1) {
    throw Error("empty_rows", "invalid value");
  }
}

// The score scale, finite in the call's type T (a double past float's range
// would scale float scores by inf).
template <typename T>
void CheckScale(const std::optional<double>& scale) {
  if (scale && !std::isfinite(static_cast<T>(*scale))) {
    throw Error("scale", ValueText(*scale) + " is not a finite " +
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
  const auto mask_arrays =
      CheckAttentionMask(mask, shape.batch, shape.heads, shape.n, shape.m);
  CheckNoOverlap(out_name, o, "queries", q);
  CheckNoOverlap(out_name, o, "keys", k);
  CheckNoOverlap(out_name, o, "values", v);
  CheckNoOverlap(out_name, o, "keys.scales", key_scales);
  CheckNoOverlap(out_name, o, "values.scales", value_scales);
  CheckApartFromMask(out_name, o, mask_arrays);
  CheckExecution(execution);
  return shape;
}

}  // namespace detail
}  // namespace attnpool
