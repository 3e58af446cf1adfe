// attnpool-demo: "attention pooling by similarity" on the seed's synthetic
// data, computed with attnpool and drawn by tools/plot_demo.py (matplotlib).
//
// Data: y = 2 sin(x) + x + ε, ε ~ N(0, σ²), with 40 training points drawn
// uniformly on [0, 5) (fixed seed) and validation queries x = 0, 0.1, …, 4.9;
// a second case repeats it with many more points. For each case it pools with
// the four kernels of the seed (Gaussian, boxcar, constant, triangular; width
// 1) and with Gaussians of width 0.1, 0.2, 0.5, 1, keeping the attention
// weights; and it scans Gaussian widths by leave-one-out cross-validation
// (attnpool::cross_validate: each training point predicted from the others,
// every width in one streaming pass), choosing the width of least LOO error.
// Calls that keep the weights run the staged pipeline; the others the fused
// kernel.
//
// It writes the numbers as .npy files plus summary.json into --out, prints
// a summary, and runs the plotting script unless --no-plot.
#include <attnpool/attnpool.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "tools/npy.h"

namespace {

using Clock = std::chrono::steady_clock;
using attnpool::Kernel;

struct Options {
  std::string out = "demo";
  bool plot = true;
  size_t large = 2000;
  uint64_t seed = 1;
  double noise = 1.0;
  int threads = 0;
  std::string isa;
  std::string python = ATTNPOOL_PYTHON;
  std::string plot_script = ATTNPOOL_PLOT_SCRIPT;
};

const char kUsage[] =
    "usage: attnpool-demo [--out DIR] [--no-plot] [--large N] [--seed S]\n"
    "                     [--noise SIGMA] [--threads N] [--isa TARGET]\n"
    "                     [--python PATH] [--plot-script FILE]\n"
    "\n"
    "Attention pooling by similarity (Nadaraya-Watson) on y = 2 sin x + x + "
    "e:\n"
    "the kernel shapes, the fits and attention weights of the Gaussian, "
    "boxcar,\n"
    "constant and triangular kernels and of Gaussian widths 0.1, 0.2, 0.5, 1,\n"
    "and the width chosen by leave-one-out cross-validation; for 40 training\n"
    "points and for --large N points (default 2000; 0 skips that case).\n"
    "Writes the numbers (.npy, summary.json) and the figures (PNG, SVG) to\n"
    "--out (default ./demo) and prints a summary.\n";

// Uniform doubles in [0, 1) and normals from a fixed engine, so that the data
// do not depend on the standard library's distributions.
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1p-53; }
  double Normal() {  // Box–Muller
    const double u = 1.0 - Uniform(), v = Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
  }

 private:
  std::mt19937_64 engine_;
};

double Truth(double x) { return 2.0 * std::sin(x) + x; }

struct Data {
  std::string name;
  std::vector<float> x_train, y_train, x_val, y_truth;
};

Data MakeData(const std::string& name, size_t train_count, double step,
              uint64_t seed, double noise) {
  Data data;
  data.name = name;
  Random random(seed);
  std::vector<double> x(train_count);
  for (double& value : x) value = 5.0 * random.Uniform();
  std::sort(x.begin(), x.end());
  for (double value : x) {
    data.x_train.push_back(static_cast<float>(value));
    data.y_train.push_back(
        static_cast<float>(Truth(value) + noise * random.Normal()));
  }
  const size_t val_count = static_cast<size_t>(std::llround(5.0 / step));
  for (size_t i = 0; i < val_count; ++i) {
    const double value = i * step;
    data.x_val.push_back(static_cast<float>(value));
    data.y_truth.push_back(static_cast<float>(Truth(value)));
  }
  return data;
}

struct Fit {
  std::string kernel;
  double bandwidth;
  std::vector<float> y_hat;    // n_val
  std::vector<float> weights;  // n_val × n_train, when kept
  double rmse = 0, max_error = 0;
  size_t empty = 0;  // queries with no weight (NaN)
};

// Times every attnpool call of the demo.
struct Stopwatch {
  Clock::duration total{};
  size_t calls = 0;
  double weights = 0;  // n·m summed over calls
};

class Demo {
 public:
  explicit Demo(const Options& options) {
    execution_.threads = options.threads;
  }

