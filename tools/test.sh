#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: x86 (every target
# this CPU supports, forced one by one), the installed-package consumer, and
# aarch64 under qemu (NEON, SVE, SVE2).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh test
tools/test-arm.sh build-arm
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
# One test at a time: each already uses every core through OpenMP.
ctest --test-dir build --output-on-failure
