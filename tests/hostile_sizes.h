// Bad-input cases over the API table shared by the hostile test
// (test_hostile.cc) and the fuzzer (tests/fuzz/fuzz_api.cc): a case plants
// one bad argument into a valid call's workspace, and names the arguments
// its error may give. Here the sizes past what any call can address.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tests/api_table.h"

namespace attnpool_test {

template <typename T>
struct HostileCase {
  std::string what;                   // printed on failure
  std::vector<std::string> accepted;  // argument names the error may give
  std::function<void(Workspace<T>&)> mutate;  // plants the bad argument
  // What runs; empty: the row's function with the mutated arguments.
  std::function<void(const Api<T>&, const Args<T>&)> call;
};

template <typename T>
using Cases = std::vector<HostileCase<T>>;

// Sets dimension `rows ? rows : cols` of a view, keeping stride ≥ cols.
template <typename V>
void Resize(V& view, bool rows, size_t size) {
  if (rows) {
    view.rows = size;
  } else {
    view.cols = size;
    view.stride = std::max(view.stride, size);
  }
}

inline std::vector<Dim> AllDims() { return {kN, kM, kD, kDv}; }

template <typename T>
bool UsesDim(const Api<T>& api, Dim dim) {
  for (const SlotSpec& slot : api.slots) {
    if (slot.rows == dim || slot.cols == dim) return true;
  }
  return false;
}

// Sizes of 2^62, 2^63 and SIZE_MAX for each size symbol, and pairs of
// symbols whose product overflows while each fits.
template <typename T>
Cases<T> SizeOverflow(const Api<T>& api, Workspace<T>&) {
  Cases<T> cases;
  // The argument names an overflow of these symbols may give: the views
  // that use them, and the row's own products.
  const auto names = [&api](std::vector<Dim> dims) {
    std::vector<std::string> accepted;
    for (const SlotSpec& slot : api.slots) {
      for (Dim dim : dims) {
        if (slot.rows == dim || slot.cols == dim) accepted.push_back(slot.name);
      }
    }
    for (const auto& product : api.products) {
      for (Dim dim : dims) {
        if (product.first.first == dim || product.first.second == dim) {
          accepted.push_back(product.second);
        }
      }
    }
    return accepted;
  };
  // Consistent shapes (no mismatch to catch first) with huge sizes: every
  // occurrence of the symbols changes together.
  const auto set = [&api](Workspace<T>& ws, std::vector<Dim> dims,
                          size_t size) {
    for (size_t s = 0; s < api.slots.size(); ++s) {
      for (Dim dim : dims) {
        if (api.slots[s].rows == dim) Resize(ws.args.views[s], true, size);
        if (api.slots[s].cols == dim) Resize(ws.args.views[s], false, size);
      }
    }
    for (Dim dim : dims) {
      if (dim == kD) ws.args.depth = size;
    }
  };
  const std::pair<size_t, const char*> huge_sizes[] = {
      {size_t{1} << 62, "2^62"},
      {size_t{1} << 63, "2^63"},
      {std::numeric_limits<size_t>::max(), "SIZE_MAX"}};
  for (Dim dim : AllDims()) {
    if (!UsesDim(api, dim)) continue;
    for (const auto& [huge, text] : huge_sizes) {
      cases.push_back({std::string(DimName(dim)) + " = " + text, names({dim}),
                       [set, dim, huge = huge](Workspace<T>& ws) {
                         set(ws, {dim}, huge);
                       }});
    }
  }
  // Pairs whose product overflows while each size alone fits: every
  // matrix's two symbols, and the row's own products.
  std::vector<std::pair<Dim, Dim>> pairs;
  for (const SlotSpec& slot : api.slots) {
    if (slot.rows != slot.cols) pairs.emplace_back(slot.rows, slot.cols);
  }
  for (const auto& product : api.products) pairs.push_back(product.first);
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  const size_t half = (size_t{1} << 32) + 1;
  for (const auto& pair : pairs) {
    const std::vector<Dim> dims = {pair.first, pair.second};
    cases.push_back({std::string(DimName(pair.first)) + " = " +
                         DimName(pair.second) + " = 2^32 + 1",
                     names(dims), [set, dims, half](Workspace<T>& ws) {
                       set(ws, dims, half);
                     }});
  }
  return cases;
}

}  // namespace attnpool_test
