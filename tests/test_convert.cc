// element.h's conversions on every supported target against the reference
// (src/reference.h): every one of the 65,536 bfloat16 and binary16 patterns
// widened; narrowing of every representable value, of each midpoint
// between neighbours (ties to even) and of the floats next to it, of
// overflow and underflow, ±0, ±inf and NaN payloads; arrays of every
// length around the vector width; int8 row quantization.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "src/reference.h"
#include "tests/each_target.h"
#include "tests/require_rejected.h"

namespace attnpool_test {
namespace {

using attnpool::bf16;
using attnpool::f16;

float FloatFromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

uint32_t BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Whether `actual` is `expected`: the same value, the same sign of zero,
// or both NaN of the same sign.
bool Same(double actual, double expected) {
  if (std::isnan(expected)) {
    return std::isnan(actual) && std::signbit(actual) == std::signbit(expected);
  }
  return actual == expected && std::signbit(actual) == std::signbit(expected);
}

struct Format {
  const char* name;
  double (*value)(uint16_t);
  double (*round)(double);
  void (*narrow)(const float*, size_t, uint16_t*);
  void (*widen)(const uint16_t*, size_t, float*);
};

const Format kFormats[] = {
    {"bfloat16", attnpool::reference::bfloat16_value,
     attnpool::reference::round_to_bfloat16,
     [](const float* in, size_t n, uint16_t* out) {
       attnpool::to_bfloat16(in, n, reinterpret_cast<bf16*>(out));
     },
     [](const uint16_t* in, size_t n, float* out) {
       attnpool::to_float(reinterpret_cast<const bf16*>(in), n, out);
     }},
    {"float16", attnpool::reference::float16_value,
     attnpool::reference::round_to_float16,
     [](const float* in, size_t n, uint16_t* out) {
       attnpool::to_float16(in, n, reinterpret_cast<f16*>(out));
     },
     [](const uint16_t* in, size_t n, float* out) {
       attnpool::to_float(reinterpret_cast<const f16*>(in), n, out);
     }},
};

// Floats whose narrowing the test checks: each finite pattern's value, the
// midpoints between neighbours of one sign (exact in float: one bit more
// than the format) and the floats on either side of each, the largest
// finite value's half-way point to inf, values below the smallest
// subnormal's half, and the specials.
std::vector<float> NarrowingInputs(const Format& format) {
  std::vector<float> inputs;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const double value = format.value(static_cast<uint16_t>(bits));
    if (!std::isfinite(value)) continue;
    inputs.push_back(static_cast<float>(value));
    const double next = format.value(static_cast<uint16_t>(bits + 1));
    if ((bits & 0x7FFF) == 0x7FFF || !std::isfinite(next)) {
      // The largest finite magnitude: half a place above it rounds to inf.
      const double place =
          std::fabs(value - format.value(static_cast<uint16_t>(bits - 1)));
      const float half_way =
          static_cast<float>(value + std::copysign(place / 2, value));
      inputs.push_back(half_way);
      inputs.push_back(std::nextafter(half_way, 0.0f));
      continue;
    }
    const float middle = static_cast<float>((value + next) / 2);
    REQUIRE(static_cast<double>(middle) == (value + next) / 2);
    inputs.push_back(middle);
    inputs.push_back(std::nextafter(middle, 0.0f));
    inputs.push_back(std::nextafter(middle, std::copysign(HUGE_VALF, middle)));
  }
  const float specials[] = {0.0f,
                            -0.0f,
                            HUGE_VALF,
                            -HUGE_VALF,
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            1e-30f,
                            -1e-30f,
                            1e30f,
                            -1e30f};
  inputs.insert(inputs.end(), std::begin(specials), std::end(specials));
  // NaNs: quiet and signalling, payloads high and low, both signs.
  for (uint32_t payload :
       {0x400000u, 0x000001u, 0x7FFFFFu, 0x00FFFFu, 0x010000u, 0x3FFFFFu}) {
    inputs.push_back(FloatFromBits(0x7F800000u | payload));
    inputs.push_back(FloatFromBits(0xFF800000u | payload));
  }
  return inputs;
}

ATTNPOOL_TEST_EACH_TARGET(WidensEveryPattern,
                          "element: every pattern widens exactly",
                          "[element]") {
  std::vector<uint16_t> patterns(0x10000);
  for (uint32_t bits = 0; bits < 0x10000; ++bits)
    patterns[bits] = static_cast<uint16_t>(bits);
  std::vector<float> widened(patterns.size());
  for (const Format& format : kFormats) {
    format.widen(patterns.data(), patterns.size(), widened.data());
    RequireRanOnTarget();
    size_t wrong = 0;
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const double expected = format.value(static_cast<uint16_t>(bits));
      if (!Same(widened[bits], expected)) {
        if (++wrong <= 5) {
          UNSCOPED_INFO(format.name << " 0x" << std::hex << bits
                                    << " widened to " << widened[bits]
                                    << ", expected " << expected);
        }
      }
    }
    INFO(format.name << " on " << CurrentTarget());
    REQUIRE(wrong == 0);
  }
}

