// apply_kernel: argument checks, the kernel plan, and the OpenMP driver.
#include <attnpool/error.h>
#include <attnpool/kernel.h>

#include <cmath>
#include <limits>
#include <string>

#include "arch/stages.h"
#include "src/dispatch.h"
#include "src/enum_names.h"
#include "src/kernel_plan.h"
#include "src/threads.h"
#include "src/kept_outputs.h"
#include "core/validate.h"

namespace attnpool {
namespace {

// Rows per dispatched call: element-wise work, so only enough to amortize
// the call and balance threads.
constexpr size_t kKernelBlockRows = 16;

template <typename T>
void ApplyKernel(const KernelSpec& spec, Distance input, MatrixView<T> values,
                 size_t depth, const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::CheckExecution(execution);
  const auto plan = detail::MakeKernelPlan<T>(spec, input, depth);
  detail::CheckView("values", values);
  detail::RecordRunTarget(0);
  if (values.rows == 0 || values.cols == 0) return;
  detail::KeptOutputs kept(execution);
  kept.Keep(values);
  detail::ForEachRowBlock(
      values.rows, kKernelBlockRows, detail::WorkersOf(execution),
      [&](size_t begin, size_t end) {
        return detail::ApplyKernelRows(plan, values, begin, end);
      });
}

}  // namespace

namespace detail {

template <typename T>
KernelPlan<T> MakeKernelPlan(const KernelSpec& spec, Distance input,
                             size_t depth) {
  CheckEnum("kernel.kernel", static_cast<int>(spec.kernel), kKernelCount);
  CheckEnum("input", static_cast<int>(input), kDistanceCount);
  KernelPlan<T> plan;
  plan.kernel = spec.kernel;
  plan.argument = kernel_properties(spec.kernel).argument;
  plan.exponential = is_exponential(spec.kernel);
  plan.input = distance_properties(input).output;
  if (needs_distance(spec.kernel)) {
    if (plan.input == DistanceOutput::score) {
      std::string distances;
      for (const DistanceProperties& d : kDistances) {
        if (is_similarity(d.distance)) continue;
        distances += (distances.empty() ? "" : ", ") + std::string(d.name);
      }
      throw Error("kernel.kernel", std::string(kernel_name(spec.kernel)) +
                                       " needs a distance (" + distances +
                                       "), not the similarity " +
                                       distance_name(input));
    }
    const double h = spec.bandwidth;
    if (!(h >= static_cast<double>(std::numeric_limits<T>::min()) &&
          h <= static_cast<double>(std::numeric_limits<T>::max()))) {
      throw Error("kernel.bandwidth",
                  ValueText(h) + " is not a positive, finite, normal " +
                      (sizeof(T) == 4 ? "float" : "double"));
    }
    plan.inverse_bandwidth = static_cast<T>(1.0 / h);
  }
  if (spec.kernel == Kernel::exp) {
    if (spec.scale) {
      if (!std::isfinite(static_cast<T>(*spec.scale))) {
        throw Error("kernel.scale", ValueText(*spec.scale) +
                                        " is not a finite " +
                                        (sizeof(T) == 4 ? "float" : "double"));
      }
      plan.scale = static_cast<T>(*spec.scale);
    } else if (depth == 0) {
      throw Error("kernel.scale",
                  "not given, and its default 1/√d is undefined for d = 0");
    } else {
      plan.scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(depth)));
    }
  }
  return plan;
}

template KernelPlan<float> MakeKernelPlan<float>(const KernelSpec&, Distance,
                                                 size_t);
template KernelPlan<double> MakeKernelPlan<double>(const KernelSpec&, Distance,
                                                   size_t);

}  // namespace detail

ATTNPOOL_DEFINE_ENUM_NAMES(Kernel, kernel, kKernels)

void apply_kernel(const KernelSpec& spec, Distance input,
                  MatrixView<float> values, size_t depth,
                  const Execution& execution) {
  ApplyKernel(spec, input, values, depth, execution);
}

void apply_kernel(const KernelSpec& spec, Distance input,
                  MatrixView<double> values, size_t depth,
                  const Execution& execution) {
  ApplyKernel(spec, input, values, depth, execution);
}

}  // namespace attnpool
