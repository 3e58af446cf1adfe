// The ring that ring attention and distributed cross-validation share:
// every rank's shard of keys and values visits every rank, passed from
// rank r to rank r + 1 with non-blocking sends and receives while the rank
// works on the shard in hand.
#pragma once

#include <attnpool/matrix.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace attnpool {
namespace mpi {
namespace detail {

// The rows of each rank's shard that travel (gathered from every rank),
// the offset of the first of them in the whole sequence (and the sequence's
// length last: size + 1 entries), and how many of the shard's rows come
// before them (0: the whole shard travels).
struct ShardLayout {
  std::vector<size_t> rows, offset, skipped;
  size_t most_rows = 0;
};
ShardLayout GatherShardLayout(MPI_Comm comm, size_t rows);

// The part of `layout` within keys [begin, end) of the whole sequence:
// each shard's rows there, and no others, travel.
ShardLayout ShardsWithin(const ShardLayout& layout, size_t begin, size_t end);

// Calls visit(shard, keys, values) on this rank once for every rank's
// shard: its own first, then those of rank − 1, rank − 2, … (mod P), each
// while the next one is in flight; keys d columns, values dv; each shard's
// rows that `layout` says travel, and no other row is read. Collective.
// Checks this rank's keys and values (views, keys.cols = depth,
// values.rows = keys.rows) and agrees with the other ranks before
// sending anything. When a visit throws on any rank (invalid arguments
// on the first, the own shard; out of memory on any), every rank throws
// after the transfer in flight completes, as Collectively (agreement.h)
// does.
template <typename T>
void VisitShardsInRing(
    MPI_Comm comm, const ShardLayout& layout, ConstMatrixView<T> keys,
    ConstMatrixView<T> values, size_t depth,
    const std::function<void(int shard, ConstMatrixView<T> keys,
                             ConstMatrixView<T> values)>& visit);

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
