#!/usr/bin/env bash
# The Python package: `pip install .` into a virtual environment of pip's
# python3 (never Debian's, whose NumPy comes from apt), then its tests
# (tests/python) on every target this CPU supports.
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
"$venv/bin/python" -m pip install -q numpy pytest scikit-learn statsmodels matplotlib
# The build directory of pyproject.toml (build/python/...) is kept between
# runs: only what changed is rebuilt. The compilers CMake finds by default
# (not Python's g++): through ccache (tools/test.sh), the library's objects
# are then the x86 build's.
CC=${CC:-cc} CXX=${CXX:-c++} "$venv/bin/python" -m pip install -q .
"$venv/bin/python" -m pytest -q tests/python