  // Nadaraya–Watson with `kernel` of width h: queries x_val, keys x_train.
  Fit Pool(const Data& data, Kernel kernel, double h, bool keep_weights) {
    Fit fit;
    fit.kernel = attnpool::kernel_name(kernel);
    fit.bandwidth = h;
    const size_t n = data.x_val.size(), m = data.x_train.size();
    fit.y_hat.resize(n);
    const attnpool::PoolSpec spec{attnpool::Distance::sqeuclidean,
                                  {kernel, h},
                                  attnpool::Normalization::sum};
    const attnpool::ConstMatrixView<float> queries(data.x_val.data(), n, 1),
        keys(data.x_train.data(), m, 1), values(data.y_train.data(), m, 1);
    const attnpool::MatrixView<float> out(fit.y_hat.data(), n, 1);
    if (keep_weights) {
      fit.weights.resize(n * m);
      Run(n, m, [&] {
        attnpool::attention_pool_staged(spec, queries, keys, values, out,
                                        {fit.weights.data(), n, m}, {},
                                        execution_);
      });
    } else {  // the fused kernel: no n×m matrix
      Run(n, m, [&] {
        attnpool::attention_pool(spec, queries, keys, values, out, {},
                                 execution_);
      });
    }
    double sum = 0;
    size_t counted = 0;
    for (size_t i = 0; i < n; ++i) {
      const double error = fit.y_hat[i] - data.y_truth[i];
      if (std::isnan(error)) {
        ++fit.empty;
        continue;
      }
      sum += error * error;
      fit.max_error = std::max(fit.max_error, std::abs(error));
      ++counted;
    }
    fit.rmse = counted ? std::sqrt(sum / counted) : NAN;
    return fit;
  }

  // Leave-one-out mean squared errors of Gaussian widths, all in one
  // streaming pass of the library's cross-validation (regression.h).
  attnpool::CrossValidationResult LeaveOneOut(const Data& data,
                                              const std::vector<double>& h) {
    const size_t m = data.x_train.size();
    attnpool::CrossValidationResult result;
    Run(m, m * h.size(), [&] {
      result = attnpool::cross_validate(
          Kernel::gaussian, {data.x_train.data(), m, 1},
          {data.y_train.data(), m, 1}, h, {}, execution_);
    });
    return result;
  }

  const Stopwatch& stopwatch() const { return stopwatch_; }

 private:
  template <class Call>
  void Run(size_t n, size_t m, const Call& call) {
    const auto start = Clock::now();
    call();
    stopwatch_.total += Clock::now() - start;
    ++stopwatch_.calls;
    stopwatch_.weights += double(n) * m;
    const std::string ran = attnpool::last_run_target();
    if (!ran.empty()) target_ = ran;
  }

 public:
  std::string target_;

 private:
  attnpool::Execution execution_;
  Stopwatch stopwatch_;
};

// Direct double-precision Nadaraya–Watson, to show the SIMD result agrees.
double MaxDeviationFromDirect(const Data& data, const Fit& fit, Kernel kernel) {
  double worst = 0;
  for (size_t i = 0; i < data.x_val.size(); ++i) {
    double numerator = 0, denominator = 0;
    for (size_t j = 0; j < data.x_train.size(); ++j) {
      const double u =
          std::abs(double(data.x_val[i]) - data.x_train[j]) / fit.bandwidth;
      const double w = kernel == Kernel::gaussian     ? std::exp(-u * u / 2)
                       : kernel == Kernel::boxcar     ? (u < 1 ? 1.0 : 0.0)
                       : kernel == Kernel::triangular ? std::max(1 - u, 0.0)
                                                      : 1.0;
      numerator += w * data.y_train[j];
      denominator += w;
    }
    if (denominator == 0) continue;
    worst = std::max(worst, std::abs(numerator / denominator - fit.y_hat[i]));
  }
  return worst;
}

// ---------------------------------------------------------------- output

// The demo's files, written all or none at the end (output_files.h): the
// arrays (a deque: their addresses stay put) and the summary.
struct Outputs {
  std::deque<attnpool_tools::NpyArray> arrays;
  std::vector<attnpool_tools::OutputFile> files;
};
Outputs& PendingOutputs() {
  static Outputs outputs;
  return outputs;
}

