"""The Python package (python/attnpool) against NumPy formulas in float64,
on every target this CPU supports; its array conventions, errors, GIL
release and zero-copy inputs. Run by tools/test-python.sh in a venv where
`pip install .` put the package."""
import pickle
import threading
import time

import numpy as np
import pytest

import attnpool
from attnpool import _core

import kernel_formulas

from conftest import close, numpy_softmax, rng_for

DTYPES = (np.float32, np.float64)


def numpy_distances(q, k, distance):
    q, k = q.astype(np.float64), k.astype(np.float64)
    diff = q[:, None, :] - k[None, :, :]
    if distance == "sqeuclidean":
        return (diff ** 2).sum(-1)
    if distance == "euclidean":
        return np.sqrt((diff ** 2).sum(-1))
    if distance == "manhattan":
        return np.abs(diff).sum(-1)
    if distance == "dot":
        return q @ k.T
    qn = np.linalg.norm(q, axis=1)[:, None]
    kn = np.linalg.norm(k, axis=1)[None, :]
    return (q @ k.T) / np.where(qn * kn == 0, 1, qn * kn)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("distance", attnpool.DISTANCES)
def test_pairwise_distances(target, dtype, distance):
    rng = rng_for("distances", target, distance, dtype)
    n, m, d = rng.integers(1, 40, size=3)
    q = rng.standard_normal((n, d)).astype(dtype)
    k = rng.standard_normal((m, d)).astype(dtype)
    got = attnpool.pairwise_distances(q, k, distance)
    assert got.dtype == dtype and got.shape == (n, m)
    close(got, numpy_distances(q, k, distance), dtype, scale=d)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", kernel_formulas.DISTANCE_KERNELS)
def test_apply_kernel(target, dtype, kernel):
    rng = rng_for("kernel", target, kernel, dtype)
    r = rng.uniform(0, 3, size=(7, 33))
    values = r.astype(dtype)
    attnpool.apply_kernel(values, kernel, bandwidth=1.5, input="euclidean")
    close(values, kernel_formulas.weights(kernel, r.astype(dtype) / 1.5), dtype)


def test_every_kernel_has_a_formula():
    named = set(kernel_formulas.DISTANCE_KERNELS) | set(kernel_formulas.OTHER_KERNELS)
    assert set(attnpool.KERNELS) == named | set(kernel_formulas.SCORE_KERNELS)


