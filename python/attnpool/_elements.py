"""Keys and values in reduced precision, as inference engines keep their KV
caches: bfloat16 (uint16 bit patterns: NumPy has no bfloat16), binary16
(NumPy's float16) and int8 rows with one float32 scale each (Int8Rows).
Every computation is in float32, on the float values the elements hold."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _core
from ._checks import as_input


class Int8Rows(NamedTuple):
    """int8 rows with one scale per row: element (..., r, c) is
    ``scales[..., r] * data[..., r, c]``. :func:`quantize_rows` makes one."""
    data: np.ndarray
    scales: np.ndarray


def _of_dtype(name: str, array, dtype, what: str) -> np.ndarray:
    """`array` as a contiguous ndarray of `dtype`, which it must have: a
    conversion would round twice (float64 → float32 → bfloat16) or read
    numbers as bit patterns."""
    array = as_input(name, array)
    if array.dtype != dtype:
        raise TypeError(f"{name}: dtype {array.dtype}; {what}")
    return np.ascontiguousarray(array)


def to_bfloat16(x) -> np.ndarray:
    """float32 → bfloat16 bit patterns (uint16, the same shape): rounded to
    nearest, ties to even; ±inf beyond the largest finite value; NaN kept."""
    x = _of_dtype("x", x, np.float32, "to_bfloat16 rounds float32 values")
    out = np.empty(x.shape, dtype=np.uint16)
    _core.to_bfloat16(x.reshape(-1), out.reshape(-1))
    return out


def bfloat16_to_float(bits) -> np.ndarray:
    """bfloat16 bit patterns (uint16) → float32, exactly."""
    bits = _of_dtype("bits", bits, np.uint16,
                     "bfloat16_to_float takes uint16 bit patterns")
    out = np.empty(bits.shape, dtype=np.float32)
    _core.bfloat16_to_float(bits.reshape(-1), out.reshape(-1))
    return out


def quantize_rows(x) -> Int8Rows:
    """Each row (last axis) of float32 ``x`` to int8 with the scale
    max|row| / 127, rounded to nearest even."""
    x = _of_dtype("x", x, np.float32, "quantize_rows takes float32 rows")
    rows = (x.reshape(int(np.prod(x.shape[:-1])), x.shape[-1]) if x.ndim
            else x.reshape(1, 1))
    data = np.empty(rows.shape, dtype=np.int8)
    scales = np.empty(rows.shape[0], dtype=np.float32)
    _core.quantize_rows(rows, data, scales)
    return Int8Rows(data.reshape(x.shape), scales.reshape(x.shape[:-1]))


def dequantize_rows(rows: Int8Rows) -> np.ndarray:
    """The float32 values of int8 rows: scale · element, rounded once."""
    return (rows.scales[..., None].astype(np.float32) *
            rows.data.astype(np.float32)).astype(np.float32)


# The core's element types (element.h's table): name -> (storage dtype,
# scaled). Bit patterns are unsigned integers, as bfloat16's uint16.
_TYPES = {name: (np.dtype(descr), scaled)
          for name, descr, scaled in _core.element_types()}
# The unscaled types by the dtype of their arrays.
_BY_DTYPE = {dtype: name for name, (dtype, scaled) in _TYPES.items()
             if not scaled}


class ScaledRows(NamedTuple):
    """Rows of a scaled element type (:func:`element_types`): ``data`` holds
    its stored values (int8, or the bit patterns of a float8 type as uint8),
    ``scales`` one float32 scale per row (shaped as ``data`` without its
    last axis; a broadcast scale is one for every row); element (..., r, c)
    is ``scales[..., r]`` times the value ``data[..., r, c]`` holds, rounded
    once."""
    data: np.ndarray
    scales: np.ndarray
    element: str


def element_types() -> dict:
    """The element types keys and values may be stored in: name ->
    (the dtype of its arrays, whether its rows carry scales)."""
    return dict(_TYPES)


def widen_rows(rows) -> np.ndarray:
    """Keys or values of any element type (an array of an unscaled type, or
    :class:`ScaledRows`, :class:`Int8Rows`) back in float32: the values
    every computation reads, each element exact but a scaled type's
    ``scale * value``, rounded once."""
    array, type_name, scales = element("rows", rows)
    if array.ndim == 0:
        raise ValueError("rows: has no axis; rows are its last")
    cols = array.shape[-1]
    count = int(np.prod(array.shape[:-1]))
    if scales is not None:
        if scales.ndim == 0:  # one scale for every row
            scales = np.broadcast_to(scales, array.shape[:-1])
        if scales.shape == array.shape[:-1]:
            scales = scales.reshape(count)  # (else the core names it)
    out = np.empty((count, cols), dtype=np.float32)
    _core.widen_rows(array.reshape(count, cols), type_name, scales, out)
    return out.reshape(array.shape)


def is_narrow(array) -> bool:
    """Whether keys or values are stored in a reduced-precision type."""
    return isinstance(array, (Int8Rows, ScaledRows)) or (
        isinstance(array, np.ndarray) and
        _BY_DTYPE.get(array.dtype.newbyteorder("="), "float32") != "float32")


def element(name: str, array) -> tuple:
    """Keys or values as the core's element functions take them: (array,
    element type name, scales or None); the core reads the arrays in
    place where their rows are contiguous and copies them once otherwise."""
    if isinstance(array, Int8Rows):
        array = ScaledRows(array.data, array.scales, "int8")
    if isinstance(array, ScaledRows):
        if not _TYPES.get(array.element, (None, False))[1]:
            raise ValueError(f"{name}.element: {array.element!r} is not a scaled "
                             f"element type ({', '.join(n for n, (_, s) in _TYPES.items() if s)})")
        return (as_input(name + ".data", array.data), array.element,
                np.asarray(as_input(name + ".scales", array.scales),
                           dtype=np.float32))
    array = as_input(name, array)
    if array.dtype not in _BY_DTYPE:
        kinds = "; ".join(f"{n} ({d})" for n, (d, s) in _TYPES.items() if not s)
        raise TypeError(f"{name}: dtype {array.dtype} is not an element type of "
                        f"reduced-precision calls ({kinds}; ScaledRows)")
    return array, _BY_DTYPE[array.dtype], None


def float32_queries(queries) -> np.ndarray:
    queries = as_input("queries", queries)
    if queries.dtype != np.float32:
        raise TypeError(f"queries: dtype {queries.dtype}; reduced-precision keys "
                        "or values take float32 queries")
    return queries
