// attnpool pool: attention pooling of the values by the kernel weights of
// the query-key distances, with the masks.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tools/cli/arrays.h"
#include "tools/cli/commands.h"
#include "tools/cli/mask_options.h"
#include "tools/cli/options.h"
#include "tools/cli/ranks.h"
#include "tools/cli/run.h"

namespace attnpool_cli {
namespace {

// Keys and values: this rank's part of their files' rows (queries are
// whole: under mpirun they are float32, see PreparePool).
StoredElements StoredElementsOf(const Arguments& arguments,
                                const InputMatrix& matrix,
                                const std::string& dtype_option,
                                const std::string& scales_option) {
  return ReadStoredElements(
      arguments, matrix.Label(), matrix.option, matrix.array, {matrix.rows},
      dtype_option, scales_option, CurrentRanks().rank, CurrentRanks().size);
}

struct PoolInputs {
  InputMatrix queries, keys, values;
  // Set when queries, keys or values are narrow (the others then float32 or
  // narrow); stored_queries only when the queries are.
  std::optional<StoredElements> stored_queries, stored_keys, stored_values;
  MaskInputs mask;
  attnpool::PoolSpec spec;
  // Under mpirun (ranks.h): this rank's part of the keys and values, the
  // number of keys in all, and how the ranks' states merge.
  size_t key_total = 0;
  std::string reduction = "tree";
};

// The one place that runs the pooling, on a block of query rows: the fused
// kernel (no n x m matrix), or the staged pipeline when the weights of the
// block are wanted (weights.data non-null; keys and values of T).
template <typename T, typename Rows>
void PoolBlock(const attnpool::PoolSpec& spec,
               attnpool::ConstMatrixView<T> queries, const Rows& keys,
               const Rows& values, attnpool::MatrixView<T> out,
               attnpool::MatrixView<T> weights, const attnpool::Mask<T>& mask,
               const attnpool::Execution& execution) {
  if constexpr (std::is_same<Rows, attnpool::ConstMatrixView<T>>::value) {
    if (weights.data != nullptr) {
      return attnpool::attention_pool_staged(spec, queries, keys, values, out,
                                             weights, mask, execution);
    }
  }
  attnpool::attention_pool(spec, queries, keys, values, out, mask, execution);
}

// The type of the computation and the result: float32 where any input is
// narrow, else the inputs' own.
NpyType ComputeType(const PoolInputs& inputs) {
  return inputs.stored_keys ? NpyType::float32 : inputs.queries.array.type;
}

template <typename T>
int RunPool(const PoolInputs& inputs, const std::string& out_path,
            const std::optional<std::string>& weights_path, const Run& run) {
  const size_t rows = inputs.queries.rows, key_count = inputs.keys.rows;
  Results results = PoolResults(out_path, weights_path, rows, inputs.values,
                                key_count, ComputeType(inputs));
  const std::string shape = "n=" + std::to_string(rows) +
                            " m=" + std::to_string(inputs.key_total) +
                            " d=" + std::to_string(inputs.queries.cols) +
                            " dv=" + std::to_string(inputs.values.cols);
  const attnpool::Mask<T> mask = inputs.mask.Mask<T>();
  // Narrow queries (float calls only; not under mpirun) go to the library
  // as stored, which widens them once per block of rows.
  const auto queries = inputs.stored_queries ? attnpool::ConstMatrixView<T>{}
                                             : View<T>(inputs.queries);
  if (CurrentRanks().launched) {  // the result on rank 0, which writes it
    const auto start = Clock::now();
    const auto across = [&](const auto& keys, const auto& values) {
      PoolAcrossRanks(run.command, inputs.spec, queries, keys, values,
                      MatrixRows<T>(results.out, 0, rows), mask,
                      inputs.reduction, run.settings.execution);
    };
    if constexpr (std::is_same<T, float>::value) {
      if (inputs.stored_keys) {
        across(ElementRowsOf(inputs.keys, *inputs.stored_keys),
               ElementRowsOf(inputs.values, *inputs.stored_values));
      }
    }
    if (!inputs.stored_keys)
      across(View<T>(inputs.keys), View<T>(inputs.values));
    if (CurrentRanks().rank != 0) return 0;
    return Finish(run, results, Clock::now() - start, shape);
  }
  const auto pool = [&](const auto& keys, const auto& values) {
    return ComputeInChunks(
        run, rows, key_count, [&](size_t begin, size_t count) {
          const auto out = MatrixRows<T>(results.out, begin, count);
          const auto block_mask = attnpool::mask_rows(mask, begin, count);
          if constexpr (std::is_same<T, float>::value) {
            if (inputs.stored_queries) {
              return attnpool::attention_pool(
                  inputs.spec,
                  ElementRowsSlice(
                      ElementRowsOf(inputs.queries, *inputs.stored_queries),
                      begin, count),
                  keys, values, out, block_mask, run.settings.execution);
            }
          }
          PoolBlock<T>(inputs.spec, Rows(queries, begin, count), keys, values,
                       out, WeightRows<T>(results, begin, count), block_mask,
                       run.settings.execution);
        });
  };
  std::chrono::steady_clock::duration compute_time{};
  if constexpr (std::is_same<T, float>::value) {
    if (inputs.stored_keys) {
      compute_time = pool(ElementRowsOf(inputs.keys, *inputs.stored_keys),
                          ElementRowsOf(inputs.values, *inputs.stored_values));
    }
  }
  if (!inputs.stored_keys) {
    compute_time = pool(View<T>(inputs.keys), View<T>(inputs.values));
  }
  return Finish(run, results, compute_time, shape);
}

// Keys or values: under mpirun this rank's part of the rows, else all.
InputMatrix LoadKeyRows(const std::string& option, const std::string& path,
                        size_t* total) {
  if (!CurrentRanks().launched) {
    InputMatrix matrix = LoadAnyMatrix(option, path);
    *total = matrix.rows;
    return matrix;
  }
  attnpool_tools::NpyRowRange range;
  InputMatrix matrix = LoadMatrixPart(option, path, CurrentRanks().rank,
                                      CurrentRanks().size, &range);
  *total = range.total;
  return matrix;
}

// What mpirun cannot split by rows of the keys.
void RequireSplittable(const Arguments& arguments) {
  std::string option = arguments.Get("--weights") ? "--weights" : "";
  if (option.empty()) option = MaskInputs::ArrayOption(arguments);
  if (!option.empty()) {
    throw CliError{option +
                   ": not under mpirun (an n x m array; each rank holds "
                   "only its keys)"};
  }
}

// Reads and checks the inputs of `pool` into `inputs`, timed by `reading`.
void PreparePool(const Arguments& arguments, PoolInputs& inputs,
                 std::optional<InputReading>& reading) {
  RequireOptions(arguments, {"--queries", "--keys", "--values", "-o"});
  const RunSettings settings = ReadSettings(arguments);
  auto& spec = inputs.spec;
  spec.distance = NameOption(arguments, "--distance", "sqeuclidean",
                             &attnpool::distance_from_name);
  spec.kernel.kernel = NameOption(arguments, "--kernel", "gaussian",
                                  &attnpool::kernel_from_name);
  if (const auto bandwidth = NumberOption(arguments, "--bandwidth")) {
    spec.kernel.bandwidth = *bandwidth;
  }
  spec.kernel.scale = NumberOption(arguments, "--scale");
  spec.normalization = NameOption(arguments, "--normalize", "sum",
                                  &attnpool::normalization_from_name);
  spec.empty_rows = ParseEmptyRows(arguments);
  if (const auto reduction = arguments.Get("--reduction")) {
    if (*reduction != "tree" && *reduction != "rank_order") {
      UsageError("--reduction: '" + *reduction +
                 "' is not one of: tree, rank_order");
    }
    inputs.reduction = *reduction;
  }

  reading.emplace(arguments, settings);
  inputs.queries = LoadAnyMatrix("--queries", arguments.Required("--queries"));
  size_t value_total = 0;
  inputs.keys =
      LoadKeyRows("--keys", arguments.Required("--keys"), &inputs.key_total);
  inputs.values =
      LoadKeyRows("--values", arguments.Required("--values"), &value_total);
  if (CurrentRanks().launched) RequireSplittable(arguments);
  const bool narrow_queries = IsNarrow(inputs.queries.array);
  if (narrow_queries || IsNarrow(inputs.keys.array) ||
      IsNarrow(inputs.values.array)) {
    if (arguments.Get("--weights")) {
      throw CliError{
          "--weights: not with reduced-precision queries, keys or values"};
    }
    if (narrow_queries && CurrentRanks().launched) {
      throw CliError{inputs.queries.Label() +
                     ": reduced-precision queries are not taken under "
                     "mpirun (give float32 queries)"};
    }
    if (!narrow_queries && inputs.queries.array.type != NpyType::float32) {
      throw CliError{inputs.queries.Label() +
                     " must be float32 or reduced-precision beside "
                     "reduced-precision keys or values"};
    }
    // The queries' options are checked against their file, float32 too.
    const StoredElements queries = ReadStoredElements(
        arguments, inputs.queries.Label(), inputs.queries.option,
        inputs.queries.array, {inputs.queries.rows}, "--queries-dtype",
        "--query-scales");
    if (narrow_queries) inputs.stored_queries = queries;
    inputs.stored_keys = StoredElementsOf(arguments, inputs.keys,
                                          "--keys-dtype", "--key-scales");
    inputs.stored_values = StoredElementsOf(arguments, inputs.values,
                                            "--values-dtype", "--value-scales");
  } else {
    for (const char* option :
         {"--queries-dtype", "--keys-dtype", "--values-dtype", "--query-scales",
          "--key-scales", "--value-scales"}) {
      if (arguments.Get(option)) {
        throw CliError{std::string(option) +
                       " applies to reduced-precision inputs only"};
      }
    }
    RequireFloat(inputs.queries.Label(), inputs.queries.array);
    RequireFloat(inputs.keys.Label(), inputs.keys.array);
    RequireFloat(inputs.values.Label(), inputs.values.array);
    RequireSameType(inputs.queries, inputs.keys);
    RequireSameType(inputs.queries, inputs.values);
  }
  const size_t rows = inputs.queries.rows, key_count = inputs.key_total;
  RequireSameColumns(inputs.queries, inputs.keys);
  if (CurrentRanks().launched) {  // each rank holds a part of both
    RequireExtent(inputs.values, "rows in all", value_total, key_count,
                  "(one per key: the rows of " + inputs.keys.Label() + ")");
  }
  RequireRowPerKey(inputs.keys, inputs.values);
  MaskCall call;
  call.n = rows;
  call.m = key_count;
  call.score_type = ComputeType(inputs);
  call.reference = inputs.queries.Label();
  call.narrow = inputs.stored_keys.has_value();
  inputs.mask = MaskInputs(arguments, call);
}

int Pool(const Arguments& arguments) {
  PoolInputs inputs{};
  std::optional<InputReading> reading;
  const unsigned long long bytes_read = BytesRead();
  // Under mpirun every rank prepares its inputs; one rank's error stops all.
  OnEveryRank([&] { PreparePool(arguments, inputs, reading); });
  if (CurrentRanks().launched) ReportInputReading(BytesRead() - bytes_read);
  return reading->Compute(ComputeType(inputs), [&](auto zero, const Run& run) {
    return RunPool<decltype(zero)>(inputs, arguments.Required("-o"),
                                   arguments.Get("--weights"), run);
  });
}

}  // namespace

Command PoolCommand() {
  return MakeCommand(
      "pool",
      "attnpool pool --queries Q.npy --keys K.npy --values V.npy "
      "-o OUT.npy [options]\n\n"
      "Attention pooling: OUT (n x dv) = W . V, where W (n x m) "
      "holds the normalized\nkernel weights of the query-key "
      "distances. Nadaraya-Watson is the default\n(sqeuclidean, "
      "gaussian, sum); scaled dot-product attention is --distance "
      "dot\n--kernel exp --normalize softmax.",
      {{
           kQueries,
           kKeys,
           {"--values", "V.npy", "values, m x dv (required)", {"values"}},
           kOut,
           {"--weights", "W.npy",
            "also write the n x m attention weights (this runs the staged "
            "pipeline, which forms them; without it, the fused kernel runs)"},
           kDistance,
           {"--kernel", "NAME", kPoolKernelHelp.c_str(), {"kernel"}},
           {"--bandwidth",
            "H",
            "the width h of the distance kernels, > 0 (default 1)",
            {"kernel.bandwidth"}},
           {"--scale",
            "S",
            "the factor of exp(S * score) (default 1/sqrt(d))",
            {"kernel.scale"}},
           {"--normalize", "NAME", kNormalizationHelp.c_str()},
           EmptyRowsOption(
               "output of a query with no weight left (empty boxcar window, "
               "all keys masked): NaN (default) or 0"),
       },
       MaskOptions(MaskShape::matrices),
       {{"--reduction", "NAME",
         "under mpirun (each rank reads its part of the keys and values, "
         "rank 0 writes OUT): how the ranks' states merge: tree (default, "
         "log P steps) or rank_order (in rank order on rank 0: the same "
         "bits from run to run)"}},
       kReducedPrecisionOptions,
       kRunOptions},
      Pool);
}

}  // namespace attnpool_cli
