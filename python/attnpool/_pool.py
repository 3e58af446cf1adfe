"""Attention pooling: the fused kernel, the staged pipeline that also
returns the weights, and the shard API as PoolState."""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _core
from ._checks import (as_input, float_dtype, integer, mask_arguments, output,
                      shape_of, takes_mask, threads_of)
from ._elements import element, float32_queries, is_narrow


def _spec(distance: str, kernel: str, bandwidth: float, scale: Optional[float],
          normalize: str, empty_rows: str) -> tuple:
    """The pooling options as the core takes them."""
    return (distance, kernel, float(bandwidth),
            None if scale is None else float(scale), normalize, empty_rows)


def _inputs(queries, keys, values):
    queries, keys, values = as_input("queries", queries), as_input("keys", keys), as_input("values", values)
    dtype = float_dtype("queries", queries)
    n = shape_of("queries", queries, 2)[0]
    m = shape_of("keys", keys, 2)[0]
    dv = shape_of("values", values, 2)[1]
    return queries, keys, values, dtype, n, m, dv


@takes_mask()
def attention_pool(queries, keys, values, *, distance: str = "sqeuclidean",
                   kernel: str = "gaussian", bandwidth: float = 1.0,
                   scale: Optional[float] = None, normalize: str = "sum",
                   empty_rows: str = "nan", out: Optional[np.ndarray] = None,
                   threads: Optional[int] = None,
                   return_weights: bool = False, **mask):
    """Attention pooling: out[i] = Σ_j w(q_i, k_j) · v_j.

    queries (n, d), keys (m, d), values (m, dv) → (n, dv). The weights are
    ``kernel`` (one of ``KERNELS``; ``bandwidth`` h, or ``scale`` for exp) of
    ``distance``, then ``normalize`` (sum: Nadaraya–Watson; softmax;
    argmax; none) under the mask keywords below (query i sits at key
    position p = i + ``causal_offset``). Runs the fused
    kernel, which never forms the n×m weights; with ``return_weights`` the
    staged pipeline, returning ``(out, weights)``.

    Queries, keys and values may be stored in reduced precision (each its
    own): uint16 bfloat16 bit patterns, float16, or :class:`Int8Rows`; the
    others are then float32, and so is the result (not with
    ``return_weights``). bfloat16 dot products run on the CPU's bf16
    dot-product instruction where it has one.
    """
    result = _core.attention_pool_plain(
        queries, keys, values, distance, kernel, bandwidth, scale, normalize,
        empty_rows, out, threads, return_weights, mask)
    if result is not NotImplemented:
        return result
    # (Arguments that need converting: the core's plain path took none.)
    if is_narrow(queries) or is_narrow(keys) or is_narrow(values):
        if return_weights:
            raise ValueError("return_weights: not with reduced-precision "
                             "queries, keys or values")
        queries = element("queries", queries)
        n = shape_of("queries", queries[0], 2)[0]
        keys, values = element("keys", keys), element("values", values)
        out = output("out", out, (n, shape_of("values", values[0], 2)[1]),
                     np.float32)
        _core.attention_pool_elements(
            _spec(distance, kernel, bandwidth, scale, normalize, empty_rows),
            *queries, *keys, *values, out,
            mask_arguments("attention_pool", mask, n), threads_of(threads))
        return out
    queries, keys, values, dtype, n, m, dv = _inputs(queries, keys, values)
    out = output("out", out, (n, dv), dtype)
    weights = np.empty((n, m), dtype=dtype) if return_weights else None
    _core.attention_pool(
        _spec(distance, kernel, bandwidth, scale, normalize, empty_rows),
        queries, keys, values, out, weights,
        mask_arguments("attention_pool", mask, n), threads_of(threads))
    return (out, weights) if return_weights else out


