"""The four stages, each on its own."""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _core
from ._elements import element, float32_queries, is_narrow
from ._checks import (as_input, float_dtype, mask_arguments, output, shape_of,
                      takes_mask, threads_of, writable)


def pairwise_distances(queries, keys, distance: str = "sqeuclidean", *,
                       out: Optional[np.ndarray] = None,
                       threads: Optional[int] = None) -> np.ndarray:
    """Distances (or similarities) of every query to every key.

    queries (n, d), keys (m, d) → (n, m). ``distance``: one of
    ``DISTANCES`` (sqeuclidean, euclidean, manhattan, dot, cosine).
    Keys may be stored in reduced precision (uint16 bfloat16 bits,
    float16, :class:`Int8Rows`) beside float32 queries.
    """
    if is_narrow(keys):
        queries = float32_queries(queries)
        keys = element("keys", keys)
        n = shape_of("queries", queries, 2)[0]
        out = output("out", out, (n, shape_of("keys", keys[0], 2)[0]), np.float32)
        _core.pairwise_distances_elements(distance, queries, *keys, out,
                                          threads_of(threads))
        return out
    queries, keys = as_input("queries", queries), as_input("keys", keys)
    dtype = float_dtype("queries", queries)
    n = shape_of("queries", queries, 2)[0]
    m = shape_of("keys", keys, 2)[0]
    out = output("out", out, (n, m), dtype)
    _core.pairwise_distances(distance, queries, keys, out, threads_of(threads))
    return out


def apply_kernel(values: np.ndarray, kernel: str = "gaussian", *,
                 bandwidth: float = 1.0, scale: Optional[float] = None,
                 input: str = "sqeuclidean", depth: int = 0,
                 threads: Optional[int] = None) -> np.ndarray:
    """Kernel weights of distances, in place on ``values`` (returned).

    ``input`` names the distance that produced ``values`` (sqeuclidean: r²;
    euclidean, manhattan: r; dot, cosine: scores); ``depth`` is the data's
    depth d, for exp's default scale 1/√d.
    """
    values = writable("values", values)
    _core.apply_kernel(kernel, float(bandwidth), scale, input, values,
                       int(depth), threads_of(threads))
    return values


@takes_mask()
def normalize(values: np.ndarray, normalization: str = "softmax", *,
              empty_rows: str = "nan", threads: Optional[int] = None,
              **mask) -> np.ndarray:
    """Row normalization in place on ``values`` (n, m), returned.

    ``normalization``: none, sum, softmax or argmax, under the mask
    keywords below (``valid_lengths``: n integers; ``bias`` and ``visible``:
    (n, m)). A row that sees no key is NaN (``empty_rows="nan"``) or 0.
    """
    values = writable("values", values)
    n = shape_of("values", values, 2)[0]
    _core.normalize(normalization, values,
                    mask_arguments("normalize", mask, n), empty_rows,
                    threads_of(threads))
    return values


def weighted_sum(weights, values, *, out: Optional[np.ndarray] = None,
                 threads: Optional[int] = None) -> np.ndarray:
    """weights (n, m) · values (m, dv) → (n, dv)."""
    weights, values = as_input("weights", weights), as_input("values", values)
    dtype = float_dtype("weights", weights)
    n = shape_of("weights", weights, 2)[0]
    dv = shape_of("values", values, 2)[1]
    out = output("out", out, (n, dv), dtype)
    _core.weighted_sum(weights, values, out, threads_of(threads))
    return out