@pytest.mark.parametrize("dtype", DTYPES)
def test_normalize_softmax_with_masks(target, dtype):
    rng = rng_for("normalize", target, dtype)
    n, m = 9, 21
    scores = rng.standard_normal((n, m))
    lengths = rng.integers(0, m + 1, size=n)
    bias = rng.standard_normal((n, m))
    visible = rng.random((n, m)) < 0.8
    shown = (np.arange(m)[None, :] < lengths[:, None]) & visible
    shown &= np.arange(m)[None, :] <= np.arange(n)[:, None] + 3
    want = numpy_softmax(scores.astype(dtype) + bias.astype(dtype), shown)
    got = attnpool.normalize(scores.astype(dtype), "softmax", valid_lengths=lengths,
                             causal=True, causal_offset=3, bias=bias.astype(dtype),
                             visible=visible)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    close(np.nan_to_num(got), np.nan_to_num(want), dtype)
    banded = attnpool.normalize(scores.astype(dtype), "softmax", causal_offset=2,
                                window_left=3, window_right=1)
    position = np.arange(n)[:, None] + 2
    band = (np.arange(m)[None, :] >= position - 3) & (np.arange(m)[None, :] <= position + 1)
    close(banded, numpy_softmax(scores.astype(dtype), band), dtype)
    zeros = attnpool.normalize(scores.astype(dtype), "softmax", valid_lengths=np.zeros(n, int),
                               empty_rows="zero")
    assert (zeros == 0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_weighted_sum(target, dtype):
    rng = rng_for("wsum", target, dtype)
    w = rng.random((37, 50)).astype(dtype)
    v = rng.standard_normal((50, 19)).astype(dtype)
    got = attnpool.weighted_sum(w, v)
    close(got, w.astype(np.float64) @ v.astype(np.float64), dtype, scale=50)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tricube"])
def test_attention_pool_is_nadaraya_watson(target, dtype, kernel):
    rng = rng_for("pool", target, kernel, dtype)
    x = rng.uniform(0, 5, size=(200, 1)).astype(dtype)
    y = (np.sin(x) + 0.1 * rng.standard_normal(x.shape)).astype(dtype)
    queries = np.linspace(0, 5, 31).reshape(-1, 1).astype(dtype)
    h = 0.7
    w = kernel_formulas.weights(kernel, numpy_distances(queries, x, "euclidean") / h)
    with np.errstate(invalid="ignore"):
        want = (w / w.sum(1, keepdims=True)) @ y.astype(np.float64)
    got, weights = attnpool.attention_pool(queries, x, y, kernel=kernel, bandwidth=h,
                                           distance="sqeuclidean", return_weights=True)
    fused = attnpool.attention_pool(queries, x, y, kernel=kernel, bandwidth=h)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    close(np.nan_to_num(got), np.nan_to_num(want), dtype, scale=10)
    close(np.nan_to_num(fused), np.nan_to_num(want), dtype, scale=10)
    close(weights.sum(1)[~np.isnan(want[:, 0])], 1.0, dtype, scale=10)


def test_pool_state_shards_merge_into_the_whole(target):
    rng = rng_for("shards", target)
    q = rng.standard_normal((17, 4))
    k = rng.standard_normal((90, 4))
    v = rng.standard_normal((90, 3))
    options = dict(distance="dot", kernel="exp", normalize="softmax", causal=True,
                   causal_offset=40)
    whole = attnpool.attention_pool(q, k, v, **options)
    bounds = [0, 25, 25, 61, 90]  # an empty shard too
    states = [attnpool.PoolState.partial(q, k[a:b], v[a:b], key_offset=a, **options)
              for a, b in zip(bounds, bounds[1:])]
    # States travel by pickle (multiprocessing, Dask, mpi4py).
    states = [pickle.loads(pickle.dumps(state)) for state in states]
    merged = states[0]
    for state in states[1:]:
        merged.merge(state)
    close(merged.finish(), whole, np.float64, scale=10)
    assert merged.accumulator.shape == (17, 3) and merged.max.shape == (17,)


def test_pool_state_refuses_another_spec():
    q = np.ones((2, 2))
    a = attnpool.PoolState.partial(q, q, q, kernel="gaussian")
    b = attnpool.PoolState.partial(q, q, q, key_offset=2, kernel="boxcar")
    with pytest.raises(ValueError, match="later"):
        a.merge(b)


# ------------------------------------------------------------- conventions

def test_strided_inputs_in_place_or_copied_once():
    rng = rng_for("strided")
    big = rng.standard_normal((40, 24))
    q, k = big[::2, :8], big[1::2, 8:16]  # rows contiguous: read in place
    before = _core.input_copies()
    got = attnpool.pairwise_distances(q, k)
    assert _core.input_copies() == before
    close(got, numpy_distances(q, k, "sqeuclidean"), np.float64)
    kt = np.asfortranarray(k)  # columns contiguous: copied once
    got = attnpool.pairwise_distances(q, kt)
    assert _core.input_copies() == before + 1
    close(got, numpy_distances(q, k, "sqeuclidean"), np.float64)
    reversed_rows = k[::-1]  # negative stride: copied
    close(attnpool.pairwise_distances(q, reversed_rows),
          numpy_distances(q, reversed_rows, "sqeuclidean"), np.float64)


def test_strided_vectors_are_read_as_strided():
    # 1-D arrays (a weight vector, a state's max and sum) whose stride is not
    # 1 are copied where they are read and refused where they are written.
    rng = rng_for("strided vectors")
    q, k = rng.standard_normal((3, 1, 4, 5)), rng.standard_normal((3, 1, 6, 5))
    w_q, w_k = rng.standard_normal((7, 5)), rng.standard_normal((7, 5))
    w_v = rng.standard_normal((7, 3))
    for strided in (w_v[:, 1], w_v[::-1, 1]):  # stride 3, and -3
        want = attnpool.additive_attention(q, k, k, w_q, w_k, strided.copy())
        assert attnpool.additive_attention(q, k, k, w_q, w_k, strided).tobytes() == \
            want.tobytes()
    x = rng.standard_normal((4, 2))
    state = attnpool.PoolState.partial(x, x, x)
    both = np.empty((4, 2))
    state.max = both[:, 0]
    with pytest.raises(ValueError, match="into.max"):
        state.merge(attnpool.PoolState.partial(x, x, x, key_offset=4))


def test_read_only_states_merge_in_and_finish():
    # A state only read (merged in, or finished) may be read-only, as one
    # received into a read-only buffer.
    x = np.random.default_rng(8).standard_normal((4, 2))
    whole = attnpool.attention_pool(x, np.vstack([x, x]), np.vstack([x, x]))
    later = attnpool.PoolState.partial(x, x, x, key_offset=4)
    for array in later._arrays():
        array.flags.writeable = False
    state = attnpool.PoolState.partial(x, x, x).merge(later)
    close(state.finish(), whole, np.float64)
    for array in state._arrays():
        array.flags.writeable = False
    close(state.finish(), whole, np.float64)


def _misaligned(array):
    """A copy of `array` at an odd address, rows an odd number of bytes
    apart: no stride is a multiple of its element size."""
    rows, cols = array.shape
    size = array.dtype.itemsize
    row_bytes = cols * size + 1
    buffer = np.zeros(rows * row_bytes + 1, np.uint8)
    odd = np.ndarray(array.shape, array.dtype, buffer, offset=1,
                     strides=(row_bytes, size))
    odd[...] = array
    return odd


def test_foreign_byte_order_and_misaligned_inputs_are_copied():
    # Big-endian data (FITS files, network buffers) and arrays at odd byte
    # strides are copied into native, aligned arrays: the same bits.
    rng = rng_for("byte order")
    q, k, v = (rng.standard_normal(shape).astype(np.float32)
               for shape in ((4, 3), (6, 3), (6, 2)))
    want = attnpool.attention_pool(q, k, v).tobytes()
    # Contiguous, at an odd address.
    buffer = np.zeros(k.nbytes + 1, np.uint8)
    odd_k = np.ndarray(k.shape, k.dtype, buffer, offset=1)
    odd_k[...] = k
    for args in ((q.astype(">f4"), k, v), (q, k.astype(">f4"), v.astype(">f4")),
                 (_misaligned(q), _misaligned(k), _misaligned(v)), (q, odd_k, v)):
        assert attnpool.attention_pool(*args).tobytes() == want
    # Reduced-precision caches and int8 scales likewise.
    queries = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    keys = rng.standard_normal((1, 2, 6, 8)).astype(np.float16)
    values = attnpool.quantize_rows(rng.standard_normal((12, 4)).astype(np.float32))
    values = attnpool.Int8Rows(values.data.reshape(1, 2, 6, 4),
                               values.scales.reshape(1, 2, 6))
    swapped = attnpool.Int8Rows(values.data, values.scales.astype(">f4"))
    want = attnpool.scaled_dot_product_attention(queries, keys, values).tobytes()
    assert attnpool.scaled_dot_product_attention(
        queries, keys.astype(">f2"), swapped).tobytes() == want


class _Subclass(np.ndarray):
    pass


# attention_pool's options as the core reads them itself (its plain path),
# and forms of some that the package converts first (its converting path):
# the same call either way. Arrays, by their names, become converting forms
# through a function.
PLAIN_AND_CONVERTED = [
    ({}, {"queries": memoryview}),
    ({}, {"keys": lambda a: a.view(_Subclass)}),
    ({"bias": None}, {"values": lambda a: a.astype(a.dtype.newbyteorder())}),
    ({"threads": 1}, {"threads": np.int64(1)}),
    ({"bandwidth": 0.75}, {"bandwidth": np.float32(0.75)}),
    ({"bandwidth": 2}, {"bandwidth": np.int32(2)}),
    ({"kernel": "exp", "scale": 0.5, "normalize": "softmax", "causal": True,
      "causal_offset": 2, "window_left": 3, "softcap": 4.0},
     {"causal": 1, "causal_offset": np.int8(2)}),
    ({"kernel": "exp", "normalize": "softmax", "alibi_slope": 0.25, "sink": 1,
      "chunk": 2}, {"chunk": np.uint8(2), "sink": np.float16(1)}),
    ({"return_weights": True}, {"return_weights": 1}),
    ({"normalize": "none", "empty_rows": "zero", "out": "out"},
     {"out": lambda a: a.view(_Subclass)}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("plain, converted", PLAIN_AND_CONVERTED)
def test_plain_and_converted_arguments_agree(dtype, plain, converted):
    rng = rng_for("plain", np.dtype(dtype).name, repr(plain))
    arrays = {"queries": rng.standard_normal((5, 3)).astype(dtype),
              "keys": rng.standard_normal((7, 3)).astype(dtype),
              "values": rng.standard_normal((7, 2)).astype(dtype)}
    options = dict(plain)
    if "out" in options:
        options["out"] = np.empty((5, 2), dtype)
    before = _core.plain_calls()
    want = attnpool.attention_pool(*arrays.values(), **options)
    assert _core.plain_calls() == before + 1
    for name, value in converted.items():
        if name in arrays:
            arrays[name] = value(arrays[name])
        elif callable(value):
            options[name] = value(np.empty((5, 2), dtype))
        else:
            options[name] = value
    got = attnpool.attention_pool(*arrays.values(), **options)
    assert _core.plain_calls() == before + 1
    want, got = (x if isinstance(x, tuple) else (x,) for x in (want, got))
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert type(g) is type(w) or "out" in converted
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes()


class _Float(float):
    """A float whose float() is another number."""
    def __float__(self):
        return 2.0


# Arguments the plain path leaves to the package (its reading would differ,
# or the package copies them first): the call on them, through the package,
# gives what it gives on plain forms of them.
DECLINED = [
    ("queries", _misaligned, {}),
    ("queries", lambda a: a[::-1], {}),                        # negative stride
    ("keys", lambda a: np.broadcast_to(a[:1], a.shape), {}),   # row stride 0
    ("values", lambda a: np.repeat(a, 2, axis=1)[:, ::2], {}),  # strided rows
    ("bandwidth", lambda _: _Float(1.0), {"bandwidth": 2.0}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, form, plain", DECLINED)
def test_plain_path_declines(dtype, name, form, plain):
    rng = rng_for("declined", np.dtype(dtype).name, name)
    arrays = {"queries": rng.standard_normal((5, 3)).astype(dtype),
              "keys": rng.standard_normal((7, 3)).astype(dtype),
              "values": rng.standard_normal((7, 2)).astype(dtype)}
    options = {}
    if name in arrays:
        arrays[name] = form(arrays[name])
    else:
        options[name] = form(None)
    before = _core.plain_calls()
    got = attnpool.attention_pool(*arrays.values(), **options)
    assert _core.plain_calls() == before
    want = attnpool.attention_pool(
        *(np.ascontiguousarray(a) for a in arrays.values()), **plain)
    assert _core.plain_calls() == before + 1
    assert got.tobytes() == want.tobytes()


def _read_only(array):
    array.flags.writeable = False
    return array


@pytest.mark.parametrize("out, kind", [
    (np.zeros((5, 3)), ValueError),                 # shape
    (np.zeros((5, 2), np.float32), TypeError),      # dtype
    (np.zeros((5, 4))[:, ::2], ValueError),         # rows not contiguous
    (_read_only(np.zeros((5, 2))), ValueError),
])
def test_plain_path_declines_outs(out, kind):
    before = _core.plain_calls()
    with pytest.raises(kind, match="out"):
        attnpool.attention_pool(np.ones((5, 3)), np.ones((7, 3)),
                                np.ones((7, 2)), out=out)
    assert _core.plain_calls() == before


def test_empty_and_broadcast_inputs():
    q = np.ones((3, 4))
    assert attnpool.attention_pool(q[:0], q, q).shape == (0, 4)
    assert attnpool.pairwise_distances(q[:0], q).shape == (0, 3)
    state = attnpool.PoolState.partial(q[:0], q, q)
    assert state.finish().shape == (0, 4)
    broadcast = np.broadcast_to(q[0], (5, 4))  # row stride 0: copied
    close(attnpool.pairwise_distances(broadcast, q), np.zeros((5, 3)), np.float64)


def test_pool_state_best_is_written_in_place():
    q = np.random.default_rng(5).standard_normal((4, 2))
    state = attnpool.PoolState.partial(q, q, q, distance="dot", kernel="exp",
                                       normalize="argmax")
    state.best = state.best.astype(np.int64)  # a converted copy would take writes
    with pytest.raises(TypeError, match="best"):
        state.merge(attnpool.PoolState.partial(q, q, q, key_offset=4, distance="dot",
                                               kernel="exp", normalize="argmax"))


def test_read_only_inputs():
    q = np.ones((3, 2))
    q.flags.writeable = False
    assert attnpool.pairwise_distances(q, q).shape == (3, 3)


def test_out_is_written_in_place():
    q = np.ones((3, 2), np.float32)
    out = np.full((3, 3), 7, np.float32)
    assert attnpool.pairwise_distances(q, q, out=out) is out
    assert (out == 0).all()


@pytest.mark.parametrize("call, kind, argument", [
    (lambda: attnpool.pairwise_distances(np.ones((3, 2), int), np.ones((3, 2))),
     TypeError, "queries"),
    (lambda: attnpool.pairwise_distances(np.ones((3, 2)), np.ones((3, 2), np.float32)),
     TypeError, "keys"),
    (lambda: attnpool.pairwise_distances(np.ones(3), np.ones((3, 2))), ValueError, "queries"),
    (lambda: attnpool.pairwise_distances(np.ones((3, 2)), np.ones((3, 4))),
     ValueError, "keys.cols"),
    (lambda: attnpool.pairwise_distances(np.ones((3, 2)), np.ones((3, 2)), "chebyshev"),
     ValueError, "distance"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                     bandwidth=-1), ValueError, "bandwidth"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                     valid_lengths=[1, 2]), ValueError, "valid_lengths"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                     valid_lengths=[[1], [2], [3]]),
     ValueError, "valid_lengths"),
    (lambda: attnpool.scaled_dot_product_attention(
        np.ones((2, 1, 3, 2)), np.ones((2, 1, 4, 2)), np.ones((2, 1, 4, 2)),
        valid_lengths=np.ones((3, 2), int)), ValueError, "valid_lengths"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                     causal=True, causal_offset=1.5),
     TypeError, "causal_offset"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                     window_left=np.inf), TypeError, "window_left"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                     threads=2**40), ValueError, "threads"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                     bogus=None), TypeError, "bogus"),
    (lambda: attnpool.scaled_dot_product_attention(
        np.ones((1, 1, 3, 2)), np.ones((1, 1, 4, 2)), np.ones((1, 1, 4, 2)),
        window=None), TypeError, "window"),
    (lambda: attnpool.PoolState.partial(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                        key_offset=None), TypeError, "key_offset"),
    (lambda: attnpool.scaled_dot_product_attention_varlen(
        np.ones((3, 1, 2)), np.ones((4, 1, 2)), np.ones((4, 1, 2)), [0, 3], [0, 4],
        out=np.ones((3, 2))), ValueError, "out"),
    (lambda: attnpool.to_bfloat16(np.ones(3)), TypeError, "x"),
    (lambda: attnpool.bfloat16_to_float(np.ones(3, np.float32)), TypeError, "bits"),
    (lambda: attnpool.quantize_rows(np.ones((2, 3), np.int8)), TypeError, "x"),
    (lambda: attnpool.weighted_sum(np.ones((3, 2)), np.ones((2, 2)), threads=-1),
     ValueError, "threads"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2), object),
                                     np.ones((4, 1))), TypeError, "keys: dtype object"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)),
                                     np.full((4, 1), "1")), TypeError, "values: dtype"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                     bias=np.zeros((3, 4), object)), TypeError, "bias"),
    (lambda: attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                     visible=np.zeros((3, 4), object)),
     TypeError, "visible"),
])
def test_errors_name_the_argument(call, kind, argument):
    with pytest.raises(kind, match=argument):
        call()


