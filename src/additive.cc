// Additive (Bahdanau) attention (attention.h): projections by the GEMM,
// scores by the per-ISA tanh loop (arch/additive-inl.h) one block of queries
// at a time, then the normalization and weighted-sum stages on that block.
#include <attnpool/attention.h>
#include <attnpool/error.h>
#include <attnpool/weighted_sum.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "arch/additive.h"
#include "arch/contributions.h"
#include "arch/stages.h"
#include "core/visible_run.h"
#include "arch/weighted_sum.h"
#include "src/aligned_buffer.h"
#include "src/attention_checks.h"
#include "src/dispatch.h"
#include "src/pool_plan.h"
#include "src/threads.h"
#include "src/kept_outputs.h"

namespace attnpool {
namespace {

// Query rows per block: a block's scores (rows × m) stay in L2 for m up to
// several thousand keys.
constexpr size_t kAdditiveBlockRows = 16;

// wᵀ as a dense cols × rows matrix.
template <typename T>
detail::AlignedBuffer<T> Transpose(ConstMatrixView<T> w) {
  auto t = detail::AllocateBuffer<T>(w.rows * w.cols);
  for (size_t r = 0; r < w.rows; ++r) {
    for (size_t c = 0; c < w.cols; ++c) t[c * w.rows + r] = w(r, c);
  }
  return t;
}

template <typename T>
void AdditiveAttention(const AdditiveWeights<T>& weights,
                       TensorView<const T> queries, TensorView<const T> keys,
                       TensorView<const T> values, TensorView<T> out,
                       const AttentionMask<T>& mask, EmptyRows empty_rows,
                       const Execution& execution) {
  using detail::CheckSize;
  detail::EnsureDispatchReady();
  detail::CheckEmptyRows(empty_rows);
  const detail::SdpaShape shape = detail::CheckSdpa(
      queries, keys, values, out, mask, execution, /*same_depth=*/false);
  const ConstMatrixView<T> w_q = weights.w_q, w_k = weights.w_k;
  const size_t hidden = w_q.rows;
  const auto o = detail::CheckTensor("out", out, true);
  detail::CheckNoOverlap("out", o, "weights.w_q",
                         detail::CheckView("weights.w_q", w_q));
  detail::CheckNoOverlap("out", o, "weights.w_k",
                         detail::CheckView("weights.w_k", w_k));
  CheckSize("weights.w_q.cols", w_q.cols, queries.cols, "queries.cols");
  CheckSize("weights.w_k.rows", w_k.rows, hidden, "weights.w_q.rows");
  CheckSize("weights.w_k.cols", w_k.cols, keys.cols, "keys.cols");
  if (hidden > 0 && weights.w_v == nullptr) {
    throw Error("weights.w_v", "is null but h = " + std::to_string(hidden));
  }
  detail::CheckNoOverlap("out", o, "weights.w_v",
                         detail::BiasRange(weights.w_v, hidden));

  const size_t n = shape.n, m = shape.m, dv = values.cols;
  const size_t group = shape.kv_heads == 0 ? 1 : shape.heads / shape.kv_heads;
  const detail::Workers threads = detail::WorkersOf(execution);
  // Each slot's block of scores (ForEachRowBlock over a head's n queries).
  const size_t slots =
      detail::BlockSlots(n, kAdditiveBlockRows, threads.threads);
  const size_t padded_m = (m + detail::kAdditiveKeyAlignment - 1) /
                          detail::kAdditiveKeyAlignment *
                          detail::kAdditiveKeyAlignment;
  size_t q_elements = 0, k_elements = 0, t_elements = 0, s_elements = 0;
  if (__builtin_mul_overflow(n, hidden, &q_elements) ||
      __builtin_mul_overflow(m, hidden, &k_elements) ||
      __builtin_mul_overflow(hidden, padded_m, &t_elements) ||
      __builtin_mul_overflow(slots * kAdditiveBlockRows, padded_m,
                             &s_elements) ||
      std::max({q_elements, k_elements, t_elements, s_elements}) >
          std::numeric_limits<size_t>::max() / sizeof(T)) {
    throw Error("weights.w_q.rows",
                "the projections overflow the address space");
  }
  detail::KeptOutputs kept(execution);
  kept.Keep(out);
  const auto w_q_t = Transpose(w_q), w_k_t = Transpose(w_k);
  auto projected_q = detail::AllocateBuffer<T>(n * hidden);
  auto projected_k = detail::AllocateBuffer<T>(m * hidden);
  auto keys_t = detail::AllocateBuffer<T>(hidden * padded_m);
  auto block_scores = detail::AllocateBuffer<T>(s_elements);
  std::vector<size_t> lengths;
  for (size_t b = 0; b < shape.batch; ++b) {
    for (size_t h = 0; h < shape.heads; ++h) {
      const MatrixView<T> head_out = out.matrix(b, h);
      const Mask<T> head_mask = detail::HeadMask(mask, b, h, n, lengths);
      if (m == 0) {
        detail::FillEmptyRows(empty_rows, detail::HasSink(head_mask), head_out);
        continue;
      }
      // Keys projected and transposed once per key head, zero padded.
      if (h % group == 0) {
        weighted_sum(keys.matrix(b, h / group),
                     ConstMatrixView<T>(w_k_t.get(), keys.cols, hidden),
                     MatrixView<T>(projected_k.get(), m, hidden), execution);
        for (size_t u = 0; u < hidden; ++u) {
          T* row = keys_t.get() + u * padded_m;
          for (size_t j = 0; j < m; ++j) row[j] = projected_k[j * hidden + u];
          std::fill(row + m, row + padded_m, T(0));
        }
      }
      weighted_sum(queries.matrix(b, h),
                   ConstMatrixView<T>(w_q_t.get(), queries.cols, hidden),
                   MatrixView<T>(projected_q.get(), n, hidden), execution);
      // Keys that contribute nothing (arch/contributions.h) must not turn
      // their value rows' NaN and ±inf into 0·NaN: the sums run over the
      // values with those entries zeroed, and the contributing keys' terms
      // are added back.
      const ConstMatrixView<T> original_values = values.matrix(b, h / group);
      const bool finite_values = detail::AllFinite(original_values);
      detail::AlignedBuffer<T> zeroed;
      ConstMatrixView<T> head_values = original_values;
      if (!finite_values) {
        zeroed = detail::AllocateBuffer<T>(m * dv);
        const MatrixView<T> copy(zeroed.get(), m, dv);
        detail::CopyZeroingNonFinite(original_values, copy);
        head_values = copy;
      }
      const size_t packed_size =
          detail::WeightedSumPackedSize(head_values, kAdditiveBlockRows);
      auto packed = detail::AllocateBuffer<T>(packed_size);
      if (packed_size != 0) {
        detail::PackWeightedSumValues(head_values, 0, m, packed.get());
      }
      detail::ForEachRowBlock(
          n, kAdditiveBlockRows, threads,
          [&](size_t begin, size_t end, int slot) {
            const size_t rows = end - begin;
            T* scores =
                block_scores.get() + slot * kAdditiveBlockRows * padded_m;
            const MatrixView<T> block(scores, rows, m, padded_m);
            detail::AdditiveScoreRows(
                ConstMatrixView<T>(projected_q.get() + begin * hidden, rows,
                                   hidden),
                ConstMatrixView<T>(keys_t.get(), hidden, m, padded_m),
                weights.w_v, block);
            // The block's rows as the mask sees them.
            detail::NormalizePlan<T> plan;
            plan.normalization = Normalization::softmax;
            plan.empty_rows = empty_rows;
            plan.mask = detail::MaskRows(head_mask, begin, rows);
            detail::NormalizeRows(plan, block, 0, rows);
            const MatrixView<T> block_out(head_out.row(begin), rows, dv,
                                          head_out.stride);
            const int64_t target = detail::WeightedSumRows(
                block, head_values, packed_size != 0 ? packed.get() : nullptr,
                block_out, 0, rows, 0, dv);
            if (!finite_values) {
              // Beside a sink a row is never empty (pool.cc).
              detail::AddNonFiniteTerms(plan, ConstMatrixView<T>(block),
                                        original_values, block_out, 0, 0, 0,
                                        detail::HasSink(head_mask)
                                            ? detail::EmptyRowTerms::add
                                            : detail::EmptyRowTerms::skip);
            }
            return target;
          });
    }
  }
}

}  // namespace

void additive_attention(const AdditiveWeights<float>& weights,
                        TensorView<const float> queries,
                        TensorView<const float> keys,
                        TensorView<const float> values, TensorView<float> out,
                        const AttentionMask<float>& mask, EmptyRows empty_rows,
                        const Execution& execution) {
  AdditiveAttention(weights, queries, keys, values, out, mask, empty_rows,
                    execution);
}

void additive_attention(const AdditiveWeights<double>& weights,
                        TensorView<const double> queries,
                        TensorView<const double> keys,
                        TensorView<const double> values, TensorView<double> out,
                        const AttentionMask<double>& mask, EmptyRows empty_rows,
                        const Execution& execution) {
  AdditiveAttention(weights, queries, keys, values, out, mask, empty_rows,
                    execution);
}

}  // namespace attnpool
