// Nadaraya–Watson regression on training points sharded across ranks
// (include/attnpool/mpi.h).
#include <attnpool/error.h>
#include <attnpool/mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "src/mpi/agreement.h"
#include "src/mpi/pool_reduce.h"
#include "src/mpi/spec_agreement.h"
#include "src/mpi/state_wire.h"
#include "src/regression_checks.h"
#include "core/validate.h"

namespace attnpool {
namespace mpi {

namespace core = ::attnpool::detail;

template <typename T>
DistributedNadarayaWatson<T>::DistributedNadarayaWatson(MPI_Comm comm,
                                                        Kernel kernel,
                                                        double bandwidth,
                                                        ConstMatrixView<T> x,
                                                        ConstMatrixView<T> y)
    : DistributedNadarayaWatson(comm, kernel, std::vector<double>{bandwidth},
                                /*per_dimension=*/false, x, y) {}

template <typename T>
DistributedNadarayaWatson<T>::DistributedNadarayaWatson(
    MPI_Comm comm, Kernel kernel, const std::vector<double>& bandwidths,
    ConstMatrixView<T> x, ConstMatrixView<T> y)
    : DistributedNadarayaWatson(comm, kernel, bandwidths,
                                /*per_dimension=*/true, x, y) {}

template <typename T>
DistributedNadarayaWatson<T>::DistributedNadarayaWatson(
    MPI_Comm comm, Kernel kernel, const std::vector<double>& bandwidths,
    bool per_dimension, ConstMatrixView<T> x, ConstMatrixView<T> y)
    : kernel_(kernel), bandwidth_(bandwidths) {
  detail::SameEverywhere same;
  same.add("the element type (float or double)", sizeof(T))
      .add("kernel", static_cast<int64_t>(kernel))
      .add("bandwidth.size", static_cast<int64_t>(bandwidths.size()))
      .add("x.cols", static_cast<int64_t>(x.cols))
      .add("y.cols", static_cast<int64_t>(y.cols));
  for (double h : bandwidths) same.add_number("bandwidth", h);
  same.Check(comm);
  detail::Collectively(comm, [&] {
    if (x.rows == 0) {  // an empty shard: the views, and no y rows
      core::CheckKernel(kernel);
      core::CheckView("x", x);
      core::CheckView("y", y);
      core::CheckSize("y.rows", y.rows, 0, "x.rows");
    } else if (per_dimension) {
      local_.emplace(kernel, bandwidths, x, y);
    } else {
      local_.emplace(kernel, bandwidths[0], x, y);
    }
  });
  const auto offset_and_total = detail::OffsetAndTotal(comm, x.rows);
  if (offset_and_total.second == 0) {
    throw Error("x.rows", "is 0 on every rank: no training point");
  }
  offset_ = offset_and_total.first;
  size_ = offset_and_total.second;
  local_size_ = x.rows, depth_ = x.cols, outputs_ = y.cols;
  // (The shards' pool_spec(): a bandwidth beyond T's range is scaled.)
  spec_ = core::NadarayaWatsonSpec(
      kernel,
      per_dimension ? 1.0 : bandwidths[0] * core::RangeScale<T>(bandwidths[0]),
      EmptyRows::nan);
  MPI_Comm_dup(comm, &comm_);
}

template <typename T>
DistributedNadarayaWatson<T>::~DistributedNadarayaWatson() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

template <typename T>
void DistributedNadarayaWatson<T>::predict(ConstMatrixView<T> queries,
                                           MatrixView<T> out,
                                           const Options& options,
                                           const Execution& execution) const {
  detail::SameEverywhere same;
  same.add("queries.rows", static_cast<int64_t>(queries.rows))
      .add("queries.cols", static_cast<int64_t>(queries.cols));
  detail::AddOptions(same, options);
  same.Check(comm_);
  const bool receives = detail::Receives(comm_, options);
  std::optional<detail::StateReduction<T>> reduction;
  detail::Collectively(comm_, [&] {
    detail::CheckOptions(comm_, options);
    core::CheckView("queries", queries);
    core::CheckSize("queries.cols", queries.cols, depth_,
                    "the depth of the training points");
    if (receives) {
      core::CheckView("out", out);
      core::CheckSize("out.rows", out.rows, queries.rows, "queries.rows");
      core::CheckSize("out.cols", out.cols, outputs_, "the columns of y");
    }
    core::CheckExecution(execution);  // (an empty shard checks it too)
    reduction.emplace(comm_, spec_, options, queries.rows, outputs_);
    // An empty shard keeps the state of no key.
    if (local_) {
      local_->predict_partial(queries, offset_, reduction->state(), execution);
    }
  });
  reduction->ReduceAndFinish(out);
}

template class DistributedNadarayaWatson<float>;
template class DistributedNadarayaWatson<double>;

}  // namespace mpi
}  // namespace attnpool
