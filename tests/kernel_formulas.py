"""NumPy formulas of the kernels (include/attnpool/kernel.h), the oracle of
the Python tests: weights of u = r / h, in float64.

DISTANCE_KERNELS lists the kernels of distances in the table's order (those
Nadaraya-Watson regression takes); the tests check that every kernel the
library names has a formula here.
"""
import numpy as np

DISTANCE_KERNELS = {
    "gaussian": lambda u: np.exp(-u ** 2 / 2),
    "boxcar": lambda u: (u < 1).astype(np.float64),
    "triangular": lambda u: np.maximum(1 - u, 0),
    "epanechnikov": lambda u: np.maximum(1 - u ** 2, 0),
    "biweight": lambda u: np.maximum(1 - u ** 2, 0) ** 2,
    "triweight": lambda u: np.maximum(1 - u ** 2, 0) ** 3,
    "tricube": lambda u: np.maximum(1 - np.abs(u) ** 3, 0) ** 3,
    "cosine": lambda u: np.where(u < 1, np.cos(np.pi / 2 * np.minimum(u, 1)), 0.0),
}

# Kernels of scores or of nothing: exp(scale * s) is tested on its own.
OTHER_KERNELS = {"constant": lambda u: np.ones_like(u)}
SCORE_KERNELS = ("exp",)


def weights(kernel, u):
    """The weights of `kernel` at u = r / h (u ≥ 0)."""
    return {**DISTANCE_KERNELS, **OTHER_KERNELS}[kernel](np.asarray(u, np.float64))
