// The tests' statement of an AttentionMask's meaning per head, from the
// kinds of the mask field list (include/attnpool/mask_fields.h), so that a
// field added there reaches every oracle: the Mask that head h of batch
// entry b (n queries) must behave as.
#pragma once

#include <attnpool/mask.h>

#include <cstddef>
#include <type_traits>
#include <vector>

// Valid lengths per query (entry b·n + i) or per batch entry (entry b, for
// every query), copied into `lengths`; without `lengths` left out. Bias and
// visibility: their (b, h) matrix, a dimension of 1 serving every index.
// A value per head: head h's. Every other field: as given.
template <typename T>
attnpool::Mask<T> OracleHeadMask(const attnpool::AttentionMask<T>& mask,
                                 size_t b, size_t h, size_t n,
                                 std::vector<size_t>* lengths) {
  namespace kind = attnpool::mask_kind;
  attnpool::Mask<T> head;
  attnpool::VisitMaskPair(head, mask, [&](auto field, auto& one,
                                          const auto& all) {
    using Kind = typename decltype(field)::Kind;
    if constexpr (std::is_same<Kind, kind::lengths>::value) {
      if (all == nullptr || lengths == nullptr) return;
      lengths->resize(n);
      for (size_t i = 0; i < n; ++i) {
        (*lengths)[i] = all[mask.lengths_per_query ? b * n + i : b];
      }
      one = lengths->data();
    } else if constexpr (std::is_same<Kind, kind::matrix>::value ||
                         std::is_same<Kind, kind::booleans>::value) {
      if (all.data == nullptr) return;
      one = all.matrix(all.batch == 1 ? 0 : b, all.heads == 1 ? 0 : h);
    } else if constexpr (std::is_same<Kind, kind::head_number>::value) {
      if (all != nullptr) one = all[h];
    } else {
      one = all;
    }
  });
  return head;
}
