"""Argument handling shared by the package's functions: arrays in, results
allocated, masks converted. The compiled core checks the rest and raises
errors that name the argument."""

from __future__ import annotations

from typing import Optional

import numpy as np


def integer(name: str, value, low: int, high: int) -> int:
    """`value` as an int in [low, high], or an error naming `name` (a float
    with a fraction, inf or NaN is no integer)."""
    try:
        number = int(value)
        exact = number == value
    except (TypeError, ValueError, OverflowError):
        exact = False
    if not exact:
        raise TypeError(f"{name}: must be an integer, not {value!r}")
    if not low <= number <= high:
        raise ValueError(f"{name}: {number} is outside [{low}, {high}]")
    return number


def threads_of(threads: Optional[int]) -> int:
    return 0 if threads is None else integer("threads", threads, 0, 2**31 - 1)


def float_dtype(name: str, array: np.ndarray) -> np.dtype:
    if array.dtype not in (np.float32, np.float64):
        raise TypeError(
            f"{name}: dtype {array.dtype} is not supported (float32 or float64)")
    return array.dtype


def _in_place(array: np.ndarray) -> bool:
    """Whether the core can take `array` as it is: native byte order, and
    every stride and the address multiples of its element size."""
    size = array.dtype.itemsize
    return (array.dtype.isnative and array.ctypes.data % size == 0 and
            all(stride % size == 0 for stride in array.strides))


def _numeric(name: str, array: np.ndarray) -> np.ndarray:
    if array.dtype.kind not in "biufc":
        raise TypeError(f"{name}: dtype {array.dtype} is not numeric")
    return array


def as_input(name: str, array) -> np.ndarray:
    """`array` as an ndarray the core can read: without a copy where NumPy
    can view it (a PyTorch CPU tensor, an object with the buffer protocol)
    and the core read it in place; copied into native byte order, or into
    aligned rows, where it cannot (big-endian data, byte strides that are no
    multiple of the element); a dtype that is not numeric is an error
    naming `name`."""
    array = _numeric(name, array if isinstance(array, np.ndarray) else np.asarray(array))
    if _in_place(array):
        return array
    # (A copy even where the array is contiguous: its address may be odd.)
    return np.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=True)


def optional_input(name: str, array) -> Optional[np.ndarray]:
    return None if array is None else as_input(name, array)


def writable(name: str, array) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name}: must be a numpy.ndarray, not {type(array).__name__}")
    if not array.flags.writeable:
        raise ValueError(f"{name}: is read-only")
    _numeric(name, array)
    if not array.dtype.isnative:
        raise ValueError(f"{name}: dtype {array.dtype.str} is not in native byte order")
    if not _in_place(array):
        raise ValueError(f"{name}: strides {array.strides} or its address are no "
                         f"multiples of its element size ({array.dtype.itemsize})")
    return array


def output(name: str, out, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """`out` checked for writing and for its shape (the core checks its
    dtype and strides, on the views it is given), or a new array of
    `shape` and `dtype`."""
    if out is None:
        return np.empty(shape, dtype=dtype)
    out = writable(name, out)
    if out.shape != tuple(shape):
        raise ValueError(f"{name}: shape {out.shape}, expected {tuple(shape)}")
    return out


def _lengths(valid_lengths, name: str = "valid_lengths"):
    """Lengths or offsets (their shape checked by the caller) as the core
    takes them: non-negative size_t, flattened."""
    values = np.asarray(valid_lengths)
    if values.dtype.kind not in "iu":
        raise TypeError(f"{name}: dtype {values.dtype} is not an integer type")
    values = values.reshape(-1)
    if values.size and values.min() < 0:
        raise ValueError(f"{name}: entries must be ≥ 0")
    return np.ascontiguousarray(values, dtype=np.uintp)


def offsets(name: str, values):
    """Sequence offsets (cu_seqlens) as the core takes them: one axis."""
    if np.ndim(values) != 1:
        raise ValueError(f"{name}: has {np.ndim(values)} dimensions, expected 1")
    return _lengths(values, name)


def _window_side(value) -> Optional[int]:
    return None if value is None else integer("window", value, 0, 2**64 - 1)


def _per_head(name: str, values, heads: Optional[int]) -> list:
    """[] for None; on matrices (heads None) one number, else `heads`."""
    if values is None:
        return []
    if heads is None:
        return [float(values)]
    entries = np.asarray(values, dtype=np.float64)
    if entries.shape != (heads,):
        raise ValueError(f"{name}: shape {entries.shape}, expected ({heads},): "
                         "one entry per query head")
    return entries.tolist()


def masks(n: int, valid_lengths=None, causal: bool = False,
          causal_offset: int = 0, window=None, bias=None, visible=None,
          batch: Optional[int] = None, softcap: Optional[float] = None,
          alibi=None, sinks=None, heads: Optional[int] = None) -> tuple:
    """The masks as the core takes them: (valid_lengths, lengths_per_query,
    causal, causal_offset, window_left, window_right, bias, visible,
    softcap, alibi slopes, sinks). On matrices (batch None) the valid
    lengths are n, one per query, and `alibi` and `sinks` one number each;
    on (B, heads, n, m) tensors, B (one per batch entry) or (B, n) (one per
    query), and `heads` entries each. `window`: None or (left, right), a
    side None for unbounded. A boolean `visible` is viewed as uint8, without
    a copy."""
    if window is None:
        window = (None, None)
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise ValueError(f"window: must be (left, right), not {window!r}")
    left, right = _window_side(window[0]), _window_side(window[1])
    per_query = batch is None or np.ndim(valid_lengths) == 2
    if valid_lengths is not None:
        shapes = [(n,)] if batch is None else [(batch,), (batch, n)]
        if np.shape(valid_lengths) not in shapes:
            raise ValueError(f"valid_lengths: shape {np.shape(valid_lengths)}, "
                             f"expected {' or '.join(map(str, shapes))}")
    lengths = None if valid_lengths is None else _lengths(valid_lengths)
    if visible is not None:
        visible = as_input("visible", visible)
        if visible.dtype == np.bool_:
            visible = visible.view(np.uint8)
    return (lengths, per_query, bool(causal),
            integer("causal_offset", causal_offset, -2**63, 2**63 - 1), left, right,
            optional_input("bias", bias), visible,
            None if softcap is None else float(softcap),
            _per_head("alibi_slopes" if batch is not None else "alibi_slope", alibi,
                      None if batch is None else heads),
            _per_head("sinks" if batch is not None else "sink", sinks,
                      None if batch is None else heads))


def shape_of(name: str, array, ndim: int) -> tuple:
    shape = np.shape(array)
    if len(shape) != ndim:
        raise ValueError(f"{name}: has {len(shape)} dimensions, expected {ndim}")
    return shape
