"""Reduced-precision keys and values (bfloat16 bits, float16, Int8Rows,
float8 ScaledRows):
bitwise the float32 calls on the values they hold, on every target (but
int8 rows in a decode, whose scales fold into its dots and weights: there
within a rounding of each score); the conversions; errors naming the
argument."""
import numpy as np
import pytest

import attnpool
from conftest import rng_for


def bfloat16_reference(x):
    """float32 → bfloat16 bits, nearest even, NaN quiet: by integer rounding."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def test_conversions(target):
    rng = rng_for("conversions", target)
    x = np.concatenate([rng.standard_normal(1000).astype(np.float32) * 1e3,
                        np.array([0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, 1e-40],
                                 dtype=np.float32)])
    bits = attnpool.to_bfloat16(x)
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(bits, bfloat16_reference(x))
    back = attnpool.bfloat16_to_float(bits)
    np.testing.assert_array_equal(back.view(np.uint32), bits.astype(np.uint32) << 16)
    rows = attnpool.quantize_rows(x[:1000].reshape(10, 100))
    assert rows.data.dtype == np.int8 and rows.scales.shape == (10,)
    np.testing.assert_array_equal(
        rows.scales, np.abs(x[:1000].reshape(10, 100)).max(axis=1) / np.float32(127))
    held = attnpool.dequantize_rows(rows)
    assert np.all(np.abs(held - x[:1000].reshape(10, 100)) <=
                  rows.scales[:, None] * 0.5001)
    empty_rows = attnpool.quantize_rows(np.zeros((3, 0), np.float32))
    assert empty_rows.data.shape == (3, 0) and (empty_rows.scales == 0).all()
    # widen_rows: any type's rows back in float32, as the calls read them.
    np.testing.assert_array_equal(attnpool.widen_rows(bits), back)
    np.testing.assert_array_equal(attnpool.widen_rows(rows), held)
    scaled = attnpool.ScaledRows(rows.data.reshape(2, 5, 100),
                                 rows.scales.reshape(2, 5), "int8")
    np.testing.assert_array_equal(attnpool.widen_rows(scaled),
                                  held.reshape(2, 5, 100))
    one = attnpool.ScaledRows(rows.data, np.float32(0.5), "int8")
    np.testing.assert_array_equal(attnpool.widen_rows(one),
                                  rows.data.astype(np.float32) * np.float32(0.5))
    assert set(attnpool.element_types()) >= {"float32", "bfloat16", "int8"}
    # float8: every pattern widens to the format's value (times the scale).
    for name in ("float8_e4m3fn", "float8_e5m2"):
        patterns = np.arange(256, dtype=np.uint8).reshape(16, 16)
        scales = np.float32(2.0) ** np.arange(-8, 8, dtype=np.float32)
        widened = attnpool.widen_rows(attnpool.ScaledRows(patterns, scales, name))
        want = scales[:, None] * float8_values(name).reshape(16, 16).astype(np.float32)
        np.testing.assert_array_equal(widened, want)
    with pytest.raises(ValueError, match="rows.element"):
        attnpool.widen_rows(attnpool.ScaledRows(rows.data, rows.scales, "bfloat16"))
    with pytest.raises(ValueError, match="rows_scales"):
        attnpool.widen_rows(attnpool.ScaledRows(rows.data, rows.scales[:3], "int8"))


def assert_held(got, want, queries, keys, values, held_keys, held_values,
                dot=True):
    """`got` on narrow keys and values against `want`, the float32 call on
    the values they hold: bitwise, or with int8 rows in a scaled-dot call
    (their scales fold in a decode, element.h) within what a rounding of
    each score moves it, as the C++ tests' RequireWithinScoreRounding."""
    int8 = any(isinstance(a, attnpool.Int8Rows) for a in (keys, values))
    if not (dot and int8):
        np.testing.assert_array_equal(got, want)
        return
    d = queries.shape[-1]
    abs_dot = (np.abs(queries.reshape(-1, d)).astype(np.float64) @
               np.abs(held_keys.reshape(-1, d)).astype(np.float64).T).max()
    score_error = 2 * (d + 2) * 2.0**-24 * abs_dot / np.sqrt(d)
    np.testing.assert_allclose(
        got, want, rtol=0,
        atol=(4 * score_error + 1e-6) * np.abs(held_values).max())


