// attnpool regress: Nadaraya-Watson regression, its bandwidth fixed, from
// a rule of thumb or chosen by cross-validation.
#include <cstddef>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/cli/arrays.h"
#include "tools/cli/commands.h"
#include "tools/cli/options.h"
#include "tools/cli/run.h"

namespace attnpool_cli {
namespace {

// How the bandwidth is chosen.
struct BandwidthChoice {
  enum class How { fixed, rule, cross_validation } how = How::rule;
  std::string option = "--bandwidth-rule";  // the option that chose it
  std::vector<double> fixed;                // --bandwidth
  std::string fixed_text;                   // as given
  bool silverman = true;                    // --bandwidth-rule
  double h_min = 0, h_max = 0;              // --cv-grid
  size_t count = 0;
  size_t folds = 0;  // --folds; 0: leave-one-out
};

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

BandwidthChoice ParseBandwidthChoice(const Arguments& arguments) {
  BandwidthChoice choice;
  const int given = arguments.Has("--bandwidth") +
                    arguments.Has("--bandwidth-rule") +
                    arguments.Has("--cv-grid");
  if (given > 1) {
    UsageError(
        "--bandwidth, --bandwidth-rule and --cv-grid are alternatives: give "
        "one");
  }
  if (arguments.Has("--folds") && !arguments.Has("--cv-grid")) {
    UsageError("--folds needs --cv-grid");
  }
  if (const auto text = arguments.Get("--bandwidth")) {
    choice.how = BandwidthChoice::How::fixed;
    choice.option = "--bandwidth";
    choice.fixed_text = *text;
    for (const auto& part : Split(*text, ',')) {
      choice.fixed.push_back(ParseDouble("--bandwidth", part));
    }
  } else if (const auto grid = arguments.Get("--cv-grid")) {
    choice.how = BandwidthChoice::How::cross_validation;
    choice.option = "--cv-grid";
    const auto parts = Split(*grid, ',');
    if (parts.size() != 3) {
      UsageError("--cv-grid " + *grid +
                 ": expected HMIN,HMAX,COUNT (e.g. 0.05,2,32)");
    }
    choice.h_min = ParseDouble("--cv-grid", parts[0]);
    choice.h_max = ParseDouble("--cv-grid", parts[1]);
    const long long count = ParseInteger("--cv-grid", parts[2]);
    if (count < 1 || count > 100000) {
      UsageError("--cv-grid " + *grid + ": COUNT must be between 1 and 100000");
    }
    choice.count = static_cast<size_t>(count);
    if (const auto folds = arguments.Get("--folds")) {
      const long long k = ParseInteger("--folds", *folds);
      if (k < 2) {
        UsageError("--folds " + *folds +
                   ": must be at least 2 (without --folds: leave-one-out)");
      }
      choice.folds = static_cast<size_t>(k);
    }
  } else {
    const std::string rule =
        arguments.Get("--bandwidth-rule").value_or("silverman");
    if (rule != "silverman" && rule != "scott") {
      UsageError("--bandwidth-rule " + rule + ": use silverman or scott");
    }
    choice.silverman = rule == "silverman";
  }
  return choice;
}

// "0.5", "0.31 0.52": bandwidths as printed.
std::string BandwidthText(const std::vector<double>& bandwidths) {
  std::string text;
  char number[32];
  for (double h : bandwidths) {
    std::snprintf(number, sizeof(number), "%.9g", h);
    text += (text.empty() ? "" : " ") + std::string(number);
  }
  return text;
}

// The bandwidth(s) of `choice` on x and y, and how they were found: given,
// from a rule, or the minimizer of the cross-validation scores (whose curve
// is printed here, before anything else can fail).
struct ChosenBandwidth {
  std::vector<double> bandwidths;
  std::string how;
};

template <typename T>
ChosenBandwidth ChooseBandwidth(const BandwidthChoice& choice,
                                attnpool::Kernel kernel,
                                attnpool::ConstMatrixView<T> x,
                                attnpool::ConstMatrixView<T> y,
                                const RunSettings& settings) {
  switch (choice.how) {
    case BandwidthChoice::How::fixed:
      return {choice.fixed, "--bandwidth"};
    case BandwidthChoice::How::rule: {
      auto bandwidths = choice.silverman ? attnpool::silverman_bandwidth(x)
                                         : attnpool::scott_bandwidth(x);
      const bool several = bandwidths.size() > 1;
      return {std::move(bandwidths),
              std::string(choice.silverman ? "Silverman" : "Scott") +
                  "'s rule of thumb" +
                  (several ? ", one per column of --x" : "")};
    }
    case BandwidthChoice::How::cross_validation:
      break;
  }
  const auto grid = attnpool::gaussian_bandwidth_grid(
      choice.h_min, choice.h_max, choice.count);
  attnpool::CrossValidationOptions options;
  options.folds = choice.folds;
  const auto result =
      attnpool::cross_validate(kernel, x, y, grid, options, settings.execution);
  const std::string method = choice.folds == 0
                                 ? "leave-one-out"
                                 : std::to_string(choice.folds) + "-fold";
  std::printf(
      "# %s cross-validation, %s kernel, %zu points: h, score (mean held-out "
      "squared error), unpredictable points\n",
      method.c_str(), attnpool::kernel_name(kernel), x.rows);
  for (size_t b = 0; b < grid.size(); ++b) {
    std::printf("%.9g %.9g %zu\n", grid[b], result.scores[b],
                result.unpredictable[b]);
  }
  std::fflush(stdout);
  if (result.best == attnpool::CrossValidationResult::npos) {
    throw CliError{
        "--cv-grid: every bandwidth leaves some point with no other "
        "training point in its kernel window (h = " +
        BandwidthText({grid.back()}) + " leaves " +
        std::to_string(result.unpredictable.back()) +
        "): raise HMAX, or use --kernel gaussian"};
  }
  char score[64];
  std::snprintf(score, sizeof(score), "%.9g", result.scores[result.best]);
  return {{result.best_bandwidth},
          "least " + method + " score, " + std::string(score)};
}

// A --bandwidth list fits x: 1 value, or one per column.
void CheckBandwidthCount(const BandwidthChoice& choice, const InputMatrix& x) {
  const size_t count = choice.fixed.size();
  if (choice.how != BandwidthChoice::How::fixed || count == 1 ||
      count == x.cols) {
    return;
  }
  throw CliError{"--bandwidth " + choice.fixed_text + ": " +
                 std::to_string(count) + " values, expected 1" +
                 (x.cols > 1 ? " or " + std::to_string(x.cols) +
                                   " (one per column of " + x.Describe() + ")"
                             : " (" + x.Describe() + " has one column)")};
}

struct RegressInputs {
  InputMatrix x, y, queries;
  attnpool::Kernel kernel = attnpool::Kernel::gaussian;
  attnpool::EmptyRows empty_rows = attnpool::EmptyRows::nan;
  BandwidthChoice bandwidth;
};

// The regression of `inputs`, with its bandwidth(s) chosen into `bandwidths`
// and printed on stdout.
template <typename T>
attnpool::NadarayaWatson<T> Fit(const RegressInputs& inputs,
                                attnpool::ConstMatrixView<T> x,
                                attnpool::ConstMatrixView<T> y,
                                const RunSettings& settings,
                                std::vector<double>* bandwidths) {
  const auto chosen =
      ChooseBandwidth(inputs.bandwidth, inputs.kernel, x, y, settings);
  *bandwidths = chosen.bandwidths;
  auto model =
      bandwidths->size() == 1
          ? attnpool::NadarayaWatson<T>(inputs.kernel, (*bandwidths)[0], x, y)
          : attnpool::NadarayaWatson<T>(inputs.kernel, *bandwidths, x, y);
  model.set_empty_rows(inputs.empty_rows);
  std::printf("bandwidth: %s (%s)\n", BandwidthText(*bandwidths).c_str(),
              chosen.how.c_str());
  std::fflush(stdout);
  return model;
}

template <typename T>
int RunRegress(const RegressInputs& inputs, const std::string& out_path,
               const std::optional<std::string>& weights_path, const Run& run) {
  const size_t rows = inputs.queries.rows, size = inputs.x.rows;
  // The library's "bandwidth" comes from the option that chose it.
  const std::map<std::string, std::string> overrides = {
      {"bandwidth", inputs.bandwidth.option}};
  Results results = PoolResults(out_path, weights_path, rows, inputs.y, size,
                                inputs.y.array.type);
  const auto x = View<T>(inputs.x);
  const auto y = View<T>(inputs.y);
  const auto queries = View<T>(inputs.queries);
  std::vector<double> bandwidths;
  const auto compute_time = ComputeWithProgress(
      run, rows,
      [&](Progress* progress) {
        const auto model = Fit(inputs, x, y, run.settings, &bandwidths);
        ForEachChunk(
            rows, size, run.settings, progress,
            [&](size_t begin, size_t count) {
              const auto block = Rows(queries, begin, count);
              const auto out = MatrixRows<T>(results.out, begin, count);
              if (weights_path) {
                model.predict(block, out, WeightRows<T>(results, begin, count),
                              run.settings.execution);
              } else {
                model.predict(block, out, run.settings.execution);
              }
            });
      },
      overrides);
  return Finish(run, results, compute_time,
                "n=" + std::to_string(size) + " m=" + std::to_string(rows) +
                    " d=" + std::to_string(inputs.x.cols) +
                    " dy=" + std::to_string(inputs.y.cols) +
                    " h=" + BandwidthText(bandwidths));
}

int Regress(const Arguments& arguments) {
  RequireOptions(arguments, {"--x", "--y", "--queries", "-o"});
  const RunSettings settings = ReadSettings(arguments);

  RegressInputs inputs{};
  const std::string kernel = arguments.Get("--kernel").value_or("gaussian");
  inputs.kernel = ParseName("--kernel", kernel, &attnpool::kernel_from_name);
  if (!attnpool::needs_distance(inputs.kernel)) {
    UsageError("--kernel " + kernel + ": regression takes " +
               TableNames(attnpool::kKernels, kOfDistances));
  }
  inputs.empty_rows = ParseEmptyRows(arguments);
  inputs.bandwidth = ParseBandwidthChoice(arguments);

  const InputReading reading(arguments, settings);
  LoadMatrices(
      arguments,
      {{"--x", &inputs.x}, {"--y", &inputs.y}, {"--queries", &inputs.queries}});
  RequireExtent(
      inputs.y, "rows", inputs.y.rows, inputs.x.rows,
      "(one per training point: the rows of " + inputs.x.Describe() + ")");
  RequireSameColumns(inputs.x, inputs.queries);
  CheckBandwidthCount(inputs.bandwidth, inputs.x);
  return reading.Compute(inputs.x.array.type, [&](auto zero, const Run& run) {
    return RunRegress<decltype(zero)>(inputs, arguments.Required("-o"),
                                      arguments.Get("--weights"), run);
  });
}

}  // namespace

Command RegressCommand() {
  // -o: regression's errors about its "out" name it (the other commands'
  // -o feeds no argument).
  OptionInfo out = kOut;
  out.feeds = {"out"};
  // --bandwidth, --bandwidth-rule and --cv-grid feed "bandwidth" as the
  // one given chooses it (RunRegress); --cv-grid also feeds the grid.
  return MakeCommand(
      "regress",
      "attnpool regress --x X.npy --y Y.npy --queries Q.npy -o OUT.npy "
      "[options]\n\n"
      "Nadaraya-Watson kernel regression: OUT[i] = sum_j K(|q_i - x_j| / h) "
      "y_j /\nsum_j K(|q_i - x_j| / h). The bandwidth h is fixed "
      "(--bandwidth), from a rule of\nthumb (--bandwidth-rule, the default) "
      "or the least cross-validation score on a\ngrid (--cv-grid); it is "
      "printed on stdout as 'bandwidth: H', after the grid's\n'h score "
      "unpredictable' lines with --cv-grid.",
      {{
           {"--x", "X.npy", "training inputs, n x d (required)", {"x"}},
           {"--y",
            "Y.npy",
            "training targets, n x dy, or n entries (required)",
            {"y"}},
           {"--queries",
            "Q.npy",
            "where to predict, m x d (required)",
            {"queries"}},
           out,
           {"--weights",
            "W.npy",
            "also write the m x n weights of the training points for each "
            "query",
            {"weights"}},
           {"--kernel", "NAME", kRegressKernelHelp.c_str(), {"kernel"}},
           {"--bandwidth", "H",
            "a fixed bandwidth h > 0, or one per column of x: H1,H2,..."},
           {"--bandwidth-rule", "silverman|scott",
            "a normal-reference rule of thumb, one bandwidth per column of x "
            "(the default: silverman)"},
           {"--cv-grid",
            "HMIN,HMAX,COUNT",
            "choose h by cross-validation among COUNT bandwidths from HMIN to "
            "HMAX (evenly spaced in 1/h^2), printing the score of each",
            {"bandwidths", "h_min", "h_max", "count"}},
           {"--folds",
            "K",
            "with --cv-grid: K-fold (point i in fold i mod K) instead of "
            "leave-one-out",
            {"options.folds"}},
           EmptyRowsOption("output of a query with no training point in its "
                           "kernel window: NaN (default) or 0"),
       },
       kRunOptions},
      Regress);
}

}  // namespace attnpool_cli
