// One call of an API table row decoded from fuzz input bytes (the layout in
// tests/fuzz/fuzz_api.cc, after the function and flags bytes): its sizes,
// layout, spec, mask, thread count, tuning and values, made valid, and for
// attention_pool its keys and values stored narrow. Shared by the fuzz
// target, which checks the call on every target, and the random MPI program
// (tests/mpi/random_mpi.cc), which splits it across ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tests/api_table.h"
#include "tests/fuzz/fuzz_common.h"

namespace attnpool_test {

template <typename T>
struct DecodedCall {
  std::unique_ptr<Workspace<T>> ws;  // ws->args: the call
  Sizes sizes;
  Layout layout;
  uint8_t flags = 0, layout_byte = 0, threads_byte = 0;
  std::string tuning;  // for force_tuning ("": this CPU's choice)
  // attention_pool on float with an element byte that asks for it: the
  // keys and values (and with bf16 keys maybe the queries) also stored
  // narrow, ws->args' views rounded in place to the values they hold.
  bool narrow = false;
  NarrowRows query_rows, key_rows, value_rows;

  // What was decoded, for a failure's report.
  std::string Describe(const Api<T>& api) const;
};

template <typename T>
DecodedCall<T> DecodeCall(const Api<T>& api, Bytes& bytes, uint8_t flags);

}  // namespace attnpool_test
