// attnpool distances: the all-pairs distances of the queries and keys.
#include <cstddef>
#include <string>

#include "tools/cli/arrays.h"
#include "tools/cli/commands.h"
#include "tools/cli/options.h"
#include "tools/cli/run.h"

namespace attnpool_cli {
namespace {

template <typename T>
int RunDistances(attnpool::Distance distance, const InputMatrix& queries_in,
                 const InputMatrix& keys_in, const std::string& out_path,
                 const Run& run) {
  const size_t rows = queries_in.rows, key_count = keys_in.rows;
  Results results{out_path, attnpool_tools::MakeNpyArray(queries_in.array.type,
                                                         {rows, key_count})};
  const auto queries = View<T>(queries_in);
  const auto keys = View<T>(keys_in);
  const auto compute_time =
      ComputeInChunks(run, rows, key_count, [&](size_t begin, size_t count) {
        attnpool::pairwise_distances(
            distance, Rows(queries, begin, count), keys,
            MatrixRows<T>(results.out, begin, count), run.settings.execution);
      });
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
  InputMatrix queries, keys;
  LoadMatrices(arguments, {{"--queries", &queries}, {"--keys", &keys}});
  RequireSameColumns(queries, keys);
  return reading.Compute(queries.array.type, [&](auto zero, const Run& run) {
    return RunDistances<decltype(zero)>(distance, queries, keys,
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
      {{kQueries, kKeys, kOut, kDistance}, kRunOptions}, Distances);
}

}  // namespace attnpool_cli
