# The ASan + UBSan libFuzzer build and one function's fuzzing run, shared by
# tools/test-sanitize.sh (fixed seeds, in CI) and tools/fuzz-campaign.sh
# (random seeds, long). Sourced, not run.

# configure_sanitized BUILD_DIR: clang 14, the library under ASan + UBSan,
# the suite and the libFuzzer target; no benchmarks, tools or shared
# library. Targets: AVX2 as the baseline (neither EMU128 nor SSE4), and AVX3
# where this CPU runs it (arch/target_policy.h says why). -O2: Highway's code
# needs its inlining, twice the fuzzing rate of -O1.
configure_sanitized() {
  local flags="-O2 -gline-tables-only -DATTNPOOL_SANITIZED_BUILD"
  if [[ $(uname -m) == x86_64 ]]; then
    flags+=" -march=haswell -mpclmul -maes"
    grep -qw avx512f /proc/cpuinfo && flags+=" -DATTNPOOL_SANITIZED_AVX3"
  fi
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$1" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$flags" \
    -DATTNPOOL_SANITIZE=ON -DATTNPOOL_BUILD_FUZZERS=ON \
    -DATTNPOOL_BUILD_TESTS=ON -DATTNPOOL_BUILD_BENCHMARKS=OFF \
    -DATTNPOOL_BUILD_TOOLS=OFF -DATTNPOOL_BUILD_SHARED_C=OFF >/dev/null
}

# fuzz_function ROOT FUNCTION LIBFUZZER-OPTIONS...: fuzzes one function from
# tests/fuzz/corpus into ROOT/<function>/ (its new inputs in corpus/, the
# log, the exit status in rc, a failing input as crash-*, leak-*, ...).
# ASan keeps 16 MiB of freed memory poisoned (not 256) and leaves new
# allocations unfilled: for the small allocations of small inputs, fresh
# pages cost more than the checks.
fuzz_function() {
  local dir="$1/${2//\//_}" rc=0
  rm -rf "$dir" && mkdir -p "$dir/corpus"
  ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16:max_malloc_fill_size=0} \
    ATTNPOOL_FUZZ_API=$2 "$build/tests/attnpool_fuzz" "${@:3}" \
    -timeout=60 -print_final_stats=1 -artifact_prefix="$dir/" \
    "$dir/corpus" tests/fuzz/corpus >"$dir/log" 2>&1 || rc=$?
  echo "$rc" >"$dir/rc"
}

# fuzz_report ROOT FUNCTION: one line (executions, rate), or on a failure
# the input's name and the failure's report; returns non-zero on a failure.
fuzz_report() {
  local dir="$1/${2//\//_}"
  local runs rate
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log")
  if [[ $(cat "$dir/rc" 2>/dev/null) != 0 ]]; then
    echo "FAILED $2: $dir/$(ls "$dir" | grep -E '^(crash|leak|timeout|oom)-' | head -1)"
    grep -E "attnpool fuzz failure|call:|ERROR|runtime error" -A2 "$dir/log" | head -20
    return 1
  fi
  printf '%-34s %9s executions (%s/s), no failure\n' "$2" "${runs:-?}" "${rate:-?}"
}
