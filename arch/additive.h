// The additive-attention scores' interface between src/ and arch/: one
// block of query rows at a time, dispatched to the active target.
#pragma once

#include <attnpool/matrix.h>

#include <cstddef>
#include <cstdint>

namespace attnpool {
namespace detail {

// Key columns of the transposed key projection are padded to a multiple of
// this, so that every target loads whole vectors (zeros past m).
constexpr size_t kAdditiveKeyAlignment = 128;

// scores(r, j) = Σᵤ w_v[u] · tanh(queries(r, u) + keys_t(u, j)) for every
// row r of `scores` and key j < scores.cols. queries: rows × h projected
// queries; keys_t: h × m projected keys, transposed, with stride a multiple
// of kAdditiveKeyAlignment and zero padding; scores' stride likewise (the
// padding is written). Sums over u in order, accumulated in T. Returns the
// target bit.
int64_t AdditiveScoreRows(ConstMatrixView<float> queries,
                          ConstMatrixView<float> keys_t, const float* w_v,
                          MatrixView<float> scores);
int64_t AdditiveScoreRows(ConstMatrixView<double> queries,
                          ConstMatrixView<double> keys_t, const double* w_v,
                          MatrixView<double> scores);

}  // namespace detail
}  // namespace attnpool