ATTNPOOL_TEST_EACH_TARGET(NarrowsToNearestEven,
                          "element: narrowing rounds to nearest even",
                          "[element]") {
  for (const Format& format : kFormats) {
    const std::vector<float> inputs = NarrowingInputs(format);
    std::vector<uint16_t> narrowed(inputs.size());
    format.narrow(inputs.data(), inputs.size(), narrowed.data());
    RequireRanOnTarget();
    size_t wrong = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const double expected = format.round(inputs[i]);
      const double actual = format.value(narrowed[i]);
      if (!Same(actual, expected)) {
        if (++wrong <= 5) {
          UNSCOPED_INFO(format.name << " " << inputs[i] << " (0x" << std::hex
                                    << BitsOf(inputs[i]) << ") narrowed to 0x"
                                    << narrowed[i] << " = " << actual
                                    << ", expected " << expected);
        }
      }
    }
    INFO(format.name << " on " << CurrentTarget() << ", " << inputs.size()
                     << " inputs");
    REQUIRE(wrong == 0);
  }
}

// Every length up to three vectors and more: elements past `count` are
// neither read (the input ends there, guarded) nor written.
ATTNPOOL_TEST_EACH_TARGET(ConvertsArraysOfAnyLength,
                          "element: arrays of any length", "[element]") {
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (const Format& format : kFormats) {
    for (size_t count = 0; count <= 200; ++count) {
      std::vector<float> in(count + 1), back(count + 1, 42.0f);
      for (float& x : in) x = normal(random);
      std::vector<uint16_t> narrow(count + 1, 0xABCD);
      format.narrow(in.data(), count, narrow.data());
      format.widen(narrow.data(), count, back.data());
      INFO(format.name << " count " << count << " on " << CurrentTarget());
      REQUIRE(narrow[count] == 0xABCD);
      REQUIRE(back[count] == 42.0f);
      for (size_t i = 0; i < count; ++i) {
        REQUIRE(Same(back[i], format.round(in[i])));
      }
    }
  }
}

// The factor of quantize_rows is the float 127/max (element.h), not
// 1/scale: for this row they round 0.0174869075·f to either side of 0.5.
ATTNPOOL_TEST_EACH_TARGET(QuantizesByTheStatedFactor, "element: int8 factor",
                          "[element]") {
  const float row[2] = {4.44167423f, 0.0174869075f};
  int8_t q[2] = {0, 0};
  float scale = 0;
  attnpool::quantize_rows({row, 1, 2}, {q, 1, 2}, &scale);
  RequireRanOnTarget();
  REQUIRE(scale == 4.44167423f / 127);
  REQUIRE(q[0] == 127);
  REQUIRE(q[1] == 0);  // 0.0174869075·(127/max) rounds below 0.5
  REQUIRE(std::nearbyint(row[1] * (1.0f / scale)) == 1.0f);  // 1/scale: above
}

