// Per-ISA hot loop of additive (Bahdanau) attention: the scores
// s(q, k) = Σᵤ w_v[u] · tanh(p_q[u] + p_k[u]) of a block of queries against
// every key, vectorized over keys (the key projection is transposed, so a
// vector holds one hidden unit of N consecutive keys). Two key vectors per
// step keep two independent tanh chains in flight; each score is one
// multiply-add chain over u in order, so it does not depend on blocking.

#if defined(ATTNPOOL_ARCH_ADDITIVE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_ADDITIVE_INL_H_
#undef ATTNPOOL_ARCH_ADDITIVE_INL_H_
#else
#define ATTNPOOL_ARCH_ADDITIVE_INL_H_
#endif

#include "arch/additive.h"
#include "arch/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace additive {
namespace hn = hwy::HWY_NAMESPACE;

template <typename T>
void ScoreRows(ConstMatrixView<T> queries, ConstMatrixView<T> keys_t,
               const T* HWY_RESTRICT w_v, MatrixView<T> scores) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const size_t hidden = queries.cols, m = scores.cols;
  for (size_t r = 0; r < scores.rows; ++r) {
    const T* HWY_RESTRICT query = queries.row(r);
    T* HWY_RESTRICT out = scores.row(r);
    // keys_t and scores are padded to kAdditiveKeyAlignment ≥ 2·N columns.
    for (size_t j = 0; j < m; j += 2 * N) {
      auto sum0 = hn::Zero(d);
      auto sum1 = hn::Zero(d);
      for (size_t u = 0; u < hidden; ++u) {
        const T* HWY_RESTRICT key = keys_t.row(u) + j;
        const auto q = hn::Set(d, query[u]);
        const auto w = hn::Set(d, w_v[u]);
        const auto t0 =
            attnpool::HWY_NAMESPACE::Tanh(d, hn::Add(q, hn::Load(d, key)));
        const auto t1 =
            attnpool::HWY_NAMESPACE::Tanh(d, hn::Add(q, hn::Load(d, key + N)));
        sum0 = hn::MulAdd(w, t0, sum0);
        sum1 = hn::MulAdd(w, t1, sum1);
      }
      hn::Store(sum0, d, out + j);
      hn::Store(sum1, d, out + j + N);
    }
  }
}

}  // namespace additive
}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_ADDITIVE_INL_H_
