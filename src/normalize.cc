// normalize: argument and mask checks, the plan, and the OpenMP driver.
#include <attnpool/error.h>
#include <attnpool/normalize.h>

#include <cmath>
#include <string>

#include "arch/stages.h"
#include "src/dispatch.h"
#include "src/enum_names.h"
#include "src/kernel_plan.h"
#include "src/threads.h"
#include "src/validate.h"

namespace attnpool {
namespace {

// Rows per dispatched call.
constexpr size_t kNormalizeBlockRows = 16;

template <typename T>
void Normalize(Normalization normalization, MatrixView<T> values,
               const Mask<T>& mask, EmptyRows empty_rows,
               const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::CheckExecution(execution);
  const auto value_bytes = detail::CheckView("values", values);
  const auto plan = detail::MakeNormalizePlan(
      normalization, false, empty_rows, mask, values.rows, values.cols,
      "values", value_bytes, values.cols);
  detail::RecordRunTarget(0);
  if (values.rows == 0) return;
  detail::ForEachRowBlock(
      values.rows, kNormalizeBlockRows, detail::ThreadCount(execution),
      [&](size_t begin, size_t end) {
        return detail::NormalizeRows(plan, values, begin, end);
      });
}

}  // namespace

namespace detail {

// The score adjustments of a mask (normalize.h): values, and what they need.
template <typename T>
void CheckScoreAdjustments(const Mask<T>& mask, bool scores, bool softmax) {
  const char* needs_scores =
      "adjusts scores: it needs softmax or argmax, or an exponential kernel";
  if (mask.softcap) {
    if (!ValidSoftcap(*mask.softcap)) {
      throw Error("mask.softcap", "is " + std::to_string(*mask.softcap) +
                                      " but must be finite, > 0 and have a "
                                      "finite reciprocal");
    }
    if (!scores) throw Error("mask.softcap", needs_scores);
  }
  if (mask.alibi_slope != T(0)) {
    if (!std::isfinite(mask.alibi_slope)) {
      throw Error("mask.alibi_slope", "is " + std::to_string(mask.alibi_slope) +
                                          " but must be finite");
    }
    if (!scores) throw Error("mask.alibi_slope", needs_scores);
  }
  if (mask.sink) {
    if (std::isnan(*mask.sink)) throw Error("mask.sink", "is NaN");
    if (!softmax) {
      throw Error("mask.sink",
                  "joins a softmax: it needs softmax, or sum of an "
                  "exponential kernel's weights");
    }
  }
}

template <typename T>
NormalizePlan<T> MakeNormalizePlan(Normalization normalization, bool logits,
                                   EmptyRows empty_rows, const Mask<T>& mask,
                                   size_t rows, size_t cols,
                                   const char* target_name, ByteRange target,
                                   size_t valid_length_limit) {
  CheckEnum("normalization", static_cast<int>(normalization),
            kNormalizationCount);
  CheckEnum("empty_rows", static_cast<int>(empty_rows), 2);
  if (mask.valid_lengths != nullptr) {
    CheckValidLengths(mask.valid_lengths, rows, valid_length_limit, cols);
  }
  if (mask.bias.data != nullptr || mask.bias.rows != 0) {
    const auto bias_bytes = CheckView("mask.bias", mask.bias);
    CheckSize("mask.bias.rows", mask.bias.rows, rows, "the number of queries");
    CheckSize("mask.bias.cols", mask.bias.cols, cols, "the number of keys");
    CheckNoOverlap(target_name, target, "mask.bias", bias_bytes);
    const bool scores = logits || normalizes_scores(normalization);
    if (!scores) {
      throw Error("mask.bias",
                  "is added to scores: it needs softmax or argmax, or an "
                  "exponential kernel");
    }
  }
  CheckScoreAdjustments(mask, logits || normalizes_scores(normalization),
                        normalization == Normalization::softmax ||
                            (logits && normalization == Normalization::sum));
  if (mask.visible.data != nullptr || mask.visible.rows != 0) {
    const auto visible_bytes = CheckView("mask.visible", mask.visible);
    CheckSize("mask.visible.rows", mask.visible.rows, rows,
              "the number of queries");
    CheckSize("mask.visible.cols", mask.visible.cols, cols,
              "the number of keys");
    CheckNoOverlap(target_name, target, "mask.visible", visible_bytes);
  }
  if (mask.valid_lengths != nullptr) {
    const auto begin = reinterpret_cast<uintptr_t>(mask.valid_lengths);
    CheckNoOverlap(target_name, target, "mask.valid_lengths",
                   {begin, begin + rows * sizeof(size_t)});
  }
  NormalizePlan<T> plan;
  plan.normalization = normalization;
  plan.logits = logits;
  plan.empty_rows = empty_rows;
  plan.mask = mask;
  return plan;
}

template NormalizePlan<float> MakeNormalizePlan(Normalization, bool, EmptyRows,
                                                const Mask<float>&, size_t,
                                                size_t, const char*, ByteRange,
                                                size_t);
template NormalizePlan<double> MakeNormalizePlan(Normalization, bool, EmptyRows,
                                                 const Mask<double>&, size_t,
                                                 size_t, const char*, ByteRange,
                                                 size_t);

}  // namespace detail

ATTNPOOL_DEFINE_ENUM_NAMES(Normalization, normalization, kNormalizations)

void normalize(Normalization normalization, MatrixView<float> values,
               const Mask<float>& mask, EmptyRows empty_rows,
               const Execution& execution) {
  Normalize(normalization, values, mask, empty_rows, execution);
}

void normalize(Normalization normalization, MatrixView<double> values,
               const Mask<double>& mask, EmptyRows empty_rows,
               const Execution& execution) {
  Normalize(normalization, values, mask, empty_rows, execution);
}

}  // namespace attnpool