@pytest.mark.parametrize("out, kind, argument", [
    (np.zeros((3, 4)), ValueError, "out"),               # shape
    (np.zeros((3, 3), np.float32), TypeError, "out"),    # dtype
    (np.zeros((3, 6))[:, ::2], ValueError, "out"),       # rows not contiguous
    (np.zeros((3, 3), ">f8"), ValueError, "out: dtype >f8 is not in native"),
    (_misaligned(np.zeros((3, 3))), ValueError, r"out: strides \(25, 8\)"),
    (np.zeros((3, 3), object), TypeError, "out: dtype object"),
])
def test_bad_out_is_refused_and_untouched(out, kind, argument):
    out[...] = 5
    with pytest.raises(kind, match=argument):
        attnpool.pairwise_distances(np.ones((3, 2)), np.ones((3, 2)), out=out)
    assert (out == 5).all()


def test_read_only_out_is_refused():
    out = np.zeros((3, 3))
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out"):
        attnpool.pairwise_distances(np.ones((3, 2)), np.ones((3, 2)), out=out)


def test_nothing_written_on_a_library_error():
    out = np.full((3, 1), 5.0)
    with pytest.raises(ValueError, match="bandwidth"):
        attnpool.attention_pool(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                bandwidth=0, out=out)
    assert (out == 5).all()


