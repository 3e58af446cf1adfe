// Cross-validation of Nadaraya–Watson regression on points sharded across
// ranks (include/attnpool/mpi.h, cross_validate): each rank's points are
// queries, held out from their own fits, over every rank's points as they
// pass around the ring.
#include <attnpool/error.h>
#include <attnpool/mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "src/mpi/agreement.h"
#include "src/mpi/ring.h"
#include "src/mpi/spec_agreement.h"
#include "src/mpi/state_wire.h"
#include "src/regression_checks.h"

namespace attnpool {
namespace mpi {
namespace {

namespace core = ::attnpool::detail;
using detail::OwnedState;

// Points [offset, offset + rows) of the whole set, grouped by fold
// (whole-set index mod folds; stable within a fold), as every rank lays
// out its shard: begin[f] is the first row of fold f (folds + 1 entries).
// Leave-one-out (folds 0): one group, in index order.
std::vector<size_t> FoldGroups(size_t offset, size_t rows, size_t folds) {
  if (folds == 0) return {0, rows};
  // Indices below x in fold f: ⌈(x − f) / folds⌉ for x ≥ f.
  const auto below = [folds](size_t x, size_t f) {
    return x > f ? (x - f + folds - 1) / folds : size_t(0);
  };
  std::vector<size_t> begin(folds + 1, 0);
  for (size_t f = 0; f < folds; ++f) {
    begin[f + 1] = begin[f] + below(offset + rows, f) - below(offset, f);
  }
  return begin;
}

// A view of rows [begin, end) of a state.
template <typename T>
PoolPartial<T> StateRows(const PoolPartial<T>& state, size_t begin,
                         size_t end) {
  PoolPartial<T> rows = state;
  rows.accumulator.data = state.accumulator.row(begin);
  rows.accumulator.rows = end - begin;
  rows.max += begin, rows.sum += begin, rows.best += begin;
  return rows;
}

template <typename T>
ConstMatrixView<T> Rows(ConstMatrixView<T> view, size_t begin, size_t end) {
  return {view.row(begin), end - begin, view.cols, view.stride};
}

template <typename T>
CrossValidationResult CrossValidate(MPI_Comm caller, Kernel kernel,
                                    ConstMatrixView<T> x, ConstMatrixView<T> y,
                                    const std::vector<double>& grid,
                                    const CrossValidationOptions& options,
                                    const Execution& execution) {
  const detail::PrivateComm comm(caller);
  detail::SameEverywhere same;
  same.add("the element type (float or double)", sizeof(T))
      .add("kernel", static_cast<int64_t>(kernel))
      .add("x.cols", static_cast<int64_t>(x.cols))
      .add("y.cols", static_cast<int64_t>(y.cols))
      .add("bandwidths.size", static_cast<int64_t>(grid.size()))
      .add("options.folds", static_cast<int64_t>(options.folds))
      .add("options.scales.size", static_cast<int64_t>(options.scales.size()));
  for (double h : grid) same.add_number("bandwidths", h);
  for (double s : options.scales) same.add_number("options.scales", s);
  same.Check(comm);
  const auto offset_and_total = detail::OffsetAndTotal(comm, x.rows);
  const size_t offset = offset_and_total.first, total = offset_and_total.second;
  const size_t rows = x.rows, depth = x.cols, outputs = y.cols;
  const size_t folds = options.folds, bandwidths = grid.size();

  // This rank's points, scaled and grouped by fold: the queries, and the
  // shard that travels.
  std::vector<T> points, targets;
  // Each bandwidth's state of the rank's queries, the state of one
  // shard's, and the predictions of a bandwidth: allocated collectively,
  // with the points, so that a rank out of memory throws on every rank.
  std::vector<OwnedState<T>> states;
  OwnedState<T> part;
  std::vector<T> predicted;
  // Per bandwidth: this rank's sum of held-out errors and its count of
  // predictable points; then every rank's (`all`), summed in rank order.
  const int size = detail::Size(comm);
  std::vector<double> local, all;
  // (As one process's cross_validate: coordinates and grid scaled into T's
  // range where they leave it.)
  double range_scale = 1;
  detail::Collectively(comm, [&] {
    core::CheckCrossValidation(kernel, x, y, grid, options, execution, total);
    range_scale = core::GridScale<T>(grid);
    points.resize(rows * depth);
    targets.resize(rows * outputs);
    for (size_t b = 0; b < bandwidths; ++b) states.emplace_back(rows, outputs);
    part = OwnedState<T>(rows, outputs);
    predicted.resize(rows * outputs);
    local.assign(2 * bandwidths, 0.0);
    all.resize(2 * bandwidths * size);
    std::vector<size_t> order(rows);
    std::iota(order.begin(), order.end(), size_t(0));
    if (folds != 0) {
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return (offset + a) % folds < (offset + b) % folds;
      });
    }
    for (size_t i = 0; i < rows; ++i) {
      for (size_t k = 0; k < depth; ++k) {
        const T scaled =
            core::ScaledCoordinate(x, order[i], k, options.scales,
                                   "options.scales", range_scale, "bandwidths");
        points[i * depth + k] = scaled;
      }
      std::copy(y.row(order[i]), y.row(order[i]) + outputs,
                targets.data() + i * outputs);
    }
  });
  const ConstMatrixView<T> queries(points.data(), rows, depth);
  const ConstMatrixView<T> values(targets.data(), rows, outputs);
  const std::vector<size_t> groups = FoldGroups(offset, rows, folds);
  std::vector<PoolSpec> specs(bandwidths);
  for (size_t b = 0; b < bandwidths; ++b) {
    specs[b] =
        core::NadarayaWatsonSpec(kernel, grid[b] * range_scale, EmptyRows::nan);
  }
  uint64_t formed = 0;
  // Pools query rows [begin, end) over keys [key_begin, key_end) of the
  // visiting shard and merges the result into each bandwidth's state (in
  // whatever order the shards come: merging is exact up to rounding);
  // `pairs` of them are visible through `mask`.
  const auto pool = [&](ConstMatrixView<T> shard_x, ConstMatrixView<T> shard_y,
                        size_t begin, size_t end, size_t key_begin,
                        size_t key_end, const Mask<T>& mask, uint64_t pairs) {
    if (begin == end || key_begin == key_end) return;
    for (size_t b = 0; b < bandwidths; ++b) {
      const PoolPartial<T> target = StateRows(part.view(), begin, end);
      attention_pool_partial(specs[b], Rows(queries, begin, end),
                             Rows(shard_x, key_begin, key_end),
                             Rows(shard_y, key_begin, key_end), 0, target, mask,
                             execution);
      attention_pool_merge(specs[b], StateRows(states[b].view(), begin, end),
                           target);
    }
    formed += pairs * bandwidths;
  };
  const detail::ShardLayout layout = detail::GatherShardLayout(comm, rows);
  const int rank = detail::Rank(comm);
  detail::VisitShardsInRing<T>(
      comm, layout, queries, values, depth,
      [&](int shard, ConstMatrixView<T> shard_x, ConstMatrixView<T> shard_y) {
        const size_t m = shard_x.rows;
        if (folds != 0) {  // each fold's queries over the other folds
          const std::vector<size_t> keys =
              FoldGroups(layout.offset[shard], m, folds);
          for (size_t f = 0; f < folds; ++f) {
            const uint64_t queries_in_fold = groups[f + 1] - groups[f];
            pool(shard_x, shard_y, groups[f], groups[f + 1], 0, keys[f], {},
                 queries_in_fold * keys[f]);
            pool(shard_x, shard_y, groups[f], groups[f + 1], keys[f + 1], m, {},
                 queries_in_fold * (m - keys[f + 1]));
          }
        } else if (shard != rank) {
          pool(shard_x, shard_y, 0, rows, 0, m, {}, uint64_t(rows) * m);
        } else {  // query i over its shard's points j < i, then j > i
          const uint64_t half = uint64_t(rows) * (rows - 1) / 2;
          Mask<T> before;
          before.causal = true;
          before.causal_offset = -1;
          pool(shard_x, shard_y, 0, rows, 0, m, before, half);
          Mask<T> after;
          after.window_left = 0;
          after.causal_offset = 1;
          pool(shard_x, shard_y, 0, rows, 0, m, after, half);
        }
      });

