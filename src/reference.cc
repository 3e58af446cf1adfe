#include "src/reference.h"

#include <attnpool/error.h>

#include <algorithm>
#include <cmath>

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
    case Distance::cosine:
      for (size_t p = 0; p < depth; ++p) {
        sum += query[p] * key[p];
        query_norm += query[p] * query[p];
        key_norm += key[p] * key[p];
      }
      // 0 when a norm is 0, unless the other vector is not finite: the
      // dot product is then NaN (0·inf, 0·NaN), and so is the cosine.
      if (query_norm == 0 || key_norm == 0) return std::isnan(sum) ? sum : 0;
      return sum / (std::sqrt(query_norm) * std::sqrt(key_norm));
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

}  // namespace reference
}  // namespace attnpool
