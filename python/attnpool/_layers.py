"""The attention layers on (batch, heads, rows, columns) arrays."""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _core
from ._elements import element, float32_queries, is_narrow
from ._checks import (as_input, float_dtype, mask_arguments, offsets,
                      optional_input, output, shape_of, takes_mask, threads_of)


def _tensors(queries, keys, values):
    queries, keys, values = as_input("queries", queries), as_input("keys", keys), as_input("values", values)
    return queries, keys, values, float_dtype("queries", queries)


@takes_mask(layers=True)
def scaled_dot_product_attention(queries, keys, values, *,
                                 scale: Optional[float] = None,
                                 empty_rows: str = "nan",
                                 out: Optional[np.ndarray] = None,
                                 threads: Optional[int] = None,
                                 **mask) -> np.ndarray:
    """softmax(scale · Q Kᵀ + bias, masked) · V per (batch, head).

    queries (B, Hq, n, d), keys (B, Hkv, m, d), values (B, Hkv, m, dv) →
    (B, Hq, n, dv); Hkv divides Hq (grouped-query attention: query head h
    reads key/value head h // (Hq / Hkv)). ``scale`` None: 1/√d. The mask
    keywords below: ``valid_lengths`` B entries (one per batch entry) or
    (B, n) (one per query); query i sits at key position p = i +
    ``causal_offset``; ``bias`` and ``visible`` (B or 1, Hq or 1, n, m),
    broadcast like NumPy; ``alibi_slopes`` and ``sinks`` (Hq,), one per
    query head (the standard slopes: :func:`alibi_slopes`). Key blocks
    outside every query's window are skipped. PyTorch CPU tensors are read
    without a copy.

    Keys and values may be stored in reduced precision, as KV caches are
    (each its own, and the queries too): uint16 bfloat16 bit patterns,
    float16, or :class:`Int8Rows` (data (B, H, m, d), scales (B, H, m));
    the result is float32. Decoding reads them in place; bfloat16 queries
    and keys take the CPU's bf16 dot-product instruction where it has one.
    """
    result = _core.scaled_dot_product_attention_plain(
        queries, keys, values, scale, empty_rows, out, threads, mask)
    if result is not NotImplemented:
        return result
    # (Arguments that need converting: the core's plain path took none.)
    if is_narrow(queries) or is_narrow(keys) or is_narrow(values):
        queries = element("queries", queries)
        keys, values = element("keys", keys), element("values", values)
        return _sdpa(_core.scaled_dot_product_attention_elements, queries,
                     (*keys, *values), np.float32, mask, scale,
                     empty_rows, out, threads)
    queries, keys, values, dtype = _tensors(queries, keys, values)
    return _sdpa(_core.scaled_dot_product_attention, queries, (keys, values),
                 dtype, mask, scale, empty_rows, out, threads)


