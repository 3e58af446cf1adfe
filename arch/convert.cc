// Array conversions between float and the reduced-precision element types
// (arch/convert-inl.h), compiled once per target; arch/convert.h is their
// interface.
#include "arch/target_policy.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arch/convert.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <limits>

#include "arch/convert-inl.h"
#include "arch/convert.h"
#include "arch/prefix_io-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename E>
void Narrow(const float* HWY_RESTRICT in, size_t count, E* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= count; i += N)
    StoreNarrow(df, hn::LoadU(df, in + i), out + i);
  if (i < count) {
    StoreNarrowPrefix(df, LoadPrefix(df, in + i, count - i), out + i,
                      count - i);
  }
}

template <typename E>
void Widen(const E* HWY_RESTRICT in, size_t count, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= count; i += N) hn::StoreU(LoadWide(df, in + i), df, out + i);
  if (i < count) {
    StorePrefix(df, LoadWidePrefix(df, in + i, count - i), out + i, count - i);
  }
}

int64_t ToBF16Array(const float* in, size_t count, uint16_t* out) {
  Narrow(in, count, reinterpret_cast<bf16*>(out));
  return HWY_TARGET;
}
int64_t ToF16Array(const float* in, size_t count, uint16_t* out) {
  Narrow(in, count, reinterpret_cast<f16*>(out));
  return HWY_TARGET;
}
int64_t FromBF16Array(const uint16_t* in, size_t count, float* out) {
  Widen(reinterpret_cast<const bf16*>(in), count, out);
  return HWY_TARGET;
}
int64_t FromF16Array(const uint16_t* in, size_t count, float* out) {
  Widen(reinterpret_cast<const f16*>(in), count, out);
  return HWY_TARGET;
}

// max |x| over the row (a NaN row may give any value: the caller checks
// finiteness first).
HWY_INLINE float RowMaxAbs(const float* HWY_RESTRICT row, size_t cols) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  auto max = hn::Zero(df);
  for (size_t c = 0; c < cols; c += N) {
    max = hn::Max(max, hn::Abs(LoadPrefix(df, row + c, std::min(N, cols - c))));
  }
  return hn::GetLane(hn::MaxOfLanes(df, max));
}

int64_t QuantizeRowsF32(ConstMatrixView<float> in, MatrixView<int8_t> out,
                        float* HWY_RESTRICT scales) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  for (size_t r = 0; r < in.rows; ++r) {
    const float* HWY_RESTRICT row = in.row(r);
    int8_t* HWY_RESTRICT target = out.row(r);
    const float max = RowMaxAbs(row, in.cols);
    float scale = max / 127.0f;
    if (max != 0.0f && scale < std::numeric_limits<float>::min()) {
      // A subnormal scale has few bits: 127 times its rounding would pass
      // the bound. It is rounded up instead (every |in| / scale ≤ 127, and
      // 0 becomes the least subnormal), and each element divided by it as
      // stored, in double: |in − scale·out| ≤ scale/2, scale·out exact.
      if (double(scale) * 127.0 < double(max)) {
        scale = std::nextafter(scale, std::numeric_limits<float>::infinity());
      }
      scales[r] = scale;
      for (size_t c = 0; c < in.cols; ++c) {
        target[c] =
            static_cast<int8_t>(std::nearbyint(double(row[c]) / double(scale)));
      }
      continue;
    }
    scales[r] = scale;
    const float ratio = max == 0.0f ? 0.0f : 127.0f / max;
    const auto factor = hn::Set(df, ratio);
    for (size_t c = 0; c < in.cols; c += N) {
      const size_t count = std::min(N, in.cols - c);
      const auto q = hn::DemoteTo(
          d8, hn::NearestInt(hn::Mul(LoadPrefix(df, row + c, count), factor)));
      if (count == N) {
        hn::StoreU(q, d8, target + c);
      } else {
        HWY_ALIGN int8_t buffer[kMaxLanesBytes / sizeof(float)];
        hn::Store(q, d8, buffer);
        std::copy(buffer, buffer + count, target + c);
      }
    }
  }
  return HWY_TARGET;
}

int64_t DequantizeRowsF32(ConstMatrixView<int8_t> in,
                          const float* HWY_RESTRICT scales, size_t scale_stride,
                          MatrixView<float> out) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  for (size_t r = 0; r < in.rows; ++r) {
    const int8_t* HWY_RESTRICT row = in.row(r);
    float* HWY_RESTRICT target = out.row(r);
    const auto scale = hn::Set(df, scales[r * scale_stride]);
    for (size_t c = 0; c < in.cols; c += N) {
      const size_t count = std::min(N, in.cols - c);
      StorePrefix(df, hn::Mul(scale, LoadWidePrefix(df, row + c, count)),
                  target + c, count);
    }
  }
  return HWY_TARGET;
}

int64_t WidenElementRows(const ElementRows& in, MatrixView<float> out) {
  const detail::RowList<float> rows(in);
  for (size_t r = 0; r < in.rows; ++r) {
    if (rows.is_narrow()) {
      WidenRow(rows, r, out.row(r));
    } else {
      std::copy(rows.row(r), rows.row(r) + in.cols, out.row(r));
    }
  }
  return HWY_TARGET;
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnpool {
namespace detail {

HWY_EXPORT(ToBF16Array);
HWY_EXPORT(ToF16Array);
HWY_EXPORT(FromBF16Array);
HWY_EXPORT(FromF16Array);
HWY_EXPORT(QuantizeRowsF32);
HWY_EXPORT(DequantizeRowsF32);
HWY_EXPORT(WidenElementRows);

int64_t ToBF16Array(const float* in, size_t count, uint16_t* out) {
  return HWY_DYNAMIC_DISPATCH(ToBF16Array)(in, count, out);
}
int64_t ToF16Array(const float* in, size_t count, uint16_t* out) {
  return HWY_DYNAMIC_DISPATCH(ToF16Array)(in, count, out);
}
int64_t FromBF16Array(const uint16_t* in, size_t count, float* out) {
  return HWY_DYNAMIC_DISPATCH(FromBF16Array)(in, count, out);
}
int64_t FromF16Array(const uint16_t* in, size_t count, float* out) {
  return HWY_DYNAMIC_DISPATCH(FromF16Array)(in, count, out);
}
int64_t QuantizeRows(ConstMatrixView<float> in, MatrixView<int8_t> out,
                     float* scales) {
  return HWY_DYNAMIC_DISPATCH(QuantizeRowsF32)(in, out, scales);
}
int64_t DequantizeRows(ConstMatrixView<int8_t> in, const float* scales,
                       size_t scale_stride, MatrixView<float> out) {
  return HWY_DYNAMIC_DISPATCH(DequantizeRowsF32)(in, scales, scale_stride, out);
}

int64_t WidenRows(const ElementRows& in, MatrixView<float> out) {
  return HWY_DYNAMIC_DISPATCH(WidenElementRows)(in, out);
}

}  // namespace detail
}  // namespace attnpool
#endif  // HWY_ONCE
