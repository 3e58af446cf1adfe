#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: x86 (every target
# this CPU supports, forced one by one; the installed-package consumer; the
# Python tests), aarch64 under qemu (NEON, SVE, SVE2: tools/test-arm.sh), the
# Python package built by pip in a venv (tools/test-python.sh), and an
# ASan + UBSan build of the suite with a fixed-seed fuzzing minute per
# function (tools/test-sanitize.sh). Prints each stage's time at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

stages=()
report() {
  echo
  echo "== stage times"
  for line in "${stages[@]}"; do echo "   $line"; done
}
trap report EXIT
stage() {  # name, command...
  local name=$1 start=$SECONDS status=0
  shift
  echo
  echo "== $name"
  "$@" || status=$?
  stages+=("$(printf '%-22s %4d s%s' "$name" $((SECONDS - start)) \
    "$([[ $status == 0 ]] || echo "  FAILED ($status)")")")
  return $status
}

# Every build through ccache (installed with the build profile): the x86
# build goes on from the main job's (tools/demo.sh, the same commands) and
# the Python package's compiles the library with the x86 build's commands.
export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache

x86_build() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DATTNPOOL_BUILD_TESTS=ON -DATTNPOOL_BUILD_SHARED_C=ON >/dev/null
  cmake --build build -j"$(nproc)" >build/build.log 2>&1 ||
    { tail -n 60 build/build.log; return 1; }
  tail -n 1 build/build.log
}
# One test at a time: each already uses every core through OpenMP. A
# failure prints everything but the passing tests' lines.
x86_suite() {
  if ! ctest --test-dir build --output-on-failure >build/ctest.log 2>&1; then
    grep -v " Passed " build/ctest.log
    return 1
  fi
  tail -n 3 build/ctest.log
}

stage "install (test profile)" tools/install-deps.sh test
stage "x86 build" x86_build
stage "x86 suite" x86_suite
stage "aarch64 under qemu" tools/test-arm.sh build-arm
stage "Python package" tools/test-python.sh
stage "ASan + UBSan, fuzzing" tools/test-sanitize.sh build-asan
