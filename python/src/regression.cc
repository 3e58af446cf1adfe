// Nadaraya–Watson regression: prediction from training points, the rules of
// thumb for the bandwidth, and cross-validation of a bandwidth grid. The
// package's NadarayaWatson estimator is written in Python over these.
#include <attnpool/attnpool.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "python/src/arguments.h"

namespace attnpool_python {
namespace {

// Predictions at `queries` of the model of (x, y) with `bandwidths` (one,
// or one per dimension); with `weights`, also the n_queries × n weights.
void NadarayaWatsonPredict(const std::string& kernel,
                           const std::vector<double>& bandwidths,
                           const InArray& x, const InArray& y,
                           const InArray& queries, const OutArray& out,
                           const std::optional<OutArray>& weights,
                           const std::string& empty_rows, int threads) {
  WithDtype("X", x, [&](auto zero) {
    using T = decltype(zero);
    const Input<T, 2> xs("X", x), ys("y", y, "X"), q("queries", queries, "X");
    const Output<T, 2> o("out", out, {q.shape(0), ys.shape(1)}, "X");
    std::optional<Output<T, 2>> w;
    if (weights)
      w.emplace("weights", *weights,
                std::array<size_t, 2>{q.shape(0), xs.shape(0)}, "X");
    const auto policy = EmptyRowsOf(empty_rows);
    const auto execution = ExecutionOf(threads);
    const auto kind = attnpool::kernel_from_name(kernel.c_str());
    nb::gil_scoped_release release;
    attnpool::NadarayaWatson<T> model(kind, bandwidths, xs.matrix(),
                                      ys.matrix());
    model.set_empty_rows(policy);
    if (w) {
      model.predict(q.matrix(), o.matrix(), w->matrix(), execution);
    } else {
      model.predict(q.matrix(), o.matrix(), execution);
    }
  });
}

// Rule-of-thumb bandwidths, one per dimension.
std::vector<double> RuleOfThumb(const std::string& rule, const InArray& x) {
  std::vector<double> bandwidths;
  WithDtype("X", x, [&](auto zero) {
    using T = decltype(zero);
    const Input<T, 2> xs("X", x);
    if (rule == "silverman") {
      bandwidths = attnpool::silverman_bandwidth(xs.matrix());
    } else if (rule == "scott") {
      bandwidths = attnpool::scott_bandwidth(xs.matrix());
    } else {
      ThrowValue("bandwidth", "unknown rule '" + rule + "'");
    }
  });
  return bandwidths;
}

nb::dict CrossValidate(const std::string& kernel, const InArray& x,
                       const InArray& y, const std::vector<double>& bandwidths,
                       size_t folds, const std::vector<double>& scales,
                       int threads) {
  attnpool::CrossValidationResult result;
  WithDtype("X", x, [&](auto zero) {
    using T = decltype(zero);
    const Input<T, 2> xs("X", x), ys("y", y, "X");
    attnpool::CrossValidationOptions options;
    options.folds = folds;
    options.scales = scales;
    const auto kind = attnpool::kernel_from_name(kernel.c_str());
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    result = attnpool::cross_validate(kind, xs.matrix(), ys.matrix(),
                                      bandwidths, options, execution);
  });
  nb::dict d;
  d["bandwidths"] = result.bandwidths;
  d["scores"] = result.scores;
  d["unpredictable"] = result.unpredictable;
  d["best"] = result.best == attnpool::CrossValidationResult::npos
                  ? nb::none()
                  : nb::cast(result.best);
  d["best_bandwidth"] = result.best_bandwidth;
  return d;
}

}  // namespace

void DefineRegression(nb::module_& m) {
  m.def("nadaraya_watson_predict", &NadarayaWatsonPredict);
  m.def("rule_of_thumb", &RuleOfThumb);
  m.def("cross_validate", &CrossValidate);
  m.def("gaussian_bandwidth_grid", &attnpool::gaussian_bandwidth_grid);
}

}  // namespace attnpool_python
