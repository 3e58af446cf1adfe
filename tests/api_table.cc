// The rows of the API table (tests/api_table.h) and the Workspace that lays
// out one call; their reference checks are in tests/api_oracles.h.
#include "tests/api_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <sstream>
#include <stdexcept>

#include "src/reference.h"
#include "tests/api_oracles.h"
#include "tests/pool_specs.h"

namespace attnpool_test {

// LeakSanitizer (ASan builds): libomp keeps its thread teams' structures
// until exit; they are not leaks of ours. A weak hook: inert elsewhere.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libomp.so\n";
}

const char* DimName(Dim dim) {
  static const char* const kNames[kDimCount] = {"n", "m", "d", "dv"};
  return kNames[dim];
}

template <typename T>
size_t Api<T>::SlotIndex(const std::string& slot) const {
  for (size_t s = 0; s < slots.size(); ++s) {
    if (slot == slots[s].name) return s;
  }
  throw std::logic_error(std::string(name) + " has no slot " + slot);
}

namespace {

using namespace oracles;

// -------------------------------------------------------------- the rows

template <typename T>
std::vector<Api<T>> MakeApis() {
  using A = Args<T>;
  std::vector<Api<T>> apis;
  const auto set_distance = [](A& a, int v) {
    a.distance = static_cast<Distance>(v);
  };
  const auto set_kernel = [](A& a, int v) {
    a.kernel.kernel = static_cast<Kernel>(v);
  };
  const auto set_normalization = [](A& a, int v) {
    a.normalization = static_cast<Normalization>(v);
  };
  const auto set_empty_rows = [](A& a, int v) {
    a.empty_rows = static_cast<EmptyRows>(v);
  };

  {
    Api<T> api;
    api.name = "pairwise_distances";
    api.slots = {{"queries", kN, kD, Role::input},
                 {"keys", kM, kD, Role::input},
                 {"out", kN, kM, Role::output}};
    api.enums = {{"distance", attnpool::kDistanceCount, set_distance}};
    api.setup = [](A& a, const Sizes&) { a.distance = Distance::sqeuclidean; };
    api.run = [](const A& a) {
      attnpool::pairwise_distances(a.distance, a.views[0], a.views[1],
                                   a.views[2], a.execution);
    };
    api.verify = [](const A& before, const A& after) {
      return VerifyDistances<T>(before.distance, before.views[0],
                                before.views[1], after.views[2]);
    };
    apis.push_back(api);
  }
  {
    Api<T> api;
    api.name = "apply_kernel";
    api.slots = {{"values", kN, kM, Role::in_place}};
    api.uses_kernel = true;
    api.enums = {{"kernel.kernel", attnpool::kKernelCount, set_kernel},
                 {"input", attnpool::kDistanceCount, set_distance}};
    api.setup = [](A& a, const Sizes& sizes) {
      a.distance = Distance::sqeuclidean;
      a.kernel = {Kernel::gaussian, 1.5};
      a.depth = sizes[kD];
    };
    api.run = [](const A& a) {
      attnpool::apply_kernel(a.kernel, a.distance, a.views[0], a.depth,
                             a.execution);
    };
    api.verify = [](const A& before, const A& after) {
      return VerifyKernel<T>(before.kernel, before.distance, before.depth,
                             before.views[0], after.views[0]);
    };
    apis.push_back(api);
  }
  {
    Api<T> api;
    api.name = "normalize";
    api.slots = {{"values", kN, kM, Role::in_place}};
    api.uses_mask = true;
    api.enums = {
        {"normalization", attnpool::kNormalizationCount, set_normalization},
        {"empty_rows", 2, set_empty_rows}};
    api.setup = [](A& a, const Sizes&) {
      a.normalization = Normalization::softmax;
    };
    api.run = [](const A& a) {
      attnpool::normalize(a.normalization, a.views[0], a.mask, a.empty_rows,
                          a.execution);
    };
    api.verify = [](const A& before, const A& after) {
      const ConstMatrixView<T> values = before.views[0];
      return CompareNormalized<T>(before.normalization, false,
                                  before.empty_rows, before.mask, Dense(values),
                                  values.rows, values.cols, after.views[0], 0);
    };
    apis.push_back(api);
  }
  {
    Api<T> api;
    api.name = "weighted_sum";
    api.slots = {{"weights", kN, kM, Role::input},
                 {"values", kM, kDv, Role::input},
                 {"out", kN, kDv, Role::output}};
    api.setup = [](A&, const Sizes&) {};
    api.run = [](const A& a) {
      attnpool::weighted_sum(a.views[0], a.views[1], a.views[2], a.execution);
    };
    api.verify = [](const A& before, const A& after) {
      return VerifyWeightedSum<T>(before.views[0], before.views[1],
                                  after.views[2]);
    };
    apis.push_back(api);
  }
  const auto pool_setup = [](A& a, const Sizes&) {
    a.distance = Distance::sqeuclidean;
    a.kernel = {Kernel::gaussian, 1.5};
    a.normalization = Normalization::sum;
  };
  const std::vector<EnumArgument<T>> pool_enums = {
      {"spec.distance", attnpool::kDistanceCount, set_distance},
      {"kernel.kernel", attnpool::kKernelCount, set_kernel},
      {"normalization", attnpool::kNormalizationCount, set_normalization},
      {"empty_rows", 2, set_empty_rows}};
  // A pooling row: queries, keys, values and the n×dv output `out` (as its
  // errors name it), with the kernel, the mask and the spec's enums.
  const auto pool_row = [&](const char* name, const char* out) {
    Api<T> api;
    api.name = name;
    api.slots = {{"queries", kN, kD, Role::input},
                 {"keys", kM, kD, Role::input},
                 {"values", kM, kDv, Role::input},
                 {out, kN, kDv, Role::output}};
    api.uses_kernel = api.uses_mask = true;
    api.enums = pool_enums;
    api.setup = pool_setup;
    return api;
  };
  // The fused output (slot 3) against the staged pipeline.
  const auto verify_fused = [](const A& before, const A& after) {
    return VerifyFused<T>(before, after.views[3]);
  };
  {
    Api<T> api = pool_row("attention_pool_staged", "out");
    api.slots.push_back({"weights", kN, kM, Role::output});
    api.run = [](const A& a) {
      attnpool::attention_pool_staged(a.spec(), a.views[0], a.views[1],
                                      a.views[2], a.views[3], a.views[4],
                                      a.mask, a.execution);
    };
    api.verify = [](const A& before, const A& after) {
      return VerifyPipeline<T>(before.spec(), before.mask, before.views[0],
                               before.views[1], before.views[2], after.views[3],
                               after.views[4]);
    };
    apis.push_back(api);
  }
  {
    Api<T> api = pool_row("attention_pool_staged/workspace", "out");
    api.products = {{{kN, kM}, "queries"}};
    api.run = [](const A& a) {
      attnpool::attention_pool_staged(a.spec(), a.views[0], a.views[1],
                                      a.views[2], a.views[3], a.mask,
                                      a.execution);
    };
    // The same call with caller-supplied weights must give the same bits;
    // those weights and that output are then checked as above.
    api.verify = [](const A& before, const A& after) {
      const size_t n = before.views[0].rows, m = before.views[1].rows;
      const size_t dv = before.views[2].cols;
      std::vector<T> weights(std::max<size_t>(1, n * m)), out(n * dv + 1);
      const MatrixView<T> w(weights.data(), n, m), o(out.data(), n, dv);
      attnpool::attention_pool_staged(before.spec(), before.views[0],
                                      before.views[1], before.views[2], o, w,
                                      before.mask, before.execution);
      if (!SameBits<T>(o, after.views[3])) {
        return std::string("differs from the call with weights");
      }
      return VerifyPipeline<T>(before.spec(), before.mask, before.views[0],
                               before.views[1], before.views[2], o, w);
    };
    apis.push_back(api);
  }
  {
    Api<T> api = pool_row("attention_pool", "out");
    api.run = [](const A& a) {
      attnpool::attention_pool(a.spec(), a.views[0], a.views[1], a.views[2],
                               a.views[3], a.mask, a.execution);
    };
    api.verify = verify_fused;
    apis.push_back(api);
  }
  {
    // The shard API as one call's arguments see it: every key in one shard
    // whose partial state is the caller's `partial.accumulator` (max, sum
    // and best in scratch), merged with an empty later shard and finished in
    // place. Merging non-trivial shards is tests/test_fused.cc's.
    Api<T> api = pool_row("attention_pool_partial", "partial.accumulator");
    api.lengths_beyond_keys = true;
    api.run = [](const A& a) {
      const MatrixView<T> accumulator = a.views[3];
      // Hostile sizes (n = 2⁶²) must be rejected before anything is
      // written: the scratch is sized for every valid call of the tests.
      const size_t n = std::min<size_t>(accumulator.rows, 1 << 16);
      const size_t dv = std::min<size_t>(accumulator.cols, 1 << 12);
      std::vector<T> scratch(4 * n + 1);
      std::vector<size_t> best(2 * n + 1);
      const attnpool::PoolPartial<T> all{accumulator, scratch.data(),
                                         scratch.data() + n, best.data()};
      attnpool::attention_pool_partial(a.spec(), a.views[0], a.views[1],
                                       a.views[2], 0, all, a.mask, a.execution);
      // A later shard without keys, in the state pool.h documents for it:
      // max −inf, sum 0, accumulator 0.
      std::vector<T> empty_accumulator(n * dv + 1, T(0));
      std::fill(scratch.begin() + 2 * n, scratch.begin() + 3 * n,
                -std::numeric_limits<T>::infinity());
      const attnpool::PoolPartial<T> empty{{empty_accumulator.data(), n, dv},
                                           scratch.data() + 2 * n,
                                           scratch.data() + 3 * n,
                                           best.data() + n};
      attnpool::attention_pool_merge(a.spec(), all, empty);
      attnpool::attention_pool_finish(a.spec(), all, accumulator);
    };
    api.verify = verify_fused;
    apis.push_back(api);
  }
  return apis;
}

}  // namespace