// widen_rows over every element type of the table (float8 included, on
// every target): each pattern of a 1- or
// 2-byte type (4,096 random ones of float32) in rows of 13 elements 16
// apart, against the reference's value of the pattern (times the row's
// scale in float, one rounding, for a scaled type: a scale a row, then one
// for all, scale_stride 0). The padding holds junk that must not be read.
ATTNPOOL_TEST_EACH_TARGET(WidensRowsOfEveryType, "element: widen_rows",
                          "[element]") {
  std::mt19937 random(17);
  for (const auto& entry : attnpool::kElementTypes) {
    INFO("type " << entry.name);
    const size_t bytes = entry.bytes, cols = 13, stride = 16;
    const size_t count = bytes == 4 ? 4096 : size_t{1} << (8 * bytes);
    const size_t rows = (count + cols - 1) / cols;
    std::vector<uint32_t> patterns(rows * cols);
    for (size_t k = 0; k < patterns.size(); ++k) {
      patterns[k] = bytes == 4 ? uint32_t(random()) : uint32_t(k % count);
    }
    std::vector<unsigned char> storage(rows * stride * bytes, 0xA5);
    for (size_t k = 0; k < patterns.size(); ++k) {
      std::memcpy(&storage[(k / cols * stride + k % cols) * bytes],
                  &patterns[k], bytes);  // (little-endian)
    }
    std::vector<float> scales(rows);
    std::uniform_real_distribution<float> exponent(-20, 20);
    for (float& scale : scales)
      scale = std::exp2(std::round(exponent(random))) * 0.7f;
    for (const size_t scale_stride : {size_t{1}, size_t{0}}) {
      attnpool::ElementRows in;
      in.type = entry.type;
      in.data = storage.data();
      in.rows = rows;
      in.cols = cols;
      in.stride = stride;
      if (entry.scaled) {
        in.scales = scales.data();
        in.scale_stride = scale_stride;
      }
      std::vector<float> out(rows * cols, 42.0f);
      attnpool::widen_rows(in, {out.data(), rows, cols});
      RequireRanOnTarget();
      for (size_t k = 0; k < patterns.size(); ++k) {
        const auto value = static_cast<float>(
            attnpool::reference::element_value(entry.type, patterns[k]));
        const float expected =
            entry.scaled ? scales[k / cols * scale_stride] * value : value;
        INFO("pattern " << patterns[k] << " scale stride " << scale_stride);
        REQUIRE(Same(out[k], expected));
      }
      if (!entry.scaled) break;
    }
  }
  // The reference's float8 values at the OCP OFP8 specification's landmarks.
  using attnpool::ElementType;
  const auto e4m3 = [](uint32_t bits) {
    return attnpool::reference::element_value(ElementType::float8_e4m3fn, bits);
  };
  const auto e5m2 = [](uint32_t bits) {
    return attnpool::reference::element_value(ElementType::float8_e5m2, bits);
  };
  REQUIRE(e4m3(0x7E) == 448);
  REQUIRE(e4m3(0xFE) == -448);
  REQUIRE(e4m3(0x78) == 256);  // the top exponent holds numbers
  REQUIRE(std::isnan(e4m3(0x7F)));
  REQUIRE(std::isnan(e4m3(0xFF)));
  REQUIRE(e4m3(0x08) == std::ldexp(1.0, -6));  // smallest normal
  REQUIRE(e4m3(0x01) == std::ldexp(1.0, -9));  // smallest subnormal
  REQUIRE(e4m3(0x38) == 1);
  REQUIRE(e5m2(0x7B) == 57344);
  REQUIRE(e5m2(0x7C) == HUGE_VAL);
  REQUIRE(e5m2(0xFC) == -HUGE_VAL);
  REQUIRE(std::isnan(e5m2(0x7D)));
  REQUIRE(e5m2(0x04) == std::ldexp(1.0, -14));
  REQUIRE(e5m2(0x01) == std::ldexp(1.0, -16));
  REQUIRE(e5m2(0x3C) == 1);
  REQUIRE(std::signbit(e5m2(0x80)));
  // Arguments named, nothing written.
  std::vector<int8_t> q(4, 1);
  std::vector<float> out(4, 42.0f);
  RequireRejected("in.scales", out, [&] {
    attnpool::widen_rows(attnpool::Int8Rows{{q.data(), 2, 2}, nullptr},
                         {out.data(), 2, 2});
  });
  RequireRejected("out.cols", out, [&] {
    attnpool::widen_rows(attnpool::ConstMatrixView<float>(out.data(), 2, 2),
                         {out.data(), 2, 1});
  });
  RequireRejected("out", out, [&] {
    attnpool::widen_rows(attnpool::ConstMatrixView<float>(out.data(), 1, 2),
                         {out.data() + 1, 1, 2});
  });
}

