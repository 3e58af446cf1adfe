// MPI_COMM_WORLD as the MPI tests see it (tests/mpi/).
#pragma once

#include <mpi.h>

#include <cstring>
#include <vector>

namespace attnpool_test {

inline int Rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int Ranks() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// Whether every rank's `data` has the bits of rank 0's (collective; the
// same size on every rank).
template <typename T>
bool SameOnEveryRank(const std::vector<T>& data) {
  std::vector<T> first = data;
  MPI_Bcast(first.data(), static_cast<int>(first.size() * sizeof(T)), MPI_BYTE,
            0, MPI_COMM_WORLD);
  int same = data.empty() || std::memcmp(first.data(), data.data(),
                                         data.size() * sizeof(T)) == 0;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return same == 1;
}

}  // namespace attnpool_test