def test_gil_is_released():
    rng = rng_for("gil")
    q = rng.standard_normal((8000, 64)).astype(np.float32)
    k = rng.standard_normal((8000, 64)).astype(np.float32)
    span = {}

    def work():
        span["start"] = time.perf_counter()
        attnpool.attention_pool(q, k, k, kernel="exp", normalize="softmax",
                                distance="dot", threads=1)
        span["end"] = time.perf_counter()

    worker = threading.Thread(target=work)
    worker.start()
    ticks = []
    while worker.is_alive():
        ticks.append(time.perf_counter())
    worker.join()
    # This thread kept running while the worker was inside the call: with
    # the GIL held through it, it would stop for the whole call (one gap
    # between its ticks as long as the call).
    duration = span["end"] - span["start"]
    assert duration > 0.02, "the call is too short to tell"
    inside = [span["start"]] + [t for t in ticks
                                if span["start"] < t < span["end"]] + [span["end"]]
    longest_gap = max(b - a for a, b in zip(inside, inside[1:]))
    assert longest_gap < duration / 2


def test_targets_and_version():
    assert attnpool.__version__.count(".") == 2
    assert "SCALAR" in attnpool.targets() or "EMU128" in attnpool.targets()
    assert attnpool.active_target() in attnpool.supported_targets()
    with pytest.raises(ValueError):
        attnpool.force_target("NOT_A_TARGET")


