// Random calls of attnpool::mpi under mpiexec (tests/CMakeLists.txt runs
// it on 2 and 3 ranks):
//   attnpool_mpi_random SEED COUNT [FIRST]
// Input i of SEED is the fuzz target's random input (RandomInput,
// tests/fuzz/fuzz_common.h) decoded as an attention_pool call (DecodeCall:
// shapes, spec, every mask, NaN/±inf values, narrow keys and values, the
// tuning), the same on every rank; its key rows are cut into one shard per
// rank at random points (empty shards too), and
//  - split keys (mpi::attention_pool; tree or rank-order reduction, a
//    random root, or the result everywhere): on each rank that gets the
//    result, the reference's bound (VerifyFused, as for attention_pool),
//    rank order bitwise the shards' partial states merged in order by one
//    process, everywhere the same bits on every rank; elsewhere `out`
//    untouched;
//  - ring attention (mpi::ring_attention_pool, where the call has no bias
//    or visible matrix; narrow rows as the floats they hold), the queries
//    cut at random points too: the rows of all ranks, gathered, within the
//    reference's bound.
// Each input runs on one target (input i on the i-th supported target, in
// turn), one thread per rank. Every rank prints the input before it runs
// ("random SEED/i"); a failure prints the decoded call and aborts, and
// mpiexec then stops every rank. `--random SEED 1 i` reruns input i alone.
#include <attnpool/attnpool.h>
#include <attnpool/mpi.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

#include "tests/api_oracles.h"
#include "tests/api_table.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_decode.h"
#include "tests/mpi/world.h"

