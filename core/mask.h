// What every mask field needs from the library, by its kind (the list of
// include/attnpool/mask_fields.h): whether it is given, its checks, the
// arrays it reads (for the overlap checks of outputs), and the cuts of a
// mask into one head's, into a block of rows, or past a number of keys.
// Target-independent.
#pragma once

#include <attnpool/error.h>
#include <attnpool/mask.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/validate.h"
#include "core/visible_run.h"

namespace attnpool {
namespace detail {

// Whether a field holds something: a pointer, a set optional, a view with
// data or a shape, a true flag (a position always counts as given).
template <typename U>
bool Given(const U* values) {
  return values != nullptr;
}
inline bool Given(bool flag) { return flag; }
inline bool Given(std::ptrdiff_t) { return true; }
template <typename U>
bool Given(const std::optional<U>& value) {
  return value.has_value();
}
template <typename U>
bool Given(const MatrixView<U>& view) {
  return view.data != nullptr || view.rows != 0 || view.cols != 0;
}
template <typename U>
bool Given(const TensorView<U>& view) {
  return view.data != nullptr;
}

// A given value of a field against the list's check column.
template <typename U>
void CheckMaskValue(const std::string& name, MaskCheck check, U value) {
  switch (check) {
    case MaskCheck::any:
      return;
    case MaskCheck::positive:
      if (!(value > U(0))) throw Error(name, "is 0 but must be positive");
      return;
    case MaskCheck::span:
      if (!(value > U(0) && value <= U(uint64_t{1} << 62))) {
        throw Error(name, "is " + ValueText(double(value)) +
                              " but must be in [1, 2^62]");
      }
      return;
    case MaskCheck::finite:
      if (!std::isfinite(value)) {
        throw Error(name, "is " + ValueText(value) + " but must be finite");
      }
      return;
    case MaskCheck::not_nan:
      if (std::isnan(value)) throw Error(name, "is NaN but must be a number");
      return;
    case MaskCheck::cap:
      if (!ValidSoftcap(value)) {
        throw Error(name, "is " + ValueText(value) +
                              " but must be finite, > 0 and have a finite "
                              "reciprocal");
      }
      return;
  }
}

// The arrays a checked mask reads, by the field's argument name.
using MaskArrays = std::vector<std::pair<std::string, ByteRange>>;

// What the call computes, for the fields' needs column.
struct MaskUse {
  bool scores = true;   // softmax, argmax, or an exponential kernel
  bool softmax = true;  // softmax, or sum of an exponential kernel
};

inline void CheckMaskNeeds(const std::string& name, MaskNeeds needs,
                           const MaskUse& use) {
  if (needs == MaskNeeds::scores && !use.scores) {
    throw Error(name,
                "needs scores: softmax or argmax, or an exponential kernel");
  }
  if (needs == MaskNeeds::softmax && !use.softmax) {
    throw Error(name,
                "joins a softmax: it needs softmax, or sum of an exponential "
                "kernel's weights");
  }
}

// Checks a Mask of `rows` queries over `cols` keys (valid lengths at most
// `length_limit`) for a call that computes `use`; returns the arrays it
// reads.
template <typename T>
MaskArrays CheckMask(const Mask<T>& mask, size_t rows, size_t cols,
                     size_t length_limit, const MaskUse& use) {
  MaskArrays arrays;
  const auto matrix = [&](const std::string& name, const auto& view) {
    const ByteRange bytes = CheckView(name, view);
    CheckSize(name + ".rows", view.rows, rows, "the number of queries");
    CheckSize(name + ".cols", view.cols, cols, "the number of keys");
    arrays.emplace_back(name, bytes);
  };
  VisitMask(mask, [&](auto field, const auto& member) {
    using Kind = typename decltype(field)::Kind;
    const std::string name = field.argument;
    if (!Given(member)) return;
    if constexpr (std::is_same<Kind, mask_kind::lengths>::value) {
      CheckValidLengths(member, rows, length_limit, cols);
      const auto begin = reinterpret_cast<uintptr_t>(member);
      arrays.emplace_back(name, ByteRange{begin, begin + rows * sizeof(size_t)});
    } else if constexpr (std::is_same<Kind, mask_kind::matrix>::value ||
                         std::is_same<Kind, mask_kind::booleans>::value) {
      matrix(name, member);
    } else if constexpr (std::is_same<Kind, mask_kind::count>::value ||
                         std::is_same<Kind, mask_kind::number>::value ||
                         std::is_same<Kind, mask_kind::head_number>::value) {
      CheckMaskValue(name, field.check, *member);
    }
    if constexpr (!std::is_same<Kind, mask_kind::position>::value) {
      CheckMaskNeeds(name, field.needs, use);
    }
  });
  return arrays;
}

// Checks an AttentionMask for `batch` entries of `heads` query heads, n
// queries and m keys (the layers are softmaxes: every field applies);
// returns the arrays it reads.
template <typename T>
MaskArrays CheckAttentionMask(const AttentionMask<T>& mask, size_t batch,
                              size_t heads, size_t n, size_t m) {
  MaskArrays arrays;
  VisitMask(mask, [&](auto field, const auto& member) {
    using Kind = typename decltype(field)::Kind;
    const std::string name = field.heads_argument;
    if (!Given(member)) return;
    if constexpr (std::is_same<Kind, mask_kind::lengths>::value) {
      const size_t count = mask.lengths_per_query ? batch * n : batch;
      CheckValidLengths(member, count, m, m);
      const auto begin = reinterpret_cast<uintptr_t>(member);
      arrays.emplace_back(name,
                          ByteRange{begin, begin + count * sizeof(size_t)});
    } else if constexpr (std::is_same<Kind, mask_kind::matrix>::value ||
                         std::is_same<Kind, mask_kind::booleans>::value) {
      if (member.batch != 1 && member.batch != batch) {
        throw Error(name + ".batch", "is " + std::to_string(member.batch) +
                                         " but must be 1 or the batch (" +
                                         std::to_string(batch) + ")");
      }
      if (member.heads != 1 && member.heads != heads) {
        throw Error(name + ".heads",
                    "is " + std::to_string(member.heads) +
                        " but must be 1 or the query heads (" +
                        std::to_string(heads) + ")");
      }
      CheckSize(name + ".rows", member.rows, n, "the number of queries");
      CheckSize(name + ".cols", member.cols, m, "the number of keys");
      arrays.emplace_back(name, CheckTensor(name, member));
    } else if constexpr (std::is_same<Kind, mask_kind::head_number>::value) {
      for (size_t h = 0; h < heads; ++h) {
        CheckMaskValue(name + "[" + std::to_string(h) + "]", field.check,
                       member[h]);
      }
      const auto begin = reinterpret_cast<uintptr_t>(member);
      arrays.emplace_back(name, ByteRange{begin, begin + heads * sizeof(T)});
    } else if constexpr (std::is_same<Kind, mask_kind::count>::value ||
                         std::is_same<Kind, mask_kind::number>::value) {
      CheckMaskValue(name, field.check, *member);
    }
  });
  return arrays;
}

// `output` (bytes `out`) overlaps none of the arrays a mask reads.
inline void CheckApartFromMask(const std::string& output, ByteRange out,
                               const MaskArrays& arrays) {
  for (const auto& [name, bytes] : arrays) {
    CheckNoOverlap(output, out, name, bytes);
  }
}

// The Mask of batch entry b, query head h (n queries) of an AttentionMask;
// `lengths` holds the per-query copy of a per-batch valid length.
template <typename T>
Mask<T> HeadMask(const AttentionMask<T>& mask, size_t b, size_t h, size_t n,
                 std::vector<size_t>& lengths) {
  Mask<T> head;
  VisitMaskPair(head, mask, [&](auto field, auto& one, const auto& all) {
    using Kind = typename decltype(field)::Kind;
    if constexpr (std::is_same<Kind, mask_kind::lengths>::value) {
      if (all == nullptr) return;
      if (mask.lengths_per_query) {
        one = all + b * n;
      } else {
        lengths.assign(n, all[b]);
        one = lengths.data();
      }
    } else if constexpr (std::is_same<Kind, mask_kind::matrix>::value ||
                         std::is_same<Kind, mask_kind::booleans>::value) {
      if (all.data != nullptr) {
        one = all.matrix(all.batch == 1 ? 0 : b, all.heads == 1 ? 0 : h);
      }
    } else if constexpr (std::is_same<Kind, mask_kind::head_number>::value) {
      if (all != nullptr) one = all[h];
    } else {
      one = all;
    }
  });
  return head;
}

// The mask of query rows [first, first + count) as a call of their own:
// their positions moved (ShiftPositions), their rows of the row-indexed
// fields.
template <typename T>
Mask<T> MaskRows(const Mask<T>& mask, size_t first, size_t count) {
  Mask<T> rows = ShiftPositions(mask, first);
  VisitMask(rows, [&](auto field, auto& member) {
    using Kind = typename decltype(field)::Kind;
    if constexpr (std::is_same<Kind, mask_kind::lengths>::value) {
      if (member != nullptr) member += first;
    } else if constexpr (std::is_same<Kind, mask_kind::matrix>::value ||
                         std::is_same<Kind, mask_kind::booleans>::value) {
      if (member.data != nullptr) {
        member = {member.row(first), count, member.cols, member.stride};
      }
    }
  });
  return rows;
}

// The mask of keys from `first` on (of a shard or sequence whose keys
// before `first` are cut off): the key-indexed fields' columns from it. The
// positions and valid lengths count keys from the start of the sequence, as
// the caller's key offset does.
template <typename T>
Mask<T> MaskColumnsFrom(const Mask<T>& mask, size_t first) {
  Mask<T> columns = mask;
  VisitMask(columns, [&](auto field, auto& member) {
    using Kind = typename decltype(field)::Kind;
    if constexpr (std::is_same<Kind, mask_kind::matrix>::value ||
                  std::is_same<Kind, mask_kind::booleans>::value) {
      if (member.data != nullptr) {
        member = {member.data + first, member.rows, member.cols - first,
                  member.stride};
      }
    }
  });
  return columns;
}

}  // namespace detail
}  // namespace attnpool