# Rows with scales: int8 rows and the scaled types' ScaledRows.
SCALED = (attnpool.Int8Rows, attnpool.ScaledRows)


def float8_values(name):
    """The 256 values of an OCP float8 type, from the format's definition:
    E4M3FN (bias 7, no infinities, S.1111.111 NaN), E5M2 (bias 15, IEEE)."""
    exponent_bits = 4 if name == "float8_e4m3fn" else 5
    mantissa_bits = 7 - exponent_bits
    bias = 2 ** (exponent_bits - 1) - 1
    bits = np.arange(256)
    e = (bits >> mantissa_bits) & (2 ** exponent_bits - 1)
    m = bits & (2 ** mantissa_bits - 1)
    magnitude = np.where(e == 0, m * 2.0 ** (1 - bias - mantissa_bits),
                         (2 ** mantissa_bits + m) * 2.0 ** (e - bias - mantissa_bits))
    if exponent_bits == 5:
        magnitude = np.where(e == 31, np.where(m == 0, np.inf, np.nan), magnitude)
    else:
        magnitude = np.where((bits & 0x7F) == 0x7F, np.nan, magnitude)
    return np.where(bits & 0x80, -magnitude, magnitude)


def float8_rows(array, name):
    """(ScaledRows, held float32 values): each row (last axis) scaled by
    max|row| / the largest finite value, each element the nearest pattern."""
    values = float8_values(name)
    positive = values[:0x80]
    finite = positive[np.isfinite(positive)]  # increasing with the bits
    largest = np.abs(array).max(axis=-1)
    scales = np.where(largest > 0, largest / np.float32(finite[-1]),
                      1).astype(np.float32)
    ratio = np.abs(array / scales[..., None]).astype(np.float64)
    above = np.clip(np.searchsorted(finite, ratio), 1, len(finite) - 1)
    below = above - 1
    nearest = np.where(ratio - finite[below] <= finite[above] - ratio, below, above)
    bits = (nearest | np.where(np.signbit(array), 0x80, 0)).astype(np.uint8)
    held = scales[..., None] * values[bits].astype(np.float32)
    return attnpool.ScaledRows(bits, scales, name), held.astype(np.float32)


def narrow_forms(rng, array):
    """(stored, held float32 values) for each element type."""
    bits = attnpool.to_bfloat16(array)
    half = array.astype(np.float16)
    rows = attnpool.quantize_rows(array)
    return [(bits, attnpool.bfloat16_to_float(bits)),
            (half, half.astype(np.float32)),
            (rows, attnpool.dequantize_rows(rows)),
            float8_rows(array, "float8_e4m3fn"),
            float8_rows(array, "float8_e5m2")]


@pytest.mark.parametrize("n", [2, 40])
def test_attention_pool(target, n):
    rng = rng_for("pool", target, n)
    q = rng.standard_normal((n, 16)).astype(np.float32)
    k = rng.standard_normal((300, 16)).astype(np.float32)
    v = rng.standard_normal((300, 5)).astype(np.float32)
    for (keys, held_keys), (values, held_values) in zip(narrow_forms(rng, k),
                                                        narrow_forms(rng, v)[::-1]):
        for spec in ({"distance": "dot", "kernel": "exp", "normalize": "softmax"},
                     {"distance": "sqeuclidean", "kernel": "gaussian",
                      "bandwidth": 3.0}):
            got = attnpool.attention_pool(q, keys, values, causal=True,
                                          causal_offset=250, **spec)
            want = attnpool.attention_pool(q, held_keys, held_values, causal=True,
                                           causal_offset=250, **spec)
            assert_held(got, want, q, keys, values, held_keys, held_values,
                        dot=spec["distance"] == "dot")