namespace attnpool_test {
namespace {

namespace mpi = attnpool::mpi;
using attnpool::ConstMatrixView;
using attnpool::MatrixView;

// Shard boundaries of `total` rows over the ranks: ranks − 1 random cut
// points in [0, total], sorted (so shards may be empty).
std::vector<size_t> Cuts(size_t total, int ranks, uint64_t& state) {
  std::vector<size_t> begin(ranks + 1, 0);
  for (int r = 1; r < ranks; ++r) begin[r] = SplitMix(state) % (total + 1);
  begin[ranks] = total;
  std::sort(begin.begin(), begin.end());
  return begin;
}

template <typename T>
void RunOne(const Api<T>& api, Bytes& bytes, uint8_t flags, uint64_t seed,
            uint64_t index) {
  const int rank = Rank(), ranks = Ranks();
  DecodedCall<T> decoded = DecodeCall(api, bytes, flags);
  Args<T>& args = decoded.ws->args;
  args.execution.threads = 1;  // the ranks share the cores
  const attnpool::PoolSpec spec = args.spec();
  const size_t n = decoded.sizes[kN], m = decoded.sizes[kM],
               dv = decoded.sizes[kDv];
  const MatrixView<T> queries = args.views[0], keys = args.views[1],
                      values = args.views[2];

  struct Reset {
    ~Reset() { attnpool::reset_target(); }  // the tuning too
  } reset;
  attnpool::force_tuning(decoded.tuning);
  const std::vector<std::string> targets = attnpool::supported_targets();
  const std::string target = targets[index % targets.size()];
  attnpool::force_target(target);

  uint64_t state = seed * 0x9e3779b97f4a7c15ull ^ (index + 1);
  const std::vector<size_t> key_begin = Cuts(m, ranks, state);
  const uint64_t draw = SplitMix(state);
  mpi::Options options;
  options.reduction =
      draw & 1 ? mpi::Reduction::rank_order : mpi::Reduction::tree;
  options.root = static_cast<int>(draw / 2 % ranks);
  options.everywhere = draw & 64;
  const auto where = [&] {
    std::string cuts;
    for (size_t b : key_begin) cuts += " " + std::to_string(b);
    return "input " + std::to_string(seed) + "/" + std::to_string(index) +
           ": " + decoded.Describe(api) + " target=" + target +
           " key shards at" + cuts + " reduction=" +
           (options.reduction == mpi::Reduction::tree ? "tree" : "rank_order") +
           " root=" + std::to_string(options.root) +
           " everywhere=" + std::to_string(options.everywhere) + " rank " +
           std::to_string(rank) + " of " + std::to_string(ranks);
  };

  const KeyShards<T> shards{decoded, key_begin};
  const T sentinel = T(-1234.5);
  std::vector<T> out(n * dv, sentinel);
  const MatrixView<T> out_view(out.data(), n, dv);
  try {
    shards.Visit(rank, [&](const auto& shard_keys, const auto& shard_values) {
      mpi::attention_pool(MPI_COMM_WORLD, spec, queries, shard_keys,
                          shard_values, out_view, shards.MaskOf(rank, false),
                          options, args.execution);
    });
  } catch (const std::exception& error) {
    Fail(std::string("split keys: unexpected exception: ") + error.what(),
         where());
  }
  if (options.everywhere || rank == options.root) {
    const std::string report =
        oracles::VerifyFused<T>(args, out_view, decoded.ExtraDotUnits());
    if (!report.empty()) {
      Fail("split keys differ from the reference: " + report, where());
    }
    if (options.reduction == mpi::Reduction::rank_order) {
      // The shards' states merged in key order by this process.
      const std::vector<T> folded = shards.Merged();
      if (!SameBits(folded, out)) {
        Fail("rank order differs from the shards merged in order", where());
      }
    }
  } else if (!SameBits(out, std::vector<T>(n * dv, sentinel))) {
    Fail("split keys wrote `out` on a rank that does not get the result",
         where());
  }
  if (options.everywhere && !SameOnEveryRank(out)) {
    Fail("split keys: the ranks' results differ", where());
  }

  // Ring attention, which takes no bias or visible matrix.
  if (args.mask.bias.data != nullptr || args.mask.visible.data != nullptr) {
    return;
  }
  const std::vector<size_t> query_begin = Cuts(n, ranks, state);
  const size_t q0 = query_begin[rank], q1 = query_begin[rank + 1];
  attnpool::Mask<T> mask = args.mask;
  if (mask.valid_lengths != nullptr) mask.valid_lengths += q0;
  std::vector<T> rows((q1 - q0) * dv + 1);
  const size_t k0 = key_begin[rank], k1 = key_begin[rank + 1];
  try {
    mpi::ring_attention_pool(MPI_COMM_WORLD, spec, RowsOf(queries, q0, q1),
                             RowsOf(keys, k0, k1), RowsOf(values, k0, k1),
                             {rows.data(), q1 - q0, dv}, mask, args.execution);
  } catch (const std::exception& error) {
    Fail(std::string("ring: unexpected exception: ") + error.what(), where());
  }
  std::vector<int> counts(ranks), displacements(ranks);
  for (int r = 0; r < ranks; ++r) {
    counts[r] = static_cast<int>((query_begin[r + 1] - query_begin[r]) * dv *
                                 sizeof(T));
    displacements[r] = static_cast<int>(query_begin[r] * dv * sizeof(T));
  }
  std::vector<T> whole(n * dv + 1);
  MPI_Allgatherv(rows.data(), counts[rank], MPI_BYTE, whole.data(),
                 counts.data(), displacements.data(), MPI_BYTE, MPI_COMM_WORLD);
  if (rank == 0) {
    const std::string report =
        oracles::VerifyFused<T>(args, MatrixView<T>(whole.data(), n, dv));
    if (!report.empty()) {
      std::string cuts;
      for (size_t b : query_begin) cuts += " " + std::to_string(b);
      Fail("ring attention differs from the reference: " + report,
           where() + " query shards at" + cuts);
    }
  }
}

const Api<float>* FindRow(const std::vector<Api<float>>& rows) {
  for (const auto& row : rows) {
    if (std::strcmp(row.name, "attention_pool") == 0) return &row;
  }
  return nullptr;
}

}  // namespace
}  // namespace attnpool_test

int main(int argc, char** argv) {
  using namespace attnpool_test;
  MPI_Init(&argc, &argv);
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: attnpool_mpi_random SEED COUNT [FIRST]\n");
    MPI_Finalize();
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[1], nullptr, 10);
  const uint64_t count = std::strtoull(argv[2], nullptr, 10);
  const uint64_t first = argc == 4 ? std::strtoull(argv[3], nullptr, 10) : 0;
  // The same row of both tables (Apis<T> lists the rows in one order).
  const size_t row = FindRow(Apis<float>()) - Apis<float>().data();
  for (uint64_t i = first; i < first + count; ++i) {
    const std::vector<uint8_t> input = RandomInput(seed, i);
    std::fprintf(stderr, "random %llu/%llu\n",
                 static_cast<unsigned long long>(seed),
                 static_cast<unsigned long long>(i));
    Bytes bytes(input.data(), input.size());
    bytes.Next();  // the fuzz target's function byte
    const uint8_t flags = bytes.Next();
    if (flags & 1) {
      RunOne(Apis<double>()[row], bytes, flags, seed, i);
    } else {
      RunOne(Apis<float>()[row], bytes, flags, seed, i);
    }
  }
  if (Rank() == 0) {
    std::printf("ran %llu random inputs of seed %llu on %d ranks: no failure\n",
                static_cast<unsigned long long>(count),
                static_cast<unsigned long long>(seed), Ranks());
  }
  MPI_Finalize();
  return 0;
}
