// A shard state (pool.h, PoolPartial) as it travels between ranks: one MPI
// element per query row, [max, sum, accumulator[dv]] in T followed, under
// argmax, by the winner's key index as a uint64 (unaligned: copied bytewise),
// and the merge as a non-commutative MPI_Op on such elements.
#pragma once

#include <attnpool/pool.h>
#include <mpi.h>

#include <cstddef>
#include <vector>

namespace attnpool {
namespace mpi {
namespace detail {

// A state of `rows` queries that owns its arrays, initialized to the state
// of no key: max −inf, sum 0, accumulator 0 (what an empty shard merges as).
template <typename T>
class OwnedState {
 public:
  OwnedState() : OwnedState(0, 0) {}
  OwnedState(size_t rows, size_t columns);
  PoolPartial<T> view();
  size_t rows() const { return rows_; }
  size_t columns() const { return columns_; }

 private:
  friend class StateWire;
  size_t rows_, columns_;
  std::vector<T> max_, sum_, accumulator_;
  std::vector<size_t> best_;
};

// The MPI datatype of one row on the wire and the merge op over it, for
// one spec, element type and dv; freed with the object.
class StateWire {
 public:
  template <typename T>
  StateWire(const PoolSpec& spec, size_t columns, const T* /*type tag*/);
  ~StateWire();
  StateWire(const StateWire&) = delete;
  StateWire& operator=(const StateWire&) = delete;

  MPI_Datatype type() const { return type_; }
  MPI_Op op() const { return op_; }
  size_t row_bytes() const { return row_bytes_; }
  // Rows per message: at most INT_MAX elements and about 1 GiB.
  size_t rows_per_message() const;

  // Rows [begin, end) of `state` to or from wire bytes (row `begin` first).
  template <typename T>
  void Pack(const OwnedState<T>& state, size_t begin, size_t end,
            unsigned char* wire) const;
  template <typename T>
  void Unpack(const unsigned char* wire, size_t begin, size_t end,
              OwnedState<T>& state) const;

  const PoolSpec& spec() const { return spec_; }

 private:
  template <typename T>
  static void Merge(void* earlier, void* later_and_result, int* count,
                    MPI_Datatype* type);
  template <typename T>
  static void MergeRows(const StateWire& wire, void* earlier,
                        void* later_and_result, size_t rows);

  PoolSpec spec_;
  size_t columns_;
  bool with_best_;
  size_t row_bytes_;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  MPI_Op op_ = MPI_OP_NULL;
};

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
