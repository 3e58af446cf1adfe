#include "src/mpi/state_wire.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>

namespace attnpool {
namespace mpi {
namespace detail {

template <typename T>
OwnedState<T>::OwnedState(size_t rows, size_t columns)
    : rows_(rows),
      columns_(columns),
      max_(rows, -std::numeric_limits<T>::infinity()),
      sum_(rows, T(0)),
      accumulator_(rows * columns, T(0)),
      best_(rows, 0) {}

template <typename T>
PoolPartial<T> OwnedState<T>::view() {
  PoolPartial<T> partial;
  partial.accumulator =
      MatrixView<T>(accumulator_.data(), rows_, columns_, columns_);
  partial.max = max_.data();
  partial.sum = sum_.data();
  partial.best = best_.data();
  return partial;
}

template class OwnedState<float>;
template class OwnedState<double>;

namespace {

// The attribute of a row datatype that leads the merge op to its StateWire.
int WireKey() {
  static const int key = [] {
    int created = MPI_KEYVAL_INVALID;
    MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN,
                           &created, nullptr);
    return created;
  }();
  return key;
}

}  // namespace

template <typename T>
StateWire::StateWire(const PoolSpec& spec, size_t columns, const T*)
    : spec_(spec),
      columns_(columns),
      with_best_(spec.normalization == Normalization::argmax),
      row_bytes_((2 + columns) * sizeof(T) +
                 (with_best_ ? sizeof(uint64_t) : 0)) {
  MPI_Type_contiguous(static_cast<int>(row_bytes_), MPI_BYTE, &type_);
  MPI_Type_commit(&type_);
  MPI_Type_set_attr(type_, WireKey(), this);
  MPI_Op_create(&StateWire::Merge<T>, /*commute=*/0, &op_);
}

StateWire::~StateWire() {
  MPI_Op_free(&op_);
  MPI_Type_free(&type_);
}

size_t StateWire::rows_per_message() const {
  const size_t by_bytes = std::max<size_t>(1, (size_t(1) << 30) / row_bytes_);
  return std::min<size_t>(by_bytes, INT_MAX);
}

template <typename T>
void StateWire::Pack(const OwnedState<T>& state, size_t begin, size_t end,
                     unsigned char* wire) const {
  for (size_t i = begin; i < end; ++i, wire += row_bytes_) {
    unsigned char* at = wire;
    std::memcpy(at, &state.max_[i], sizeof(T));
    std::memcpy(at += sizeof(T), &state.sum_[i], sizeof(T));
    at += sizeof(T);
    if (columns_ != 0) {  // (without columns the accumulator is empty)
      std::memcpy(at, state.accumulator_.data() + i * columns_,
                  columns_ * sizeof(T));
    }
    if (with_best_) {
      const uint64_t best = state.best_[i];
      std::memcpy(at + columns_ * sizeof(T), &best, sizeof(best));
    }
  }
}

template <typename T>
void StateWire::Unpack(const unsigned char* wire, size_t begin, size_t end,
                       OwnedState<T>& state) const {
  for (size_t i = begin; i < end; ++i, wire += row_bytes_) {
    const unsigned char* at = wire;
    std::memcpy(&state.max_[i], at, sizeof(T));
    std::memcpy(&state.sum_[i], at += sizeof(T), sizeof(T));
    at += sizeof(T);
    if (columns_ != 0) {
      std::memcpy(state.accumulator_.data() + i * columns_, at,
                  columns_ * sizeof(T));
    }
    if (with_best_) {
      uint64_t best = 0;
      std::memcpy(&best, at + columns_ * sizeof(T), sizeof(best));
      state.best_[i] = static_cast<size_t>(best);
    }
  }
}

// MPI's reduction calls this with the rows of a lower-ranked group in
// `earlier` and those of the group after it in `later_and_result` (the op
// is not commutative): the merge, in key order, goes to the latter.
// No exception may cross MPI's frames: one (no memory) ends the job.
template <typename T>
void StateWire::Merge(void* earlier, void* later_and_result, int* count,
                      MPI_Datatype* type) {
  void* attribute = nullptr;
  int found = 0;
  MPI_Type_get_attr(*type, WireKey(), &attribute, &found);
  if (!found) {
    std::fputs("attnpool::mpi: a merge of states without their layout\n",
               stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  try {
    MergeRows<T>(*static_cast<const StateWire*>(attribute), earlier,
                 later_and_result, static_cast<size_t>(*count));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "attnpool::mpi: merging states: %s\n", error.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

template <typename T>
void StateWire::MergeRows(const StateWire& wire, void* earlier,
                          void* later_and_result, size_t rows) {
  OwnedState<T> into(rows, wire.columns_), later(rows, wire.columns_);
  wire.Unpack(static_cast<const unsigned char*>(earlier), 0, rows, into);
  wire.Unpack(static_cast<const unsigned char*>(later_and_result), 0, rows,
              later);
  attention_pool_merge(wire.spec_, into.view(), later.view());
  wire.Pack(into, 0, rows, static_cast<unsigned char*>(later_and_result));
}

#define ATTNPOOL_WIRE(T)                                                \
  template StateWire::StateWire(const PoolSpec&, size_t, const T*);     \
  template void StateWire::Pack(const OwnedState<T>&, size_t, size_t,   \
                                unsigned char*) const;                  \
  template void StateWire::Unpack(const unsigned char*, size_t, size_t, \
                                  OwnedState<T>&) const;
ATTNPOOL_WIRE(float)
ATTNPOOL_WIRE(double)
#undef ATTNPOOL_WIRE

}  // namespace detail
}  // namespace mpi
}  // namespace attnpool