def test_shards_and_distances(target):
    rng = rng_for("shards", target)
    q = rng.standard_normal((7, 12)).astype(np.float32)
    k = rng.standard_normal((90, 12)).astype(np.float32)
    v = rng.standard_normal((90, 4)).astype(np.float32)
    for (keys, held_keys), (values, held_values) in zip(narrow_forms(rng, k),
                                                        narrow_forms(rng, v)):
        split = lambda a, lo, hi: (a._replace(data=a.data[lo:hi], scales=a.scales[lo:hi])
                                   if isinstance(a, SCALED) else a[lo:hi])
        state = attnpool.PoolState.partial(q, split(keys, 0, 40), split(values, 0, 40))
        state.merge(attnpool.PoolState.partial(q, split(keys, 40, 90),
                                               split(values, 40, 90), key_offset=40))
        held = attnpool.PoolState.partial(q, held_keys[:40], held_values[:40])
        held.merge(attnpool.PoolState.partial(q, held_keys[40:], held_values[40:],
                                              key_offset=40))
        assert_held(state.finish(), held.finish(), q, keys, values, held_keys,
                    held_values)
        for distance in attnpool.DISTANCES:
            np.testing.assert_array_equal(
                attnpool.pairwise_distances(q, keys, distance),
                attnpool.pairwise_distances(q, held_keys, distance))


def test_sdpa_grouped_heads(target):
    rng = rng_for("sdpa", target)
    q = rng.standard_normal((2, 4, 3, 32)).astype(np.float32)
    k = rng.standard_normal((2, 2, 200, 32)).astype(np.float32)
    v = rng.standard_normal((2, 2, 200, 32)).astype(np.float32)
    for (keys, held_keys), (values, held_values) in zip(narrow_forms(rng, k),
                                                        narrow_forms(rng, v)):
        got = attnpool.scaled_dot_product_attention(q, keys, values, causal=True,
                                                    causal_offset=197)
        want = attnpool.scaled_dot_product_attention(q, held_keys, held_values,
                                                     causal=True, causal_offset=197)
        assert_held(got, want, q, keys, values, held_keys, held_values)


def test_strided_caches_in_place_or_copied_once():
    # A cache kept (B, N, H, D), passed heads first as a transposed view: its
    # rows are contiguous (int8 scales: any positive strides), so it is read
    # in place; every other column is not, nor are broadcast scales, so they
    # are copied once. Either way the bits of the contiguous call.
    import tracemalloc
    from attnpool import _core
    rng = rng_for("strided caches")
    q = rng.standard_normal((1, 2, 1, 32)).astype(np.float32)
    k = rng.standard_normal((1, 2000, 2, 32)).astype(np.float32)
    v = rng.standard_normal((1, 2000, 2, 16)).astype(np.float32)
    heads_first = lambda a: (a._replace(data=a.data.transpose(0, 2, 1, 3),
                                        scales=a.scales.transpose(0, 2, 1))
                             if isinstance(a, SCALED)
                             else a.transpose(0, 2, 1, 3))
    dense = lambda a: (a._replace(data=np.ascontiguousarray(a.data),
                                  scales=np.ascontiguousarray(a.scales))
                       if isinstance(a, SCALED) else np.ascontiguousarray(a))
    halved = lambda a: (a._replace(data=a.data[..., ::2])
                        if isinstance(a, SCALED) else a[..., ::2])
    for (keys, _), (values, _) in zip(narrow_forms(rng, k), narrow_forms(rng, v)):
        keys, values = heads_first(keys), heads_first(values)
        want = attnpool.scaled_dot_product_attention(q, dense(keys), dense(values))
        before = _core.input_copies()
        tracemalloc.start()
        got = attnpool.scaled_dot_product_attention(q, keys, values)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert _core.input_copies() == before
        assert peak < 8192, "a copy of the keys or their scales (16 KB on)"
        np.testing.assert_array_equal(got, want)
        got = attnpool.scaled_dot_product_attention(q, keys, halved(values))
        assert _core.input_copies() == before + 1
        np.testing.assert_array_equal(
            got, attnpool.scaled_dot_product_attention(q, dense(keys),
                                                       dense(halved(values))))
        if isinstance(keys, SCALED):
            shared = keys._replace(
                scales=np.broadcast_to(keys.scales[:, :, :1], keys.scales.shape))
            got = attnpool.scaled_dot_product_attention(q, shared, values)
            assert _core.input_copies() == before + 2
            np.testing.assert_array_equal(
                got, attnpool.scaled_dot_product_attention(q, dense(shared), values))


