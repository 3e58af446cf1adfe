// Hostile inputs (docs/design.md §5): every public function of the API table
// (tests/api_table.h) × every class of invalid argument. Each case must
// throw attnpool::Error naming the argument before anything is written: the
// whole workspace — outputs full of canaries, inputs, padding, guards, mask
// arrays — stays bitwise the same, and so does the active target. The cases
// are generated from each row's description (its matrices and their size
// symbols, enums, kernel, mask), so a new row gets every applicable class
// with no edit here; the count per function and class is printed.
#include <attnpool/attnpool.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "tests/api_table.h"
#include "tests/hostile_sizes.h"
#include "tests/layer_table.h"

namespace attnpool_test {
namespace {

using attnpool::Distance;
using attnpool::Kernel;
using attnpool::MatrixView;
using attnpool::Normalization;

constexpr uint64_t kHostileSeed = 77;

template <typename T>
const char* TypeName() {
  return sizeof(T) == 4 ? "float" : "double";
}

// The places a size symbol occurs: slot dimensions, and the mask's matrices
// (rows n, cols m) for rows that take a mask.
struct Occurrence {
  std::string name;  // "keys.cols", "mask.bias.rows"
  int slot;          // -1: mask.bias, -2: mask.visible
  bool rows;
};

template <typename T>
std::vector<Occurrence> Occurrences(const Api<T>& api, Dim dim,
                                    bool with_mask) {
  std::vector<Occurrence> found;
  for (size_t s = 0; s < api.slots.size(); ++s) {
    const SlotSpec& slot = api.slots[s];
    if (slot.rows == dim) {
      found.push_back({std::string(slot.name) + ".rows", int(s), true});
    }
    if (slot.cols == dim) {
      found.push_back({std::string(slot.name) + ".cols", int(s), false});
    }
  }
  if (with_mask && (dim == kN || dim == kM)) {
    const bool rows = dim == kN;
    const char* part = rows ? ".rows" : ".cols";
    found.push_back({std::string("mask.bias") + part, -1, rows});
    found.push_back({std::string("mask.visible") + part, -2, rows});
  }
  return found;
}

template <typename T>
void ResizeOccurrence(Workspace<T>& ws, const Occurrence& at, size_t size) {
  if (at.slot >= 0) return Resize(ws.args.views[at.slot], at.rows, size);
  if (at.slot == -1) return Resize(ws.args.mask.bias, at.rows, size);
  Resize(ws.args.mask.visible, at.rows, size);
}

// ---------------------------------------------------------------- classes

template <typename T>
Cases<T> NullData(const Api<T>& api, Workspace<T>& base) {
  Cases<T> cases;
  for (size_t s = 0; s < api.slots.size(); ++s) {
    const auto view = base.slot(s);
    if (view.rows * view.cols == 0) continue;
    const std::string name = api.slots[s].name;
    cases.push_back({name + " null", {name + ".data"}, [s](Workspace<T>& ws) {
                       ws.args.views[s].data = nullptr;
                     }});
  }
  if (api.uses_mask) {
    cases.push_back(
        {"mask.bias null", {"mask.bias.data"}, [](Workspace<T>& ws) {
           ws.UseBias();
           ws.args.mask.bias.data = nullptr;
         }});
    cases.push_back(
        {"mask.visible null", {"mask.visible.data"}, [](Workspace<T>& ws) {
           ws.UseVisible();
           ws.args.mask.visible.data = nullptr;
         }});
  }
  return cases;
}

template <typename T>
Cases<T> ShapeMismatch(const Api<T>& api, Workspace<T>& base) {
  Cases<T> cases;
  for (Dim dim : AllDims()) {
    const auto all = Occurrences(api, dim, api.uses_mask);
    if (all.size() < 2) continue;
    std::vector<std::string> accepted;
    for (const Occurrence& at : all) accepted.push_back(at.name);
    const size_t size = base.sizes()[dim];
    for (const Occurrence& at : all) {
      for (int delta : {+1, -1}) {
        if (delta < 0 && size == 0) continue;
        const size_t wrong = size + delta;
        cases.push_back(
            {at.name + " = " + std::to_string(wrong) + " (" + DimName(dim) +
                 " = " + std::to_string(size) + ")",
             accepted, [at, wrong, &api](Workspace<T>& ws) {
               if (api.uses_mask) {  // the mask's shapes must agree too
                 ws.UseBias();
                 ws.UseVisible();
               }
               ResizeOccurrence(ws, at, wrong);
             }});
      }
    }
  }
  return cases;
}

template <typename T>
Cases<T> StrideBelowCols(const Api<T>& api, Workspace<T>& base) {
  Cases<T> cases;
  for (size_t s = 0; s < api.slots.size(); ++s) {
    if (base.slot(s).cols == 0) continue;
    const std::string name = api.slots[s].name;
    cases.push_back({name + ".stride = cols - 1",
                     {name + ".stride"},
                     [s](Workspace<T>& ws) {
                       auto& view = ws.args.views[s];
                       view.stride = view.cols - 1;
                     }});
  }
  if (api.uses_mask) {
    cases.push_back({"mask.bias.stride = cols - 1",
                     {"mask.bias.stride"},
                     [](Workspace<T>& ws) {
                       ws.UseBias();
                       ws.args.mask.bias.stride = ws.args.mask.bias.cols - 1;
                     }});
    cases.push_back({"mask.visible.stride = cols - 1",
                     {"mask.visible.stride"},
                     [](Workspace<T>& ws) {
                       ws.UseVisible();
                       auto& visible = ws.args.mask.visible;
                       visible.stride = visible.cols - 1;
                     }});
  }
  return cases;
}

template <typename T>
Cases<T> Bandwidth(const Api<T>& api, Workspace<T>&) {
  Cases<T> cases;
  if (!api.uses_kernel) return cases;
  std::vector<double> bad = {0.0,
                             -0.0,
                             -1.0,
                             std::nan(""),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             double(std::numeric_limits<T>::min()) / 4};
  if (sizeof(T) == 4) bad.push_back(1e39);  // finite, beyond float
  for (const attnpool::KernelProperties& properties : attnpool::kKernels) {
    if (!attnpool::needs_distance(properties.kernel)) continue;
    const Kernel kernel = properties.kernel;
    for (double h : bad) {
      std::ostringstream what;
      what << attnpool::kernel_name(kernel) << " bandwidth " << h;
      cases.push_back(
          {what.str(), {"kernel.bandwidth"}, [kernel, h](Workspace<T>& ws) {
             ws.args.distance = Distance::sqeuclidean;
             ws.args.kernel = {kernel, h};
           }});
    }
  }
  return cases;
}

template <typename T>
Cases<T> Scale(const Api<T>& api, Workspace<T>&) {
  Cases<T> cases;
  if (!api.uses_kernel) return cases;
  for (double scale : {std::nan(""), std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity()}) {
    std::ostringstream what;
    what << "exp scale " << scale;
    cases.push_back({what.str(), {"kernel.scale"}, [scale](Workspace<T>& ws) {
                       ws.args.kernel = {Kernel::exp, 1.0, scale};
                     }});
  }
  // No scale and d = 0: the default 1/√d is undefined.
  cases.push_back(
      {"exp without scale, d = 0", {"kernel.scale"}, [&api](Workspace<T>& ws) {
         ws.args.kernel = {Kernel::exp};
         ws.args.depth = 0;
         for (size_t s = 0; s < api.slots.size(); ++s) {
           if (api.slots[s].cols == kD) ws.args.views[s].cols = 0;
         }
       }});
  return cases;
}

template <typename T>
Cases<T> Overlap(const Api<T>& api, Workspace<T>& base) {
  Cases<T> cases;
  for (size_t o = 0; o < api.slots.size(); ++o) {
    if (api.slots[o].role == Role::input) continue;
    const std::string out = api.slots[o].name;
    for (size_t s = 0; s < api.slots.size(); ++s) {
      if (s == o) continue;
      const std::string other = api.slots[s].name;
      const auto view = base.slot(s);
      const size_t last = (view.rows - 1) * view.stride + view.cols - 1;
      cases.push_back({out + " at the start of " + other,
                       {out, other},
                       [o, s](Workspace<T>& ws) {
                         ws.args.views[o].data = ws.slot(s).data;
                       }});
      cases.push_back({out + " from the last element of " + other,
                       {out, other},
                       [o, s, last](Workspace<T>& ws) {
                         ws.args.views[o].data = ws.slot(s).data + last;
                       }});
    }
    if (!api.uses_mask) continue;
    cases.push_back(
        {"mask.bias on " + out, {out, "mask.bias"}, [o](Workspace<T>& ws) {
           ws.UseBias();
           ws.args.mask.bias.data = ws.slot(o).data;
         }});
    cases.push_back({"mask.visible on " + out,
                     {out, "mask.visible"},
                     [o](Workspace<T>& ws) {
                       ws.UseVisible();
                       ws.args.mask.visible.data =
                           reinterpret_cast<const uint8_t*>(ws.slot(o).data);
                     }});
    cases.push_back({"mask.valid_lengths on " + out,
                     {out, "mask.valid_lengths"},
                     [o](Workspace<T>& ws) {
                       // The first size_t-aligned address inside the output.
                       const auto address =
                           reinterpret_cast<uintptr_t>(ws.slot(o).data);
                       const uintptr_t align = alignof(size_t);
                       ws.args.mask.valid_lengths =
                           reinterpret_cast<const size_t*>(
                               (address + align - 1) / align * align);
                     }});
  }
  return cases;
}

template <typename T>
Cases<T> EnumRange(const Api<T>& api, Workspace<T>&) {
  Cases<T> cases;
  for (const EnumArgument<T>& argument : api.enums) {
    for (int value :
         {-1, argument.count, argument.count + 1, 1000, INT_MIN, INT_MAX}) {
      const auto set = argument.set;
      cases.push_back(
          {std::string(argument.name) + " = " + std::to_string(value),
           {argument.name},
           [set, value](Workspace<T>& ws) { set(ws.args, value); }});
    }
  }
  return cases;
}

template <typename T>
Cases<T> ValidLengths(const Api<T>& api, Workspace<T>& base) {
  Cases<T> cases;
  if (!api.uses_mask || api.lengths_beyond_keys) return cases;
  const size_t n = base.sizes()[kN], m = base.sizes()[kM];
  for (size_t entry : {size_t{0}, n - 1}) {
    for (size_t length : {m + 1, std::numeric_limits<size_t>::max()}) {
      cases.push_back({"valid_lengths[" + std::to_string(entry) +
                           "] = " + std::to_string(length),
                       {"mask.valid_lengths"},
                       [entry, length, n, m](Workspace<T>& ws) {
                         ws.UseValidLengths();
                         for (size_t i = 0; i < n; ++i) {
                           ws.valid_lengths()[i] = i % (m + 1);
                         }
                         ws.valid_lengths()[entry] = length;
                       }});
    }
  }
  return cases;
}

template <typename T>
Cases<T> InvalidCombination(const Api<T>& api, Workspace<T>&) {
  Cases<T> cases;
  if (api.uses_kernel) {  // a distance kernel on a similarity
    for (const attnpool::KernelProperties& properties : attnpool::kKernels) {
      if (!attnpool::needs_distance(properties.kernel)) continue;
      const Kernel kernel = properties.kernel;
      for (const attnpool::DistanceProperties& distance :
           attnpool::kDistances) {
        if (!attnpool::is_similarity(distance.distance)) continue;
        const Distance similarity = distance.distance;
        cases.push_back({std::string(attnpool::kernel_name(kernel)) + " on " +
                             attnpool::distance_name(similarity),
                         {"kernel.kernel"},
                         [kernel, similarity](Workspace<T>& ws) {
                           ws.args.kernel = {kernel, 1.5};
                           ws.args.distance = similarity;
                         }});
      }
    }
  }
  if (api.uses_mask) {  // a bias on weights that are not scores
    for (Normalization normalization :
         {Normalization::none, Normalization::sum}) {
      const bool kernel = api.uses_kernel;
      cases.push_back({std::string("bias with ") +
                           attnpool::normalization_name(normalization) +
                           (kernel ? " of boxcar weights" : ""),
                       {"mask.bias"},
                       [normalization, kernel](Workspace<T>& ws) {
                         if (kernel) {
                           ws.args.kernel = {Kernel::boxcar, 1.5};
                           ws.args.distance = Distance::euclidean;
                         }
                         ws.args.normalization = normalization;
                         ws.UseBias();
                       }});
    }
  }
  return cases;
}

template <typename T>
Cases<T> NegativeThreads(const Api<T>&, Workspace<T>&) {
  Cases<T> cases;
  for (int threads : {-1, -1000, INT_MIN}) {
    cases.push_back(
        {"execution.threads = " + std::to_string(threads),
         {"execution.threads"},
         [threads](Workspace<T>& ws) { ws.args.execution.threads = threads; }});
  }
  return cases;
}

// Targets that force_target must refuse here: unknown names, the other
// architecture's, and compiled ones this CPU lacks.
std::vector<std::string> UnsupportedTargets() {
  std::vector<std::string> names = {"AVX4", "bogus", "", "avx2 ", "EMU256"};
#if defined(__x86_64__) || defined(__i386__)
  names.insert(names.end(), {"NEON", "SVE", "SVE2"});
#else
  names.insert(names.end(), {"AVX2", "AVX3", "SSE4"});
#endif
  const auto supported = attnpool::supported_targets();
  for (const std::string& name : attnpool::compiled_targets()) {
    if (std::find(supported.begin(), supported.end(), name) ==
        supported.end()) {
      names.push_back(name);
    }
  }
  return names;
}

template <typename T>
Cases<T> ForcedIsa(const Api<T>&, Workspace<T>&) {
  Cases<T> cases;
  for (const std::string& name : UnsupportedTargets()) {
    cases.push_back({"force_target(\"" + name + "\")",
                     {"target"},
                     [](Workspace<T>&) {},
                     [name](const Api<T>& api, const Args<T>& args) {
                       attnpool::force_target(name);
                       api.run(args);
                     }});
  }
  return cases;
}

template <typename T>
struct HostileClass {
  const char* name;
  Cases<T> (*cases)(const Api<T>& api, Workspace<T>& base);
};

template <typename T>
std::vector<HostileClass<T>> Classes() {
  return {{"null data", NullData<T>},
          {"shape mismatch", ShapeMismatch<T>},
          {"stride < cols", StrideBelowCols<T>},
          {"bandwidth", Bandwidth<T>},
          {"scale", Scale<T>},
          {"overlap", Overlap<T>},
          {"size overflow", SizeOverflow<T>},
          {"enum range", EnumRange<T>},
          {"valid lengths", ValidLengths<T>},
          {"invalid combination", InvalidCombination<T>},
          {"threads", NegativeThreads<T>},
          {"forced ISA", ForcedIsa<T>}};
}

using Counts = std::map<std::string, std::map<std::string, int>>;

// Runs `call` and requires an attnpool::Error naming one of `accepted`, with
// the workspace and the active target unchanged.
// (`check_target` false: with a bad ATTNPOOL_ISA, active_target() throws
// too.)
template <typename T>
void RequireRejected(Workspace<T>& ws, const std::vector<std::string>& accepted,
                     const std::function<void()>& call,
                     bool check_target = true) {
  const auto before = ws.Snapshot();
  const std::string active = check_target ? attnpool::active_target() : "";
  bool threw = false;
  std::string argument, message;
  try {
    call();
  } catch (const attnpool::Error& error) {
    threw = true;
    argument = error.argument();
    message = error.what();
  }
  INFO("error: " << (threw ? message : std::string("none")));
  REQUIRE(threw);
  REQUIRE(std::find(accepted.begin(), accepted.end(), argument) !=
          accepted.end());
  REQUIRE(message.find(argument) != std::string::npos);
  REQUIRE(ws.Snapshot() == before);  // canaries, inputs, padding untouched
  if (check_target) REQUIRE(attnpool::active_target() == active);
}

template <typename T>
void RunTable(Counts& counts) {
  const Sizes sizes;  // n = 3, m = 4, d = 2, dv = 5: all different
  for (const Api<T>& api : Apis<T>()) {
    {  // The base call is valid: the cases below fail for their one change.
      Workspace<T> ws(api, sizes);
      ws.FillRandom(kHostileSeed);
      const auto before = ws.Clone();
      INFO(api.name << " (" << TypeName<T>() << ") base call");
      api.run(ws.args);
      REQUIRE(api.verify(before->args, ws.args) == "");
    }
    for (const HostileClass<T>& hostile : Classes<T>()) {
      Workspace<T> probe(api, sizes);
      auto& count = counts[api.name][hostile.name];
      for (const HostileCase<T>& c : hostile.cases(api, probe)) {
        Workspace<T> ws(api, sizes);
        ws.FillRandom(kHostileSeed);
        c.mutate(ws);
        std::string accepted;
        for (const auto& name : c.accepted) accepted += " " + name;
        INFO(api.name << " (" << TypeName<T>() << ") / " << hostile.name
                      << " / " << c.what << "; accepted:" << accepted);
        RequireRejected(ws, c.accepted, [&] {
          if (c.call) {
            c.call(api, ws.args);
          } else {
            api.run(ws.args);
          }
        });
        ++count;
      }
    }
  }
}

void PrintCounts(const std::string& title, const Counts& counts) {
  std::vector<std::string> classes;
  for (const auto& row : counts) {
    for (const auto& cell : row.second) {
      if (std::find(classes.begin(), classes.end(), cell.first) ==
          classes.end()) {
        classes.push_back(cell.first);
      }
    }
  }
  int total = 0;
  std::ostringstream table;
  table << std::left << std::setw(36) << "function";
  for (const auto& name : classes) table << " | " << name;
  table << " | all\n";
  for (const auto& row : counts) {
    int sum = 0;
    table << std::left << std::setw(36) << row.first;
    for (const auto& name : classes) {
      const auto cell = row.second.find(name);
      const int count = cell == row.second.end() ? 0 : cell->second;
      sum += count;
      table << " | " << std::right << std::setw(int(name.size()))
            << (count ? std::to_string(count) : "-");
    }
    table << " | " << sum << "\n";
    total += sum;
  }
  std::cout << title << ": " << total
            << " cases (float and double), each rejected naming its "
               "argument with every output canary untouched\n"
            << table.str() << std::flush;
}

// ---------------------------------------------------------------- layers

// The values a mask field's check column refuses (mask_fields.h).
std::vector<double> Refused(attnpool::MaskCheck check) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  switch (check) {
    case attnpool::MaskCheck::any:
      return {};
    case attnpool::MaskCheck::positive:
      return {0};
    case attnpool::MaskCheck::span:
      return {0, 0x1p63};
    case attnpool::MaskCheck::finite:
      return {kInf, -kInf, kNaN};
    case attnpool::MaskCheck::not_nan:
      return {kNaN};
    case attnpool::MaskCheck::cap:
      return {0, -1, kInf, kNaN};
  }
  return {};
}

// Every layer of the layer table from a valid call with every mask field it
// takes: each input and index array null, and the output over each; each
// refused value of each checked mask field, and the output over each array a
// field reads (from the field list: a new field reaches every layer); the
// per-query fields a packed layer does not take; a non-finite scale; a negative
// thread count. Each is rejected naming its argument, the output buffer
// (canaries included) untouched.
template <typename T>
void RunLayers(Counts& counts) {
  LayerOptions every;
  every.every_field = true;
  // An address in the output view (an element or two on) where any array
  // may be moved: aligned for size_t; the buffer's tail holds it.
  const auto in_output = [](LayerCall<T>& c) {
    auto* at = reinterpret_cast<unsigned char*>(c.out_view.data);
    while (reinterpret_cast<uintptr_t>(at) % alignof(size_t) != 0) {
      at += sizeof(T);
    }
    return at;
  };
  for (const Layer& layer : Layers()) {
    const uint64_t seed = kHostileSeed + (&layer - Layers().data());
    // The valid call every case below breaks one argument of.
    const auto base = MakeLayerCall<T>(layer, seed, every);
    {
      INFO(layer.name << " (" << TypeName<T>() << ") base call");
      base->Run();
      REQUIRE(base->OutputFinite());
    }
    const auto reject = [&](const std::string& hostile,
                            const std::string& argument,
                            const std::function<void(LayerCall<T>&)>& mutate) {
      const auto call = MakeLayerCall<T>(layer, seed, every);
      mutate(*call);
      INFO(layer.name << " (" << TypeName<T>() << ") / " << hostile
                      << "; expected: " << argument);
      const auto before = call->OutBytes();
      try {
        call->Run();
        FAIL("no error");
      } catch (const attnpool::Error& error) {
        INFO(error.what());
        REQUIRE(error.argument() == argument);
      }
      REQUIRE(call->OutBytes() == before);
      ++counts[layer.name][hostile];
    };
    const size_t inputs = base->Inputs().size();
    for (size_t k = 0; k < inputs; ++k) {
      const std::string name = base->Inputs()[k].first;
      reject("null data", name + ".data",
             [k](LayerCall<T>& c) { c.Inputs()[k].second->data = nullptr; });
      reject("overlap", "out", [k](LayerCall<T>& c) {
        c.Inputs()[k].second->data = c.out_view.data;
      });
    }
    const size_t heads = base->query_heads;
    attnpool::VisitMaskFields([&](auto field) {
      using Kind = typename decltype(field)::Kind;
      for (double value : Refused(field.check)) {
        std::vector<T> per_head(heads, T(0.5));
        per_head.back() = T(value);
        const std::string argument =
            std::string(field.heads_argument) +
            (std::is_same<Kind, attnpool::mask_kind::head_number>::value
                 ? "[" + std::to_string(heads - 1) + "]"
                 : "");
        reject("mask value", argument, [&](LayerCall<T>& c) {
          attnpool::VisitMask(c.mask, [&](auto f, auto& member) {
            if (std::string(f.name) != field.name) return;
            using Member = std::remove_reference_t<decltype(member)>;
            if constexpr (std::is_same<Member, std::optional<size_t>>::value) {
              member = size_t(value);
            } else if constexpr (std::is_same<Member,
                                              std::optional<T>>::value) {
              member = T(value);
            } else if constexpr (std::is_same<Member, const T*>::value) {
              member = per_head.data();
            } else {
              FAIL(f.name << ": no refused value for this kind of field");
            }
          });
        });
      }
      constexpr bool kPerQuery =
          std::is_same<Kind, attnpool::mask_kind::lengths>::value ||
          std::is_same<Kind, attnpool::mask_kind::matrix>::value ||
          std::is_same<Kind, attnpool::mask_kind::booleans>::value;
      // The output over the array a field reads (lengths and per-head
      // values copied there, valid; bias and visible over the canaries):
      // refused naming the output.
      if ((kPerQuery && layer.per_query_masks) ||
          std::is_same<Kind, attnpool::mask_kind::head_number>::value) {
        reject("overlap", "out", [&](LayerCall<T>& c) {
          unsigned char* at = in_output(c);
          attnpool::VisitMask(c.mask, [&](auto f, auto& member) {
            if (std::string(f.name) != field.name) return;
            using Member = std::remove_reference_t<decltype(member)>;
            if constexpr (std::is_same<Member, const size_t*>::value) {
              std::memcpy(at, c.valid_lengths.data(),
                          c.valid_lengths.size() * sizeof(size_t));
              member = reinterpret_cast<const size_t*>(at);
            } else if constexpr (std::is_same<Member, const T*>::value) {
              const std::vector<T> valid(heads, T(0.5));
              std::memcpy(at, valid.data(), heads * sizeof(T));
              member = reinterpret_cast<const T*>(at);
            } else if constexpr (std::is_same<Member, attnpool::TensorView<
                                                          const T>>::value) {
              member.data = reinterpret_cast<const T*>(at);
            } else if constexpr (std::is_same<Member,
                                              attnpool::TensorView<
                                                  const uint8_t>>::value) {
              member.data = at;
            } else {
              FAIL(f.name << ": no array to move into the output");
            }
          });
        });
      }
      // A packed layer's sequences have no common rows for these.
      if (!kPerQuery || layer.per_query_masks) return;
      static const size_t lengths[4] = {1, 1, 1, 1};
      static const T bias[1] = {T(0)};
      static const uint8_t visible[1] = {1};
      reject("packed mask", field.heads_argument, [&](LayerCall<T>& c) {
        attnpool::VisitMask(c.mask, [&](auto f, auto& member) {
          if (std::string(f.name) != field.name) return;
          using Member = std::remove_reference_t<decltype(member)>;
          if constexpr (std::is_same<Member, const size_t*>::value) {
            member = lengths;
          } else if constexpr (std::is_same<Member, attnpool::TensorView<
                                                        const T>>::value) {
            member = attnpool::dense_tensor(bias, 1, 1, 1, 1);
          } else if constexpr (std::is_same<Member,
                                            attnpool::TensorView<
                                                const uint8_t>>::value) {
            member = attnpool::dense_tensor(visible, 1, 1, 1, 1);
          }
        });
      });
    });
    // The index arrays of packed and paged calls: null, and moved onto the
    // output (their values copied there).
    for (size_t k = 0; k < base->index_arrays.size(); ++k) {
      reject("null data", base->index_arrays[k].name,
             [k](LayerCall<T>& c) { c.index_arrays[k].at = nullptr; });
      reject("overlap", "out", [k, &in_output](LayerCall<T>& c) {
        auto& array = c.index_arrays[k];
        unsigned char* at = in_output(c);
        std::memcpy(at, array.at, array.bytes);
        array.at = at;
      });
    }
    for (double scale : {std::numeric_limits<double>::quiet_NaN(),
                         std::numeric_limits<double>::infinity()}) {
      reject("scale", "scale", [scale](LayerCall<T>& c) { c.scale = scale; });
    }
    reject("threads", "execution.threads",
           [](LayerCall<T>& c) { c.execution.threads = -1; });
  }
}

TEST_CASE("hostile: every function and layer x every invalid-argument class",
          "[hostile][errors]") {
  attnpool::reset_target();
  Counts counts;
  RunTable<float>(counts);
  RunTable<double>(counts);
  RunLayers<float>(counts);
  RunLayers<double>(counts);
  PrintCounts("hostile inputs", counts);
}

// A view that ends right where another begins does not overlap it.
template <typename T>
void AdjacentViews() {
  const Sizes sizes;
  for (const Api<T>& api : Apis<T>()) {
    for (size_t o = 0; o < api.slots.size(); ++o) {
      if (api.slots[o].role == Role::input) continue;
      for (size_t s = 0; s < api.slots.size(); ++s) {
        if (s == o) continue;
        Workspace<T> ws(api, sizes);
        ws.FillRandom(kHostileSeed);
        const auto view = ws.slot(s);
        ws.args.views[o].data =
            view.data + (view.rows - 1) * view.stride + view.cols;
        INFO(api.name << ": " << api.slots[o].name << " right after "
                      << api.slots[s].name);
        REQUIRE_NOTHROW(api.run(ws.args));
      }
    }
  }
}

TEST_CASE("hostile: adjacent views are not overlapping", "[hostile][errors]") {
  AdjacentViews<float>();
  AdjacentViews<double>();
}

// With ATTNPOOL_ISA naming a target this process cannot run (ctest sets it:
// hostile.ATTNPOOL_ISA=…), every function's first and later calls throw
// naming ATTNPOOL_ISA, writing nothing. Without it the case has nothing to
// check.
template <typename T>
void EnvironmentIsa(Counts& counts) {
  const Sizes sizes;
  for (const Api<T>& api : Apis<T>()) {
    for (int repeat = 0; repeat < 2; ++repeat) {
      Workspace<T> ws(api, sizes);
      ws.FillRandom(kHostileSeed);
      INFO(api.name << " (" << TypeName<T>() << ")");
      RequireRejected(
          ws, {"ATTNPOOL_ISA"}, [&] { api.run(ws.args); }, false);
      ++counts[api.name]["ATTNPOOL_ISA"];
    }
  }
}

TEST_CASE("hostile: an unsupported ATTNPOOL_ISA rejects every call",
          "[hostile][errors]") {
  const char* isa = std::getenv("ATTNPOOL_ISA");
  if (isa == nullptr || *isa == '\0') {
    SUCCEED("ATTNPOOL_ISA not set");
    return;
  }
  Counts counts;
  EnvironmentIsa<float>(counts);
  EnvironmentIsa<double>(counts);
  PrintCounts(std::string("hostile ATTNPOOL_ISA=") + isa, counts);
}

}  // namespace
}  // namespace attnpool_test
