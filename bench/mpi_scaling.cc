// bench/mpi_scaling: attnpool::mpi on P ranks against one (docs/
// distributed.md: W10 and the constants of its cost model), run as
//   mpiexec -n P build/bench/mpi_scaling [--queries N] [--points M]
//           [--repeats R] [--threads T] [--context C]
// In one run it times the prediction of N queries over M training points
// (1-D, Gaussian) on rank 0 alone (a communicator of one rank, holding all
// points) and on all P ranks (each holding a contiguous M/P of them), and
// reports the medians, the speedup, and each rank's bytes written during
// the distributed call (/proc/self/io wchar: the traffic when Open MPI
// sends through sockets, `--mca btl self,tcp`; shared memory bypasses
// it), less those of a call with no query (the ranks' agreement), against
// the model's N·(dy + 2) values. Then the model's constants on this machine:
// MPI's latency and bandwidth between ranks 0 and 1 (ping-pong), the rate
// of the shard merge, and ring attention (self-attention over a context of
// C tokens, d = dv = 64) on one rank and on P.
#include <attnpool/mpi.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

// The training point j of the whole set, whatever rank generates it.
void Point(uint64_t j, float* x, float* y) {
  std::mt19937_64 engine(0x5eed + j);
  std::uniform_real_distribution<float> uniform(0.0f, 5.0f);
  *x = uniform(engine);
  *y = std::sin(*x) + 0.3f * (uniform(engine) / 5.0f - 0.5f);
}

uint64_t BytesWritten() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "wchar:") return value;
  }
  return 0;
}

double Median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const size_t half = samples.size() / 2;
  return samples.size() % 2 ? samples[half]
                            : 0.5 * (samples[half - 1] + samples[half]);
}

struct Timing {
  double seconds;
  uint64_t bytes;        // this rank's, during the last call
  uint64_t fixed_bytes;  // the same for a call with no query: the agreement
};

// The median time of `repeats` predictions on `comm` of the points
// [begin, end), every rank starting together.
Timing Time(MPI_Comm comm, uint64_t begin, uint64_t end,
            const std::vector<float>& queries, int repeats, int threads) {
  std::vector<float> x(end - begin), y(end - begin);
  for (uint64_t j = begin; j < end; ++j) Point(j, &x[j - begin], &y[j - begin]);
  const attnpool::mpi::DistributedNadarayaWatson<float> model(
      comm, attnpool::Kernel::gaussian, 0.05, {x.data(), x.size(), 1},
      {y.data(), y.size(), 1});
  std::vector<float> out(queries.size());
  std::vector<double> samples;
  uint64_t bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(comm);
    const uint64_t written = BytesWritten();
    const double start = MPI_Wtime();
    model.predict({queries.data(), queries.size(), 1},
                  {out.data(), queries.size(), 1}, {}, {threads});
    double elapsed = MPI_Wtime() - start;
    bytes = BytesWritten() - written;
    // The call's time is its slowest rank's.
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, comm);
    samples.push_back(elapsed);
  }
  const uint64_t written = BytesWritten();
  model.predict({queries.data(), 0, 1}, {out.data(), 0, 1}, {}, {threads});
  return {Median(samples), bytes, BytesWritten() - written};
}

// The median one-way time of a message of `bytes` between ranks 0 and 1
// (half a round trip); the other ranks wait.
double OneWay(size_t bytes, int repeats) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<char> buffer(std::max<size_t>(bytes, 1));
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(buffer.data(), int(bytes), MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buffer.data(), int(bytes), MPI_BYTE, 1, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buffer.data(), int(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), int(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
    samples.push_back((MPI_Wtime() - start) / 2);
  }
  return Median(samples);
}

// Rows per second of attention_pool_merge of softmax states with dv
// columns (the reduction's work per row and step).
double MergeRate(size_t rows, size_t columns, int repeats) {
  std::vector<float> acc(rows * columns, 1.0f), part(rows * columns, 2.0f),
      max(rows, 0.5f), sum(rows, 1.0f), part_max(rows, 0.25f),
      part_sum(rows, 1.0f);
  std::vector<size_t> best(rows), part_best(rows);
  attnpool::PoolSpec spec;
  const attnpool::PoolPartial<float> into{
      {acc.data(), rows, columns}, max.data(), sum.data(), best.data()};
  const attnpool::PoolPartial<float> later{{part.data(), rows, columns},
                                           part_max.data(),
                                           part_sum.data(),
                                           part_best.data()};
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    const double start = MPI_Wtime();
    attnpool::attention_pool_merge(spec, into, later);
    samples.push_back(MPI_Wtime() - start);
  }
  return rows / Median(samples);
}

