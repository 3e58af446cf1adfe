// The four stages, each on its own: pairwise_distances, apply_kernel,
// normalize (in place) and weighted_sum.
#include <attnpool/attnpool.h>
#include <nanobind/stl/string.h>

#include "python/src/arguments.h"

namespace attnpool_python {
namespace {

void PairwiseDistances(const std::string& distance, const InArray& queries,
                       const InArray& keys, const OutArray& out, int threads) {
  WithDtype("queries", queries, [&](auto zero) {
    using T = decltype(zero);
    const Input<T, 2> q("queries", queries), k("keys", keys, "queries");
    const Output<T, 2> o("out", out, {q.shape(0), k.shape(0)}, "queries");
    const auto metric = attnpool::distance_from_name(distance.c_str());
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    attnpool::pairwise_distances(metric, q.matrix(), k.matrix(), o.matrix(),
                                 execution);
  });
}

// `values` in place: a writable matrix of its own dtype.
template <typename T>
Output<T, 2> InPlace(const OutArray& values) {
  RequireDimensions("values", values, 2);
  return Output<T, 2>("values", values, {values.shape(0), values.shape(1)},
                      "values");
}

void ApplyKernel(const std::string& kernel, double bandwidth,
                 std::optional<double> scale, const std::string& input,
                 const OutArray& values, size_t depth, int threads) {
  WithDtype("values", values, [&](auto zero) {
    using T = decltype(zero);
    const auto v = InPlace<T>(values);
    const auto spec = KernelSpecOf(kernel, bandwidth, scale);
    const auto distance = attnpool::distance_from_name(input.c_str());
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    attnpool::apply_kernel(spec, distance, v.matrix(), depth, execution);
  });
}

void Normalize(const std::string& normalization, const OutArray& values,
               const MaskKeywords& mask_arguments, const std::string& empty_rows,
               int threads) {
  WithDtype("values", values, [&](auto zero) {
    using T = decltype(zero);
    const auto v = InPlace<T>(values);
    const MaskArguments<T, 2> masks(mask_arguments, "values");
    const auto kind = attnpool::normalization_from_name(normalization.c_str());
    const auto empty = EmptyRowsOf(empty_rows);
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    attnpool::normalize(kind, v.matrix(), masks.mask(), empty, execution);
  });
}

void WeightedSum(const InArray& weights, const InArray& values,
                 const OutArray& out, int threads) {
  WithDtype("weights", weights, [&](auto zero) {
    using T = decltype(zero);
    const Input<T, 2> w("weights", weights), v("values", values, "weights");
    const Output<T, 2> o("out", out, {w.shape(0), v.shape(1)}, "weights");
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    attnpool::weighted_sum(w.matrix(), v.matrix(), o.matrix(), execution);
  });
}

}  // namespace

void DefineStages(nb::module_& m) {
  m.def("pairwise_distances", &PairwiseDistances);
  m.def("apply_kernel", &ApplyKernel);
  m.def("normalize", &Normalize);
  m.def("weighted_sum", &WeightedSum);
}

}  // namespace attnpool_python
