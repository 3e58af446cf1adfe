#include "src/reference.h"

#include <attnpool/error.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace attnpool {
namespace reference {
namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

double distance(Distance distance, const double* query, const double* key,
                size_t depth) {
  double sum = 0, query_norm = 0, key_norm = 0;
  switch (distance) {
    case Distance::sqeuclidean:
    case Distance::euclidean:
      for (size_t p = 0; p < depth; ++p) {
        sum += (query[p] - key[p]) * (query[p] - key[p]);
      }
      return distance == Distance::euclidean ? std::sqrt(sum) : sum;
    case Distance::manhattan:
      for (size_t p = 0; p < depth; ++p) sum += std::fabs(query[p] - key[p]);
      return sum;
    case Distance::dot:
      for (size_t p = 0; p < depth; ++p) sum += query[p] * key[p];
      return sum;
    case Distance::cosine: {
      // Free of each vector's scale: a finite vector whose largest entry
      // lies beyond 2^±400 (its squares would leave double's range) is
      // divided by that entry's power of two (exactly) first.
      const auto exponent_of = [depth](const double* x) {
        double largest = 0;
        for (size_t p = 0; p < depth; ++p) {
          largest = std::max(largest, std::fabs(x[p]));
        }
        const int exponent =
            largest > 0 && std::isfinite(largest) ? std::ilogb(largest) : 0;
        return std::abs(exponent) > 400 ? exponent : 0;
      };
      const int query_exponent = exponent_of(query),
                key_exponent = exponent_of(key);
      for (size_t p = 0; p < depth; ++p) {
        const double q = std::ldexp(query[p], -query_exponent),
                     k = std::ldexp(key[p], -key_exponent);
        sum += q * k;
        query_norm += q * q;
        key_norm += k * k;
      }
      // 0 when a norm is 0, unless the other vector is not finite: the
      // dot product is then NaN (0·inf, 0·NaN), and so is the cosine.
      if (query_norm == 0 || key_norm == 0) return std::isnan(sum) ? sum : 0;
      return sum / (std::sqrt(query_norm) * std::sqrt(key_norm));
    }
  }
  throw Error("distance", "invalid value");
}

double kernel(const KernelSpec& spec, Distance input, double value,
              size_t depth, bool logit) {
  const bool squared = input == Distance::sqeuclidean;
  const double h = spec.bandwidth;
  const double r = squared ? std::sqrt(value) : value;  // the distance
  const double u = r / h;
  switch (spec.kernel) {
    case Kernel::gaussian: {
      const double l = squared ? -value / (2 * h * h) : -u * u / 2;
      return logit ? l : std::exp(l);
    }
    case Kernel::exp: {
      const double scale =
          spec.scale ? *spec.scale : 1 / std::sqrt(static_cast<double>(depth));
      return logit ? scale * value : std::exp(scale * value);
    }
    case Kernel::boxcar:
      return std::isnan(value) ? value : u < 1 ? 1.0 : 0.0;
    case Kernel::triangular:
      return std::isnan(value) ? value : std::max(1 - u, 0.0);
    case Kernel::epanechnikov:
      return std::isnan(value) ? value : std::max(1 - u * u, 0.0);
    case Kernel::constant:
      return 1;
    case Kernel::biweight:
      return std::isnan(value) ? value : std::pow(std::max(1 - u * u, 0.0), 2);
    case Kernel::triweight:
      return std::isnan(value) ? value : std::pow(std::max(1 - u * u, 0.0), 3);
    case Kernel::tricube:
      return std::isnan(value) ? value
                               : std::pow(std::max(1 - u * u * u, 0.0), 3);
    case Kernel::cosine:
      return std::isnan(value) ? value : u < 1 ? std::cos(kPi / 2 * u) : 0.0;
  }
  throw Error("kernel", "invalid value");
}

namespace {

// A binary floating-point format of `exponent_bits` and `mantissa_bits`
// (IEEE layout: sign, biased exponent, fraction; subnormals; inf and NaN at
// the top exponent, or, `finite` (OCP E4M3FN), numbers there but for the
// all-ones fraction, NaN).
struct NarrowFormat {
  int exponent_bits, mantissa_bits;
  bool finite = false;

  int bias() const { return (1 << (exponent_bits - 1)) - 1; }

  double value(uint16_t bits) const {
    const int top = (1 << exponent_bits) - 1;
    const bool negative = (bits >> (exponent_bits + mantissa_bits)) & 1;
    const int exponent = (bits >> mantissa_bits) & top;
    const double fraction = bits & ((1 << mantissa_bits) - 1);
    double magnitude;
    if (finite && exponent == top && fraction == (1 << mantissa_bits) - 1) {
      magnitude = std::nan("");
    } else if (exponent == top && !finite) {
      magnitude = fraction == 0 ? HUGE_VAL : std::nan("");
    } else if (exponent == 0) {
      magnitude = std::ldexp(fraction, 1 - bias() - mantissa_bits);
    } else {
      magnitude = std::ldexp(std::ldexp(1.0, mantissa_bits) + fraction,
                             exponent - bias() - mantissa_bits);
    }
    return negative ? -magnitude : magnitude;
  }

  double round(double x) const {
    if (std::isnan(x) || std::isinf(x) || x == 0) return x;
    int k = 0;
    std::frexp(std::fabs(x), &k);  // |x| in [2^(k−1), 2^k)
    const int exponent = std::max(k - 1, 1 - bias());
    const double quantum = std::ldexp(1.0, exponent - mantissa_bits);
    // Exact: a power-of-two scaling; nearbyint rounds ties to even.
    const double magnitude = std::nearbyint(std::fabs(x) / quantum) * quantum;
    const double largest =
        std::ldexp(std::ldexp(2.0, mantissa_bits) - 1, bias() - mantissa_bits);
    return std::copysign(magnitude > largest ? HUGE_VAL : magnitude, x);
  }
};

constexpr NarrowFormat kBFloat16{8, 7};
constexpr NarrowFormat kFloat16{5, 10};
constexpr NarrowFormat kFloat8E4M3FN{4, 3, true};
constexpr NarrowFormat kFloat8E5M2{5, 2};

}  // namespace

double bfloat16_value(uint16_t bits) { return kBFloat16.value(bits); }
double float16_value(uint16_t bits) { return kFloat16.value(bits); }
double round_to_bfloat16(double x) { return kBFloat16.round(x); }
double round_to_float16(double x) { return kFloat16.round(x); }

double element_value(ElementType type, uint32_t bits) {
  switch (type) {
    case ElementType::float32: {
      float value;
      std::memcpy(&value, &bits, sizeof value);
      return value;
    }
    case ElementType::bfloat16:
      return bfloat16_value(static_cast<uint16_t>(bits));
    case ElementType::float16:
      return float16_value(static_cast<uint16_t>(bits));
    case ElementType::int8:
      return static_cast<int8_t>(bits);
    case ElementType::float8_e4m3fn:
      return kFloat8E4M3FN.value(static_cast<uint8_t>(bits));
    case ElementType::float8_e5m2:
      return kFloat8E5M2.value(static_cast<uint8_t>(bits));
  }
  throw Error("type", "invalid value");
}

}  // namespace reference
}  // namespace attnpool
