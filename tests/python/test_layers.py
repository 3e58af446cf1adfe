"""The attention layers against NumPy formulas in float64 (and PyTorch's
scaled_dot_product_attention where PyTorch is installed)."""
import numpy as np
import pytest

import attnpool
from conftest import close, numpy_softmax, rng_for

DTYPES = (np.float32, np.float64)


def numpy_sdpa(q, k, v, scale, shown, bias):
    b, hq = q.shape[:2]
    group = hq // k.shape[1]
    out = np.empty(q.shape[:3] + (v.shape[3],))
    for i in range(b):
        for h in range(hq):
            s = scale * q[i, h].astype(np.float64) @ k[i, h // group].T.astype(np.float64)
            s = s + bias[min(i, bias.shape[0] - 1), min(h, bias.shape[1] - 1)]
            out[i, h] = numpy_softmax(s, shown[i]) @ v[i, h // group].astype(np.float64)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_scaled_dot_product_attention(target, dtype):
    rng = rng_for("sdpa", target, dtype)
    b, hq, hkv, n, m, d, dv = 2, 4, 2, 5, 13, 8, 6
    q = rng.standard_normal((b, hq, n, d)).astype(dtype)
    k = rng.standard_normal((b, hkv, m, d)).astype(dtype)
    v = rng.standard_normal((b, hkv, m, dv)).astype(dtype)
    bias = rng.standard_normal((1, hq, n, m)).astype(dtype)
    lengths = np.array([m, 7])
    shown = np.arange(m)[None, None, :] < lengths[:, None, None]
    shown = shown & (np.arange(m)[None, :] <= np.arange(n)[:, None] + 8)[None]
    got = attnpool.scaled_dot_product_attention(q, k, v, valid_lengths=lengths, causal=True,
                                                causal_offset=8, bias=bias)
    want = numpy_sdpa(q, k, v, 1 / np.sqrt(d), shown, bias.astype(np.float64))
    close(got, want, dtype, scale=10)


# scaled_dot_product_attention's options as the core reads them itself
# (its plain path), and forms of some that the package converts first (its
# converting path): the same call either way. Arrays, by their names,
# become converting forms through a function.
SDPA_PLAIN_AND_CONVERTED = [
    ({}, {"queries": memoryview}),
    ({"scale": 0.3}, {"keys": lambda a: a.astype(a.dtype.newbyteorder())}),
    ({"threads": 2, "empty_rows": "zero"}, {"threads": np.int16(2)}),
    ({"causal": True, "causal_offset": 3, "window_left": 4, "chunk": 5,
      "softcap": 2.5, "alibi_symmetric": False},
     {"causal_offset": np.int64(3), "softcap": np.float32(2.5)}),
    ({"out": "out", "causal": False}, {"out": lambda a: a.view(_Sub)}),
]


class _Sub(np.ndarray):
    pass


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("plain, converted", SDPA_PLAIN_AND_CONVERTED)
def test_sdpa_plain_and_converted_arguments_agree(dtype, plain, converted):
    rng = rng_for("sdpa plain", np.dtype(dtype).name, repr(plain))
    arrays = {"queries": rng.standard_normal((2, 4, 6, 8)).astype(dtype),
              "keys": rng.standard_normal((2, 2, 9, 8)).astype(dtype),
              "values": rng.standard_normal((2, 2, 9, 3)).astype(dtype)}
    options = dict(plain)
    if "out" in options:
        options["out"] = np.empty((2, 4, 6, 3), dtype)
    before = attnpool._core.plain_calls()
    want = attnpool.scaled_dot_product_attention(*arrays.values(), **options)
    assert attnpool._core.plain_calls() == before + 1
    for name, value in converted.items():
        if name in arrays:
            arrays[name] = value(arrays[name])
        elif callable(value):
            options[name] = value(np.empty((2, 4, 6, 3), dtype))
        else:
            options[name] = value
    got = attnpool.scaled_dot_product_attention(*arrays.values(), **options)
    assert attnpool._core.plain_calls() == before + 1
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_sliding_window(target, dtype):
    rng = rng_for("window", target, dtype)
    b, h, n, m, d = 1, 2, 40, 300, 16
    q = rng.standard_normal((b, h, n, d)).astype(dtype)
    k = rng.standard_normal((b, h, m, d)).astype(dtype)
    v = rng.standard_normal((b, h, m, 8)).astype(dtype)
    # Mistral-style: each of the last n tokens sees the 64 keys up to itself.
    offset = m - n
    got = attnpool.scaled_dot_product_attention(q, k, v, causal=True, causal_offset=offset,
                                                window_left=63)
    position = np.arange(n)[:, None] + offset
    shown = (np.arange(m)[None, :] <= position) & (np.arange(m)[None, :] >= position - 63)
    want = numpy_sdpa(q, k, v, 1 / np.sqrt(d), np.broadcast_to(shown, (b, n, m)),
                      np.zeros((1, 1, n, m)))
    close(got, want, dtype, scale=10)
    with pytest.raises(ValueError, match="window_left"):
        attnpool.scaled_dot_product_attention(q, k, v, window_left=-1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_chunks_and_symmetric_alibi(target, dtype):
    rng = rng_for("chunks", target, dtype)
    b, h, n, m, d = 1, 2, 30, 100, 8
    q = rng.standard_normal((b, h, n, d)).astype(dtype)
    k = rng.standard_normal((b, h, m, d)).astype(dtype)
    v = rng.standard_normal((b, h, m, 4)).astype(dtype)
    # Llama 4's local layers: causal within chunks of 16 keys.
    offset = m - n
    got = attnpool.scaled_dot_product_attention(q, k, v, causal=True, causal_offset=offset,
                                                chunk=16)
    position = np.arange(n)[:, None] + offset
    key = np.arange(m)[None, :]
    shown = (key <= position) & (key // 16 == position // 16)
    zeros = np.zeros((1, 1, n, m))
    want = numpy_sdpa(q, k, v, 1 / np.sqrt(d), np.broadcast_to(shown, (b, n, m)), zeros)
    close(got, want, dtype, scale=10)
    # An encoder's symmetric ALiBi: −slope·|j − p| on both sides.
    slopes = attnpool.alibi_slopes(h)
    got = attnpool.scaled_dot_product_attention(q, k, v, causal_offset=offset,
                                                alibi_slopes=slopes, alibi_symmetric=True)
    bias = -slopes.astype(dtype).astype(np.float64)[None, :, None, None] * np.abs(key - position)
    want = numpy_sdpa(q, k, v, 1 / np.sqrt(d), np.ones((b, n, m), bool), bias)
    close(got, want, dtype, scale=10)
    for chunk in (0, 2**62 + 1):  # chunks are [1, 2^62]
        with pytest.raises(ValueError, match="chunk"):
            attnpool.scaled_dot_product_attention(q, k, v, chunk=chunk)
    assert any(field[0] == "chunk" for field in attnpool.mask_fields())


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_softcap_alibi_sinks(target, dtype):
    rng = rng_for("adjusted", target, dtype)
    b, h, n, m, d, dv = 2, 4, 6, 50, 16, 5
    q = rng.standard_normal((b, h, n, d)).astype(dtype)
    k = rng.standard_normal((b, h, m, d)).astype(dtype)
    v = rng.standard_normal((b, h, m, dv)).astype(dtype)
    slopes = attnpool.alibi_slopes(h)
    np.testing.assert_array_equal(slopes, 2.0 ** -np.array([2.0, 4.0, 6.0, 8.0]))
    sinks = np.array([0.5, -1.0, 3.0, 0.0])
    lengths = np.array([m, 0])  # batch entry 1 sees no key: the sinks' 0
    got = attnpool.scaled_dot_product_attention(
        q, k, v, valid_lengths=lengths, causal=True, causal_offset=m - n, softcap=2.0,
        alibi_slopes=slopes, sinks=sinks)
    scores = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / np.sqrt(d)
    distance = np.arange(m)[None, :] - (np.arange(n)[:, None] + m - n)
    logits = (2.0 * np.tanh(scores / 2.0) +
              slopes.astype(dtype).astype(np.float64)[None, :, None, None] * distance)
    shown = (distance <= 0)[None, None] & (np.arange(m) < lengths[:, None, None, None])
    logits = np.where(shown, logits, -np.inf)
    sink = sinks.astype(dtype).astype(np.float64)[None, :, None, None]
    top = np.maximum(logits.max(-1, keepdims=True), sink)
    p = np.exp(logits - top)
    want = p / (p.sum(-1, keepdims=True) + np.exp(sink - top)) @ v.astype(np.float64)
    close(got, want, dtype, scale=10)
    assert (got[1] == 0).all()
    with pytest.raises(ValueError, match="sinks"):
        attnpool.scaled_dot_product_attention(q, k, v, sinks=sinks[:3])
    with pytest.raises(ValueError, match="softcap"):
        attnpool.scaled_dot_product_attention(q, k, v, softcap=0.0)
    # The pool: one slope and one sink, the sink in shard 0's state only.
    q2, k2, v2 = q[0, 0], k[0, 0], v[0, 0]
    kwargs = dict(distance="dot", kernel="exp", normalize="softmax", softcap=2.0,
                  alibi_slope=0.25, sink=1.0, causal=True, causal_offset=m - n)
    whole = attnpool.attention_pool(q2, k2, v2, **kwargs)
    first = attnpool.PoolState.partial(q2, k2[:20], v2[:20], **kwargs)
    rest = attnpool.PoolState.partial(q2, k2[20:], v2[20:], key_offset=20, **kwargs)
    close(first.merge(rest).finish(), whole, dtype, scale=10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_varlen(target, dtype):
    # (Σn, H, d) packed sequences with grouped heads and sinks: each
    # sequence's result is bitwise that of scaled_dot_product_attention on
    # it alone, causal with its end aligned.
    rng = rng_for("varlen", target, dtype)
    lengths = [(4, 30), (0, 3), (1, 70), (9, 9)]
    query_offsets = np.cumsum([0] + [n for n, _ in lengths])
    key_offsets = np.cumsum([0] + [m for _, m in lengths])
    q = rng.standard_normal((query_offsets[-1], 4, 8)).astype(dtype)
    k = rng.standard_normal((key_offsets[-1], 2, 8)).astype(dtype)
    v = rng.standard_normal((key_offsets[-1], 2, 5)).astype(dtype)
    sinks = np.array([0.0, 1.0, -1.0, 0.5])
    got = attnpool.scaled_dot_product_attention_varlen(
        q, k, v, query_offsets, key_offsets, causal=True, window_left=6, sinks=sinks)
    assert got.shape == (query_offsets[-1], 4, 5)
    for b, (n, m) in enumerate(lengths):
        qs = slice(query_offsets[b], query_offsets[b + 1])
        ks = slice(key_offsets[b], key_offsets[b + 1])
        alone = attnpool.scaled_dot_product_attention(
            q[qs].transpose(1, 0, 2)[None], k[ks].transpose(1, 0, 2)[None],
            v[ks].transpose(1, 0, 2)[None], causal=True, causal_offset=m - n,
            window_left=6, sinks=sinks)
        np.testing.assert_array_equal(got[qs], alone[0].transpose(1, 0, 2))
    with pytest.raises(ValueError, match="key_offsets"):
        attnpool.scaled_dot_product_attention_varlen(q, k, v, query_offsets, key_offsets[:-1])
    with pytest.raises(ValueError, match="query_offsets"):
        attnpool.scaled_dot_product_attention_varlen(q, k, v, query_offsets + 1, key_offsets)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_paged(target, dtype):
    # The varlen test's sequences in a paged cache (blocks of 4 rows,
    # shuffled through the pool): the same bits as contiguous.
    rng = rng_for("paged", target, dtype)
    lengths = [(1, 30), (0, 3), (1, 70), (5, 9)]
    query_offsets = np.cumsum([0] + [n for n, _ in lengths])
    key_offsets = np.cumsum([0] + [m for _, m in lengths])
    q = rng.standard_normal((query_offsets[-1], 4, 8)).astype(dtype)
    k = rng.standard_normal((key_offsets[-1], 2, 8)).astype(dtype)
    v = rng.standard_normal((key_offsets[-1], 2, 5)).astype(dtype)
    block = 4
    used = [-(-m // block) for _, m in lengths]
    order = rng.permutation(sum(used) + 3)
    table = np.zeros((len(lengths), max(used)), np.int32)
    key_cache = np.full((len(order), block, 2, 8), np.nan, dtype)
    value_cache = np.full((len(order), block, 2, 5), np.nan, dtype)
    at = 0
    for b, (_, m) in enumerate(lengths):
        for p in range(used[b]):
            table[b, p] = order[at]
            at += 1
            rows = np.arange(p * block, min(m, (p + 1) * block))
            key_cache[table[b, p], :len(rows)] = k[key_offsets[b] + rows]
            value_cache[table[b, p], :len(rows)] = v[key_offsets[b] + rows]
    key_lengths = [m for _, m in lengths]
    got = attnpool.scaled_dot_product_attention_paged(
        q, key_cache, value_cache, table, key_lengths, query_offsets, causal=True)
    want = attnpool.scaled_dot_product_attention_varlen(
        q, k, v, query_offsets, key_offsets, causal=True)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="block_table"):
        attnpool.scaled_dot_product_attention_paged(
            q, key_cache, value_cache, table[:, :1], key_lengths, query_offsets)


def test_sdpa_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = rng_for("torch")
    q = rng.standard_normal((2, 4, 16, 32)).astype(np.float32)
    k = rng.standard_normal((2, 4, 24, 32)).astype(np.float32)
    v = rng.standard_normal((2, 4, 24, 8)).astype(np.float32)
    want = torch.nn.functional.scaled_dot_product_attention(
        torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), scale=0.3).numpy()
    got = attnpool.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k),
                                                torch.from_numpy(v), scale=0.3)
    close(got, want, np.float32, scale=10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_additive_attention(target, dtype):
    rng = rng_for("additive", target, dtype)
    b, h, n, m, dq, dk, dv, hidden = 2, 2, 5, 9, 6, 4, 3, 8
    q = rng.standard_normal((b, h, n, dq)).astype(dtype)
    k = rng.standard_normal((b, h, m, dk)).astype(dtype)
    v = rng.standard_normal((b, h, m, dv)).astype(dtype)
    w_q = (0.3 * rng.standard_normal((hidden, dq))).astype(dtype)
    w_k = (0.3 * rng.standard_normal((hidden, dk))).astype(dtype)
    w_v = rng.standard_normal(hidden).astype(dtype)
    got = attnpool.additive_attention(q, k, v, w_q, w_k, w_v)
    f = lambda a: a.astype(np.float64)
    features = np.tanh((f(q) @ f(w_q).T)[:, :, :, None, :] + (f(k) @ f(w_k).T)[:, :, None, :, :])
    scores = features @ f(w_v)
    want = numpy_softmax(scores, np.ones(scores.shape, bool)) @ f(v)
    close(got, want, dtype, scale=10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_head_attention(target, dtype):
    rng = rng_for("mha", target, dtype)
    b, n, m, d, heads, dh = 2, 6, 7, 8, 2, 4
    x = rng.standard_normal((b, n, d)).astype(dtype)
    kv = rng.standard_normal((b, m, d)).astype(dtype)
    w = [(0.3 * rng.standard_normal((d, heads * dh))).astype(dtype) for _ in range(4)]
    b_o = rng.standard_normal(heads * dh).astype(dtype)
    got = attnpool.multi_head_attention(x, kv, kv, *w, heads=heads, b_o=b_o, causal=True,
                                        causal_offset=2)
    f = lambda a: a.astype(np.float64)
    qp, kp, vp = f(x) @ f(w[0]), f(kv) @ f(w[1]), f(kv) @ f(w[2])
    shown = np.arange(m)[None, :] <= np.arange(n)[:, None] + 2
    heads_out = []
    for h in range(heads):
        cols = slice(h * dh, (h + 1) * dh)
        s = qp[:, :, cols] @ kp[:, :, cols].transpose(0, 2, 1) / np.sqrt(dh)
        heads_out.append(numpy_softmax(s, shown[None]) @ vp[:, :, cols])
    want = np.concatenate(heads_out, axis=-1) @ f(w[3]) + f(b_o)
    close(got, want, dtype, scale=10)