def _sdpa(function, queries, keys_values: tuple, dtype, mask: dict,
          scale, empty_rows: str, out, threads) -> np.ndarray:
    """One SDPA call of the core: keys_values as `function` takes them, the
    values' array at index len // 2 (after the keys' arguments)."""
    query_arguments = queries if isinstance(queries, tuple) else (queries,)
    b, h, n, _ = shape_of("queries", query_arguments[0], 4)
    dv = shape_of("values", keys_values[len(keys_values) // 2], 4)[3]
    out = output("out", out, (b, h, n, dv), dtype)
    function(*query_arguments, *keys_values, out,
             mask_arguments("scaled_dot_product_attention", mask, n, batch=b,
                            heads=h),
             None if scale is None else float(scale), empty_rows,
             threads_of(threads))
    return out


@takes_mask(layers=True, per_sequence=True)
def scaled_dot_product_attention_varlen(queries, keys, values, query_offsets,
                                        key_offsets, *,
                                        scale: Optional[float] = None,
                                        empty_rows: str = "nan",
                                        out: Optional[np.ndarray] = None,
                                        threads: Optional[int] = None,
                                        **mask) -> np.ndarray:
    """Scaled dot-product attention of sequences of different lengths packed
    along the first axis (flash-attention's varlen; batched decode with one
    query each), all in one parallel call.

    queries (Σn, Hq, d), keys (Σm, Hkv, d), values (Σm, Hkv, dv) → (Σn, Hq,
    dv); sequence b owns query rows [query_offsets[b], query_offsets[b+1])
    and key rows [key_offsets[b], key_offsets[b+1]) (cu_seqlens: count + 1
    entries from 0). Query i of a sequence of n queries and m keys sits at
    key position i + m − n + ``causal_offset`` (the ends aligned); the masks
    and adjustments as :func:`scaled_dot_product_attention`. Each
    sequence's result is bitwise what that function gives it alone.

    Keys and values may be stored in reduced precision (uint16 bfloat16
    bits, float16, or :class:`Int8Rows` with data (Σm, Hkv, d) and scales
    (Σm, Hkv)) beside float32 queries: the result is float32.
    """
    # (1, H, rows, d) views of the (rows, H, d) arrays, without copies.
    heads_first = (1, 0, 2)
    if is_narrow(keys) or is_narrow(values):
        queries = float32_queries(queries)
        function, dtype = _core.scaled_dot_product_attention_varlen_elements, np.float32
        keys_values = _stored_heads_first(("keys", keys), ("values", values),
                                          heads_first, lead=True)
        dv = _columns("values", values)
    else:
        queries, keys, values = as_input("queries", queries), as_input("keys", keys), as_input("values", values)
        function, dtype = _core.scaled_dot_product_attention_varlen, float_dtype(
            "queries", queries)
        shape_of("keys", keys, 3)
        dv = shape_of("values", values, 3)[2]
        keys_values = (keys.transpose(heads_first)[None],
                       values.transpose(heads_first)[None])
    total, h, _ = shape_of("queries", queries, 3)
    out = output("out", out, (total, h, dv), dtype)
    function(
        queries.transpose(heads_first)[None], *keys_values,
        out.transpose(heads_first)[None],
        offsets("query_offsets", query_offsets), offsets("key_offsets", key_offsets),
        mask_arguments("scaled_dot_product_attention_varlen", mask, total, batch=1,
                       heads=h, per_sequence=True),
        None if scale is None else float(scale), empty_rows, threads_of(threads))
    return out


@takes_mask(layers=True, per_sequence=True)
def scaled_dot_product_attention_paged(queries, key_cache, value_cache, block_table,
                                       lengths, query_offsets, *,
                                       scale: Optional[float] = None,
                                       empty_rows: str = "nan",
                                       out: Optional[np.ndarray] = None,
                                       threads: Optional[int] = None,
                                       **mask) -> np.ndarray:
    """Scaled dot-product attention over a paged KV cache (vLLM's layout),
    read in place: key_cache (blocks, block_size, Hkv, d) and value_cache
    (blocks, block_size, Hkv, dv) pools; ``block_table`` (count, max
    blocks) int32, row b listing sequence b's blocks in order;
    ``lengths`` (count,) its keys. queries (Σn, Hq, d) packed by
    ``query_offsets`` (count + 1 entries from 0) → (Σn, Hq, dv); batched
    decode is one query per sequence. Positions, masks and adjustments as
    :func:`scaled_dot_product_attention_varlen`; each sequence's result is
    bitwise that of its rows contiguous.

    The pools may be stored in reduced precision (uint16 bfloat16 bits,
    float16, or :class:`Int8Rows` with data (blocks, block_size, Hkv, d) and
    scales (blocks, block_size, Hkv)) beside float32 queries: the result is
    float32, each sequence's bitwise that of float32 pools holding the same
    values.
    """
    # (blocks, Hkv, block_size, d) views of the pools.
    heads_first = (0, 2, 1, 3)
    if is_narrow(key_cache) or is_narrow(value_cache):
        queries = float32_queries(queries)
        function, dtype = _core.scaled_dot_product_attention_paged_elements, np.float32
        pools = _stored_heads_first(("key_cache", key_cache),
                                    ("value_cache", value_cache), heads_first,
                                    lead=False)
        dv = _columns("value_cache", value_cache)
    else:
        queries = as_input("queries", queries)
        key_cache, value_cache = as_input("key_cache", key_cache), as_input("value_cache", value_cache)
        function, dtype = _core.scaled_dot_product_attention_paged, float_dtype(
            "queries", queries)
        shape_of("key_cache", key_cache, 4)
        dv = shape_of("value_cache", value_cache, 4)[3]
        pools = (key_cache.transpose(heads_first), value_cache.transpose(heads_first))
    total, h, _ = shape_of("queries", queries, 3)
    table = np.asarray(block_table)
    if table.dtype.kind not in "iu" or table.ndim != 2:
        raise ValueError(f"block_table: must be a 2-D integer array, not {table.dtype} "
                         f"of {table.ndim} dimensions")
    if table.size and (table.min() < np.iinfo(np.int32).min or
                       table.max() > np.iinfo(np.int32).max):
        raise ValueError("block_table: entries must fit int32")
    out = output("out", out, (total, h, dv), dtype)
    function(
        queries.transpose(1, 0, 2)[None], *pools,
        np.ascontiguousarray(table, dtype=np.int32),
        offsets("lengths", lengths), out.transpose(1, 0, 2)[None],
        offsets("query_offsets", query_offsets),
        mask_arguments("scaled_dot_product_attention_paged", mask, total, batch=1,
                       heads=h, per_sequence=True),
        None if scale is None else float(scale), empty_rows, threads_of(threads))
    return out


def _columns(name: str, stored) -> int:
    """The last axis of stored keys or values (an array or Int8Rows)."""
    return (stored.data if hasattr(stored, "scales") else as_input(name, stored)).shape[-1]


def _stored_heads_first(keys: tuple, values: tuple, axes: tuple, lead: bool) -> tuple:
    """Keys and values of any element type as the core's element calls take
    them, (array, type, scales) each: the arrays' axes in `axes` order (with
    a leading axis of 1 when `lead`), int8 scales likewise."""
    arguments = []
    for name, stored in (keys, values):
        data, type_name, scales = element(name, stored)
        if data.ndim != len(axes):
            raise ValueError(f"{name}: must have {len(axes)} dimensions, not {data.ndim}")
        data = data.transpose(axes)
        if scales is not None:
            scales = scales.transpose(axes[:-1])
        if lead:
            data = data[None]
            scales = None if scales is None else scales[None]
        arguments += [data, type_name, scales]
    return tuple(arguments)


def alibi_slopes(heads: int) -> np.ndarray:
    """The standard ALiBi slopes of ``heads`` heads (Press et al.):
    2^(−8(h+1)/H) for a power of two H; otherwise those of the power of two
    below H, then every other slope of twice that many."""
    if int(heads) != heads or heads < 0:
        raise ValueError(f"heads: must be an integer ≥ 0, not {heads!r}")
    return np.array(_core.alibi_slopes(int(heads)), dtype=np.float64)


def additive_attention(queries, keys, values, w_q, w_k, w_v, *,
                       empty_rows: str = "nan",
                       out: Optional[np.ndarray] = None,
                       threads: Optional[int] = None) -> np.ndarray:
    """Additive (Bahdanau) attention: score(q, k) = w_v · tanh(W_q q + W_k k),
    softmax over the keys, weighted sum of values.

    queries (B, H, n, dq), keys (B, H, m, dk), values (B, H, m, dv) →
    (B, H, n, dv); w_q (h, dq), w_k (h, dk), w_v (h,), the same for every
    head.
    """
    queries, keys, values, dtype = _tensors(queries, keys, values)
    b, h, n, _ = shape_of("queries", queries, 4)
    dv = shape_of("values", values, 4)[3]
    out = output("out", out, (b, h, n, dv), dtype)
    _core.additive_attention(as_input("w_q", w_q), as_input("w_k", w_k), as_input("w_v", w_v),
                             queries, keys, values, out, empty_rows,
                             threads_of(threads))
    return out


@takes_mask(layers=True)
def multi_head_attention(queries, keys, values, w_q, w_k, w_v, w_o, *,
                         heads: int, b_q=None, b_k=None, b_v=None, b_o=None,
                         empty_rows: str = "nan",
                         out: Optional[np.ndarray] = None,
                         threads: Optional[int] = None, **mask) -> np.ndarray:
    """Multi-head attention: concat_h(attention(X_q W_q^h, X_k W_k^h,
    X_v W_v^h)) · W_o + b_o, each head scaled dot-product attention with
    scale 1/√dh.

    queries (B, n, d_q), keys (B, m, d_k), values (B, m, d_v) → (B, n,
    d_out). w_q (d_q, H·dh), w_k (d_k, H·dh), w_v (d_v, H·dv), w_o (H·dv,
    d_out) — PyTorch's nn.MultiheadAttention weights, transposed; biases
    optional. Head h owns columns [h·dh, (h+1)·dh).
    """
    queries, keys, values, dtype = _tensors(queries, keys, values)
    b, n, _ = shape_of("queries", queries, 3)
    shape_of("keys", keys, 3)
    shape_of("values", values, 3)
    w_o = as_input("w_o", w_o)
    d_out = shape_of("w_o", w_o, 2)[1]
    out = output("out", out, (b, n, d_out), dtype)
    if heads < 1:
        raise ValueError("heads: must be at least 1")
    # The core's tensors have a heads axis: one sequence per batch entry.
    _core.multi_head_attention(
        int(heads), as_input("w_q", w_q), as_input("w_k", w_k), as_input("w_v", w_v), w_o,
        optional_input("b_q", b_q), optional_input("b_k", b_k), optional_input("b_v", b_v),
        optional_input("b_o", b_o), queries[:, None], keys[:, None], values[:, None],
        out[:, None],
        mask_arguments("multi_head_attention", mask, n, batch=b, heads=int(heads)),
        empty_rows, threads_of(threads))
    return out