template <typename T>
const std::vector<Api<T>>& Apis() {
  static const std::vector<Api<T>> apis = MakeApis<T>();
  return apis;
}

template const std::vector<Api<float>>& Apis<float>();
template const std::vector<Api<double>>& Apis<double>();

// ------------------------------------------------------------- workspace

template <typename T>
Workspace<T>::Workspace(const Api<T>& api, const Sizes& sizes,
                        const Layout& layout)
    : api_(api), sizes_(sizes), layout_(layout) {
  std::vector<std::pair<size_t, size_t>> shapes;
  for (const SlotSpec& slot : api.slots) {
    shapes.emplace_back(sizes[slot.rows], sizes[slot.cols]);
  }
  if (api.uses_mask) shapes.emplace_back(sizes[kN], sizes[kM]);  // bias
  const bool huge = layout.huge_stride != 0;
  size_t largest = 0;
  for (const auto& shape : shapes) {
    const size_t stride =
        huge ? layout.huge_stride : shape.second + layout.padding;
    largest = std::max(largest, (shape.first + 1) * (stride + 1));
  }
  // Guards: as large as any view plus one row, so that a view moved onto
  // another's storage (the overlap tests) stays inside the arena.
  const size_t guard = layout.guard != 0 ? layout.guard
                       : huge            ? 64
                                         : largest + 16;
  size_t next = guard;
  for (const auto& shape : shapes) {
    Region region;
    region.rows = shape.first;
    region.cols = shape.second;
    region.stride = huge ? layout.huge_stride : shape.second + layout.padding;
    region.begin = next + layout.offset;
    const size_t extent =
        region.rows == 0 ? 0 : (region.rows - 1) * region.stride + region.cols;
    next = region.begin + extent + guard;
    regions_.push_back(region);
  }
  arena_elements_ = next;
  arena_bytes_ = arena_elements_ * sizeof(T);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  if (huge) {
    void* memory = mmap(nullptr, arena_bytes_, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) throw std::bad_alloc();
    arena_ = static_cast<T*>(memory);
    mapped_ = true;
    for (const Region& region : regions_) {
      for (size_t r = 0; r < region.rows; ++r) {
        T* row = arena_ + region.begin + r * region.stride;
        std::fill(row, row + region.cols, nan);
      }
    }
  } else {
    arena_ = static_cast<T*>(
        ::operator new(arena_bytes_ + 64, std::align_val_t(64)));
    std::fill(arena_, arena_ + arena_elements_, nan);
  }
  for (size_t s = 0; s < api.slots.size(); ++s) {
    const Region& region = regions_[s];
    slots_.emplace_back(arena_ + region.begin, region.rows, region.cols,
                        region.stride);
  }
  const size_t n = sizes[kN], m = sizes[kM];
  visible_.assign(n * (m + 1) + 16, 1);
  valid_lengths_.assign(n + 1, m);
  args.views = slots_;
  api.setup(args, sizes);
}

