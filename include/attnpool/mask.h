// Masks: which keys each query sees, and the adjustments of its scores.
// The fields are one list (mask_fields.h); Mask and AttentionMask, and every
// front end's view of them, are generated from it.
//
// Indices are those of the call: query i is row i of the queries, key j
// column j; query i sits at key position p = i + causal_offset (the layers
// over packed sequences and paged caches align each sequence's end: p =
// i + (m − n) + causal_offset). A key is visible when it passes every mask
// given:
//   valid_lengths  j < valid_lengths[i] (≤ m);
//   causal         j ≤ p;
//   window_left, window_right  p − window_left ≤ j ≤ p + window_right, a
//                  side left empty unbounded (Mistral, Gemma);
//   chunk          ⌊j / chunk⌋ = ⌊p / chunk⌋: the sequence cut into chunks
//                  of `chunk` keys, each query sees its own (Llama 4's
//                  chunked local attention, with causal);
//   visible        visible(i, j) ≠ 0;
//   bias           bias(i, j) ≠ −inf.
// Valid lengths, causal, the window and chunks bound a run of keys per
// query: key blocks outside every
// query's run are never visited, and keys before or after every run never
// read. Then, in this order, a visible key's score s (the logit, for
// exponential kernels) is adjusted:
//   softcap        s ← softcap·tanh(s / softcap) (Gemma 2);
//   alibi_slope    s ← s + alibi_slope·(j − p), per key, never as a matrix
//                  (Press et al.); with alibi_symmetric s − alibi_slope·|j −
//                  p|, for encoders that see both sides;
//   bias           s ← s + bias(i, j);
// and an attention sink (StreamingLLM, gpt-oss) is a logit that joins a
// softmax's denominator with no value: every weight shrinks by its share, and
// a query that sees no key gets weight 0 everywhere (not an empty row). A
// shard state (pool.h) holds it when its key_offset is 0, so that merged
// shards count it once. The adjustments and the sink need scores: a softmax,
// argmax, or an exponential kernel (the sink: a softmax, or sum of an
// exponential kernel's weights).
#pragma once

#include <attnpool/mask_fields.h>
#include <attnpool/matrix.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

namespace attnpool {

// What the normalization must compute for a field to apply, and what a
// given value must be (the list's needs and check columns).
enum class MaskNeeds : int { any, scores, softmax };
enum class MaskCheck : int { any, positive, span, finite, not_nan, cap };

// The kinds of fields (the list's kind column), as types.
namespace mask_kind {
struct lengths {};
struct flag {};
struct position {};
struct count {};
struct matrix {};
struct booleans {};
struct number {};
struct head_number {};
}  // namespace mask_kind

// How a field of a kind is held in Mask<T> (One) and AttentionMask<T>
// (Heads).
template <typename T, class Kind>
struct MaskHeld;
template <typename T>
struct MaskHeld<T, mask_kind::lengths> {
  using One = const size_t*;  // n entries
  using Heads = const size_t*;  // B entries, or B·n (lengths_per_query)
};
template <typename T>
struct MaskHeld<T, mask_kind::flag> {
  using One = bool;
  using Heads = bool;
};
template <typename T>
struct MaskHeld<T, mask_kind::position> {
  using One = std::ptrdiff_t;
  using Heads = std::ptrdiff_t;
};
template <typename T>
struct MaskHeld<T, mask_kind::count> {
  using One = std::optional<size_t>;
  using Heads = std::optional<size_t>;
};
template <typename T>
struct MaskHeld<T, mask_kind::matrix> {
  using One = MatrixView<const T>;   // n×m
  using Heads = TensorView<const T>;  // (B or 1, H or 1, n, m)
};
template <typename T>
struct MaskHeld<T, mask_kind::booleans> {
  using One = MatrixView<const uint8_t>;
  using Heads = TensorView<const uint8_t>;
};
template <typename T>
struct MaskHeld<T, mask_kind::number> {
  using One = std::optional<T>;
  using Heads = std::optional<T>;
};
template <typename T>
struct MaskHeld<T, mask_kind::head_number> {
  using One = std::optional<T>;
  using Heads = const T*;  // H entries, nullptr: none
};

// A field's line of the list, for the code that visits the fields.
template <class KindT>
struct MaskField {
  using Kind = KindT;
  const char* name;        // in Mask
  const char* heads_name;  // in AttentionMask
  const char* argument;        // "mask.<name>", as errors name it
  const char* heads_argument;  // "mask.<heads_name>"
  MaskNeeds needs;
  MaskCheck check;
  const char* help;
};

// Which keys each query of a call on matrices sees (the header's comment);
// an empty Mask shows every key to every query.
template <typename T>
struct Mask {
#define ATTNPOOL_MASK_MEMBER(name, heads_name, kind, needs, check, help) \
  typename MaskHeld<T, mask_kind::kind>::One name = {};
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_MASK_MEMBER)
#undef ATTNPOOL_MASK_MEMBER
};

