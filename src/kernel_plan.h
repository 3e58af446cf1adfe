// Checked plans of the kernel and normalization stages (internal), shared by
// the stage entry points and the staged pipeline.
#pragma once

#include <attnpool/distance.h>
#include <attnpool/kernel.h>
#include <attnpool/normalize.h>

#include <cstddef>

#include "arch/stages.h"
#include "core/mask.h"
#include "core/validate.h"

namespace attnpool {
namespace detail {

// Validates spec against its input and element type (errors name
// "kernel.kernel", "kernel.bandwidth", "kernel.scale", "input").
template <typename T>
KernelPlan<T> MakeKernelPlan(const KernelSpec& spec, Distance input,
                             size_t depth);

// Validates the normalization, the empty-row policy and the mask for an
// rows×cols matrix `target_name` occupying `target` (errors name
// "normalization", "empty_rows", "mask.…"). `logits`: the values are logits
// of exponential weights. Valid lengths may not exceed `valid_length_limit`.
// `arrays`, if given, receives the arrays the mask reads (core/mask.h).
template <typename T>
NormalizePlan<T> MakeNormalizePlan(Normalization normalization, bool logits,
                                   EmptyRows empty_rows, const Mask<T>& mask,
                                   size_t rows, size_t cols,
                                   const char* target_name, ByteRange target,
                                   size_t valid_length_limit,
                                   MaskArrays* arrays = nullptr);

}  // namespace detail
}  // namespace attnpool
