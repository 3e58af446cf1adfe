// Tuning profiles (internal): the block sizes and prefetch distances of the
// fused kernel, one named row per profile (src/tuning.cc), chosen at run
// time from what the CPU is, forcible like the target (targets.h).
#pragma once

#include <cstddef>
#include <string>

namespace attnpool {
namespace detail {

struct Tuning {
  const char* name;
  // The CPUs it is chosen on, and the measurement behind it.
  const char* chosen_on;
  // Queries per dispatched fused call (a multiple of 24: the score tiles'
  // heights 6 and 8, the weighted sum's 6); narrow values on the tile paths
  // take twice as many (they are widened once per block of rows and key
  // block). Sliding windows take two score tiles (src/fused.cc).
  size_t query_rows;
  // Bytes of one query's scores per key block (the block's scores, values
  // and outputs stay in L2 between the passes over them): a whole number
  // of key panels, at least one.
  size_t key_block_bytes;
  // Key blocks whose scores a decode over strided rows computes at once
  // (one stream of keys, then one of values); no result changes by it.
  size_t decode_stretch;
  // Decoding float keys one stride apart: the key row this many rows ahead
  // is prefetched beside each; 0 leaves the reads to the hardware
  // prefetchers. No result changes by it. (Narrow keys, and a paged
  // cache's, prefetch kPrefetchRows ahead; those an interleaved decode
  // reads beside its values, and an interleaved int8 decode's first block,
  // only where this is not 0: arch/fused-inl.h.)
  size_t decode_key_prefetch_rows;
  // Decoding float or double keys and values in place: their loads at most
  // this many bytes wide, 0 for the target's widest vectors (32 narrows
  // only AVX-512's). No result changes by it: the dots keep the 512-bit
  // order (arch/distance-inl.h DirectDotLoads), and every weighted sum is
  // one chain per output.
  size_t decode_load_bytes;
  // 1: a decode of one query over keys and values one stride apart (float
  // or double, or both bf16, both f16 or both int8) computes the next key
  // block's scores beside this block's weighted sum, a key row and a value
  // row each step (int8: a group of keys every group of value rows; two
  // streams); 0: decode_stretch blocks of scores, then their
  // values. No result changes by it: the scores and each output's chain
  // are the same operations (arch/fused-inl.h says where it applies).
  size_t decode_interleave;
};

// The profile the next call runs with: the forced one (force_tuning,
// ATTNPOOL_TUNING), else this CPU's. Throws attnpool::Error naming
// ATTNPOOL_TUNING if that variable names no profile (every call, as
// ATTNPOOL_ISA).
const Tuning& ActiveTuning();

// Every profile, in table order, and this CPU's choice among them.
const Tuning* Tunings(size_t* count);
const Tuning& ChosenTuning();

// Forces the profile `name`: a profile's name, then any of its parameters
// as name=value (whitespace apart, case-insensitive; e.g. "generic
// query_rows=192 decode_interleave=1"); "" back to this CPU's choice.
// Throws attnpool::Error naming "tuning" for an unknown name or parameter,
// or values that break the parameters' rule (src/tuning.cc Valid()),
// and then changes nothing.
void ForceTuning(const std::string& name);

// "query_rows=96 key_block_bytes=2048 ...": a profile's parameters.
std::string TuningParameters(const Tuning& tuning);

}  // namespace detail
}  // namespace attnpool