ATTNPOOL_TEST_EACH_TARGET(QuantizesRows, "element: int8 rows", "[element]") {
  std::mt19937 random(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (size_t cols : {1u, 3u, 16u, 33u, 64u, 100u}) {
    const size_t rows = 7, stride = cols + 2;
    std::vector<float> in(rows * stride), back(rows * stride, 42.0f);
    for (float& x : in) x = normal(random);
    for (size_t c = 0; c < cols; ++c) in[2 * stride + c] = 0.0f;     // zero row
    in[3 * stride] = -1e30f;                                         // huge
    for (size_t c = 0; c < cols; ++c) in[4 * stride + c] *= 1e-39f;  // tiny
    // Scales of few bits: 6.11e-42 / 127 ≈ 34 least subnormals (rounded
    // down, 127 times it falls short of the row's max), one that rounds
    // to 0, and rows of 1e-43..1e-38 (cols > 1).
    for (size_t c = 0; c < cols; ++c) {
      in[5 * stride + c] = c == 0   ? 6.1110626e-42f
                           : c == 1 ? 2.51953464e-42f
                                    : 0;
    }
    for (size_t c = 0; c < cols; ++c) {
      in[6 * stride + c] = c == 0 ? 4.76e-44f : in[6 * stride + c] * 1e-43f;
    }
    std::vector<int8_t> q(rows * stride, 99);
    std::vector<float> scales(rows);
    attnpool::quantize_rows({in.data(), rows, cols, stride},
                            {q.data(), rows, cols, stride}, scales.data());
    RequireRanOnTarget();
    attnpool::dequantize_rows({{q.data(), rows, cols, stride}, scales.data()},
                              {back.data(), rows, cols, stride});
    RequireRanOnTarget();
    // The same scales between junk: a scale stride of 2.
    std::vector<float> spread(2 * rows, -7.0f), strided(rows * stride);
    for (size_t r = 0; r < rows; ++r) spread[2 * r] = scales[r];
    attnpool::dequantize_rows(
        {{q.data(), rows, cols, stride}, spread.data(), 2},
        {strided.data(), rows, cols, stride});
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) {
        REQUIRE(strided[r * stride + c] == back[r * stride + c]);
      }
    }
    for (size_t r = 0; r < rows; ++r) {
      float max = 0;
      for (size_t c = 0; c < cols; ++c)
        max = std::max(max, std::fabs(in[r * stride + c]));
      INFO("cols " << cols << " row " << r << " on " << CurrentTarget());
      // A float factor; a subnormal scale rounded up, divided in double.
      const bool subnormal =
          max != 0 && max / 127.0f < std::numeric_limits<float>::min();
      const float scale =
          !subnormal || double(max / 127.0f) * 127.0 >= double(max)
              ? max / 127.0f
              : std::nextafter(max / 127.0f, INFINITY);
      REQUIRE(scales[r] == scale);
      const float factor = max == 0 ? 0.0f : 127.0f / max;
      const auto expected = [&](float x) {
        return static_cast<int8_t>(
            subnormal ? std::nearbyint(double(x) / double(scale))
                      : std::nearbyint(x * factor));
      };
      for (size_t c = 0; c < stride; ++c) {
        const size_t at = r * stride + c;
        if (c >= cols) {  // padding untouched
          REQUIRE(q[at] == 99);
          REQUIRE(back[at] == 42.0f);
          continue;
        }
        REQUIRE(q[at] == expected(in[at]));
        REQUIRE(back[at] == scales[r] * static_cast<float>(q[at]));
        REQUIRE(std::fabs(in[at] - back[at]) <=
                (subnormal ? scales[r] * 0.5f
                           : scales[r] * 0.5f * 1.0001f +
                                 std::numeric_limits<float>::denorm_min()));
      }
    }
  }
}

