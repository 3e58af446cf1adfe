// A call's outputs kept while its progress callback may stop it (internal).
#pragma once

#include <attnpool/execution.h>
#include <attnpool/matrix.h>

#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

namespace attnpool {
namespace detail {

// The rows of a call's outputs, copied after its checks where its
// Execution has a progress callback, and put back if the call then leaves
// by an exception — its cancellation (Cancelled), the callback's own, or a
// scratch allocation's — so that such a call writes nothing (execution.h).
// Costs nothing without a callback; with one, a copy of the outputs (their
// size in memory, one read and, on failure, one write of them). Inside
// another on the same thread (a call made by a guarded call) it keeps
// nothing: the outer one covers the call. Outputs must not overlap (every
// call checks that).
class KeptOutputs {
 public:
  explicit KeptOutputs(const Execution& execution)
      : active_(execution.progress != nullptr && depth_ == 0),
        exceptions_(std::uncaught_exceptions()) {
    if (active_) ++depth_;
  }
  KeptOutputs(const KeptOutputs&) = delete;
  KeptOutputs& operator=(const KeptOutputs&) = delete;
  ~KeptOutputs() {
    if (!active_) return;
    --depth_;
    if (std::uncaught_exceptions() > exceptions_) Restore();
  }

  template <typename T>
  void Keep(MatrixView<T> view) {
    Keep(view.data, 1, 0, 1, 0, view.rows, view.stride * sizeof(T),
         view.cols * sizeof(T));
  }
  template <typename T>
  void Keep(TensorView<T> view) {
    Keep(view.data, view.batch, view.batch_stride * sizeof(T), view.heads,
         view.head_stride * sizeof(T), view.rows, view.row_stride * sizeof(T),
         view.cols * sizeof(T));
  }
  // `count` entries from `data` (none where it is null).
  template <typename T>
  void Keep(T* data, size_t count) {
    Keep(data, 1, 0, 1, 0, 1, 0, data != nullptr ? count * sizeof(T) : 0);
  }

 private:
  // Rows of `bytes`, (outer, middle, rows) of them at those byte strides.
  struct Block {
    char* data;
    size_t outer, outer_stride, middle, middle_stride, rows, row_stride, bytes;
    std::unique_ptr<char[]> kept;  // the rows, one after another
    template <class Row>
    void EachRow(const Row& row) const {
      for (size_t a = 0; a < outer; ++a) {
        for (size_t b = 0; b < middle; ++b) {
          for (size_t r = 0; r < rows; ++r) {
            row(data + a * outer_stride + b * middle_stride + r * row_stride);
          }
        }
      }
    }
  };

  void Keep(void* data, size_t outer, size_t outer_stride, size_t middle,
            size_t middle_stride, size_t rows, size_t row_stride,
            size_t bytes) {
    if (!active_ || data == nullptr || bytes == 0 || outer == 0 ||
        middle == 0 || rows == 0) {
      return;
    }
    Block block{static_cast<char*>(data),
                outer,
                outer_stride,
                middle,
                middle_stride,
                rows,
                row_stride,
                bytes,
                nullptr};
    // (Sizes checked by the call; not zeroed: every byte is copied in.)
    block.kept.reset(new char[outer * middle * rows * bytes]);
    char* at = block.kept.get();
    block.EachRow([&](const char* row) {
      std::memcpy(at, row, bytes);
      at += bytes;
    });
    blocks_.push_back(std::move(block));
  }

  void Restore() const {
    for (const Block& block : blocks_) {
      const char* at = block.kept.get();
      block.EachRow([&](char* row) {
        std::memcpy(row, at, block.bytes);
        at += block.bytes;
      });
    }
  }

  static inline thread_local int depth_ = 0;
  const bool active_;
  const int exceptions_;
  std::vector<Block> blocks_;
};

}  // namespace detail
}  // namespace attnpool
