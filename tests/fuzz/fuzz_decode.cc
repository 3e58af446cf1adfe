#include "tests/fuzz/fuzz_decode.h"

#include <attnpool/attnpool.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>

namespace attnpool_test {

using attnpool::Distance;
using attnpool::Kernel;
using attnpool::Normalization;

template <typename T>
DecodedCall<T> DecodeCall(const Api<T>& api, Bytes& bytes, uint8_t flags) {
  DecodedCall<T> call;
  call.flags = flags;
  Sizes& sizes = call.sizes;
  for (Dim dim : {kN, kM, kD, kDv}) sizes[dim] = DecodeSize(bytes.Next());
  const uint8_t layout_byte = call.layout_byte = bytes.Next();
  const uint8_t threads_byte = call.threads_byte = bytes.Next();
  // Bound the work of one input (each target plus the reference): small
  // unless the three large bits are set.
  const bool large = flags & layout_byte & threads_byte & 128;
  const size_t budget = large ? 1 << 16 : 1 << 12;
  while (sizes[kN] * sizes[kM] * (sizes[kD] + sizes[kDv] + 1) > budget) {
    Dim largest = sizes[kN] >= sizes[kM] ? kN : kM;
    sizes[largest] /= 2;
  }
  Layout& layout = call.layout;
  layout.padding = layout_byte % 4;
  layout.offset = layout_byte / 4 % 4;
  layout.guard = 64;
  call.ws = std::make_unique<Workspace<T>>(api, sizes, layout);
  Workspace<T>& ws = *call.ws;
  Args<T>& args = ws.args;
  args.execution.threads = threads_byte % 4;
  call.tuning = Tuning(threads_byte);
  static const double kBandwidths[8] = {1e-3, 0.05, 0.5, 1, 2.5, 10, 1e3, 1e6};
  static const double kScales[8] = {0, 1, -1, 0.5, 0.01, 3, -0.2, 0};
  args.distance =
      static_cast<Distance>(bytes.Next() % attnpool::kDistanceCount);
  args.kernel.kernel =
      static_cast<Kernel>(bytes.Next() % attnpool::kKernelCount);
  args.kernel.bandwidth = kBandwidths[bytes.Next() % 8];
  const uint8_t scale_byte = bytes.Next() % 8;
  if (scale_byte != 0) args.kernel.scale = kScales[scale_byte];
  args.normalization =
      static_cast<Normalization>(bytes.Next() % attnpool::kNormalizationCount);
  args.empty_rows =
      flags & 64 ? attnpool::EmptyRows::zero : attnpool::EmptyRows::nan;
  args.depth = sizes[kD];
  const int causal_offset = static_cast<int8_t>(bytes.Next()) % 8;
  const uint8_t extras = bytes.Next(), sides = bytes.Next(),
                adjustments = bytes.Next(), elements = bytes.Next();

  // Make the call valid: distance kernels need a distance, exp's default
  // scale needs d > 0, a bias needs scores.
  if (api.uses_kernel && attnpool::needs_distance(args.kernel.kernel) &&
      attnpool::is_similarity(args.distance)) {
    args.kernel.kernel = Kernel::exp;
  }
  if (attnpool::kernel_properties(args.kernel.kernel).argument ==
          attnpool::KernelArgument::score &&
      !args.kernel.scale && sizes[kD] == 0) {
    args.kernel.scale = 1.0;
  }
  const bool exponential =
      api.uses_kernel && attnpool::is_exponential(args.kernel.kernel);
  const bool scores =
      exponential || attnpool::normalizes_scores(args.normalization);
  // In-place matrices hold what the function expects: distances (≥ 0) for
  // a distance kernel, weights (≥ 0) for `sum` of weights.
  const bool non_negative =
      (api.uses_kernel && !exponential &&
       attnpool::needs_distance(args.kernel.kernel)) ||
      (!api.uses_kernel && args.normalization == Normalization::sum);
  const bool specials = flags & 2;

  const auto fill = [&](attnpool::MatrixView<T> view, bool absolute) {
    const double scale = std::ldexp(1.0, bytes.Next() % 17 - 8);
    for (size_t r = 0; r < view.rows; ++r) {
      for (size_t c = 0; c < view.cols; ++c) {
        T x = DecodeValue<T>(bytes.Next(), scale, specials);
        view(r, c) = absolute ? std::fabs(x) : x;
      }
    }
  };
  for (size_t s = 0; s < api.slots.size(); ++s) {
    if (api.slots[s].role == Role::output) continue;
    fill(args.views[s], api.slots[s].role == Role::in_place && non_negative);
  }
  if (api.uses_mask) {
    if ((flags & 16) && scores) {
      ws.UseBias();
      fill(ws.bias(), false);
    }
    if (flags & 4) {
      ws.UseValidLengths();
      for (size_t i = 0; i < sizes[kN]; ++i) {
        ws.valid_lengths()[i] = bytes.Next() % (sizes[kM] + 1);
      }
    }
    if (flags & 8) args.mask.causal = true;
    if (flags & 8 || extras & 35 || (extras & 8 && scores)) {
      args.mask.causal_offset = causal_offset;
    }
    if (extras & 1) args.mask.window_left = sides % 8;
    if (extras & 2) args.mask.window_right = sides / 8 % 8;
    static const size_t kChunks[4] = {1, 3, 8, 64};
    if (extras & 32) args.mask.chunk = kChunks[sides / 64];
    static const double kCaps[4] = {0.25, 1, 3, 50};
    static const double kSlopes[4] = {0.5, -0.25, 1.0 / 32, 3};
    static const double kSinks[4] = {-1, 0, 2.5, HUGE_VAL};
    if (extras & 4 && scores) args.mask.softcap = T(kCaps[adjustments % 4]);
    if (extras & 8 && scores) {
      args.mask.alibi_slope = T(kSlopes[adjustments / 4 % 4]);
      args.mask.alibi_symmetric = extras & 64;
    }
    const bool softmax =
        args.normalization == Normalization::softmax ||
        (exponential && args.normalization == Normalization::sum);
    if (extras & 16 && softmax)
      args.mask.sink = T(kSinks[adjustments / 16 % 4]);
    if (flags & 32) {
      ws.UseVisible();
      auto visible = ws.visible();
      uint8_t bits = 0;
      for (size_t k = 0; k < visible.rows * visible.cols; ++k) {
        if (k % 8 == 0) bits = bytes.Next();
        visible(k / visible.cols, k % visible.cols) = (bits >> (k % 8)) & 1;
      }
    }
  }

  // Keys and values stored narrow, the inputs rounded to what they hold.
  call.narrow = std::is_same<T, float>::value &&
                std::strcmp(api.name, "attention_pool") == 0 &&
                elements % 16 != 0;
  if constexpr (std::is_same<T, float>::value) {
    if (call.narrow) {
      constexpr int kTypes = attnpool::kElementTypeCount;
      call.key_rows.Store(static_cast<attnpool::ElementType>(elements % kTypes),
                          args.views[1]);
      call.value_rows.Store(
          static_cast<attnpool::ElementType>(elements / kTypes % kTypes),
          args.views[2]);
      if (elements & 16 &&
          call.key_rows.type == attnpool::ElementType::bfloat16) {
        call.query_rows.Store(attnpool::ElementType::bfloat16, args.views[0]);
      }
    }
  }
  return call;
}

template <typename T>
std::string DecodedCall<T>::Describe(const Api<T>& api) const {
  const Args<T>& args = ws->args;
  std::ostringstream text;
  text.precision(17);
  text << api.name << "<" << (sizeof(T) == 4 ? "float" : "double")
       << "> n=" << sizes[kN] << " m=" << sizes[kM] << " d=" << sizes[kD]
       << " dv=" << sizes[kDv] << " padding=" << layout.padding
       << " offset=" << layout.offset << " threads=" << args.execution.threads
       << " distance=" << attnpool::distance_name(args.distance)
       << " kernel=" << attnpool::kernel_name(args.kernel.kernel)
       << " h=" << args.kernel.bandwidth << " scale="
       << (args.kernel.scale ? std::to_string(*args.kernel.scale) : "default")
       << " normalization=" << attnpool::normalization_name(args.normalization)
       << " empty=" << (flags & 64 ? "zero" : "nan")
       << " bias=" << (args.mask.bias.data != nullptr)
       << " valid_lengths=" << (args.mask.valid_lengths != nullptr)
       << " causal=" << args.mask.causal << "/" << args.mask.causal_offset
       << " window="
       << (args.mask.window_left ? int(*args.mask.window_left) : -1) << "/"
       << (args.mask.window_right ? int(*args.mask.window_right) : -1)
       << " softcap=" << (args.mask.softcap ? double(*args.mask.softcap) : 0.0)
       << " chunk=" << args.mask.chunk.value_or(0)
       << " alibi=" << double(args.mask.alibi_slope.value_or(0))
       << (args.mask.alibi_symmetric ? " symmetric" : "")
       << " sink=" << (args.mask.sink ? double(*args.mask.sink) : -HUGE_VAL)
       << " visible=" << (args.mask.visible.data != nullptr)
       << " specials=" << bool(flags & 2)
       << " queries=" << attnpool::element_type_name(query_rows.type)
       << " keys=" << attnpool::element_type_name(key_rows.type)
       << " values=" << attnpool::element_type_name(value_rows.type)
       << " tuning=" << (tuning.empty() ? "chosen" : "'" + tuning + "'");
  return text.str();
}

template struct DecodedCall<float>;
template struct DecodedCall<double>;
template DecodedCall<float> DecodeCall(const Api<float>&, Bytes&, uint8_t);
template DecodedCall<double> DecodeCall(const Api<double>&, Bytes&, uint8_t);

}  // namespace attnpool_test
