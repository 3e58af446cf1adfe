// The scalar reference: the oracle every target is tested against. Written
// for obviousness, in double, never optimized (DESIGN.md §2).
#pragma once

#include <attnpool/distance.h>
#include <attnpool/matrix.h>

#include <cstddef>
#include <vector>

namespace attnpool {
namespace reference {

// distance(q, k) over d coordinates, computed in double.
double distance(Distance distance, const double* query, const double* key,
                size_t depth);

// Row-major n×m matrix of reference distances.
template <typename T>
std::vector<double> pairwise_distances(Distance metric,
                                       ConstMatrixView<T> queries,
                                       ConstMatrixView<T> keys) {
  std::vector<double> out(queries.rows * keys.rows);
  std::vector<double> query(queries.cols), key(keys.cols);
  for (size_t i = 0; i < queries.rows; ++i) {
    for (size_t p = 0; p < queries.cols; ++p) query[p] = queries(i, p);
    for (size_t j = 0; j < keys.rows; ++j) {
      for (size_t p = 0; p < keys.cols; ++p) key[p] = keys(j, p);
      out[i * keys.rows + j] =
          reference::distance(metric, query.data(), key.data(), queries.cols);
    }
  }
  return out;
}

}  // namespace reference
}  // namespace attnpool