def test_tunings():
    attnpool.force_tuning("")  # this CPU's choice, over ATTNPOOL_TUNING
    profiles = attnpool.tunings()
    assert attnpool.tuning() == profiles[0]
    assert {"generic", "zen4", "small_l2"} <= set(profiles)
    with pytest.raises(ValueError, match="tuning"):
        attnpool.force_tuning("NOT_A_PROFILE")
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 2, 1, 16), dtype=np.float32)
    k = rng.standard_normal((1, 2, 3000, 16), dtype=np.float32)
    v = rng.standard_normal((1, 2, 3000, 8), dtype=np.float32)
    outputs = []
    try:
        for name in profiles:
            attnpool.force_tuning(name.upper())
            assert attnpool.tuning() == name
            assert attnpool.tuning_parameters().startswith("query_rows=")
            outputs.append(attnpool.scaled_dot_product_attention(q, k, v))
    finally:
        attnpool.reset_target()
    assert attnpool.tuning() == profiles[0]
    # A profile with parameters of its own; a value out of range refused.
    try:
        attnpool.force_tuning("generic query_rows=48 decode_interleave=1")
        assert attnpool.tuning() == "generic query_rows=48 decode_interleave=1"
        assert attnpool.tuning_parameters().startswith("query_rows=48 ")
        outputs.append(attnpool.scaled_dot_product_attention(q, k, v))
        with pytest.raises(ValueError, match="tuning"):
            attnpool.force_tuning("generic query_rows=50")
        assert attnpool.tuning() == "generic query_rows=48 decode_interleave=1"
    finally:
        attnpool.reset_target()
    for out in outputs[1:]:  # within the float bound of one another
        np.testing.assert_allclose(out, outputs[0], rtol=1e-4, atol=1e-4)


