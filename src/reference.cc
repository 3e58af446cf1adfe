#include "src/reference.h"

#include <attnpool/error.h>

#include <cmath>

namespace attnpool {
namespace reference {

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
      if (query_norm == 0 || key_norm == 0) return 0;
      return sum / (std::sqrt(query_norm) * std::sqrt(key_norm));
  }
  throw Error("distance", "invalid value");
}

}  // namespace reference
}  // namespace attnpool