template <typename T>
Workspace<T>::~Workspace() {
  if (mapped_) {
    munmap(arena_, arena_bytes_);
  } else {
    ::operator delete(arena_, std::align_val_t(64));
  }
}

template <typename T>
MatrixView<T> Workspace<T>::bias() {
  if (!api_.uses_mask) throw std::logic_error("no mask storage");
  const Region& region = regions_.back();
  return {arena_ + region.begin, region.rows, region.cols, region.stride};
}

template <typename T>
MatrixView<uint8_t> Workspace<T>::visible() {
  return {visible_.data(), sizes_[kN], sizes_[kM], sizes_[kM] + 1};
}

template <typename T>
size_t* Workspace<T>::valid_lengths() {
  return valid_lengths_.data();
}

template <typename T>
void Workspace<T>::FillRandom(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> exponent(-1, 1);
  const auto fill = [&](MatrixView<T> view, bool non_negative) {
    for (size_t r = 0; r < view.rows; ++r) {
      const double scale = std::pow(10.0, exponent(rng));
      for (size_t c = 0; c < view.cols; ++c) {
        const double x = normal(rng) * scale;
        view(r, c) = static_cast<T>(non_negative ? std::fabs(x) : x);
      }
    }
  };
  for (size_t s = 0; s < api_.slots.size(); ++s) {
    if (api_.slots[s].role != Role::output) {
      fill(slots_[s], api_.slots[s].role == Role::in_place);
    }
  }
  if (api_.uses_mask) {
    std::uniform_real_distribution<double> bias_value(-3, 3);
    const MatrixView<T> b = bias();
    for (size_t r = 0; r < b.rows; ++r) {
      for (size_t c = 0; c < b.cols; ++c) b(r, c) = T(bias_value(rng));
    }
    const MatrixView<uint8_t> v = visible();
    for (size_t r = 0; r < v.rows; ++r) {
      for (size_t c = 0; c < v.cols; ++c) v(r, c) = rng() % 4 != 0;
    }
    for (size_t i = 0; i < sizes_[kN]; ++i) {
      valid_lengths_[i] = rng() % (sizes_[kM] + 1);
    }
  }
}

