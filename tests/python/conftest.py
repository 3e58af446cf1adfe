"""Shared fixtures of the Python package's tests: every supported target,
seeds printed so that a failure can be replayed."""
import os
import sys
import zlib

import numpy as np
import pytest

import attnpool

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12}


@pytest.fixture(params=attnpool.supported_targets())
def target(request):
    attnpool.force_target(request.param)
    yield request.param
    attnpool.reset_target()


def rng_for(*key):
    """A generator seeded from the test's own parameters (stable across
    runs), the seed printed for replay."""
    seed = zlib.crc32(repr(key).encode())
    print("seed", seed, "for", key)
    return np.random.default_rng(seed)


def close(got, want, dtype, scale=1.0):
    tolerance = TOLERANCE[np.dtype(dtype).type] * max(1.0, scale)
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def numpy_softmax(scores, visible):
    """Row softmax over the visible entries (NaN rows where none is)."""
    s = np.where(visible, scores, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    e = np.where(visible, np.exp(s - np.where(np.isfinite(top), top, 0)), 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return e / e.sum(axis=-1, keepdims=True)
