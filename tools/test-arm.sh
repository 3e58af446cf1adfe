#!/usr/bin/env bash
# Cross-builds attnpool for aarch64 and runs its tests under qemu-aarch64, so
# that each compiled ARM target is executed:
#   max, 128-bit SVE vectors  SVE on the thinned sweep (ATTNPOOL_TEST_SWEEP=
#                             thin: every kernel and fused path, fewer cases;
#                             the full sweep runs natively), in two halves,
#                             with the tests that force no target; NEON on
#                             the smoke sweep (a third of thin's cases).
#                             128 bits: the SVE of Neoverse V2 (Graviton4,
#                             Grace), and the only length that qemu emulates
#                             at NEON's speed on every host.
#   max, 512-bit SVE vectors  SVE2 on the smoke sweep of the fused, pooling,
#                             stage and attention tests: a wide vector length
#                             (A64FX's), 40 times slower to emulate on some
#                             Intel hosts.
# the four runs two at a time, so that both cores stay busy; then the
# dispatch (and the BFDOT tile, max only) on a64fx (SVE, no SVE2) and
# cortex-a72 (NEON only), and the CTest cases (ATTNPOOL_ISA, the fuzz
# corpus, the C API) on max with 128-bit SVE; last, random fuzz inputs
# (attnpool_fuzz_replay --random, fixed seeds) on SVE2, SVE and NEON with
# 256-bit SVE vectors (Graviton3's) and, beside them, 384-bit ones (a length
# that is no power of two, which SVE allows).
# SVE2 differs from SVE in a few of Highway's operations, none of them the
# float kernels' own: it runs at 512 bits and in the random inputs, not the
# whole 128-bit sweep (docs/benchmarks.md, "CI").
# usage: tools/test-arm.sh [build-dir]   (default build-arm)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-arm}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DATTNPOOL_BUILD_TESTS=ON -DATTNPOOL_BUILD_BENCHMARKS=OFF \
  -DATTNPOOL_BUILD_MPI=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1 ||
  { tail -n 60 "$build/build.log"; exit 1; }
tail -n 1 "$build/build.log"
# Emulated OpenMP threads must sleep, not spin, while they wait: the two
# emulations share the cores.
export OMP_WAIT_POLICY=passive

suite() {  # name, sweep, QEMU_CPU, [Catch2 test spec]
  local log="$build/qemu-$1.log" status=0
  ATTNPOOL_TEST_SWEEP=$2 QEMU_CPU=$3 qemu-aarch64 \
    "$build/tests/attnpool_tests" "${@:4}" >"$log" 2>&1 || status=$?
  echo "$status" >"$build/qemu-$1.status"
}
wide=(fused.vs_staged.float fused.vs_staged.double hidden_keys.pools.float
  pool.staged.float distance.sweep.float kernel.sweep.float
  normalize.sweep.float weighted_sum.sweep.float attention.sdpa.float
  math.exp.float regression.powers)
wide_tests=$(printf '%s/SVE2,' "${wide[@]}")
echo "== qemu-aarch64: max with 128-bit SVE (SVE thin in two halves, NEON" \
  "smoke), and with 512-bit SVE (SVE2, smoke)"
sve128="max,sve-default-vector-length=16"
# The test names, one a line, Catch2's special characters escaped (names
# hold commas). (Catch2 exits with the number it lists.)
{ QEMU_CPU=$sve128 qemu-aarch64 "$build/tests/attnpool_tests" \
  --list-test-names-only || true; } |
  sed 's/[][\\,*~"]/\\&/g' >"$build/qemu-all.names"
[[ -s $build/qemu-all.names ]] || { echo "sve128: no test cases listed"; exit 1; }
# SVE's cases and those that force no target, alternately in two halves;
# NEON's; SVE2's run at 512 bits.
grep -v -E '/(SVE2|NEON)$' "$build/qemu-all.names" >"$build/qemu-sve.names"
awk 'NR % 2 == 1' "$build/qemu-sve.names" >"$build/qemu-sve128a.names"
awk 'NR % 2 == 0' "$build/qemu-sve.names" >"$build/qemu-sve128b.names"
grep -E '/NEON$' "$build/qemu-all.names" >"$build/qemu-neon128.names"
suite sve128a thin "$sve128" --input-file "$build/qemu-sve128a.names" &
suite sve128b thin "$sve128" --input-file "$build/qemu-sve128b.names" &
wait -n
suite neon128 smoke "$sve128" --input-file "$build/qemu-neon128.names" &
wait -n
suite sve512 smoke "max,sve-default-vector-length=64" "${wide_tests%,}" &
wait
failed=0
for name in sve128a sve128b neon128 sve512; do
  printf '%-8s %s\n' "$name" "$(grep -E '^(All tests passed|test cases:)' \
    "$build/qemu-$name.log" | head -n 1)"
  if [[ $(cat "$build/qemu-$name.status") != 0 ]]; then
    failed=1
    tail -n 60 "$build/qemu-$name.log"
  fi
