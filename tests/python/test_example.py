"""examples/nadaraya_watson.py runs and draws its three figures."""
import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "nadaraya_watson.py")


def test_seed_figures(tmp_path):
    pytest.importorskip("matplotlib")
    subprocess.run([sys.executable, EXAMPLE, str(tmp_path)], check=True, timeout=300)
    for name in ("kernels", "widths", "cross_validated"):
        figure = tmp_path / f"{name}.png"
        assert figure.stat().st_size > 10000, figure