  for (size_t b = 0; b < bandwidths; ++b) {
    attention_pool_finish(specs[b], states[b].view(),
                          {predicted.data(), rows, outputs});
    for (size_t i = 0; i < rows; ++i) {
      double error = 0;
      for (size_t c = 0; c < outputs; ++c) {
        const double residual = double(targets[i * outputs + c]) -
                                double(predicted[i * outputs + c]);
        error += residual * residual;
      }
      if (std::isnan(error)) continue;  // no held-out weight
      local[2 * b] += error;
      local[2 * b + 1] += 1;
    }
  }
  MPI_Allgather(local.data(), static_cast<int>(local.size()), MPI_DOUBLE,
                all.data(), static_cast<int>(local.size()), MPI_DOUBLE, comm);
  MPI_Allreduce(MPI_IN_PLACE, &formed, 1, MPI_UINT64_T, MPI_SUM, comm);
  CrossValidationResult result;
  result.bandwidths = grid;
  result.scores.assign(bandwidths, 0.0);
  result.unpredictable.assign(bandwidths, 0);
  result.weights_formed = formed;
  for (size_t b = 0; b < bandwidths; ++b) {
    double sum = 0, counted = 0;
    for (int r = 0; r < size; ++r) {
      sum += all[(r * bandwidths + b) * 2];
      counted += all[(r * bandwidths + b) * 2 + 1];
    }
    result.scores[b] =
        counted == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / counted;
    result.unpredictable[b] = total - static_cast<size_t>(counted);
  }
  core::ChooseBestBandwidth(result);
  return result;
}

}  // namespace

CrossValidationResult cross_validate(MPI_Comm comm, Kernel kernel,
                                     ConstMatrixView<float> x,
                                     ConstMatrixView<float> y,
                                     const std::vector<double>& bandwidths,
                                     const CrossValidationOptions& options,
                                     const Execution& execution) {
  return CrossValidate(comm, kernel, x, y, bandwidths, options, execution);
}

CrossValidationResult cross_validate(MPI_Comm comm, Kernel kernel,
                                     ConstMatrixView<double> x,
                                     ConstMatrixView<double> y,
                                     const std::vector<double>& bandwidths,
                                     const CrossValidationOptions& options,
                                     const Execution& execution) {
  return CrossValidate(comm, kernel, x, y, bandwidths, options, execution);
}

}  // namespace mpi
}  // namespace attnpool
