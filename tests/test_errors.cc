// Invalid arguments (DESIGN.md §5): each check names its argument and leaves
// the output untouched.
#include <attnpool/attnpool.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace attnpool_test {
namespace {

using attnpool::Distance;
using attnpool::MatrixView;

// Runs `call`, requires attnpool::Error naming `argument`, and requires the
// canary-filled output buffer to be bitwise unchanged.
void RequireRejected(const std::string& argument, const std::vector<float>& out,
                     const std::function<void()>& call) {
  const std::vector<float> before = out;
  try {
    call();
    FAIL("no error; expected one naming " << argument);
  } catch (const attnpool::Error& error) {
    INFO(error.what());
    REQUIRE(error.argument() == argument);
    REQUIRE(std::string(error.what()).find(argument) != std::string::npos);
  }
  REQUIRE(std::memcmp(before.data(), out.data(), out.size() * sizeof(float)) == 0);
}

TEST_CASE("pairwise_distances rejects bad arguments", "[distance][errors]") {
  std::vector<float> queries(4 * 3, 1.0f), keys(5 * 3, 2.0f);
  std::vector<float> out(4 * 5, -777.0f);
  const MatrixView<const float> q(queries.data(), 4, 3), k(keys.data(), 5, 3);
  const MatrixView<float> o(out.data(), 4, 5);
  const auto run = [&](Distance distance, MatrixView<const float> queries_view,
                       MatrixView<const float> keys_view,
                       MatrixView<float> out_view, attnpool::Execution execution) {
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
  RequireRejected("queries.stride", out, run(sq, {queries.data(), 4, 3, 2}, k, o, {}));
  RequireRejected("keys.stride", out, run(sq, q, {keys.data(), 5, 3, 1}, o, {}));
  RequireRejected("out.stride", out, run(sq, q, k, {out.data(), 4, 5, 4}, {}));
  RequireRejected("keys.cols", out, run(sq, q, {keys.data(), 5, 2, 3}, o, {}));
  RequireRejected("out.rows", out, run(sq, q, k, {out.data(), 3, 5}, {}));
  RequireRejected("out.cols", out, run(sq, q, k, {out.data(), 4, 4, 5}, {}));
  RequireRejected("queries", out, run(sq, {queries.data(), huge, 3, huge}, k, o, {}));
  RequireRejected("keys", out, run(sq, q, {keys.data(), 3, huge, huge}, o, {}));
  RequireRejected("execution.threads", out, run(sq, q, k, o, {-1}));
  // The output aliasing an input.
  RequireRejected("out", out, run(sq, {out.data(), 4, 3}, k, o, {}));
  RequireRejected("out", out, run(sq, q, {out.data() + 2, 1, 3}, {out.data(), 4, 1}, {}));
  // Unknown names.
  RequireRejected("distance", out, [] { attnpool::distance_from_name("cityblock"); });
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
