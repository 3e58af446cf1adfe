// attnpool across processes with MPI (the optional attnpool::mpi component,
// built where MPI is installed: docs/design.md §8; modes, measurements and
// the cost model in docs/distributed.md).
//
// Every function here is collective over `comm`: every rank calls it, with
// the same spec, shapes of the replicated arguments and options. Before any
// work the ranks agree on those (a mismatch throws attnpool::Error on every
// rank, naming the argument and the ranks' values) and on each rank's own
// argument checks: when one rank's arguments are invalid, EVERY rank throws
// — the failing rank its own exception, the others an Error with the same
// argument() (or "rank r" for an exception that is not an Error) whose
// message names the lowest failing rank and quotes its message. No
// rank hangs in a collective, and no output is written on any rank. The
// same holds when a rank runs out of memory (std::bad_alloc there): every
// buffer a call needs is allocated before its first transfer, and the
// ring agrees after each shard's work. (An out-of-memory inside MPI's own
// reduction of a tree, in the merge op, aborts the job: MPI gives an op
// no way to fail.)
//
// The keys are split into contiguous shards in rank order: rank r holds
// keys [o_r, o_r + m_r) of the whole sequence, o_r = m_0 + … + m_{r−1}
// (computed here; any m_r, 0 included). Its state (pool.h, PoolPartial) is
// reduced with the shard merge, which is associative but not commutative:
// one MPI element per query row, (max, sum, accumulator[dv]) in T, plus the
// winner's index under argmax — n·(dv + 2) values per rank and step.
#pragma once

#include <attnpool/pool.h>
#include <attnpool/regression.h>
#include <mpi.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace attnpool {
namespace mpi {

enum class Reduction : int {
  // MPI_Reduce (MPI_Allreduce with `everywhere`) with the merge as a
  // non-commutative MPI_Op: ⌈log₂ P⌉ steps. Within rounding of the
  // single-process call; the grouping of the merges is MPI's (fixed for a
  // given library, P and n, not promised across them).
  tree,
  // The root receives the states in rank order and merges them left to
  // right, as one process merging the same shards with attention_pool_merge
  // does: bitwise the same result from run to run, for every thread count
  // (for a fixed P and shards). P − 1 receives in a row on the root.
  rank_order,
};

struct Options {
  Reduction reduction = Reduction::tree;
  int root = 0;             // the rank whose `out` gets the result
  bool everywhere = false;  // every rank's `out` gets it
};

// Split-keys attention pooling: attention_pool over the keys of all ranks,
// each rank holding its shard of keys and values (m_r rows, any element
// type) and the same queries (n×d). `mask` as attention_pool_partial takes
// it: valid lengths (each at most the keys of all ranks) and the causal
// mask count keys from the start of the whole sequence, bias and visible
// hold this rank's n×m_r. out (n×dv) is written on the root, or on every
// rank with options.everywhere; elsewhere it is not touched and may be
// empty.
void attention_pool(MPI_Comm comm, const PoolSpec& spec,
                    ConstMatrixView<float> queries, const ElementRows& keys,
                    const ElementRows& values, MatrixView<float> out,
                    const Mask<float>& mask = {}, const Options& options = {},
                    const Execution& execution = {});
// (Float keys and values as matrices, brace-initialized: {keys, m, d}.)
void attention_pool(MPI_Comm comm, const PoolSpec& spec,
                    ConstMatrixView<float> queries, ConstMatrixView<float> keys,
                    ConstMatrixView<float> values, MatrixView<float> out,
                    const Mask<float>& mask = {}, const Options& options = {},
                    const Execution& execution = {});
void attention_pool(MPI_Comm comm, const PoolSpec& spec,
                    ConstMatrixView<double> queries,
                    ConstMatrixView<double> keys,
                    ConstMatrixView<double> values, MatrixView<double> out,
                    const Mask<double>& mask = {}, const Options& options = {},
                    const Execution& execution = {});

// Ring attention: queries sharded too. Rank r holds queries
// [q_r, q_r + n_r) of the whole sequence (q_r the sum of the lower ranks'
// n) and shard r of the keys and values; the key/value shards pass around
// the ring (to rank r + 1, from rank r − 1) with non-blocking sends and
// receives overlapped with the pooling of the shard in hand. Each rank
// holds, beside its own arguments, two buffers of the largest shard, and
// finishes its own queries: out is n_r×dv on every rank. Within rounding of
// attention_pool over the whole sequence (the shards merge in another grouping
// than split-keys'). Masks: valid lengths (n_r entries, each at most the
// keys of all ranks), causal, sliding window, ALiBi, soft-capping and the
// sink, with query i of this rank at key position q_r + i + causal_offset;
// bias and visible matrices are refused
// ("mask.bias", "mask.visible"). Keys and values are float or double;
// each ring step sends m_k·(d + dv) values, m_k the rows of shard k that
// some query of some rank sees: keys before the first or after the last key
// that any query sees through the valid lengths, the causal mask and the
// window are neither read nor sent.
void ring_attention_pool(MPI_Comm comm, const PoolSpec& spec,
                         ConstMatrixView<float> queries,
                         ConstMatrixView<float> keys,
                         ConstMatrixView<float> values, MatrixView<float> out,
                         const Mask<float>& mask = {},
                         const Execution& execution = {});
void ring_attention_pool(MPI_Comm comm, const PoolSpec& spec,
                         ConstMatrixView<double> queries,
                         ConstMatrixView<double> keys,
                         ConstMatrixView<double> values, MatrixView<double> out,
                         const Mask<double>& mask = {},
                         const Execution& execution = {});

// Nadaraya–Watson regression on training points sharded across ranks
// (rank r holds points [o_r, o_r + n_r), any n_r, at least one point in
// all): predict() is split-keys pooling of the queries over every rank's
// points, within rounding of NadarayaWatson<T> fitted on all of them
// (bitwise its partial/merge over the same shards with
// Reduction::rank_order). The constructor is collective: it agrees on the
// kernel, bandwidth and shapes and checks each rank's shard as
// NadarayaWatson does (an empty shard is allowed), and copies the shard.
template <typename T>
class DistributedNadarayaWatson {
 public:
  DistributedNadarayaWatson(MPI_Comm comm, Kernel kernel, double bandwidth,
                            ConstMatrixView<T> x, ConstMatrixView<T> y);
  DistributedNadarayaWatson(MPI_Comm comm, Kernel kernel,
                            const std::vector<double>& bandwidths,
                            ConstMatrixView<T> x, ConstMatrixView<T> y);
  ~DistributedNadarayaWatson();
  DistributedNadarayaWatson(const DistributedNadarayaWatson&) = delete;
  DistributedNadarayaWatson& operator=(const DistributedNadarayaWatson&) =
      delete;

