#!/usr/bin/env bash
# Cross-builds attnpool for aarch64 and runs its tests under qemu-aarch64, so
# that each compiled ARM target is executed, on the thinned sweep
# (ATTNPOOL_TEST_SWEEP=thin: every kernel and fused path, fewer cases; the
# full sweep runs natively):
#   max                       SVE2, SVE (512-bit vectors) and NEON, each forced
#   max, 256-bit SVE vectors  SVE2 and SVE again at another vector length
# the two in parallel, one per core; then the dispatch on a64fx (SVE, no
# SVE2) and cortex-a72 (NEON only), and the CTest cases (ATTNPOOL_ISA, the
# fuzz corpus, the C API) on max.
# usage: tools/test-arm.sh [build-dir]   (default build-arm)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-arm}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DATTNPOOL_BUILD_TESTS=ON -DATTNPOOL_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1 ||
  { tail -n 60 "$build/build.log"; exit 1; }
tail -n 1 "$build/build.log"
# Emulated OpenMP threads must sleep, not spin, while they wait: the two
# emulations share the cores.
export OMP_WAIT_POLICY=passive ATTNPOOL_TEST_SWEEP=thin

suite() {  # name, QEMU_CPU, [Catch2 test spec]
  local log="$build/qemu-$1.log" status=0
  QEMU_CPU=$2 qemu-aarch64 "$build/tests/attnpool_tests" "${@:3}" \
    >"$log" 2>&1 || status=$?
  echo "$status" >"$build/qemu-$1.status"
}
echo "== qemu-aarch64: max (SVE2, SVE, NEON) and max with 256-bit SVE (SVE2, SVE)"
suite max max &
suite sve256 "max,sve-default-vector-length=32" "[SVE2],[SVE]" &
wait
failed=0
for name in max sve256; do
  printf '%-8s %s\n' "$name" "$(grep -E '^(All tests passed|test cases:)' \
    "$build/qemu-$name.log" | head -n 1)"
  if [[ $(cat "$build/qemu-$name.status") != 0 ]]; then
    failed=1
    tail -n 60 "$build/qemu-$name.log"
  fi
done
for cpu in max a64fx cortex-a72; do
  printf '%-10s ' "$cpu"
  QEMU_CPU=$cpu qemu-aarch64 "$build/tools/attnpool-info" |
    grep -E "supported|active" | tr -s ' \n' ' '
  echo
done
[[ $(QEMU_CPU=a64fx qemu-aarch64 "$build/tools/attnpool-info" |
  grep -c "active target: *SVE$") == 1 ]] || { echo "a64fx: SVE not chosen"; failed=1; }
[[ $(QEMU_CPU=cortex-a72 qemu-aarch64 "$build/tools/attnpool-info" |
  grep -c "active target: *NEON$") == 1 ]] || { echo "cortex-a72: NEON not chosen"; failed=1; }
echo "== qemu-aarch64, QEMU_CPU=max: the CTest cases"
if QEMU_CPU=max ctest --test-dir "$build" --output-on-failure \
  >"$build/ctest.log" 2>&1; then
  tail -n 3 "$build/ctest.log"
else
  grep -v " Passed " "$build/ctest.log"
  failed=1
fi
exit $failed
