#!/usr/bin/env bash
# Cross-builds attnpool for aarch64 and runs its tests under qemu-aarch64 on
# three emulated CPUs, so each compiled ARM target is executed:
#   max -> SVE2, SVE, NEON;  a64fx -> SVE, NEON;  cortex-a72 -> NEON.
# Every run forces each target its CPU supports (tests/each_target.h).
# usage: tools/test-arm.sh [build-dir]   (default build-arm)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-arm}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DATTNPOOL_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)"
for cpu in max a64fx cortex-a72; do
  echo "== qemu-aarch64, QEMU_CPU=$cpu"
  QEMU_CPU=$cpu qemu-aarch64 "$build/tools/attnpool-info" | grep -E "supported|active"
  QEMU_CPU=$cpu qemu-aarch64 "$build/tests/attnpool_tests"
done
echo "== qemu-aarch64, QEMU_CPU=max: ATTNPOOL_ISA cases"
QEMU_CPU=max ctest --test-dir "$build" --output-on-failure
