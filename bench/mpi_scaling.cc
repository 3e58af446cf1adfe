// bench/mpi_scaling: split-keys Nadaraya–Watson across MPI ranks (the
// distributed goal of docs/benchmarks.md, W10), run as
//   mpiexec -n P build/bench/mpi_scaling [--queries N] [--points M]
//           [--repeats R] [--threads T]
// In one run it times the prediction of N queries over M training points
// (1-D, Gaussian) on rank 0 alone (a communicator of one rank, holding all
// points) and on all P ranks (each holding a contiguous M/P of them), and
// reports the medians, the speedup, and each rank's bytes written during
// the distributed call (/proc/self/io wchar: the traffic when Open MPI
// sends through sockets, `--mca btl self,tcp`; shared memory bypasses
// it), less those of a call with no query (the ranks' agreement), against
// the model's N·(dy + 2) values.
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
  return samples[samples.size() / 2];
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

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  uint64_t n = 20000, m = 2000000;
  int repeats = 3, threads = 1;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a];
    const long long value = std::atoll(argv[a + 1]);
    if (flag == "--queries")
      n = value;
    else if (flag == "--points")
      m = value;
    else if (flag == "--repeats")
      repeats = static_cast<int>(value);
    else if (flag == "--threads")
      threads = static_cast<int>(value);
  }
  std::vector<float> queries(n);
  for (uint64_t i = 0; i < n; ++i) queries[i] = 5.0f * (i + 0.5f) / n;

  // Rank 0 alone, the others waiting at the barrier after it.
  MPI_Comm alone;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &alone);
  Timing one{0, 0, 0};
  if (rank == 0) {
    one = Time(alone, 0, m, queries, repeats, threads);
    MPI_Comm_free(&alone);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Timing all = Time(MPI_COMM_WORLD, m * rank / size,
                          m * (rank + 1) / size, queries, repeats, threads);
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
  }
  MPI_Finalize();
  return 0;
}
