// The public functions as a table, for the tests that treat every function
// alike — hostile inputs (test_hostile.cc), non-finite data
// (test_nonfinite.cc), determinism, concurrency, huge strides — and for the
// fuzzer (tests/fuzz/). A row says which matrices a function takes (named
// as its errors name them, with their shapes in the size symbols n, m, d,
// dv), which other arguments it reads, how to call it, and how to check its
// outputs against the scalar reference. Adding a function is one row in
// api_table.cc; every test and the fuzzer pick it up. A C API row would call
// the C function and turn its error code into an attnpool::Error.
#pragma once

#include <attnpool/attnpool.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attnpool_test {

// Size symbols: queries n×d, keys m×d, values m×dv, weights n×m.
enum Dim : int { kN = 0, kM = 1, kD = 2, kDv = 3, kDimCount = 4 };
const char* DimName(Dim dim);

struct Sizes {
  size_t size[kDimCount] = {3, 4, 2, 5};
  size_t& operator[](Dim dim) { return size[dim]; }
  size_t operator[](Dim dim) const { return size[dim]; }
};

// An input is only read, an output only written, an in-place matrix both.
enum class Role { input, output, in_place };

struct SlotSpec {
  const char* name;  // "queries", "out", ...: what errors call it
  Dim rows;
  Dim cols;
  Role role;
};

// Every argument any row takes; each row reads the ones it needs.
template <typename T>
struct Args {
  std::vector<attnpool::MatrixView<T>> views;  // one per slot, in slot order
  // The distance of the call: stage 1's metric, or what apply_kernel's
  // input holds.
  attnpool::Distance distance = attnpool::Distance::sqeuclidean;
  attnpool::KernelSpec kernel;
  attnpool::Normalization normalization = attnpool::Normalization::softmax;
  attnpool::EmptyRows empty_rows = attnpool::EmptyRows::nan;
  size_t depth = 0;  // apply_kernel's d
  attnpool::Mask<T> mask;
  attnpool::Execution execution;

  attnpool::PoolSpec spec() const {
    return {distance, kernel, normalization, empty_rows};
  }
};

// An enum-valued argument: its name in errors, its number of valid values,
// and how to set it.
template <typename T>
struct EnumArgument {
  const char* name;
  int count;
  void (*set)(Args<T>& args, int value);
};

template <typename T>
struct Api {
  const char* name;
  std::vector<SlotSpec> slots;
  bool uses_kernel = false;  // reads args.kernel (bandwidth, scale)
  bool uses_mask = false;    // reads args.mask
  // Valid lengths count the keys of a whole sequence of which the call sees
  // a shard: lengths beyond m are valid (attention_pool_partial).
  bool lengths_beyond_keys = false;
  std::vector<EnumArgument<T>> enums;
  // Products of sizes the function forms besides its views' (e.g. the n×m
  // workspace it allocates), with the argument its overflow error names.
  std::vector<std::pair<std::pair<Dim, Dim>, std::string>> products;
  // Sets a valid call's non-view arguments for these sizes (the views are
  // laid out by Workspace).
  std::function<void(Args<T>& args, const Sizes& sizes)> setup;
  std::function<void(const Args<T>& args)> run;
  // Checks the outputs of a run (`after`) against the scalar reference
  // computed from its inputs (`before`: the same arguments on a copy taken
  // before the run) within the accuracy the headers state, including which
  // outputs are NaN. Returns "" or what differs. May run attnpool on the
  // active target (to recompute the stages a pipeline composes).
  std::function<std::string(const Args<T>& before, const Args<T>& after)>
      verify;

  size_t SlotIndex(const std::string& slot) const;
};

// The rows, in a fixed order.
template <typename T>
const std::vector<Api<T>>& Apis();

// How a Workspace lays its matrices out.
struct Layout {
  size_t padding = 1;  // elements between cols and stride
  size_t offset = 1;   // elements each matrix starts past an aligned address
  // Nonzero: every stride (queries, ..., mask.bias) is this many elements,
  // and the storage is reserved address space (mmap) of which only the rows
  // are touched, so that element offsets can pass 2³² cheaply.
  size_t huge_stride = 0;
  // Elements of the guard gap after each matrix; 0: as many as the largest
  // matrix plus a row, so that a view moved onto another's storage (the
  // overlap tests) stays inside the arena. The fuzzer's small guards still
  // catch writes just past a view.
  size_t guard = 0;
};

// Storage for one call of a row: every slot (and, for rows with masks, a
// bias matrix, a visibility matrix and valid lengths) in one arena, each
// followed by a guard gap. Everything outside the views is NaN ("canary"),
// so over-reads show up in results and stray writes in Untouched().
template <typename T>
class Workspace {
 public:
  Workspace(const Api<T>& api, const Sizes& sizes, const Layout& layout = {});
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // The call; its views point into this workspace, and its other arguments
  // are the row's valid ones. Tests edit it freely.
  Args<T> args;

  const Api<T>& api() const { return api_; }
  const Sizes& sizes() const { return sizes_; }

  // Inputs and in-place matrices: seeded random values (in-place ones ≥ 0,
  // which every kernel and normalization accepts); outputs: NaN.
  void FillRandom(uint64_t seed);

  // The mask's storage (n×m bias, n×m visibility, n valid lengths), and
  // setters that point args.mask at it.
  attnpool::MatrixView<T> bias();
  attnpool::MatrixView<uint8_t> visible();
  size_t* valid_lengths();
  void UseBias() { args.mask.bias = bias(); }
  void UseVisible() { args.mask.visible = visible(); }
  void UseValidLengths() { args.mask.valid_lengths = valid_lengths(); }

  // The base view of slot `s` (as laid out, whatever args says now).
  attnpool::MatrixView<T> slot(size_t s) const { return slots_[s]; }

  // A copy with the same layout and contents, whose args are this one's
  // rebased onto the copy (views and mask pointers into this workspace point
  // at the same places of the copy).
  std::unique_ptr<Workspace> Clone() const;

  // Everything this workspace owns, as bytes (small layouts only).
  std::vector<unsigned char> Snapshot() const;
  // Whether everything outside the output views of args is bitwise as in
  // `snapshot` (taken before a run): inputs, padding and guards untouched.
  bool Untouched(const std::vector<unsigned char>& snapshot) const;

  // Bytes of the arena (huge layouts: bytes reserved).
  size_t arena_bytes() const { return arena_bytes_; }

 private:
  struct Region {
    size_t begin;  // element index in the arena
    size_t rows, cols, stride;
  };
  T* Rebase(const T* pointer, const Workspace& from) const;

  const Api<T>& api_;
  Sizes sizes_;
  Layout layout_;
  std::vector<Region> regions_;  // slots, then the bias
  std::vector<attnpool::MatrixView<T>> slots_;
  T* arena_ = nullptr;
  size_t arena_elements_ = 0;
  size_t arena_bytes_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> visible_;
  std::vector<size_t> valid_lengths_;
};

// Whether the bytes of two views' elements are identical (NaN payloads
// included): the determinism check.
template <typename T>
bool SameBits(attnpool::MatrixView<const T> a, attnpool::MatrixView<const T> b);

// The outputs of args (output and in-place views) as bytes.
template <typename T>
std::vector<unsigned char> OutputBytes(const Api<T>& api, const Args<T>& args);

}  // namespace attnpool_test