template <typename T>
T* Workspace<T>::Rebase(const T* pointer, const Workspace& from) const {
  if (pointer >= from.arena_ && pointer < from.arena_ + from.arena_elements_) {
    return arena_ + (pointer - from.arena_);
  }
  return const_cast<T*>(pointer);
}

template <typename T>
std::unique_ptr<Workspace<T>> Workspace<T>::Clone() const {
  auto copy = std::make_unique<Workspace<T>>(api_, sizes_, layout_);
  if (mapped_) {
    for (const Region& region : regions_) {
      for (size_t r = 0; r < region.rows; ++r) {
        const size_t begin = region.begin + r * region.stride;
        std::copy(arena_ + begin, arena_ + begin + region.cols,
                  copy->arena_ + begin);
      }
    }
  } else {
    std::copy(arena_, arena_ + arena_elements_, copy->arena_);
  }
  copy->visible_ = visible_;
  copy->valid_lengths_ = valid_lengths_;
  copy->args = args;
  for (auto& view : copy->args.views)
    view.data = copy->Rebase(view.data, *this);
  auto& mask = copy->args.mask;
  mask.bias.data = copy->Rebase(mask.bias.data, *this);
  if (mask.visible.data >= visible_.data() &&
      mask.visible.data < visible_.data() + visible_.size()) {
    mask.visible.data =
        copy->visible_.data() + (mask.visible.data - visible_.data());
  }
  if (mask.valid_lengths >= valid_lengths_.data() &&
      mask.valid_lengths < valid_lengths_.data() + valid_lengths_.size()) {
    mask.valid_lengths = copy->valid_lengths_.data() +
                         (mask.valid_lengths - valid_lengths_.data());
  }
  return copy;
}