def test_varlen_and_paged(target):
    rng = rng_for("packed", target)
    query_offsets, key_offsets = [0, 3, 8, 9], [0, 7, 20, 21]
    q = rng.standard_normal((9, 4, 16)).astype(np.float32)
    k = rng.standard_normal((21, 2, 16)).astype(np.float32)
    v = rng.standard_normal((21, 2, 8)).astype(np.float32)
    # A pool of 12 blocks of 4 rows; the sequences' blocks scattered.
    pool_k = rng.standard_normal((12, 4, 2, 16)).astype(np.float32)
    pool_v = rng.standard_normal((12, 4, 2, 8)).astype(np.float32)
    table = np.array([[5, 2, 0, 0], [0, 9, 3, 11], [7, 0, 0, 0]], dtype=np.int32)
    lengths = [7, 13, 1]
    for ((keys, held_keys), (values, held_values),
         (pool_keys, held_pool_keys), (pool_values, held_pool_values)) in zip(
            narrow_forms(rng, k), narrow_forms(rng, v)[::-1],
            narrow_forms(rng, pool_k), narrow_forms(rng, pool_v)):
        got = attnpool.scaled_dot_product_attention_varlen(
            q, keys, values, query_offsets, key_offsets, causal=True)
        want = attnpool.scaled_dot_product_attention_varlen(
            q, held_keys, held_values, query_offsets, key_offsets, causal=True)
        assert got.dtype == np.float32 and got.shape == (9, 4, 8)
        assert_held(got, want, q, keys, values, held_keys, held_values)
        got = attnpool.scaled_dot_product_attention_paged(
            q, pool_keys, pool_values, table, lengths, query_offsets, causal=True)
        want = attnpool.scaled_dot_product_attention_paged(
            q, held_pool_keys, held_pool_values, table, lengths, query_offsets,
            causal=True)
        assert_held(got, want, q, pool_keys, pool_values, held_pool_keys,
                    held_pool_values)


def test_bfloat16_queries(target):
    # bf16 queries too: the bf16 dot-product tile where the CPU has one (a
    # score rounding from the float call on the held values), else bitwise.
    rng = rng_for("bf16 queries", target)
    q = rng.standard_normal((40, 64)).astype(np.float32)
    k = rng.standard_normal((300, 64)).astype(np.float32)
    v = rng.standard_normal((300, 16)).astype(np.float32)
    qb, kb, vb = (attnpool.to_bfloat16(a) for a in (q, k, v))
    held = [attnpool.bfloat16_to_float(a) for a in (qb, kb, vb)]
    spec = {"distance": "dot", "kernel": "exp", "normalize": "softmax"}
    got = attnpool.attention_pool(qb, kb, vb, **spec)
    path = attnpool.last_fused_path()
    # The tile runs exactly where the instruction is reported.
    assert (path == "tile_bf16") == (attnpool.bf16_dot_instruction() != "")
    want = attnpool.attention_pool(*held, **spec)
    if path == "tile_bf16":
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(v).max())
    else:
        np.testing.assert_array_equal(got, want)
    got = attnpool.scaled_dot_product_attention(
        qb.reshape(1, 2, 20, 64), kb.reshape(1, 1, 300, 64), vb.reshape(1, 1, 300, 16))
    want = attnpool.scaled_dot_product_attention(
        held[0].reshape(1, 2, 20, 64), held[1].reshape(1, 1, 300, 64),
        held[2].reshape(1, 1, 300, 16))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(v).max())


def test_errors():
    q = np.ones((2, 4), dtype=np.float32)
    k = attnpool.to_bfloat16(np.ones((3, 4), dtype=np.float32))
    v = np.ones((3, 2), dtype=np.float32)
    with pytest.raises(TypeError, match="queries"):
        attnpool.attention_pool(q.astype(np.float64), k, v)
    with pytest.raises(TypeError, match="values"):
        attnpool.attention_pool(q, k, v.astype(np.int32))
    with pytest.raises(ValueError, match="keys_scales"):
        attnpool.attention_pool(
            q, attnpool.Int8Rows(np.ones((3, 4), np.int8), np.ones(2, np.float32)), v)
    with pytest.raises(ValueError, match="return_weights"):
        attnpool.attention_pool(q, k, v, return_weights=True)