TEST_CASE("element: bad arguments are named, nothing written", "[element]") {
  std::vector<float> in = {1, 2, NAN, 4};
  std::vector<int8_t> q(4, 7);
  std::vector<float> scales(2, 5.0f);
  RequireRejected("in", scales, [&] {
    attnpool::quantize_rows({in.data(), 2, 2}, {q.data(), 2, 2}, scales.data());
  });
  REQUIRE(q == std::vector<int8_t>(4, 7));
  REQUIRE(scales == std::vector<float>(2, 5.0f));
  RequireRejected("out.cols", scales, [&] {
    attnpool::quantize_rows({in.data(), 2, 2}, {q.data(), 2, 1}, scales.data());
  });
  RequireRejected("scales", {}, [&] {
    attnpool::quantize_rows({in.data(), 1, 2}, {q.data(), 1, 2}, nullptr);
  });
  RequireRejected("in.scales", in, [&] {
    attnpool::dequantize_rows({{q.data(), 1, 2}, nullptr}, {in.data(), 1, 2});
  });
  // A scale_stride of 0: one scale for every row (a per-tensor scale).
  {
    const std::vector<int8_t> stored = {1, -2, 3, 4};
    const float shared = 0.5f;
    std::vector<float> widened(4);
    attnpool::dequantize_rows({{stored.data(), 2, 2}, &shared, 0},
                              {widened.data(), 2, 2});
    REQUIRE(widened == std::vector<float>{0.5f, -1.0f, 1.5f, 2.0f});
  }
  RequireRejected("out", in, [&] {
    attnpool::to_bfloat16(in.data(), 4, reinterpret_cast<bf16*>(in.data()));
  });
  RequireRejected("in", in, [&] {
    attnpool::to_float(static_cast<const f16*>(nullptr), 3, in.data());
  });
  // Counts no array has: refused before anything is read or written.
  std::vector<float> narrow(4, 7);  // bf16 storage
  for (const size_t count : {SIZE_MAX, SIZE_MAX / 2, size_t{1} << 63}) {
    RequireRejected("in", narrow, [&] {
      attnpool::to_bfloat16(in.data(), count,
                            reinterpret_cast<bf16*>(narrow.data()));
    });
    RequireRejected("in", in, [&] {
      attnpool::to_float(reinterpret_cast<const bf16*>(narrow.data()), count,
                         in.data());
    });
  }
  // An output overlapping the input past its first element.
  std::vector<float> both = {1, 2, 3, 4, 5, 6};
  RequireRejected("out", both, [&] {
    attnpool::to_float(reinterpret_cast<const bf16*>(both.data()), 4,
                       both.data() + 1);
  });
  // ±inf are not finite either.
  for (const float infinite : {INFINITY, -INFINITY}) {
    const std::vector<float> row = {1, infinite};
    RequireRejected("in", scales, [&] {
      attnpool::quantize_rows({row.data(), 1, 2}, {q.data(), 1, 2},
                              scales.data());
    });
  }
  REQUIRE(std::string(attnpool::element_type_name(
              attnpool::ElementType::bfloat16)) == "bfloat16");
  REQUIRE(attnpool::element_type_from_name("int8") ==
          attnpool::ElementType::int8);
  RequireRejected("name", {}, [] { attnpool::element_type_from_name("fp8"); });
}

}  // namespace
}  // namespace attnpool_test
