// Array conversions between float and the reduced-precision element types
// (internal; arch/convert-inl.h states their contract). Each dispatches to
// the active target and returns the Highway target bit it ran on. bf16 and
// f16 travel as their 16-bit patterns.
#pragma once

#include <attnpool/element.h>
#include <attnpool/matrix.h>

#include <cstddef>
#include <cstdint>

namespace attnpool {
namespace detail {

int64_t ToBF16Array(const float* in, size_t count, uint16_t* out);
int64_t ToF16Array(const float* in, size_t count, uint16_t* out);
int64_t FromBF16Array(const uint16_t* in, size_t count, float* out);
int64_t FromF16Array(const uint16_t* in, size_t count, float* out);

// element.h's quantize_rows and dequantize_rows, on checked arguments (in
// finite; row r's scale at scales[r · scale_stride]).
int64_t QuantizeRows(ConstMatrixView<float> in, MatrixView<int8_t> out,
                     float* scales);
int64_t DequantizeRows(ConstMatrixView<int8_t> in, const float* scales,
                       size_t scale_stride, MatrixView<float> out);

// out ← the float values of `in` (a checked view of out's shape).
int64_t WidenRows(const ElementRows& in, MatrixView<float> out);

}  // namespace detail
}  // namespace attnpool
