// normalize: argument and mask checks, the plan, and the OpenMP driver.
#include <attnpool/error.h>
#include <attnpool/normalize.h>

#include <cmath>
#include <string>

#include "arch/stages.h"
#include "src/dispatch.h"
#include "src/enum_names.h"
#include "core/mask.h"
#include "src/kernel_plan.h"
#include "src/threads.h"
#include "src/kept_outputs.h"
#include "core/validate.h"

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
  if (values.rows == 0 || values.cols == 0) return;  // (nothing to write)
  detail::KeptOutputs kept(execution);
  kept.Keep(values);
  detail::ForEachRowBlock(
      values.rows, kNormalizeBlockRows, detail::WorkersOf(execution),
      [&](size_t begin, size_t end) {
        return detail::NormalizeRows(plan, values, begin, end);
      });
}

}  // namespace

namespace detail {

template <typename T>
NormalizePlan<T> MakeNormalizePlan(Normalization normalization, bool logits,
                                   EmptyRows empty_rows, const Mask<T>& mask,
                                   size_t rows, size_t cols,
                                   const char* target_name, ByteRange target,
                                   size_t valid_length_limit,
                                   MaskArrays* arrays) {
  CheckEnum("normalization", static_cast<int>(normalization),
            kNormalizationCount);
  CheckEnum("empty_rows", static_cast<int>(empty_rows), 2);
  MaskUse use;
  use.scores = logits || normalizes_scores(normalization);
  use.softmax = normalization == Normalization::softmax ||
                (logits && normalization == Normalization::sum);
  const MaskArrays read = CheckMask(mask, rows, cols, valid_length_limit, use);
  CheckApartFromMask(target_name, target, read);
  if (arrays != nullptr) *arrays = read;
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
                                                size_t, MaskArrays*);
template NormalizePlan<double> MakeNormalizePlan(Normalization, bool, EmptyRows,
                                                 const Mask<double>&, size_t,
                                                 size_t, const char*, ByteRange,
                                                 size_t, MaskArrays*);

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
