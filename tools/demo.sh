#!/usr/bin/env bash
# The main job: installs what is missing, builds, prints what this machine
# offers, runs the demo (attention pooling by similarity on the seed's data:
# summary on the terminal, figures in build/demo/), and benchmarks the
# distance stage per target against FAISS and a naive loop in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh build
# Only what the main job builds: no tests (Catch2 comes with the test
# profile), through ccache (tools/test.sh goes on in the same build).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DATTNPOOL_BUILD_TESTS=OFF -DATTNPOOL_BUILD_SHARED_C=OFF >/dev/null
cmake --build build -j"$(nproc)" --target attnpool-info attnpool-demo bench_distance
build/tools/attnpool-info
echo
build/tools/attnpool-demo --out build/demo
echo
echo "Benchmarking the distance stage (about a minute)..."
# OpenBLAS's core-type overrides slow FAISS's sgemm: unset for the baselines.
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE build/bench/bench_distance \
  --benchmark_filter='(sqeuclidean|dot)/4096x4096x(128|3)/' \
  --benchmark_repetitions=3 --benchmark_min_time=0.2 \
  --benchmark_out=build/bench_distance.json --benchmark_out_format=json \
  >/dev/null
python3 tools/bench_summary.py build/bench_distance.json