// The same for every head of a batch of the attention layers (attention.h):
// valid lengths one per batch entry, or with lengths_per_query one per
// query (valid_lengths[b·n + i]); bias and visible (batch, heads, n, m)
// tensors whose batch and heads may each be 1 (broadcast over that
// dimension, as NumPy does); a value per query head (alibi_slopes, sinks: Hq
// entries, attention.h's alibi_slopes gives the standard slopes).
template <typename T>
struct AttentionMask {
#define ATTNPOOL_MASK_MEMBER(name, heads_name, kind, needs, check, help) \
  typename MaskHeld<T, mask_kind::kind>::Heads heads_name = {};
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_MASK_MEMBER)
#undef ATTNPOOL_MASK_MEMBER
  bool lengths_per_query = false;
};

// The mask of query rows [first, first + count) of a call as a call of
// their own: their rows of the valid lengths, bias and visible, their key
// positions (causal_offset + first; exact wherever a key position fits
// std::ptrdiff_t).
template <typename T>
Mask<T> mask_rows(const Mask<T>& mask, size_t first, size_t count);
extern template Mask<float> mask_rows(const Mask<float>&, size_t, size_t);
extern template Mask<double> mask_rows(const Mask<double>&, size_t, size_t);

template <class MaskT>
struct IsAttentionMask : std::false_type {};
template <typename T>
struct IsAttentionMask<AttentionMask<T>> : std::true_type {};
template <typename T>
struct IsAttentionMask<const AttentionMask<T>> : std::true_type {};

// The MaskField of a line of the list.
#define ATTNPOOL_MASK_FIELD(name, heads_name, kind, needs, check, help)       \
  ::attnpool::MaskField<::attnpool::mask_kind::kind> {                        \
    #name, #heads_name, "mask." #name, "mask." #heads_name,                   \
        ::attnpool::MaskNeeds::needs, ::attnpool::MaskCheck::check, help      \
  }

// Calls visit(field, member) for each field of a Mask or AttentionMask (const
// or not), in the list's order: `field` a MaskField<Kind>, `member` the
// mask's member.
template <class MaskT, class Visit>
void VisitMask(MaskT& mask, Visit&& visit) {
  constexpr bool kHeads = IsAttentionMask<MaskT>::value;
#define ATTNPOOL_MASK_VISIT(name, heads_name, kind, needs, check, help)    \
  if constexpr (kHeads) {                                                  \
    visit(ATTNPOOL_MASK_FIELD(name, heads_name, kind, needs, check, help), \
          mask.heads_name);                                                \
  } else {                                                                 \
    visit(ATTNPOOL_MASK_FIELD(name, heads_name, kind, needs, check, help), \
          mask.name);                                                      \
  }
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_MASK_VISIT)
#undef ATTNPOOL_MASK_VISIT
}

// Calls visit(field, one_member, heads_member) for each field: the member of
// a Mask beside the same field's member of an AttentionMask.
template <class OneMask, class HeadsMask, class Visit>
void VisitMaskPair(OneMask& one, HeadsMask& heads, Visit&& visit) {
#define ATTNPOOL_MASK_VISIT(name, heads_name, kind, needs, check, help)  \
  visit(ATTNPOOL_MASK_FIELD(name, heads_name, kind, needs, check, help), \
        one.name, heads.heads_name);
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_MASK_VISIT)
#undef ATTNPOOL_MASK_VISIT
}

// Calls visit(field) for each field (MaskField<Kind>), without a mask.
template <class Visit>
void VisitMaskFields(Visit&& visit) {
#define ATTNPOOL_MASK_VISIT(name, heads_name, kind, needs, check, help) \
  visit(ATTNPOOL_MASK_FIELD(name, heads_name, kind, needs, check, help));
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_MASK_VISIT)
#undef ATTNPOOL_MASK_VISIT
}

}  // namespace attnpool
