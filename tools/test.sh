#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: x86 (every target
# this CPU supports, forced one by one), the installed-package consumer,
# aarch64 under qemu (NEON, SVE, SVE2), and an ASan + UBSan build with
# fuzzing (tools/test-sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh test
tools/test-arm.sh build-arm
# clang 14 with ASan + UBSan: the whole suite, then a minute of fuzzing per
# function (ATTNPOOL_FUZZ_SECONDS).
tools/test-sanitize.sh build-asan
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
# One test at a time: each already uses every core through OpenMP.
ctest --test-dir build --output-on-failure
