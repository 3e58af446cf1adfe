// The vectorized exp and tanh (arch/math-inl.h) on every supported target,
// against std::exp / std::tanh in double (float lanes) and long double
// (double lanes). Checks the contract stated in arch/math-inl.h: relative
// error bounds, the flush to +0 below the smallest normal number (never a
// denormal), +inf above the overflow threshold, ±0, ±inf and NaN; and the
// array loop's tail handling. Prints the largest error found per target.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "arch/math.h"
#include "src/math.h"
#include "tests/each_target.h"
#include "tests/test_data.h"

namespace attnpool_test {
namespace {

// The contract's bounds (arch/math-inl.h).
constexpr double kExpFloatBound = 2e-7;
constexpr double kTanhFloatBound = 2e-7;
constexpr double kExpDoubleBound = 4e-16;
constexpr double kTanhDoubleBound = 5e-16;

// Under qemu (aarch64 builds are tested emulated, ~30× slower) the dense
// samples are thinned by this factor; on x86 the binades are exhaustive.
#if defined(__aarch64__)
constexpr uint32_t kThinning = 16;
constexpr size_t kDoubleSamples = 16000;  // long double is software there
#else
constexpr uint32_t kThinning = 1;
constexpr size_t kDoubleSamples = 400000;
#endif

enum class Function { exp, tanh };

const char* Name(Function f) { return f == Function::exp ? "exp" : "tanh"; }

float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
uint32_t BitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// Runs the library's array function; requires that it ran on the target the
// test forced.
template <typename T>
void Apply(Function f, const T* in, T* out, size_t count) {
  const int64_t target = f == Function::exp
                             ? attnpool::detail::ExpArray(in, out, count)
                             : attnpool::detail::TanhArray(in, out, count);
  REQUIRE(std::string(attnpool::detail::MathTargetName(target)) ==
          CurrentTarget());
}

// Largest relative error seen, and contract violations.
struct Tally {
  double max_error = 0;
  double worst_input = 0;
  size_t checked = 0;
  size_t failures = 0;