void SaveArray(const std::string& dir, const std::string& name,
               const std::vector<size_t>& shape,
               const std::vector<float>& values) {
  auto array =
      attnpool_tools::MakeNpyArray(attnpool_tools::NpyType::float32, shape);
  if (array.count != values.size()) {
    throw std::logic_error("SaveArray: shape mismatch for " + name);
  }
  std::memcpy(array.mutable_data<float>(), values.data(),
              values.size() * sizeof(float));
  Outputs& outputs = PendingOutputs();
  outputs.arrays.push_back(std::move(array));
  const std::string path = dir + "/" + name + ".npy";
  outputs.files.push_back(
      attnpool_tools::NpyOutput(path, path, outputs.arrays.back()));
}

std::vector<float> Concatenate(const std::vector<Fit>& fits,
                               std::vector<float> Fit::*member) {
  std::vector<float> all;
  for (const auto& fit : fits)
    all.insert(all.end(), (fit.*member).begin(), (fit.*member).end());
  return all;
}

std::string Number(double value) {
  if (std::isnan(value)) return "NaN";
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

std::string FitsJson(const std::vector<Fit>& fits) {
  std::string json = "[";
  for (size_t i = 0; i < fits.size(); ++i) {
    json += std::string(i ? ", " : "") + "{\"kernel\": \"" + fits[i].kernel +
            "\", \"bandwidth\": " + Number(fits[i].bandwidth) +
            ", \"rmse\": " + Number(fits[i].rmse) +
            ", \"max_error\": " + Number(fits[i].max_error) +
            ", \"empty\": " + std::to_string(fits[i].empty) + "}";
  }
  return json + "]";
}

void PrintFits(const std::vector<Fit>& fits) {
  for (const auto& fit : fits) {
    std::printf("  %-12s %5s   %8.4f      %8.4f", fit.kernel.c_str(),
                Number(fit.bandwidth).c_str(), fit.rmse, fit.max_error);
    if (fit.empty)
      std::printf("   (%zu queries with no weight: NaN)", fit.empty);
    std::printf("\n");
  }
}

// One case: the fits, the weights (when `keep_weights`), the LOO scan.
std::string RunCase(Demo& demo, const Data& data, bool keep_weights,
                    const Options& options, const std::string& description) {
  const std::string& dir = options.out;
  const size_t n = data.x_val.size(), m = data.x_train.size();
  std::printf("\n%s case: %s\n", data.name.c_str(), description.c_str());
  std::printf("  %-12s %5s   %s   %s\n", "kernel", "h", "RMSE vs truth",
              "max |error|");

  const Kernel kernels[] = {Kernel::gaussian, Kernel::boxcar, Kernel::constant,
                            Kernel::triangular};
  std::vector<Fit> kernel_fits, width_fits;
  double deviation = 0;
  for (Kernel kernel : kernels) {
    kernel_fits.push_back(demo.Pool(data, kernel, 1.0, keep_weights));
    if (keep_weights) {
      deviation = std::max(
          deviation, MaxDeviationFromDirect(data, kernel_fits.back(), kernel));
    }
  }
  for (double h : {0.1, 0.2, 0.5, 1.0}) {
    width_fits.push_back(demo.Pool(data, Kernel::gaussian, h, keep_weights));
    if (keep_weights) {
      deviation = std::max(
          deviation,
          MaxDeviationFromDirect(data, width_fits.back(), Kernel::gaussian));
    }
  }
  PrintFits(kernel_fits);
  PrintFits(width_fits);

  // Leave-one-out over log-spaced widths.
  constexpr int kWidthCount = 33;
  const double low = 0.02, high = 2.0;
  std::vector<double> grid;
  for (int i = 0; i < kWidthCount; ++i) {
    grid.push_back(low * std::pow(high / low, double(i) / (kWidthCount - 1)));
  }
  const attnpool::CrossValidationResult cv = demo.LeaveOneOut(data, grid);
  std::vector<float> widths, loo_mse, val_rmse;
  for (int i = 0; i < kWidthCount; ++i) {
    widths.push_back(static_cast<float>(grid[i]));
    loo_mse.push_back(static_cast<float>(cv.scores[i]));
    val_rmse.push_back(static_cast<float>(
        demo.Pool(data, Kernel::gaussian, grid[i], false).rmse));
  }
  const size_t best = cv.best;
  const Fit chosen = demo.Pool(data, Kernel::gaussian, widths[best], false);
  size_t oracle = 0;
  for (size_t i = 0; i < val_rmse.size(); ++i)
    if (val_rmse[i] < val_rmse[oracle]) oracle = i;
  std::printf(
      "  leave-one-out over %d Gaussian widths in [%g, %g]: chosen h = %.3g "
      "(LOO MSE %.4f), RMSE vs truth %.4f\n"
      "  (the width of least RMSE vs truth would be %.3g: RMSE %.4f)\n",
      kWidthCount, low, high, widths[best], loo_mse[best], chosen.rmse,
      widths[oracle], val_rmse[oracle]);
  if (keep_weights) {
    std::printf(
        "  largest difference from a direct double-precision evaluation: "
        "%.2g\n",
        deviation);
  }

  const std::string prefix = data.name + "_";
  SaveArray(dir, prefix + "x_train", {m}, data.x_train);
  SaveArray(dir, prefix + "y_train", {m}, data.y_train);
  SaveArray(dir, prefix + "x_val", {n}, data.x_val);
  SaveArray(dir, prefix + "y_truth", {n}, data.y_truth);
  SaveArray(dir, prefix + "fit_kernels", {kernel_fits.size(), n},
            Concatenate(kernel_fits, &Fit::y_hat));
  SaveArray(dir, prefix + "fit_widths", {width_fits.size(), n},
            Concatenate(width_fits, &Fit::y_hat));
  if (keep_weights) {
    SaveArray(dir, prefix + "weights_kernels", {kernel_fits.size(), n, m},
              Concatenate(kernel_fits, &Fit::weights));
    SaveArray(dir, prefix + "weights_widths", {width_fits.size(), n, m},
              Concatenate(width_fits, &Fit::weights));
  }
  SaveArray(dir, prefix + "loo_widths", {widths.size()}, widths);
  SaveArray(dir, prefix + "loo_mse", {loo_mse.size()}, loo_mse);
  SaveArray(dir, prefix + "loo_val_rmse", {val_rmse.size()}, val_rmse);
  SaveArray(dir, prefix + "fit_loo", {n}, chosen.y_hat);

  return "{\"name\": \"" + data.name + "\", \"train\": " + std::to_string(m) +
         ", \"queries\": " + std::to_string(n) +
         ", \"weights\": " + (keep_weights ? "true" : "false") +
         ", \"kernels\": " + FitsJson(kernel_fits) +
         ", \"widths\": " + FitsJson(width_fits) +
         ", \"loo\": {\"bandwidth\": " + Number(widths[best]) +
         ", \"mse\": " + Number(loo_mse[best]) +
         ", \"rmse\": " + Number(chosen.rmse) + "}}";
}

bool ParseOptions(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "attnpool-demo: %s needs a value\n", word.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (word == "-h" || word == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (word == "--out" || word == "-o") {
      options->out = value();
    } else if (word == "--no-plot") {
      options->plot = false;
    } else if (word == "--large") {
      options->large = std::strtoull(value().c_str(), nullptr, 10);
    } else if (word == "--seed") {
      options->seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (word == "--noise") {
      options->noise = std::strtod(value().c_str(), nullptr);
    } else if (word == "--threads") {
      options->threads = std::atoi(value().c_str());
    } else if (word == "--isa") {
      options->isa = value();
    } else if (word == "--python") {
      options->python = value();
    } else if (word == "--plot-script") {
      options->plot_script = value();
    } else {
      std::fprintf(stderr, "attnpool-demo: unknown option '%s'\n%s",
                   word.c_str(), kUsage);
      return false;
    }
  }
  return true;
}

std::string Join(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : " ") + name;
  return text;
}

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) return 2;
  const auto start = Clock::now();
  try {
    if (!options.isa.empty()) attnpool::force_target(options.isa);
    if (mkdir(options.out.c_str(), 0755) != 0 && errno != EEXIST) {
      std::fprintf(stderr, "attnpool-demo: cannot create %s: %s\n",
                   options.out.c_str(), std::strerror(errno));
      return 1;
    }
    std::printf(
        "attnpool demo: attention pooling by similarity (Nadaraya-Watson)\n"
        "data: y = 2 sin(x) + x + e, e ~ N(0, %g^2), x uniform on [0, 5), "
        "seed %llu\n",
        options.noise, static_cast<unsigned long long>(options.seed));

    Demo demo(options);
    // The kernel shapes on [-2.5, 2.5], through the kernel stage.
    std::vector<float> grid;
    for (int i = 0; i <= 100; ++i) grid.push_back(-2.5f + 0.05f * i);
    std::vector<float> shapes;
    for (Kernel kernel : {Kernel::gaussian, Kernel::boxcar, Kernel::constant,
                          Kernel::triangular}) {
      std::vector<float> values(grid.size());
      for (size_t i = 0; i < grid.size(); ++i) values[i] = grid[i] * grid[i];
      attnpool::apply_kernel({kernel, 1.0}, attnpool::Distance::sqeuclidean,
                             {values.data(), 1, values.size()}, 1);
      shapes.insert(shapes.end(), values.begin(), values.end());
    }
    SaveArray(options.out, "kernel_grid", {grid.size()}, grid);
    SaveArray(options.out, "kernel_shapes", {4, grid.size()}, shapes);

    std::vector<std::string> cases;
    const Data seed = MakeData("seed", 40, 0.1, options.seed, options.noise);
    cases.push_back(
        RunCase(demo, seed, true, options,
                "40 training points, 50 queries x = 0, 0.1, ..., 4.9"));
    if (options.large > 0) {
      const Data large = MakeData("large", options.large, 0.0025,
                                  options.seed + 1, options.noise);
      cases.push_back(RunCase(
          demo, large, false, options,
          std::to_string(options.large) +
              " training points, 2000 queries x = 0, 0.0025, ..., 4.9975"));
    }

    const auto& watch = demo.stopwatch();
    const double compute_ms =
        std::chrono::duration<double, std::milli>(watch.total).count();
    const double all_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    const std::string target =
        demo.target_.empty() ? attnpool::active_target() : demo.target_;
    std::printf(
        "\ntarget %s (supported: %s), %d threads, float32\n"
        "time: %zu pooling calls in %.1f ms (%.2f G weights/s), %.0f ms in "
        "all\n",
        target.c_str(), Join(attnpool::supported_targets()).c_str(),
        attnpool::thread_count({options.threads}),
        watch.calls, compute_ms, watch.weights / (compute_ms * 1e6), all_ms);

    std::string json = "{\"target\": \"" + target +
                       "\", \"noise\": " + Number(options.noise) +
                       ", \"seed\": " + std::to_string(options.seed) +
                       ", \"compute_ms\": " + Number(compute_ms) +
                       ", \"kernels\": [\"gaussian\", \"boxcar\", "
                       "\"constant\", \"triangular\"], \"cases\": [";
    for (size_t i = 0; i < cases.size(); ++i)
      json += (i ? ", " : "") + cases[i];
    json += "]}\n";
    const std::string summary_path = options.out + "/summary.json";
    std::vector<attnpool_tools::OutputFile> files = PendingOutputs().files;
    files.push_back({summary_path, summary_path, [&json](std::FILE* file) {
                       return std::fputs(json.c_str(), file) >= 0;
                     }});
    attnpool_tools::CommitOutputs(files);
  } catch (const attnpool::Error& error) {
    std::fprintf(stderr, "attnpool-demo: %s\n", error.what());
    return 1;
  } catch (const attnpool_tools::NpyError& error) {
    std::fprintf(stderr, "attnpool-demo: %s\n", error.what());
    return 1;
  } catch (const attnpool_tools::OutputError& error) {
    std::fprintf(stderr, "attnpool-demo: %s\n", error.what());
    return 1;
  }

  if (options.plot) {
    const auto plot_start = Clock::now();
    const std::string command = ShellQuote(options.python) + " " +
                                ShellQuote(options.plot_script) + " " +
                                ShellQuote(options.out);
    std::fflush(stdout);
    const int status = std::system(command.c_str());
    if (status != 0) {
      std::fprintf(stderr,
                   "attnpool-demo: plotting failed (%s); the numbers are in "
                   "%s (python3-matplotlib and python3-numpy draw them)\n",
                   command.c_str(), options.out.c_str());
      return 1;
    }
    std::printf(
        "plotting: %.1f s\n",
        std::chrono::duration<double>(Clock::now() - plot_start).count());
  }
  return 0;
}
