// Invalid arguments (docs/design.md §5): each check names its argument and
// leaves the output untouched.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include "tests/require_rejected.h"

#include <cstring>
#include <functional>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace attnpool_test {
namespace {

using attnpool::Distance;
using attnpool::MatrixView;

TEST_CASE("pairwise_distances rejects bad arguments", "[distance][errors]") {
  std::vector<float> queries(4 * 3, 1.0f), keys(5 * 3, 2.0f);
  std::vector<float> out(4 * 5, -777.0f);
  const MatrixView<const float> q(queries.data(), 4, 3), k(keys.data(), 5, 3);
  const MatrixView<float> o(out.data(), 4, 5);
  const auto run = [&](Distance distance, MatrixView<const float> queries_view,
                       MatrixView<const float> keys_view,
                       MatrixView<float> out_view,
                       attnpool::Execution execution) {
    return [=] {
      attnpool::pairwise_distances(distance, queries_view, keys_view, out_view,
                                   execution);
    };
  };
  const Distance sq = Distance::sqeuclidean;
  const size_t huge = std::numeric_limits<size_t>::max() / 2;

  RequireRejected("distance", out, run(static_cast<Distance>(7), q, k, o, {}));
  RequireRejected("distance", out, run(static_cast<Distance>(-1), q, k, o, {}));
  RequireRejected("queries.data", out, run(sq, {nullptr, 4, 3}, k, o, {}));
  RequireRejected("keys.data", out, run(sq, q, {nullptr, 5, 3}, o, {}));
  RequireRejected("queries.stride", out,
                  run(sq, {queries.data(), 4, 3, 2}, k, o, {}));
  RequireRejected("keys.stride", out,
                  run(sq, q, {keys.data(), 5, 3, 1}, o, {}));
  RequireRejected("out.stride", out, run(sq, q, k, {out.data(), 4, 5, 4}, {}));
  RequireRejected("keys.cols", out, run(sq, q, {keys.data(), 5, 2, 3}, o, {}));
  RequireRejected("out.rows", out, run(sq, q, k, {out.data(), 3, 5}, {}));
  RequireRejected("out.cols", out, run(sq, q, k, {out.data(), 4, 4, 5}, {}));
  RequireRejected("queries", out,
                  run(sq, {queries.data(), huge, 3, huge}, k, o, {}));
  RequireRejected("keys", out, run(sq, q, {keys.data(), 3, huge, huge}, o, {}));
  RequireRejected("execution.threads", out, run(sq, q, k, o, {-1}));
  // The output aliasing an input.
  RequireRejected("out", out, run(sq, {out.data(), 4, 3}, k, o, {}));
  RequireRejected("out", out,
                  run(sq, q, {out.data() + 2, 1, 3}, {out.data(), 4, 1}, {}));
  // Unknown names.
  RequireRejected("distance", out,
                  [] { attnpool::distance_from_name("cityblock"); });
}

TEST_CASE("apply_kernel rejects bad arguments", "[kernel][errors]") {
  using attnpool::Kernel;
  using attnpool::KernelSpec;
  std::vector<float> values(3 * 4, 0.5f);
  const MatrixView<float> v(values.data(), 3, 4);
  const auto run = [&](KernelSpec spec, Distance input, MatrixView<float> view,
                       size_t depth, attnpool::Execution execution = {}) {
    return [=] { attnpool::apply_kernel(spec, input, view, depth, execution); };
  };
  const Distance sq = Distance::sqeuclidean;
  const double inf = std::numeric_limits<double>::infinity();
  RequireRejected("kernel.kernel", values,
                  run({static_cast<Kernel>(attnpool::kKernelCount)}, sq, v, 4));
  RequireRejected("input", values,
                  run({Kernel::gaussian},
                      static_cast<Distance>(attnpool::kDistanceCount), v, 4));
  RequireRejected("kernel.kernel", values,
                  run({Kernel::gaussian}, Distance::dot, v, 4));
  RequireRejected("kernel.kernel", values,
                  run({Kernel::boxcar}, Distance::cosine, v, 4));
  for (double h : {0.0, -1.0, inf, -inf, std::nan(""), 1e-50, 1e50}) {
    INFO("bandwidth " << h);
    RequireRejected("kernel.bandwidth", values,
                    run({Kernel::triangular, h}, sq, v, 4));
  }
  RequireRejected("kernel.scale", values,
                  run({Kernel::exp, 1, std::nan("")}, Distance::dot, v, 4));
  RequireRejected("kernel.scale", values,
                  run({Kernel::exp, 1, inf}, Distance::dot, v, 4));
  // Finite as a double, past float's range: inf in a float call.
  RequireRejected("kernel.scale", values,
                  run({Kernel::exp, 1, 1e39}, Distance::dot, v, 4));
  RequireRejected("kernel.scale", values,
                  run({Kernel::exp}, Distance::dot, v, 0));
  RequireRejected("values.stride", values,
                  run({Kernel::gaussian}, sq, {values.data(), 3, 4, 3}, 4));
  RequireRejected("values.data", values,
                  run({Kernel::gaussian}, sq, {nullptr, 3, 4}, 4));
  RequireRejected("execution.threads", values,
                  run({Kernel::gaussian}, sq, v, 4, {-2}));
}

TEST_CASE("normalize rejects bad arguments", "[normalize][errors]") {
  using attnpool::EmptyRows;
  using attnpool::Mask;
  using attnpool::Normalization;
  std::vector<float> values(3 * 4, 0.5f), bias(3 * 4, 1.0f);
  std::vector<uint8_t> visible(3 * 4, 1);
  const MatrixView<float> v(values.data(), 3, 4);
  const auto run = [&](Normalization normalization, MatrixView<float> view,
                       Mask<float> mask, EmptyRows empty = EmptyRows::nan) {
    return [=] { attnpool::normalize(normalization, view, mask, empty); };
  };
  const Normalization softmax = Normalization::softmax;
  RequireRejected("normalization", values,
                  run(static_cast<Normalization>(4), v, {}));
  RequireRejected("empty_rows", values,
                  run(softmax, v, {}, static_cast<EmptyRows>(2)));
  const size_t too_long[3] = {4, 5, 0};
  Mask<float> mask;
  mask.valid_lengths = too_long;
  RequireRejected("mask.valid_lengths", values, run(softmax, v, mask));
  mask = {};
  mask.bias = {bias.data(), 2, 4};
  RequireRejected("mask.bias.rows", values, run(softmax, v, mask));
  mask.bias = {bias.data(), 3, 3};
  RequireRejected("mask.bias.cols", values, run(softmax, v, mask));
  mask.bias = {bias.data(), 3, 4};
  RequireRejected("mask.bias", values, run(Normalization::sum, v, mask));
  RequireRejected("mask.bias", values, run(Normalization::none, v, mask));
  mask.bias = {nullptr, 3, 4};
  RequireRejected("mask.bias.data", values, run(softmax, v, mask));
  // A bias that overlaps the matrix being normalized.
  mask.bias = {values.data() + 4, 2, 4};
  RequireRejected("values", values, run(softmax, {values.data(), 2, 4}, mask));
  mask = {};
  mask.visible = {visible.data(), 3, 5, 5};
  RequireRejected("mask.visible.cols", values, run(softmax, v, mask));
  // Score adjustments: their values, and what they need (scores; a sink a
  // softmax).
  for (float cap : {0.0f, -2.0f, INFINITY, NAN}) {
    mask = {};
    mask.softcap = cap;
    RequireRejected("mask.softcap", values, run(softmax, v, mask));
  }
  mask.softcap = 3.0f;
  RequireRejected("mask.softcap", values, run(Normalization::sum, v, mask));
  mask = {};
  mask.alibi_slope = NAN;
  RequireRejected("mask.alibi_slope", values, run(softmax, v, mask));
  mask.alibi_slope = 0.5f;
  RequireRejected("mask.alibi_slope", values,
                  run(Normalization::none, v, mask));
  mask = {};
  mask.sink = NAN;
  RequireRejected("mask.sink", values, run(softmax, v, mask));
  mask.sink = 1.0f;
  RequireRejected("mask.sink", values, run(Normalization::argmax, v, mask));
  RequireRejected("mask.sink", values, run(Normalization::sum, v, mask));
}

TEST_CASE("attention_pool_staged rejects bad arguments", "[pool][errors]") {
  using attnpool::Kernel;
  using attnpool::Mask;
  using attnpool::Normalization;
  using attnpool::PoolSpec;
  // n = 3 queries, m = 4 keys, d = 2, dv = 5. out and weights live in one
  // canary buffer, so one comparison covers both.
  std::vector<float> queries(3 * 2, 1.0f), keys(4 * 2, 2.0f),
      values(4 * 5, 3.0f);
  std::vector<float> outputs(3 * 5 + 3 * 4, -777.0f);
  const MatrixView<const float> q(queries.data(), 3, 2), k(keys.data(), 4, 2),
      v(values.data(), 4, 5);
  const MatrixView<float> o(outputs.data(), 3, 5), w(outputs.data() + 15, 3, 4);
  const PoolSpec nw{
      Distance::sqeuclidean, {Kernel::gaussian, 0.5}, Normalization::sum};
  const auto run = [&](PoolSpec spec, MatrixView<const float> queries_view,
                       MatrixView<const float> keys_view,
                       MatrixView<const float> values_view,
                       MatrixView<float> out_view,
                       MatrixView<float> weights_view, Mask<float> mask = {}) {
    return [=] {
      attnpool::attention_pool_staged(spec, queries_view, keys_view,
                                      values_view, out_view, weights_view,
                                      mask);
    };
  };
  PoolSpec bad = nw;
  bad.distance = static_cast<Distance>(8);
  RequireRejected("spec.distance", outputs, run(bad, q, k, v, o, w));
  bad = nw;
  bad.kernel.bandwidth = -1;
  RequireRejected("kernel.bandwidth", outputs, run(bad, q, k, v, o, w));
  bad = {Distance::dot, {Kernel::epanechnikov}, Normalization::sum};
  RequireRejected("kernel.kernel", outputs, run(bad, q, k, v, o, w));
  bad = nw;
  bad.normalization = static_cast<Normalization>(-1);
  RequireRejected("normalization", outputs, run(bad, q, k, v, o, w));
  RequireRejected("keys.cols", outputs,
                  run(nw, q, {keys.data(), 2, 4}, v, o, w));
  RequireRejected("values.rows", outputs,
                  run(nw, q, k, {values.data(), 3, 5}, o, w));
  RequireRejected("out.rows", outputs,
                  run(nw, q, k, v, {outputs.data(), 2, 5}, w));
  RequireRejected("out.cols", outputs,
                  run(nw, q, k, v, {outputs.data(), 3, 4}, w));
  RequireRejected("weights.rows", outputs,
                  run(nw, q, k, v, o, {outputs.data() + 15, 2, 4}));
  RequireRejected("weights.cols", outputs,
                  run(nw, q, k, v, o, {outputs.data() + 15, 3, 3}));
  RequireRejected("out", outputs,
                  run(nw, q, k, v, o, {outputs.data() + 10, 3, 4}));
  RequireRejected("weights", outputs,
                  run(nw, q, k, {outputs.data() + 15, 4, 5}, o, w));
  Mask<float> mask;
  std::vector<float> bias(3 * 4);
  mask.bias = {bias.data(), 3, 4};
  const PoolSpec boxcar{
      Distance::euclidean, {Kernel::boxcar, 1.0}, Normalization::sum};
  RequireRejected("mask.bias", outputs, run(boxcar, q, k, v, o, w, mask));
  const size_t lengths[3] = {1, 9, 2};
  mask = {};
  mask.valid_lengths = lengths;
  RequireRejected("mask.valid_lengths", outputs, run(nw, q, k, v, o, w, mask));
}

TEST_CASE("attention_pool and its shard API reject bad arguments",
          "[fused][errors]") {
  using attnpool::Kernel;
  using attnpool::Normalization;
  using attnpool::PoolPartial;
  using attnpool::PoolSpec;
  // n = 3, m = 4, d = 2, dv = 5; out and the partial state share one canary
  // buffer.
  std::vector<float> queries(3 * 2, 1.0f), keys(4 * 2, 2.0f),
      values(4 * 5, 3.0f);
  std::vector<float> outputs(3 * 5 + 3 * 5 + 3 + 3, -777.0f);
  std::vector<size_t> best(3, 77);
  const MatrixView<const float> q(queries.data(), 3, 2), k(keys.data(), 4, 2),
      v(values.data(), 4, 5);
  const MatrixView<float> o(outputs.data(), 3, 5);
  float* max = outputs.data() + 30;
  float* sum = outputs.data() + 33;
  const PoolPartial<float> partial{
      {outputs.data() + 15, 3, 5}, max, sum, best.data()};
  const PoolSpec nw{
      Distance::sqeuclidean, {Kernel::gaussian, 0.5}, Normalization::sum};
  PoolSpec bad = nw;
  bad.kernel.bandwidth = 0;
  RequireRejected("kernel.bandwidth", outputs,
                  [&] { attnpool::attention_pool(bad, q, k, v, o); });
  RequireRejected("values.rows", outputs, [&] {
    attnpool::attention_pool(nw, q, k, {values.data(), 3, 5}, o);
  });
  RequireRejected("out", outputs, [&] {
    attnpool::attention_pool(nw, q, k, {outputs.data(), 4, 5},
                             {outputs.data() + 2, 3, 5});
  });
  RequireRejected("partial.max", outputs, [&] {
    attnpool::attention_pool_partial(
        nw, q, k, v, 0, {partial.accumulator, nullptr, sum, best.data()});
  });
  RequireRejected("partial.accumulator.cols", outputs, [&] {
    attnpool::attention_pool_partial(
        nw, q, k, v, 0, {{outputs.data() + 15, 3, 4}, max, sum, best.data()});
  });
  RequireRejected("later.accumulator.rows", outputs, [&] {
    attnpool::attention_pool_merge(
        nw, partial, {{outputs.data() + 15, 2, 5}, max, sum, best.data()});
  });
  RequireRejected("partial.accumulator.cols", outputs, [&] {
    attnpool::attention_pool_finish(nw, partial, {outputs.data(), 3, 4});
  });
  // The state's arrays lie apart from the inputs and from each other; out
  // may be the accumulator itself, but overlap nothing else it reads.
  RequireRejected("partial.sum", outputs, [&] {
    attnpool::attention_pool_partial(
        nw, q, k, v, 0,
        {partial.accumulator, max, values.data() + 7, best.data()});
  });
  RequireRejected("partial.best", outputs, [&] {
    attnpool::attention_pool_partial(
        nw, q, k, v, 0,
        {partial.accumulator, max, sum, reinterpret_cast<size_t*>(max)});
  });
  RequireRejected("key_offset", outputs, [&] {
    attnpool::attention_pool_partial(nw, q, k, v, SIZE_MAX - 2, partial);
  });
  std::vector<float> later_max_sum(6);
  std::vector<size_t> later_best(3);
  RequireRejected("into.accumulator", outputs, [&] {
    attnpool::attention_pool_merge(nw, partial,
                                   {{outputs.data() + 5, 3, 5},
                                    later_max_sum.data(),
                                    later_max_sum.data() + 3,
                                    later_best.data()});
  });
  RequireRejected("out", outputs, [&] {
    attnpool::attention_pool_finish(nw, partial, {outputs.data() + 20, 3, 5});
  });
  RequireRejected("out", outputs, [&] {
    attnpool::attention_pool_finish(
        nw, {partial.accumulator, max, outputs.data() + 12, best.data()}, o);
  });
  // Valid lengths may run past a shard, not past a whole sequence.
  const size_t lengths[3] = {2, 9, 4};
  attnpool::Mask<float> mask;
  mask.valid_lengths = lengths;
  RequireRejected("mask.valid_lengths", outputs,
                  [&] { attnpool::attention_pool(nw, q, k, v, o, mask); });
  std::vector<float> accumulator(3 * 5);
  attnpool::attention_pool_partial(
      nw, q, k, v, 0, {{accumulator.data(), 3, 5}, max, sum, best.data()},
      mask);
}

TEST_CASE("empty shapes are valid and write nothing", "[distance][errors]") {
  std::vector<float> queries(6, 1.0f), out(6, -777.0f);
  // m = 0: no output columns; n = 0: no output rows. Null data is fine there.
  attnpool::pairwise_distances(Distance::dot, {queries.data(), 2, 3},
                               {nullptr, 0, 3}, {out.data(), 2, 0});
  attnpool::pairwise_distances(Distance::dot, {nullptr, 0, 3},
                               {queries.data(), 2, 3}, {nullptr, 0, 2});
  REQUIRE(out == std::vector<float>(6, -777.0f));
  REQUIRE(attnpool::last_run_target().empty());
}

}  // namespace
}  // namespace attnpool_test
