// Uses the installed attnpool::mpi: split-keys pooling of one query over
// one key per rank, whose value is the rank, under a constant kernel and a
// sum: the mean of the ranks.
#include <attnpool/mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  attnpool::PoolSpec spec;
  spec.kernel.kernel = attnpool::Kernel::constant;
  const double query = 0, key = 0, value = rank;
  double out = -1;
  attnpool::mpi::attention_pool(MPI_COMM_WORLD, spec, {&query, 1, 1},
                                {&key, 1, 1}, {&value, 1, 1}, {&out, 1, 1});
  // The same in float, its shards brace-initialized as in the README.
  const float query_f = 0, key_f = 0, value_f = float(rank);
  float out_f = -1;
  attnpool::mpi::attention_pool(MPI_COMM_WORLD, spec, {&query_f, 1, 1},
                                {&key_f, 1, 1}, {&value_f, 1, 1},
                                {&out_f, 1, 1});
  const double expected = (size - 1) / 2.0;
  int status = 0;
  if (rank == 0) {
    if (out != expected || out_f != float(expected)) {
      std::printf("mpi consumer: %g and %g, expected %g\n", out, out_f,
                  expected);
      status = 1;
    } else {
      std::printf("mpi consumer: the mean of %d ranks\n", size);
    }
  }
  MPI_Finalize();
  return status;
}
