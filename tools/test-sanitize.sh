#!/usr/bin/env bash
# ASan + UBSan (clang 14) build of the library with the whole test suite
# and the libFuzzer target, in one build directory (tools/fuzz-common.sh:
# the AVX2 target, and AVX3 where the CPU has it); runs the suite, which
# replays the corpus (tests/fuzz/corpus), then fuzzes each function of the
# API table (tests/api_table.h), the attention layers
# (tests/fuzz/fuzz_layers.cc) and cross-validation
# (tests/fuzz/fuzz_regression.cc), two at a time, with a fixed seed and a
# fixed number of inputs (ATTNPOOL_FUZZ_RUNS, default 15000: 4-35 s for a
# pooling function on a Zen 3; the layers, whose inputs make some thirty
# calls each, a twentieth of it; cross-validation, whose oracle weighs every
# pair of every bandwidth, a fortieth), so that a result depends only on the
# code: two runs of one commit fuzz the same inputs. For that the feedback is
# edges only (no hit
# counts, compare traces or entropic bookkeeping) and the library runs on
# one thread (OMP_THREAD_LIMIT=1): OpenMP threads race on the coverage
# counters.
# Thread counts are fuzzed by tools/fuzz-campaign.sh, which runs long
# randomized campaigns, and tested by the suite.
# A failure leaves its input in <build>/fuzz/<function>/crash-*: once fixed,
# copy it into tests/fuzz/corpus as a regression input.
# usage: tools/test-sanitize.sh [build-dir]   (default build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
runs=${ATTNPOOL_FUZZ_RUNS:-15000}
source tools/fuzz-common.sh
configure_sanitized "$build"
cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1 ||
  { tail -n 60 "$build/build.log"; exit 1; }
tail -n 1 "$build/build.log"
# Two processes share the cores: idle OpenMP threads must not spin.
export OMP_WAIT_POLICY=passive

echo "== ASan + UBSan: the test suite"
if ! ctest --test-dir "$build" -j2 --output-on-failure >"$build/ctest.log" 2>&1; then
  grep -v " Passed " "$build/ctest.log"
  exit 1
fi
grep -E "tests passed|Total Test time" "$build/ctest.log"
grep -h "^hostile inputs:" "$build/Testing/Temporary/LastTest.log" || true

# The costlier functions' share of the inputs.
declare -A divisor=([attention_layers]=20 [cross_validate]=40)
echo "== libFuzzer (ASan + UBSan): $runs inputs per function" \
  "($((runs / divisor[attention_layers])) for attention_layers," \
  "$((runs / divisor[cross_validate])) for cross_validate), fixed seeds"
mapfile -t functions < <(ATTNPOOL_FUZZ_API=list "$build/tests/attnpool_fuzz")
failed=0
# Two at a time, the next starting as soon as one ends: the functions past
# the API table (listed last, the longest) first.
for ((j = ${#functions[@]} - 1; j >= 0; --j)); do
  while (($(jobs -rp | wc -l) >= 2)); do wait -n; done
  function_runs=$((runs / ${divisor[${functions[j]}]:-1}))
  # The seed: the function's index, so each explores its own sequence.
  OMP_THREAD_LIMIT=1 fuzz_function "$build/fuzz" "${functions[j]}" \
    -seed=$((j + 1)) -runs="$function_runs" -use_counters=0 -use_cmp=0 \
    -entropic=0 &
done
wait
for function in "${functions[@]}"; do
  fuzz_report "$build/fuzz" "$function" || failed=1
done
exit $failed