done
# The lists ran every test case they name (a name that matched nothing
# would go silently).
cases() {  # log: the test cases Catch2 reports it ran, passed or failed
  { grep -oE 'in [0-9]+ test case|^test cases: +[0-9]+' "$1" || echo 0; } |
    head -n 1 | grep -oE '[0-9]+'
}
for name in sve128a sve128b neon128; do
  ran=$(cases "$build/qemu-$name.log")
  listed=$(wc -l <"$build/qemu-$name.names")
  [[ $ran == "$listed" ]] ||
    { echo "$name: $ran of its $listed test cases ran"; failed=1; }
done
[[ -s $build/qemu-neon128.names && -s $build/qemu-sve128a.names ]] ||
  { echo "no NEON or SVE test cases listed"; failed=1; }
# Every wide-vector test ran (a renamed one would drop out silently).
grep -q "in ${#wide[@]} test cases" "$build/qemu-sve512.log" ||
  { echo "sve512: expected ${#wide[@]} test cases"; failed=1; }
for cpu in max a64fx cortex-a72; do
  printf '%-10s ' "$cpu"
  QEMU_CPU=$cpu qemu-aarch64 "$build/tools/attnpool-info" |
    grep -E "supported|active|bf16" | tr -s ' \n' ' '
  echo
done
# BFDOT: max has FEAT_BF16; a64fx and cortex-a72 do not.
[[ $(QEMU_CPU=max qemu-aarch64 "$build/tools/attnpool-info" |
  grep -c "bf16 dot tile: *BF16 (supported: BF16)$") == 1 ]] || { echo "max: no BFDOT tile"; failed=1; }
for cpu in a64fx cortex-a72; do
  [[ $(QEMU_CPU=$cpu qemu-aarch64 "$build/tools/attnpool-info" |
    grep -c "bf16 dot tile: *none (supported: none)$") == 1 ]] || { echo "$cpu: a BFDOT tile"; failed=1; }
done
[[ $(QEMU_CPU=a64fx qemu-aarch64 "$build/tools/attnpool-info" |
  grep -c "active target: *SVE$") == 1 ]] || { echo "a64fx: SVE not chosen"; failed=1; }
[[ $(QEMU_CPU=cortex-a72 qemu-aarch64 "$build/tools/attnpool-info" |
  grep -c "active target: *NEON$") == 1 ]] || { echo "cortex-a72: NEON not chosen"; failed=1; }
echo "== qemu-aarch64, max with 128-bit SVE: the CTest cases"
# (fuzz.random's inputs run below, at the vector lengths no suite runs.)
if QEMU_CPU=max,sve-default-vector-length=16 ctest --test-dir "$build" -E '^fuzz\.random$' --output-on-failure \
  >"$build/ctest.log" 2>&1; then
  tail -n 3 "$build/ctest.log"
else
  grep -v " Passed " "$build/ctest.log"
  failed=1
fi
random_inputs() {  # vector bytes, seed
  local log="$build/qemu-random-$1.log" status=0
  QEMU_CPU=max,sve-default-vector-length=$1 qemu-aarch64 \
    "$build/tests/attnpool_fuzz_replay" --random "$2" 200 >"$log" 2>&1 ||
    status=$?
  echo "$status" >"$build/qemu-random-$1.status"
}
echo "== qemu-aarch64: 200 random fuzz inputs each with 256-bit and 384-bit" \
  "SVE vectors (SVE2, SVE, NEON)"
random_inputs 32 1 &
random_inputs 48 2 &
wait
for bytes in 32 48; do
  printf 'sve%-5s %s\n' "$((8 * bytes))" \
    "$(grep -E '^ran ' "$build/qemu-random-$bytes.log" | head -n 1)"
  if [[ $(cat "$build/qemu-random-$bytes.status") != 0 ]]; then
    failed=1
    tail -n 60 "$build/qemu-random-$bytes.log"
  fi
done
exit $failed
