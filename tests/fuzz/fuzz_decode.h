// One call of an API table row decoded from fuzz input bytes (the layout in
// tests/fuzz/fuzz_api.cc, after the function and flags bytes): its sizes,
// layout, spec, mask, thread count, tuning and values, made valid, and for
// attention_pool its keys and values stored narrow. Shared by the fuzz
// target, which checks the call on every target, and the random MPI program
// (tests/mpi/random_mpi.cc), which splits it across ranks.
#pragma once

#include <attnpool/attnpool.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tests/api_oracles.h"
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

  // The rounding units its dots may err beyond distance.h's bound
  // (oracles::VerifyFused): int8 keys' on the decode path, their scales
  // folded (element.h).
  double ExtraDotUnits() const {
    return narrow && key_rows.type == attnpool::ElementType::int8
               ? oracles::kFoldedInt8DotUnits
               : 0;
  }

  // What was decoded, for a failure's report.
  std::string Describe(const Api<T>& api) const;
};

template <typename T>
DecodedCall<T> DecodeCall(const Api<T>& api, Bytes& bytes, uint8_t flags);

template <typename T>
attnpool::MatrixView<T> RowsOf(attnpool::MatrixView<T> view, size_t begin,
                               size_t end) {
  return {view.data + begin * view.stride, end - begin, view.cols, view.stride};
}

template <typename T>
attnpool::MatrixView<T> ColumnsOf(attnpool::MatrixView<T> view, size_t begin,
                                  size_t end) {
  if (view.data == nullptr) return view;
  return {view.data + begin, view.rows, end - begin, view.stride};
}

// A decoded attention_pool call's keys in shards: shard r holds keys
// [begin[r], begin[r + 1]) of the whole sequence (empty ones too).
template <typename T>
struct KeyShards {
  const DecodedCall<T>& call;
  std::vector<size_t> begin;

  // The call's mask as shard r's state takes it: its columns of the bias
  // and visibility matrices (prefix masks count keys from the sequence's
  // start); the sink, which joins the softmax once, in shard 0's alone when
  // `merging` (a caller of the shard API merges it so; attnpool::mpi takes
  // it on every rank).
  attnpool::Mask<T> MaskOf(size_t r, bool merging) const {
    attnpool::Mask<T> mask = call.ws->args.mask;
    mask.bias = ColumnsOf(mask.bias, begin[r], begin[r + 1]);
    mask.visible = ColumnsOf(mask.visible, begin[r], begin[r + 1]);
    if (merging && r > 0) mask.sink.reset();
    return mask;
  }

  // pool(keys, values) of shard r: narrow where the call stores them so.
  template <class Pool>
  void Visit(size_t r, const Pool& pool) const {
    const size_t b = begin[r], e = begin[r + 1];
    if constexpr (std::is_same<T, float>::value) {
      if (call.narrow) {
        pool(call.key_rows.Rows(b, e), call.value_rows.Rows(b, e));
        return;
      }
    }
    const Args<T>& args = call.ws->args;
    pool(attnpool::ConstMatrixView<T>(RowsOf(args.views[1], b, e)),
         attnpool::ConstMatrixView<T>(RowsOf(args.views[2], b, e)));
  }

  // The shards' states (attention_pool_partial) merged in key order and
  // finished (n×dv, dense): what one process merging them gives.
  std::vector<T> Merged() const {
    const Args<T>& args = call.ws->args;
    const size_t n = call.sizes[kN], dv = call.sizes[kDv];
    std::vector<T> accumulators(2 * n * dv + 1), scratch(4 * n + 1);
    std::vector<size_t> best(2 * n + 1);
    const attnpool::PoolPartial<T> into{{accumulators.data(), n, dv},
                                        scratch.data(),
                                        scratch.data() + n,
                                        best.data()};
    const attnpool::PoolPartial<T> later{{accumulators.data() + n * dv, n, dv},
                                         scratch.data() + 2 * n,
                                         scratch.data() + 3 * n,
                                         best.data() + n};
    for (size_t r = 0; r + 1 < begin.size(); ++r) {
      Visit(r, [&](const auto& keys, const auto& values) {
        attnpool::attention_pool_partial(
            args.spec(), args.views[0], keys, values, begin[r],
            r == 0 ? into : later, MaskOf(r, true), args.execution);
      });
      if (r > 0) attnpool::attention_pool_merge(args.spec(), into, later);
    }
    std::vector<T> out(n * dv + 1);
    attnpool::attention_pool_finish(args.spec(), into, {out.data(), n, dv});
    out.pop_back();
    return out;
  }
};

}  // namespace attnpool_test