template <typename T>
std::vector<unsigned char> Workspace<T>::Snapshot() const {
  if (mapped_) throw std::logic_error("Snapshot of a huge layout");
  std::vector<unsigned char> bytes(arena_bytes_ + visible_.size() +
                                   valid_lengths_.size() * sizeof(size_t));
  unsigned char* next = bytes.data();
  std::memcpy(next, arena_, arena_bytes_);
  next += arena_bytes_;
  std::memcpy(next, visible_.data(), visible_.size());
  next += visible_.size();
  std::memcpy(next, valid_lengths_.data(),
              valid_lengths_.size() * sizeof(size_t));
  return bytes;
}

template <typename T>
bool Workspace<T>::Untouched(const std::vector<unsigned char>& snapshot) const {
  const std::vector<unsigned char> now = Snapshot();
  if (now.size() != snapshot.size()) return false;
  std::vector<char> written(arena_elements_, 0);
  for (size_t s = 0; s < api_.slots.size(); ++s) {
    if (api_.slots[s].role == Role::input) continue;
    const MatrixView<T>& view = args.views[s];
    if (view.data < arena_ || view.data >= arena_ + arena_elements_) continue;
    const size_t begin = static_cast<size_t>(view.data - arena_);
    for (size_t r = 0; r < view.rows; ++r) {
      for (size_t c = 0; c < view.cols; ++c) {
        written[begin + r * view.stride + c] = 1;
      }
    }
  }
  for (size_t e = 0; e < arena_elements_; ++e) {
    if (!written[e] && std::memcmp(&now[e * sizeof(T)],
                                   &snapshot[e * sizeof(T)], sizeof(T)) != 0) {
      return false;
    }
  }
  return std::memcmp(now.data() + arena_bytes_, snapshot.data() + arena_bytes_,
                     now.size() - arena_bytes_) == 0;
}

template class Workspace<float>;
template class Workspace<double>;

template <typename T>
bool SameBits(ConstMatrixView<T> a, ConstMatrixView<T> b) {
  if (a.rows != b.rows || a.cols != b.cols) return false;
  for (size_t r = 0; r < a.rows; ++r) {
    if (a.cols != 0 &&
        std::memcmp(a.row(r), b.row(r), a.cols * sizeof(T)) != 0) {
      return false;
    }
  }
  return true;
}

template bool SameBits<float>(ConstMatrixView<float>, ConstMatrixView<float>);
template bool SameBits<double>(ConstMatrixView<double>,
                               ConstMatrixView<double>);

template <typename T>
std::vector<unsigned char> OutputBytes(const Api<T>& api, const Args<T>& args) {
  std::vector<unsigned char> bytes;
  for (size_t s = 0; s < api.slots.size(); ++s) {
    if (api.slots[s].role == Role::input) continue;
    const MatrixView<T>& view = args.views[s];
    for (size_t r = 0; r < view.rows; ++r) {
      const auto* row = reinterpret_cast<const unsigned char*>(view.row(r));
      bytes.insert(bytes.end(), row, row + view.cols * sizeof(T));
    }
  }
  return bytes;
}

template std::vector<unsigned char> OutputBytes(const Api<float>&,
                                                const Args<float>&);
template std::vector<unsigned char> OutputBytes(const Api<double>&,
                                                const Args<double>&);

template struct Api<float>;
template struct Api<double>;

}  // namespace attnpool_test
