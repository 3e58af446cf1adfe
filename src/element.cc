// element.h: the element types' names, the public conversions and int8
// quantization (checks here, vector loops in arch/convert.cc).
#include <attnpool/element.h>
#include <attnpool/error.h>

#include <cmath>
#include <string>

#include "arch/convert.h"
#include "src/dispatch.h"
#include "src/enum_names.h"
#include "core/validate.h"

namespace attnpool {
namespace {

// Pointers to `count` elements of `in` and `out`, neither null unless count
// is 0, their extents within the address space (a count of SIZE_MAX is no
// array's), not overlapping.
void CheckArrays(const void* in, size_t in_bytes, const void* out,
                 size_t out_bytes, size_t count) {
  if (count == 0) return;
  if (in == nullptr)
    throw Error("in", "is null but count is " + std::to_string(count));
  if (out == nullptr)
    throw Error("out", "is null but count is " + std::to_string(count));
  const auto in_range =
      detail::CheckViewBytes("in", in, 1, count, count, in_bytes);
  const auto out_range =
      detail::CheckViewBytes("out", out, 1, count, count, out_bytes);
  detail::CheckNoOverlap("out", out_range, "in", in_range);
}

template <typename Convert, typename In, typename Out>
void ConvertArray(Convert convert, const In* in, size_t count, Out* out) {
  detail::EnsureDispatchReady();
  CheckArrays(in, sizeof(In), out, sizeof(Out), count);
  if (count == 0) return;
  detail::RecordRunTarget(convert(in, count, out));
}

}  // namespace

const char* element_type_name(ElementType type) {
  return detail::EnumName("type", kElementTypes, type);
}

ElementType element_type_from_name(const char* name) {
  return detail::EnumFromName<ElementType>("name", kElementTypes, name);
}

void to_bfloat16(const float* in, size_t count, bf16* out) {
  ConvertArray(detail::ToBF16Array, in, count,
               reinterpret_cast<uint16_t*>(out));
}
void to_float16(const float* in, size_t count, f16* out) {
  ConvertArray(detail::ToF16Array, in, count, reinterpret_cast<uint16_t*>(out));
}
void to_float(const bf16* in, size_t count, float* out) {
  ConvertArray(detail::FromBF16Array, reinterpret_cast<const uint16_t*>(in),
               count, out);
}
void to_float(const f16* in, size_t count, float* out) {
  ConvertArray(detail::FromF16Array, reinterpret_cast<const uint16_t*>(in),
               count, out);
}

void quantize_rows(ConstMatrixView<float> in, MatrixView<int8_t> out,
                   float* scales) {
  detail::EnsureDispatchReady();
  const auto in_bytes = detail::CheckView("in", in);
  const auto out_bytes = detail::CheckView("out", out);
  detail::CheckSize("out.rows", out.rows, in.rows, "in.rows");
  detail::CheckSize("out.cols", out.cols, in.cols, "in.cols");
  detail::CheckNoOverlap("out", out_bytes, "in", in_bytes);
  if (in.rows == 0) return;
  if (scales == nullptr) throw Error("scales", "is null");
  const auto scale_begin = reinterpret_cast<uintptr_t>(scales);
  const detail::ByteRange scale_bytes{scale_begin,
                                      scale_begin + in.rows * sizeof(float)};
  detail::CheckNoOverlap("scales", scale_bytes, "in", in_bytes);
  detail::CheckNoOverlap("scales", scale_bytes, "out", out_bytes);
  for (size_t r = 0; r < in.rows; ++r) {
    for (size_t c = 0; c < in.cols; ++c) {
      if (!std::isfinite(in(r, c))) {
        throw Error("in", "element (" + std::to_string(r) + ", " +
                              std::to_string(c) +
                              ") is not finite; int8 cannot hold it");
      }
    }
  }
  detail::RecordRunTarget(detail::QuantizeRows(in, out, scales));
}

void dequantize_rows(const Int8Rows& in, MatrixView<float> out) {
  detail::EnsureDispatchReady();
  const auto in_bytes = detail::CheckView("in.data", in.data);
  const auto out_bytes = detail::CheckView("out", out);
  detail::CheckSize("out.rows", out.rows, in.data.rows, "in.data.rows");
  detail::CheckSize("out.cols", out.cols, in.data.cols, "in.data.cols");
  detail::CheckNoOverlap("out", out_bytes, "in.data", in_bytes);
  if (in.data.rows == 0) return;
  if (in.scales == nullptr) throw Error("in.scales", "is null");
  detail::CheckNoOverlap(
      "out", out_bytes, "in.scales",
      detail::CheckScales("in", in.scales, in.data.rows, in.scale_stride));
  detail::RecordRunTarget(
      detail::DequantizeRows(in.data, in.scales, in.scale_stride, out));
}

void widen_rows(const ElementRows& in, MatrixView<float> out) {
  detail::EnsureDispatchReady();
  detail::ByteRange scale_bytes;
  const auto in_bytes = detail::CheckView("in", in, &scale_bytes);
  const auto out_bytes = detail::CheckView("out", out);
  detail::CheckSize("out.rows", out.rows, in.rows, "in.rows");
  detail::CheckSize("out.cols", out.cols, in.cols, "in.cols");
  detail::CheckNoOverlap("out", out_bytes, "in", in_bytes);
  detail::CheckNoOverlap("out", out_bytes, "in.scales", scale_bytes);
  if (in.rows == 0 || in.cols == 0) return;
  detail::RecordRunTarget(detail::WidenRows(in, out));
}

}  // namespace attnpool