def test_bf16_dot_instructions():
    supported = attnpool.supported_bf16_dot_instructions()
    with pytest.raises(ValueError, match="instruction"):
        attnpool.force_bf16_dot_instruction("NOT_AN_INSTRUCTION")
    try:
        for name in supported:
            attnpool.force_bf16_dot_instruction(name.lower())
            assert attnpool.bf16_dot_instruction() in (name, "")
    finally:
        attnpool.reset_target()
    assert attnpool.bf16_dot_instruction() in (supported[:1] + [""])


def test_thread_counts_past_the_machine_are_clamped():
    # 2**31 - 1 OpenMP threads cannot be created: without the clamp the
    # runtime would end the interpreter. The bits are those of one thread.
    rng = rng_for("threads")
    q = rng.standard_normal((300, 16)).astype(np.float32)
    k = rng.standard_normal((200, 16)).astype(np.float32)
    one = attnpool.attention_pool(q, k, k, kernel="exp", normalize="softmax",
                                  distance="dot", threads=1)
    many = attnpool.attention_pool(q, k, k, kernel="exp", normalize="softmax",
                                   distance="dot", threads=2**31 - 1)
    np.testing.assert_array_equal(one, many)


def test_versions_agree():
    """The extension's version (the library's), pip's metadata and CMake's
    project() (the one place it is written) are one."""
    import importlib.metadata
    import pathlib
    import re
    cmake = pathlib.Path(__file__).resolve().parents[2] / "CMakeLists.txt"
    stated = re.search(r"project\(attnpool VERSION ([0-9.]+)", cmake.read_text())[1]
    assert attnpool.__version__ == stated
    assert importlib.metadata.version("attnpool") == stated
