// Test memory that cannot be read: keys and values a mask hides, placed
// where reading them faults (tests/test_hidden_keys.cc, tests/mpi).
#pragma once

#include <attnpool/matrix.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstddef>

namespace attnpool_test {

// rows × cols elements whose rows from `boundary` on (or, with
// `fence_head`, before it) lie in pages mapped without access: reading one
// of them is a segmentation fault.
template <typename T>
class Fenced {
 public:
  Fenced(size_t rows, size_t cols, size_t boundary, bool fence_head = false)
      : rows_(rows), cols_(cols) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const auto whole_pages = [&](size_t bytes) {
      return (bytes + page - 1) / page * page;
    };
    const size_t head_bytes = boundary * cols * sizeof(T);
    const size_t tail_bytes = (rows - boundary) * cols * sizeof(T);
    head_ = whole_pages(head_bytes) + (fence_head ? page : 0);
    bytes_ = head_ + whole_pages(tail_bytes) + page;
    void* memory = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(memory != MAP_FAILED);
    base_ = static_cast<unsigned char*>(memory);
    // Row `boundary` starts on the first page past the head.
    data_ = reinterpret_cast<T*>(base_ + head_ - head_bytes);
    if (fence_head) {
      REQUIRE(mprotect(base_, head_, PROT_NONE) == 0);
    } else {
      REQUIRE(mprotect(base_ + head_, bytes_ - head_, PROT_NONE) == 0);
    }
  }
  ~Fenced() { munmap(base_, bytes_); }
  Fenced(const Fenced&) = delete;
  Fenced& operator=(const Fenced&) = delete;

  attnpool::MatrixView<T> view() { return {data_, rows_, cols_}; }

 private:
  size_t rows_, cols_, head_ = 0, bytes_ = 0;
  unsigned char* base_ = nullptr;
  T* data_ = nullptr;
};

}  // namespace attnpool_test