// The median time of ring self-attention over `context` tokens on `comm`
// (each rank holding a contiguous part of the queries, keys and values),
// d = dv = 64, no mask (a causal mask would leave rank 0 a quarter of the
// work of rank 1: contiguous parts balance only unmasked attention).
double RingTime(MPI_Comm comm, size_t context, int repeats, int threads) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const size_t begin = context * rank / size, end = context * (rank + 1) / size;
  const size_t rows = end - begin, depth = 64;
  std::mt19937_64 engine(0x5eed + rank);
  std::normal_distribution<float> normal;
  std::vector<float> q(rows * depth), k(rows * depth), v(rows * depth),
      out(rows * depth);
  for (auto* data : {&q, &k, &v}) {
    for (float& x : *data) x = normal(engine);
  }
  attnpool::PoolSpec spec;
  spec.distance = attnpool::Distance::dot;
  spec.kernel.kernel = attnpool::Kernel::exp;
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(comm);
    const double start = MPI_Wtime();
    attnpool::mpi::ring_attention_pool(
        comm, spec, {q.data(), rows, depth}, {k.data(), rows, depth},
        {v.data(), rows, depth}, {out.data(), rows, depth}, {}, {threads});
    double elapsed = MPI_Wtime() - start;
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, comm);
    samples.push_back(elapsed);
  }
  return Median(samples);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  uint64_t n = 20000, m = 2000000;
  uint64_t context = 16384;
  int repeats = 3, threads = 1;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a];
    const long long value = std::atoll(argv[a + 1]);
    if (flag == "--queries") {
      n = value;
    } else if (flag == "--points") {
      m = value;
    } else if (flag == "--repeats") {
      repeats = static_cast<int>(value);
    } else if (flag == "--threads") {
      threads = static_cast<int>(value);
    } else if (flag == "--context") {
      context = value;
    } else {
      if (rank == 0) std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  std::vector<float> queries(n);
  for (uint64_t i = 0; i < n; ++i) queries[i] = 5.0f * (i + 0.5f) / n;

  // Rank 0 alone, the others waiting at the barrier after it.
  MPI_Comm alone;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &alone);
  Timing one{0, 0, 0};
  double ring_one = 0;
  if (rank == 0) {
    one = Time(alone, 0, m, queries, repeats, threads);
    ring_one = RingTime(alone, context, repeats, threads);
    MPI_Comm_free(&alone);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Timing all = Time(MPI_COMM_WORLD, m * rank / size,
                          m * (rank + 1) / size, queries, repeats, threads);
  const double ring_all = RingTime(MPI_COMM_WORLD, context, repeats, threads);
  double latency = 0, bandwidth = 0;
  if (size > 1) {
    latency = OneWay(8, 101);
    const size_t big = size_t(64) << 20;
    bandwidth = big / (OneWay(big, 5) - latency);
  }
  const double merge_rate = rank == 0 ? MergeRate(n, 1, 21) : 0;
  const double merge_rate_64 = rank == 0 ? MergeRate(n, 64, 21) : 0;
  std::vector<uint64_t> bytes(2 * size);
  const uint64_t mine[2] = {all.bytes, all.fixed_bytes};
  MPI_Gather(mine, 2, MPI_UINT64_T, bytes.data(), 2, MPI_UINT64_T, 0,
             MPI_COMM_WORLD);
  if (rank == 0) {
    const double pairs = double(n) * double(m);
    std::printf(
        "split-keys Nadaraya-Watson, 1-D Gaussian: %llu queries x "
        "%llu points, %d thread(s) per rank, median of %d\n",
        (unsigned long long)n, (unsigned long long)m, threads, repeats);
    std::printf("  1 rank : %8.3f s  %6.2f Gpairs/s\n", one.seconds,
                pairs / one.seconds / 1e9);
    std::printf("  %d ranks: %8.3f s  %6.2f Gpairs/s  speedup %.2fx\n", size,
                all.seconds, pairs / all.seconds / 1e9,
                one.seconds / all.seconds);
    const double model = double(n) * (1 + 2) * sizeof(float);
    std::printf(
        "  bytes each rank wrote in a call (n*(dy+2) values = %.0f "
        "bytes; the agreement: those of a call with no query)\n",
        model);
    for (int r = 0; r < size; ++r) {
      const uint64_t total = bytes[2 * r], fixed = bytes[2 * r + 1];
      std::printf(
          "  rank %d: %llu in all, %llu of agreement, the rest %.4f "
          "of n*(dy+2) values\n",
          r, (unsigned long long)total, (unsigned long long)fixed,
          (double(total) - double(fixed)) / model);
    }
    const double flops = 4.0 * context * context * 64;
    std::printf("ring attention, %llu tokens, d = dv = 64\n",
                (unsigned long long)context);
    std::printf("  1 rank : %8.3f s  %6.1f GFLOP/s\n", ring_one,
                flops / ring_one / 1e9);
    std::printf("  %d ranks: %8.3f s  %6.1f GFLOP/s  speedup %.2fx\n", size,
                ring_all, flops / ring_all / 1e9, ring_one / ring_all);
    std::printf(
        "model constants: latency %.2f us, bandwidth %.2f GB/s "
        "(ranks 0 and 1), merge %.0f Mrows/s (dv = 1), %.1f Mrows/s "
        "(dv = 64)\n",
        latency * 1e6, bandwidth / 1e9, merge_rate / 1e6, merge_rate_64 / 1e6);
  }
  MPI_Finalize();
  return 0;
}
