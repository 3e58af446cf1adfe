#!/usr/bin/env bash
# A long randomized fuzzing campaign: every function of the API table for
# SECONDS seconds each, two at a time (both cores), with random seeds and
# full coverage feedback, under ASan + UBSan (the build of
# tools/test-sanitize.sh). Prints each function's executions and rate.
# Findings are left in <build>/campaign/<function>/crash-* (and leak-*,
# timeout-*, oom-*): reproduce one with
#   ATTNPOOL_FUZZ_API=<function> <build>/tests/attnpool_fuzz_replay <file>
# keep it in tests/fuzz/open/ until its defect is fixed, then move it into
# tests/fuzz/corpus as a regression input (README "Sanitizers and fuzzing").
# ATTNPOOL_FUZZ_RUNS, if set, also ends each function after that many
# inputs (cheap functions reach it long before SECONDS).
# usage: tools/fuzz-campaign.sh SECONDS [build-dir]   (default build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: tools/fuzz-campaign.sh SECONDS [build-dir]}
build=${2:-build-asan}
source tools/fuzz-common.sh
configure_sanitized "$build"
cmake --build "$build" -j"$(nproc)" --target attnpool_fuzz attnpool_fuzz_replay
export OMP_WAIT_POLICY=passive

mapfile -t functions < <(ATTNPOOL_FUZZ_API=list "$build/tests/attnpool_fuzz")
echo "== campaign: ${#functions[@]} functions x $seconds s, two at a time," \
  "random seeds"
failed=0
for ((k = 0; k < ${#functions[@]}; k += 2)); do
  for ((j = k; j < k + 2 && j < ${#functions[@]}; ++j)); do
    fuzz_function "$build/campaign" "${functions[j]}" \
      -max_total_time="$seconds" ${ATTNPOOL_FUZZ_RUNS:+-runs=$ATTNPOOL_FUZZ_RUNS} &
  done
  wait
done
for function in "${functions[@]}"; do
  fuzz_report "$build/campaign" "$function" || failed=1
done
exit $failed