  void Fail(double x, double got, const char* why) {
    if (failures++ < 8) {
      FAIL_CHECK(why << ": x = " << std::hexfloat << x << " ("
                     << std::defaultfloat << x << "), got " << std::hexfloat
                     << got);
    }
  }
  void Error(double x, double error, double bound, double got) {
    if (error > max_error) {
      max_error = error;
      worst_input = x;
    }
    if (!(error <= bound)) Fail(x, got, "relative error above the bound");
  }
};

// Checks one float result against the contract.
void CheckFloat(Function f, float x, float got, Tally& tally) {
  ++tally.checked;
  if (std::isnan(x)) {
    if (!std::isnan(got)) tally.Fail(x, got, "NaN must give NaN");
    return;
  }
  if (f == Function::exp) {
    const double want = std::exp(static_cast<double>(x));
    if (want < FLT_MIN) {
      // Flushed: exactly +0, never a denormal.
      if (!(got == 0 && !std::signbit(got))) tally.Fail(x, got, "expected +0");
    } else if (std::isinf(static_cast<float>(want))) {
      if (!(std::isinf(got) && got > 0)) tally.Fail(x, got, "expected +inf");
    } else if (!(got >= FLT_MIN)) {
      tally.Fail(x, got, "expected a normal float");
    } else {
      tally.Error(x, std::fabs(got - want) / want, kExpFloatBound, got);
    }
  } else {
    const double want = std::tanh(static_cast<double>(x));
    if (want == 0) {
      if (!(got == 0 && std::signbit(got) == std::signbit(x))) {
        tally.Fail(x, got, "expected a zero of the sign of x");
      }
    } else {
      tally.Error(x, std::fabs(got - want) / std::fabs(want), kTanhFloatBound,
                  got);
    }
  }
}

// Checks every `step`-th float bit pattern in [begin, end) of one sign
// (patterns of non-negative floats; `negative` sets the sign bit).
void CheckFloatBits(Function f, uint32_t begin, uint32_t end, uint32_t step,
                    bool negative, Tally& tally) {
  constexpr size_t kChunk = size_t{1} << 16;
  std::vector<float> in(kChunk), out(kChunk);
  const uint32_t sign = negative ? 0x80000000u : 0;
  uint64_t bits = begin;
  while (bits < end) {
    size_t count = 0;
    for (; count < kChunk && bits < end; ++count, bits += step) {
      in[count] = FloatFromBits(static_cast<uint32_t>(bits) | sign);
    }
    Apply(f, in.data(), out.data(), count);
    for (size_t i = 0; i < count; ++i) CheckFloat(f, in[i], out[i], tally);
  }
}

void CheckFloatRange(Function f, float low, float high, uint32_t step,
                     Tally& tally) {
  // [low, high) with low, high of one sign.
  if (low >= 0) {
    CheckFloatBits(f, BitsOf(low), BitsOf(high), step, false, tally);
  } else {
    CheckFloatBits(f, BitsOf(-high) + 1, BitsOf(-low) + 1, step, true, tally);
  }
}

void CheckFloatList(Function f, const std::vector<float>& inputs,
                    Tally& tally) {
  std::vector<float> out(inputs.size());
  Apply(f, inputs.data(), out.data(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    CheckFloat(f, inputs[i], out[i], tally);
  }
}

void Report(Function f, const char* type, const Tally& tally, double bound) {
  std::printf(
      "math: %-6s %-4s %-6s max relative error %.3g (bound %.3g) at x = %a "
      "over %zu inputs\n",
      CurrentTarget().c_str(), Name(f), type, tally.max_error, bound,
      tally.worst_input, tally.checked);
  REQUIRE(tally.failures == 0);
  REQUIRE(tally.max_error <= bound);
}

std::vector<float> FloatEdgeCases() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> edges = {
      0.0f, -0.0f, inf, -inf, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
      FloatFromBits(1), FloatFromBits(0x80000001u),  // ± smallest denormal
      1e-30f, -1e-30f, 1.0f, -1.0f, 0.5f, 88.0f, -88.0f, 100.0f, -100.0f,
      -104.0f, 1e10f, -1e10f, 1e30f, -1e30f, 9.0f, 9.0109f, 9.5f, 10.0f, -10.0f,
      20.0f, -20.0f, 44.0f, 45.0f, -45.0f,
      // quiet and signaling NaNs, both signs, with payloads
      FloatFromBits(0x7fc00000u), FloatFromBits(0xffc00000u),
      FloatFromBits(0x7fc00001u), FloatFromBits(0xffc001ffu),
      FloatFromBits(0x7f800001u), FloatFromBits(0x7fffffffu),
      FloatFromBits(0xffffffffu)};
  // The thresholds of exp and a few floats either side.
  for (double threshold : {std::log(static_cast<double>(FLT_MAX)),
                           std::log(static_cast<double>(FLT_MIN))}) {
    float x = static_cast<float>(threshold);
    for (int k = 0; k < 4; ++k) x = std::nextafter(x, -inf);
    for (int k = 0; k < 9; ++k, x = std::nextafter(x, inf)) edges.push_back(x);
  }
  return edges;
}

void FloatExact(Function f) {
  // Exact values of the contract.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (f == Function::exp) {
    const float in[] = {0.0f, -0.0f, inf, -inf, nan, -87.5f, -1e30f, 1e30f};
    float out[8];
    Apply(f, in, out, 8);
    CHECK(out[0] == 1.0f);
    CHECK(out[1] == 1.0f);
    CHECK((std::isinf(out[2]) && out[2] > 0));
    CHECK((out[3] == 0 && !std::signbit(out[3])));
    CHECK(std::isnan(out[4]));
    CHECK((out[5] == 0 && !std::signbit(out[5])));  // would be a denormal
    CHECK((out[6] == 0 && !std::signbit(out[6])));
    CHECK((std::isinf(out[7]) && out[7] > 0));
  } else {
    const float in[] = {0.0f, -0.0f, inf, -inf, nan, 10.0f, -1e30f, 1e-40f};
    float out[8];
    Apply(f, in, out, 8);
    CHECK((out[0] == 0 && !std::signbit(out[0])));
    CHECK((out[1] == 0 && std::signbit(out[1])));
    CHECK(out[2] == 1.0f);
    CHECK(out[3] == -1.0f);
    CHECK(std::isnan(out[4]));
    CHECK(out[5] == 1.0f);
    CHECK(out[6] == -1.0f);
    CHECK(out[7] == 1e-40f);  // tanh(x) = x for denormals
  }
}

void FloatAccuracy(Function f) {
  Tally tally;
  FloatExact(f);
  CheckFloatList(f, FloatEdgeCases(), tally);
  const float inf = std::numeric_limits<float>::infinity();
  // Every 997th float of each sign (every 997·kThinning-th under qemu):
  // denormals, both paths of tanh, the whole range of exp and beyond it.
  for (bool negative : {false, true}) {
    CheckFloatBits(f, 0, BitsOf(inf) + 1, 997 * kThinning, negative, tally);
  }
  // Whole binades, exhaustively on x86.
  CheckFloatRange(f, 1.0f, 2.0f, kThinning, tally);
  CheckFloatRange(f, -1.0f, -0.5f, kThinning, tally);
  if (f == Function::exp) {
    // Around the overflow (88.72) and flush (−87.34) thresholds, where the
    // fast path's bound |x| ≤ 87.34 also lies.
    CheckFloatRange(f, 86.0f, 90.0f, kThinning, tally);
    CheckFloatRange(f, -90.0f, -86.0f, kThinning, tally);
  } else {
    // Both sides of the switch from the polynomial to the exp form (|x| = 1)
    // and the start of the saturation to ±1.
    CheckFloatRange(f, 0.5f, 1.0f, kThinning, tally);
    CheckFloatRange(f, -2.0f, -1.0f, kThinning, tally);
    CheckFloatRange(f, 8.0f, 10.0f, 16 * kThinning, tally);
    CheckFloatRange(f, 0x1p-13f, 0x1p-12f, 4 * kThinning, tally);
  }
  Report(f, "float", tally,
         f == Function::exp ? kExpFloatBound : kTanhFloatBound);
}

ATTNPOOL_TEST_EACH_TARGET(ExpFloat, "math.exp.float", "[math]") {
  FloatAccuracy(Function::exp);
}

ATTNPOOL_TEST_EACH_TARGET(TanhFloat, "math.tanh.float", "[math]") {
  FloatAccuracy(Function::tanh);
}

// ------------------------------------------------------------------ double

void DoubleAccuracy(Function f) {
  using Long = long double;
  static_assert(std::numeric_limits<Long>::digits >= 64,
                "the double reference needs a wider long double");
  const double inf = std::numeric_limits<double>::infinity();
  const double bound = f == Function::exp ? kExpDoubleBound : kTanhDoubleBound;
  std::mt19937_64 rng(kSeed + 7);
  INFO("seed " << kSeed + 7);
  std::vector<double> in;
  // Uniform over the range, around |x| ≤ 1, and log-uniform magnitudes.
  const double extent = f == Function::exp ? 709.8 : 25.0;
  std::uniform_real_distribution<double> uniform(-extent, extent);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_real_distribution<double> exponent(-330.0, 3.0);
  for (size_t i = 0; i < kDoubleSamples; ++i) {
    in.push_back(uniform(rng));
    in.push_back(unit(rng));
    const double magnitude = std::pow(10.0, exponent(rng));
    in.push_back(i % 2 ? magnitude : -magnitude);
  }
  // Exact values, specials and the thresholds' neighbours.
  for (double x : {0.0,      -0.0,    inf,      -inf,         DBL_MAX,
                   -DBL_MAX, DBL_MIN, -DBL_MIN, DBL_TRUE_MIN, -DBL_TRUE_MIN,
                   0.625,    -0.625,  19.0,     20.0,         -20.0,
                   1e300,    -1e300,  -745.2,   -800.0,       710.0}) {
    in.push_back(x);
  }
  for (Long threshold : {std::log(static_cast<Long>(DBL_MAX)),
                         std::log(static_cast<Long>(DBL_MIN))}) {
    double x = static_cast<double>(threshold);
    for (int k = 0; k < 4; ++k) x = std::nextafter(x, -inf);
    for (int k = 0; k < 9; ++k, x = std::nextafter(x, inf)) in.push_back(x);
  }
  const size_t nan_at = in.size();
  in.push_back(std::numeric_limits<double>::quiet_NaN());
  in.push_back(-std::numeric_limits<double>::quiet_NaN());

  std::vector<double> out(in.size());
  Apply(f, in.data(), out.data(), in.size());
  Tally tally;
  for (size_t i = 0; i < in.size(); ++i) {
    const double x = in[i], got = out[i];
    ++tally.checked;
    if (i >= nan_at) {
      if (!std::isnan(got)) tally.Fail(x, got, "NaN must give NaN");
      continue;
    }
    if (f == Function::exp) {
      const Long want = std::exp(static_cast<Long>(x));
      if (want < DBL_MIN) {
        if (!(got == 0 && !std::signbit(got)))
          tally.Fail(x, got, "expected +0");
      } else if (std::isinf(static_cast<double>(want))) {
        if (!(std::isinf(got) && got > 0)) tally.Fail(x, got, "expected +inf");
      } else {
        tally.Error(x, static_cast<double>(std::fabs(got - want) / want), bound,
                    got);
      }
    } else {
      const Long want = std::tanh(static_cast<Long>(x));
      if (want == 0) {
        if (!(got == 0 && std::signbit(got) == std::signbit(x))) {
          tally.Fail(x, got, "expected a zero of the sign of x");
        }
      } else {
        tally.Error(
            x, static_cast<double>(std::fabs(got - want) / std::fabs(want)),
            bound, got);
      }
    }
  }
  if (f == Function::exp) {
    const double special[] = {0.0, -inf, inf, -800.0};
    double result[4];
    Apply(f, special, result, 4);
    CHECK(result[0] == 1.0);
    CHECK((result[1] == 0 && !std::signbit(result[1])));
    CHECK(result[2] == inf);
    CHECK((result[3] == 0 && !std::signbit(result[3])));
  } else {
    const double special[] = {-0.0, -inf, inf, 20.0};
    double result[4];
    Apply(f, special, result, 4);
    CHECK((result[0] == 0 && std::signbit(result[0])));
    CHECK(result[1] == -1.0);
    CHECK(result[2] == 1.0);
    CHECK(result[3] == 1.0);
  }
  Report(f, "double", tally, bound);
}

ATTNPOOL_TEST_EACH_TARGET(ExpDouble, "math.exp.double", "[math]") {
  DoubleAccuracy(Function::exp);
}

ATTNPOOL_TEST_EACH_TARGET(TanhDouble, "math.tanh.double", "[math]") {
  DoubleAccuracy(Function::tanh);
}

// -------------------------------------------------------------- array tails

// Every count up to 2·(the longest vector)+1 at several offsets: results equal
// the one-element calls bit for bit (the functions are lane-wise), nothing
// outside [0, count) is written, and in-place calls give the same results.
template <typename T>
void Tails(Function f) {
  constexpr size_t kMaxCount = 2 * 64 + 1;  // 64 floats: 2048-bit SVE
  constexpr size_t kGuard = 8;
  std::mt19937_64 rng(kSeed + 3);
  INFO("seed " << kSeed + 3);
  std::uniform_real_distribution<double> uniform(-100.0, 100.0);
  std::vector<T> source(kMaxCount + 3);
  for (T& x : source) x = static_cast<T>(uniform(rng));
  source[5] = std::numeric_limits<T>::quiet_NaN();
  source[6] = -std::numeric_limits<T>::infinity();
  std::vector<T> single(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    Apply(f, &source[i], &single[i], 1);
  }
  const T canary = T(-12345);
  for (size_t offset : {0, 1, 3}) {
    for (size_t count = 0; count <= kMaxCount; ++count) {
      INFO(Name(f) << " count " << count << " offset " << offset);
      std::vector<T> out(count + 2 * kGuard, canary);
      Apply(f, source.data() + offset, out.data() + kGuard, count);
      std::vector<T> in_place(source.begin() + offset,
                              source.begin() + offset + count);
      Apply(f, in_place.data(), in_place.data(), count);
      for (size_t i = 0; i < out.size(); ++i) {
        const bool inside = i >= kGuard && i < kGuard + count;
        const T want = inside ? single[offset + i - kGuard] : canary;
        REQUIRE(std::memcmp(&out[i], &want, sizeof(T)) == 0);
        if (inside) {
          REQUIRE(std::memcmp(&in_place[i - kGuard], &want, sizeof(T)) == 0);
        }
      }
    }
  }
}

ATTNPOOL_TEST_EACH_TARGET(TailsFloat, "math.tails.float", "[math]") {
  Tails<float>(Function::exp);
  Tails<float>(Function::tanh);
}

ATTNPOOL_TEST_EACH_TARGET(TailsDouble, "math.tails.double", "[math]") {
  Tails<double>(Function::exp);
  Tails<double>(Function::tanh);
}

}  // namespace
}  // namespace attnpool_test