class PoolState:
    """Attention pooling of n queries over one shard of the keys, as a state
    that merges with the states of the following shards and finishes into
    the result of :func:`attention_pool` over all the keys (within
    rounding). Made by :meth:`partial`; its arrays are NumPy arrays
    (``accumulator`` (n, dv), ``max``, ``sum`` and ``best`` (n,)), and it
    pickles, so states can travel between processes (multiprocessing, Dask,
    mpi4py) and be merged where they meet. (multiprocessing: the ``spawn``
    or ``forkserver`` start method; a ``fork`` child of a process that
    computed on several threads hangs in its first multi-threaded call, a
    limit of GNU OpenMP, unless it passes ``threads=1``.)

    Per query: for softmax, and exponential kernels under sum, ``max`` is
    the largest logit seen, ``sum`` = Σ exp(a − max) and ``accumulator`` =
    Σ exp(a − max)·v; otherwise (other kernels, and none) ``max`` is −inf,
    ``sum`` = Σ w and ``accumulator`` = Σ w·v; for argmax ``best`` is the
    chosen key's index in the whole sequence.
    """

    def __init__(self, spec: tuple, accumulator: np.ndarray, max: np.ndarray,
                 sum: np.ndarray, best: np.ndarray):
        self.spec = spec
        self.accumulator, self.max, self.sum, self.best = accumulator, max, sum, best

    def _arrays(self) -> tuple:
        return (self.accumulator, self.max, self.sum, self.best)

    @classmethod
    @takes_mask()
    def partial(cls, queries, keys, values, *, key_offset: int = 0,
                distance: str = "sqeuclidean", kernel: str = "gaussian",
                bandwidth: float = 1.0, scale: Optional[float] = None,
                normalize: str = "sum", empty_rows: str = "nan",
                threads: Optional[int] = None, **mask) -> "PoolState":
        """The state of keys [key_offset, key_offset + m) of the whole
        sequence: ``keys``, ``values``, ``bias`` and ``visible`` hold just
        this shard; ``valid_lengths`` and ``causal`` count keys from the
        start of the whole sequence, and ALiBi its positions; a ``sink`` joins
        the state of the shard at key_offset 0 only. Options as
        :func:`attention_pool` (keys and values in reduced precision too)."""
        spec = _spec(distance, kernel, bandwidth, scale, normalize, empty_rows)
        key_offset = integer("key_offset", key_offset, 0, 2**64 - 1)
        if is_narrow(keys) or is_narrow(values):
            queries = float32_queries(queries)
            keys, values = element("keys", keys), element("values", values)
            n, dv = shape_of("queries", queries, 2)[0], shape_of("values", values[0], 2)[1]
            core, dtype, arrays = _core.pool_partial_elements, np.float32, (*keys, *values)
        else:
            queries, keys, values, dtype, n, m, dv = _inputs(queries, keys, values)
            core, arrays = _core.pool_partial, (keys, values)
        state = cls(spec, np.empty((n, dv), dtype), np.empty(n, dtype),
                    np.empty(n, dtype), np.zeros(n, np.uintp))
        core(spec, queries, *arrays, int(key_offset), state._arrays(),
             mask_arguments("partial", mask, n), threads_of(threads))
        return state

    def merge(self, later: "PoolState") -> "PoolState":
        """Merges in the state of the keys that follow this one's; returns
        self."""
        if not isinstance(later, PoolState):
            raise TypeError(f"later: must be a PoolState, not {type(later).__name__}")
        if later.spec != self.spec:
            raise ValueError(f"later: pooled with {later.spec}, this state with {self.spec}")
        _core.pool_merge(self.spec, self._arrays(), later._arrays())
        return self

    def finish(self, out: Optional[np.ndarray] = None) -> np.ndarray:
        """The pooled result (n, dv) of the keys merged so far."""
        out = output("out", out, self.accumulator.shape, self.accumulator.dtype)
        _core.pool_finish(self.spec, self._arrays(), out)
        return out

    def __repr__(self) -> str:
        n, dv = self.accumulator.shape
        return f"PoolState(n={n}, dv={dv}, dtype={self.accumulator.dtype}, spec={self.spec})"
