// Test matrices: strided, misaligned, NaN-padded, seeded random contents.
#pragma once

#include <attnpool/matrix.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <vector>

namespace attnpool_test {

// Seed of every randomized test: fixed, and printed (INFO) on failure so a
// failing case can be rerun alone.
constexpr uint64_t kSeed = 20261126;

// Thinner sweeps under emulation, where programs run 30-100 times slower
// (tools/test-arm.sh sets ATTNPOOL_TEST_SWEEP): `thin` runs a subset of the
// large sweeps' cases, chosen so that every kernel, shape class and fused
// path still runs on every target; `smoke` a third of that again (a second
// vector length, whose emulation is slower still on some hosts). Natively,
// the full sweep on the targets machines run (AVX2 and up, NEON, SVE), and
// the thin one on the fallbacks (SSE4, SSSE3, SSE2, EMU128, scalar), which
// only the oldest machines dispatch to: each_target.cc sets FallbackSweep()
// around a test forced to one of those.
enum class Sweep { full, thin, smoke };
inline Sweep& FallbackSweep() {
  static Sweep sweep = Sweep::full;
  return sweep;
}
inline Sweep CurrentSweep() {
  static const Sweep environment = [] {
    const char* name = std::getenv("ATTNPOOL_TEST_SWEEP");
    if (name == nullptr) return Sweep::full;
    if (std::strcmp(name, "thin") == 0) return Sweep::thin;
    if (std::strcmp(name, "smoke") == 0) return Sweep::smoke;
    return Sweep::full;
  }();
  return environment != Sweep::full ? environment : FallbackSweep();
}
inline bool ThinSweep() { return CurrentSweep() != Sweep::full; }

// Whether case `index` of a sweep runs: always in the full sweep; in the
// thin one, one case in `stride` (in the smoke one, in 3·stride), rotated by
// `rotation` (e.g. the index of the spec it runs with) so that every case
// runs for some rotation.
inline bool InSweep(size_t index, size_t rotation = 0, size_t stride = 3) {
  const size_t every = CurrentSweep() == Sweep::full   ? 1
                       : CurrentSweep() == Sweep::thin ? stride
                                                       : 3 * stride;
  return (index + rotation) % every == 0;
}

// `full` natively, `thin` in the thin and smoke sweeps.
inline size_t SweepCount(size_t full, size_t thin) {
  return ThinSweep() ? thin : full;
}

// An allocator aligned like the widest vector of any target (2048-bit
// SVE), so that the offsets tests apply are the misalignments the kernels
// see.
template <typename T>
struct VectorAligned {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{256};
  VectorAligned() = default;
  template <typename U>
  VectorAligned(const VectorAligned<U>&) {}
  T* allocate(size_t count) {
    return static_cast<T*>(::operator new(count * sizeof(T), kAlignment));
  }
  void deallocate(T* pointer, size_t) {
    ::operator delete(pointer, kAlignment);
  }
  template <typename U>
  bool operator==(const VectorAligned<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const VectorAligned<U>&) const {
    return false;
  }
};
template <typename T>
using AlignedVector = std::vector<T, VectorAligned<T>>;

// A rows×cols matrix stored with `padding` extra elements per row and the
// first element `offset` elements past a vector-aligned allocation, so that
// kernels see misaligned, strided rows. Padding holds NaN: any over-read shows
// up.
template <typename T>
class TestMatrix {
 public:
  TestMatrix(size_t rows, size_t cols, size_t padding = 0, size_t offset = 0)
      : rows_(rows),
        cols_(cols),
        stride_(cols + padding),
        offset_(offset),
        storage_(offset + rows * (cols + padding) + 1,
                 std::numeric_limits<T>::quiet_NaN()) {
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) (*this)(r, c) = T(0);
    }
  }

  T& operator()(size_t r, size_t c) { return data()[r * stride_ + c]; }
  T operator()(size_t r, size_t c) const { return data()[r * stride_ + c]; }
  T* data() { return storage_.data() + offset_; }
  const T* data() const { return storage_.data() + offset_; }
  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }

  attnpool::MatrixView<T> view() { return {data(), rows_, cols_, stride_}; }
  attnpool::MatrixView<const T> view() const {
    return {data(), rows_, cols_, stride_};
  }
  // Everything, padding included: to check that nothing else was written.
  const AlignedVector<T>& storage() const { return storage_; }

  // Whether everything outside the view (padding and guards) is bitwise the
  // same as in `other`, a matrix of the same shape.
  bool SamePadding(const TestMatrix& other) const {
    for (size_t k = 0; k < storage_.size(); ++k) {
      const bool inside = k >= offset_ && (k - offset_) / stride_ < rows_ &&
                          (k - offset_) % stride_ < cols_;
      if (!inside &&
          std::memcmp(&storage_[k], &other.storage_[k], sizeof(T)) != 0) {
        return false;
      }
    }
    return true;
  }

  // Normal values; each row scaled by 10^U(−3, max_exponent) so that
  // magnitudes within a call span many orders.
  void FillRandom(std::mt19937_64& rng, double max_exponent = 6) {
    std::normal_distribution<double> normal;
    std::uniform_real_distribution<double> exponent(-3, max_exponent);
    for (size_t r = 0; r < rows_; ++r) {
      const double scale = std::pow(10.0, exponent(rng));
      for (size_t c = 0; c < cols_; ++c) (*this)(r, c) = T(normal(rng) * scale);
    }
  }

 private:
  size_t rows_, cols_, stride_, offset_;
  AlignedVector<T> storage_;
};

}  // namespace attnpool_test
