// attnpool distances: the all-pairs distances of the queries and keys.
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>

#include "tools/cli/arrays.h"
#include "tools/cli/commands.h"
#include "tools/cli/options.h"
#include "tools/cli/run.h"

namespace attnpool_cli {
namespace {

// Keys stored narrow (`stored`; queries then float32) or as the queries.
template <typename T>
int RunDistances(attnpool::Distance distance, const InputMatrix& queries_in,
                 const InputMatrix& keys_in,
                 const std::optional<StoredElements>& stored,
                 const std::string& out_path, const Run& run) {
  const size_t rows = queries_in.rows, key_count = keys_in.rows;
  Results results{out_path,
                  MakeResult("-o", queries_in.array.type, {rows, key_count})};
  CheckResults(results);
  const auto queries = View<T>(queries_in);
  const auto distances = [&](const auto& keys) {
    return ComputeInChunks(
        run, rows, key_count, [&](size_t begin, size_t count) {
          attnpool::pairwise_distances(
              distance, Rows(queries, begin, count), keys,
              MatrixRows<T>(results.out, begin, count), run.settings.execution);
        });
  };
  std::chrono::steady_clock::duration compute_time{};
  if constexpr (std::is_same<T, float>::value) {
    if (stored) compute_time = distances(ElementRowsOf(keys_in, *stored));
  }
  if (!stored) compute_time = distances(View<T>(keys_in));
  return Finish(run, results, compute_time,
                "n=" + std::to_string(rows) +
                    " m=" + std::to_string(key_count) +
                    " d=" + std::to_string(queries_in.cols));
}

int Distances(const Arguments& arguments) {
  RequireOptions(arguments, {"--queries", "--keys", "-o"});
  const RunSettings settings = ReadSettings(arguments);
  const auto distance = NameOption(arguments, "--distance", "sqeuclidean",
                                   &attnpool::distance_from_name);
  const InputReading reading(arguments, settings);
  const InputMatrix queries = LoadMatrix(arguments, "--queries");
  const InputMatrix keys =
      LoadAnyMatrix("--keys", arguments.Required("--keys"));
  std::optional<StoredElements> stored;
  if (IsNarrow(keys.array)) {
    if (queries.array.type != NpyType::float32) {
      throw CliError{queries.Label() +
                     " must be float32 beside reduced-precision keys"};
    }
    stored =
        ReadStoredElements(arguments, keys.Label(), keys.option, keys.array,
                           {keys.rows}, "--keys-dtype", "--key-scales");
  } else {
    for (const char* option : {"--keys-dtype", "--key-scales"}) {
      if (arguments.Get(option)) {
        throw CliError{std::string(option) +
                       " applies to reduced-precision keys only"};
      }
    }
    RequireFloat(keys.Label(), keys.array);
    RequireSameType(queries, keys);
  }
  RequireSameColumns(queries, keys);
  return reading.Compute(queries.array.type, [&](auto zero, const Run& run) {
    return RunDistances<decltype(zero)>(distance, queries, keys, stored,
                                        arguments.Required("-o"), run);
  });
}

}  // namespace

Command DistancesCommand() {
  return MakeCommand(
      "distances",
      "attnpool distances --queries Q.npy --keys K.npy -o OUT.npy "
      "[options]\n\nAll-pairs distances: OUT (n x m)[i, j] = "
      "distance(queries[i], keys[j]).",
      {{kQueries, kKeys, kOut, kDistance}, kNarrowKeyOptions, kRunOptions},
      Distances);
}

}  // namespace attnpool_cli
