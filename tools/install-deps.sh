#!/usr/bin/env bash
# Installs the Debian (bookworm) packages attnpool needs; quick and silent
# when they are already there.
#   tools/install-deps.sh build   compiler (and ccache: a rebuild, or the
#                                 Python package's build of the same
#                                 library, reuses what was compiled),
#                                 Highway, OpenMP, Google Benchmark,
#                                 the benchmark baselines (FAISS, OpenBLAS,
#                                 oneDNN),
#                                 and NumPy + matplotlib (the demo's plots,
#                                 the benchmark report), statsmodels (the
#                                 bench/baseline_statsmodels.py baseline)
#   tools/install-deps.sh test    the above, Catch2, the aarch64 cross
#                                 toolchain with qemu for the ARM tests, and
#                                 clang 14 with its sanitizer and libFuzzer
#                                 runtimes and OpenMP (tools/test-sanitize.sh),
#                                 and venv and headers for Debian's python3
#                                 (tools/test-python.sh, where python3 is it),
#                                 and Open MPI (attnpool::mpi and its tests)
set -euo pipefail
profile=${1:-build}
packages=(cmake ninja-build g++ ccache pkg-config python3 libhwy-dev libbenchmark-dev
          libfaiss-dev libopenblas-dev libdnnl-dev python3-numpy
          python3-matplotlib python3-statsmodels)
if [[ $profile == test ]]; then
  packages+=(catch2 g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgomp1:arm64
             clang-14 libclang-rt-14-dev libomp-14-dev python3-venv python3-dev
             libopenmpi-dev openmpi-bin)
elif [[ $profile != build ]]; then
  echo "usage: $0 build|test" >&2; exit 2
fi

sudo=""
[[ $(id -u) -eq 0 ]] || sudo=sudo
if [[ $profile == test ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $sudo dpkg --add-architecture arm64
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
