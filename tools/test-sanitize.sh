#!/usr/bin/env bash
# ASan + UBSan (clang 14) build of the library, the whole test suite and the
# libFuzzer target, in one build directory; runs the suite, then fuzzes each
# function of the API table (tests/api_table.h) for ATTNPOOL_FUZZ_SECONDS
# (default 60) seconds, three at a time, starting from tests/fuzz/corpus.
# A fuzzing failure leaves its input in <build>/fuzz/<function>/crash-*: once
# fixed, copy it into tests/fuzz/corpus as a regression input.
# usage: tools/test-sanitize.sh [build-dir]   (default build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
seconds=${ATTNPOOL_FUZZ_SECONDS:-60}
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
  -DATTNPOOL_SANITIZE=ON -DATTNPOOL_BUILD_FUZZERS=ON \
  -DATTNPOOL_BUILD_BENCHMARKS=OFF -DATTNPOOL_BUILD_TOOLS=OFF \
  -DATTNPOOL_BUILD_SHARED_C=OFF >/dev/null
cmake --build "$build" -j"$(nproc)"
# Two processes share the cores: idle OpenMP threads must not spin.
export OMP_WAIT_POLICY=passive

echo "== ASan + UBSan: the test suite"
if ! ctest --test-dir "$build" -j2 --output-on-failure >"$build/ctest.log" 2>&1; then
  cat "$build/ctest.log"
  exit 1
fi
grep -E "tests passed|Total Test time" "$build/ctest.log"
grep -h "^hostile inputs:" "$build/Testing/Temporary/LastTest.log" || true

echo "== libFuzzer (ASan + UBSan): ${seconds} s per function, every target each input"
mapfile -t functions < <(ATTNPOOL_FUZZ_API=list "$build/tests/attnpool_fuzz")
fuzz() {  # function name
  local dir="$build/fuzz/${1//\//_}"
  local rc=0
  rm -rf "$dir" && mkdir -p "$dir/corpus"
  ATTNPOOL_FUZZ_API=$1 "$build/tests/attnpool_fuzz" -max_total_time="$seconds" \
    -timeout=60 -print_final_stats=1 -artifact_prefix="$dir/" \
    "$dir/corpus" tests/fuzz/corpus >"$dir/log" 2>&1 || rc=$?
  echo "$rc" >"$dir/rc"
}
# Three at a time on two cores: a minute each, two minutes in all.
for ((k = 0; k < ${#functions[@]}; k += 3)); do
  for ((j = k; j < k + 3 && j < ${#functions[@]}; ++j)); do
    fuzz "${functions[j]}" &
  done
  wait
done
failed=0
for function in "${functions[@]}"; do
  dir="$build/fuzz/${function//\//_}"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log")
  if [[ $(cat "$dir/rc" 2>/dev/null) != 0 ]]; then
    failed=1
    echo "FAILED $function: $(ls "$dir" | grep -E '^(crash|leak|timeout|oom)-' | head -1)"
    grep -E "attnpool fuzz failure|call:|ERROR|runtime error" -A2 "$dir/log" | head -20
  else
    printf '%-34s %9s executions (%s/s), no failure\n' "$function" "${runs:-?}" "${rate:-?}"
  fi
done
exit $failed
