"""Argument handling shared by the package's functions: arrays in, results
allocated, masks converted. The compiled core checks the rest and raises
errors that name the argument."""

from __future__ import annotations

import inspect
from typing import Optional

import numpy as np

from . import _core


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


# The mask fields of the library's list (attnpool/mask_fields.h): (name,
# heads_name, kind, needs, help). Every mask keyword of the package is one
# of them: `name` for the functions on matrices, `heads_name` for the
# attention layers.
MASK_FIELDS = tuple(_core.mask_fields())

# Kinds of the fields a layer over packed sequences or paged caches does not
# take: per-query lengths and n×m arrays (their rows are each sequence's).
PER_CALL_KINDS = ("lengths", "matrix", "booleans")


def _lengths_field(name, value, n, batch, heads):
    shapes = [(n,)] if batch is None else [(batch,), (batch, n)]
    if np.shape(value) not in shapes:
        raise ValueError(f"{name}: shape {np.shape(value)}, "
                         f"expected {' or '.join(map(str, shapes))}")
    return _lengths(value, name), batch is None or np.ndim(value) == 2


def _booleans_field(name, value, n, batch, heads):
    value = as_input(name, value)
    return value.view(np.uint8) if value.dtype == np.bool_ else value


def _head_number_field(name, value, n, batch, heads):
    if batch is None:
        return float(value)
    entries = np.asarray(value, dtype=np.float64)
    if entries.shape != (heads,):
        raise ValueError(f"{name}: shape {entries.shape}, expected ({heads},): "
                         "one entry per query head")
    return entries.tolist()


# A field's value as the core takes it, by its kind.
_MASK_VALUE = {
    "lengths": _lengths_field,
    "flag": lambda name, value, *_: bool(value),
    "position": lambda name, value, *_: integer(name, value, -2**63, 2**63 - 1),
    "count": lambda name, value, *_: integer(name, value, 0, 2**64 - 1),
    "matrix": lambda name, value, *_: as_input(name, value),
    "booleans": _booleans_field,
    "number": lambda name, value, *_: float(value),
    "head_number": _head_number_field,
}


def mask_arguments(function: str, mask: dict, n: int,
                   batch: Optional[int] = None, heads: Optional[int] = None,
                   per_sequence: bool = False) -> dict:
    """The mask keywords of a call (`mask`, a field's value None for
    absent) as the core takes them: on matrices (batch None) by the fields'
    names, valid lengths n (one per query) and a number per head_number
    field; on (B, heads, n, m) tensors by their heads names, valid lengths B
    (one per batch entry) or (B, n) (one per query) and `heads` entries per
    head_number field. `per_sequence`: the layers over packed sequences and
    paged caches, which take no lengths nor n×m arrays. An unknown keyword
    is a TypeError naming `function`."""
    layers = batch is not None
    known = {}
    for name, heads_name, kind, _, _ in MASK_FIELDS:
        if not (per_sequence and kind in PER_CALL_KINDS):
            known[heads_name if layers else name] = kind
    converted = {}
    for name, value in mask.items():
        if name not in known:
            raise TypeError(f"{function}() got an unexpected keyword argument "
                            f"{name!r}")
        if value is not None:
            converted[name] = _MASK_VALUE[known[name]](name, value, n, batch, heads)
    return converted


def takes_mask(layers: bool = False, per_sequence: bool = False):
    """Gives a function taking the mask keywords (``**mask``) their
    signature and documentation, from the library's list: one keyword-only
    parameter per field (default None: absent), and a line of help each."""
    def decorate(function):
        signature = inspect.signature(function)
        parameters = [p for p in signature.parameters.values()
                      if p.kind != inspect.Parameter.VAR_KEYWORD]
        lines = []
        for name, heads_name, kind, _, help in MASK_FIELDS:
            if per_sequence and kind in PER_CALL_KINDS:
                continue
            keyword = heads_name if layers else name
            parameters.append(inspect.Parameter(
                keyword, inspect.Parameter.KEYWORD_ONLY, default=None))
            lines.append(f"    ``{keyword}``: {help}.")
        function.__signature__ = signature.replace(parameters=parameters)
        function.__doc__ = ((function.__doc__ or "").rstrip() +
                            "\n\n    Mask keywords (attnpool/mask_fields.h):\n\n" +
                            "\n".join(lines) + "\n")
        return function
    return decorate


def shape_of(name: str, array, ndim: int) -> tuple:
    shape = np.shape(array)
    if len(shape) != ndim:
        raise ValueError(f"{name}: has {len(shape)} dimensions, expected {ndim}")
    return shape