  // Collective: the same queries (m×d) on every rank; out (m×dy) written as
  // Options say. Errors as NadarayaWatson::predict's.
  void predict(ConstMatrixView<T> queries, MatrixView<T> out,
               const Options& options = {},
               const Execution& execution = {}) const;

  size_t size() const { return size_; }              // n over all ranks
  size_t local_size() const { return local_size_; }  // n_r
  size_t offset() const { return offset_; }          // o_r
  size_t depth() const { return depth_; }            // d
  size_t outputs() const { return outputs_; }        // dy

 private:
  DistributedNadarayaWatson(MPI_Comm comm, Kernel kernel,
                            const std::vector<double>& bandwidths,
                            bool per_dimension, ConstMatrixView<T> x,
                            ConstMatrixView<T> y);

  MPI_Comm comm_ = MPI_COMM_NULL;  // a duplicate of the caller's
  Kernel kernel_;
  std::vector<double> bandwidth_;
  PoolSpec spec_;
  size_t size_ = 0, local_size_ = 0, offset_ = 0, depth_ = 0, outputs_ = 0;
  std::optional<NadarayaWatson<T>> local_;  // none for an empty shard
};

extern template class DistributedNadarayaWatson<float>;
extern template class DistributedNadarayaWatson<double>;

// cross_validate (regression.h) of the Nadaraya–Watson regressor of the
// points of all ranks, rank r holding points [o_r, o_r + n_r) (any n_r,
// n ≥ 2 in all; the folds of k-fold by the whole-set index, o_r + i mod
// k): the same scores, unpredictable counts and minimizer on every rank,
// within rounding of one process's cross_validate over the whole set. Each
// rank predicts its own points held out; the point shards pass around the
// ring once (VisitShardsInRing), and each visit pools the rank's points
// over the visiting shard for every bandwidth with the fused kernel
// (attention_pool_partial): leave-one-out hides the point itself with the
// causal and window masks, k-fold visits the shard's points of the other
// folds as two runs (each rank groups its points by fold). So it costs one
// pass of exps per bandwidth (not the single-process powers path's two per
// pair for the whole grid) and skips no distant pair
// (options.allow_powers and skip_distant are ignored; used_powers is
// false); weights_formed counts query-point-bandwidth triples. Errors as
// cross_validate's, agreed across ranks; the bandwidths, kernel, options
// and d, dy must be the same on every rank.
CrossValidationResult cross_validate(MPI_Comm comm, Kernel kernel,
                                     ConstMatrixView<float> x,
                                     ConstMatrixView<float> y,
                                     const std::vector<double>& bandwidths,
                                     const CrossValidationOptions& options = {},
                                     const Execution& execution = {});
CrossValidationResult cross_validate(MPI_Comm comm, Kernel kernel,
                                     ConstMatrixView<double> x,
                                     ConstMatrixView<double> y,
                                     const std::vector<double>& bandwidths,
                                     const CrossValidationOptions& options = {},
                                     const Execution& execution = {});

// For programs built on these calls (the command line is one): agrees
// whether any rank of `comm` failed in a step of its own (`failed`; `texts`
// describe this rank's failure, the same number of them on every rank).
// Collective: every rank must reach it, failed or not, so that none waits
// in a later collective for a rank that stopped. Every rank gets the lowest
// failing rank and its texts, or nothing when none failed.
struct RankFailure {
  int rank;
  std::vector<std::string> texts;
};
std::optional<RankFailure> first_failure(MPI_Comm comm, bool failed,
                                         std::vector<std::string> texts);

}  // namespace mpi
}  // namespace attnpool
