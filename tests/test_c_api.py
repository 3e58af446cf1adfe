#!/usr/bin/env python3
"""The C API through Python ctypes on NumPy arrays, against NumPy formulas.

usage: test_c_api.py path/to/libattnpool_c.so
"""
import ctypes
import sys
import unittest

import numpy as np

import kernel_formulas

LIBRARY_PATH = None
lib = None

FLOAT32, FLOAT64 = 0, 1
DISTANCES = {"sqeuclidean": 0, "euclidean": 1, "manhattan": 2, "dot": 3, "cosine": 4}
KERNELS = {}  # name -> value, as the library names them (filled by main)
NORMALIZATIONS = {"none": 0, "sum": 1, "softmax": 2, "argmax": 3}
OK, INVALID_ARGUMENT, UNSUPPORTED_TARGET = 0, 1, 2
RULES = {"silverman": 0, "scott": 1}
NO_BANDWIDTH = ctypes.c_size_t(-1).value


class ConstMatrix(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("rows", ctypes.c_size_t),
                ("cols", ctypes.c_size_t), ("stride", ctypes.c_size_t)]


class Matrix(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("rows", ctypes.c_size_t),
                ("cols", ctypes.c_size_t), ("stride", ctypes.c_size_t)]


class KernelSpec(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_int), ("bandwidth", ctypes.c_double),
                ("has_scale", ctypes.c_int), ("scale", ctypes.c_double)]


class PoolSpec(ctypes.Structure):
    _fields_ = [("distance", ctypes.c_int), ("kernel", KernelSpec),
                ("normalization", ctypes.c_int), ("empty_rows", ctypes.c_int)]


PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_double)


class Execution(ctypes.Structure):
    """attnpool_execution as attnpool_execution_init() and threads give it."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("threads", ctypes.c_int64),
                ("progress", PROGRESS), ("progress_context", ctypes.c_void_p)]

    def __init__(self, threads=0, progress=None):
        super().__init__(ctypes.sizeof(Execution), threads, progress or PROGRESS(), None)


TENSOR_FIELDS = [("batch", ctypes.c_size_t), ("heads", ctypes.c_size_t),
                 ("rows", ctypes.c_size_t), ("cols", ctypes.c_size_t),
                 ("batch_stride", ctypes.c_size_t), ("head_stride", ctypes.c_size_t),
                 ("row_stride", ctypes.c_size_t)]


class ConstTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p)] + TENSOR_FIELDS


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p)] + TENSOR_FIELDS


def mask_struct(library, heads):
    """The C mask struct (attnpool_mask, or with `heads` the layers'
    attnpool_attention_mask) built from the library's own list of fields
    (attnpool_mask_layout): name=value sets a field, and the has_ flag of a
    count or number; struct_size is set."""
    members = [("struct_size", ctypes.c_size_t)]
    if heads:
        members.append(("lengths_per_query", ctypes.c_int64))
    for line in library.attnpool_mask_layout(int(heads)).decode().splitlines():
        name, kind = line.split()
        given = [("has_" + name, ctypes.c_int64)]
        members += {
            "lengths": [(name, ctypes.POINTER(ctypes.c_size_t))],
            "flag": [(name, ctypes.c_int64)],
            "position": [(name, ctypes.c_ssize_t)],
            "count": given + [(name, ctypes.c_size_t)],
            "matrix": [(name, ConstTensor if heads else ConstMatrix)],
            "booleans": [(name, ConstTensor if heads else ConstMatrix)],
            "number": given + [(name, ctypes.c_double)],
            "head_number": ([(name, ctypes.c_void_p)] if heads
                            else given + [(name, ctypes.c_double)]),
        }[kind]

    class MaskStruct(ctypes.Structure):
        _fields_ = members

        def __init__(self, **fields):
            super().__init__(struct_size=ctypes.sizeof(self))
            for name, value in fields.items():
                if hasattr(self, "has_" + name):
                    setattr(self, "has_" + name, 1)
                setattr(self, name, value)
    return MaskStruct


Mask = AttentionMask = None  # built by load()


class PagedCache(ctypes.Structure):
    _fields_ = [("keys", ConstTensor), ("values", ConstTensor),
                ("block_table", ctypes.POINTER(ctypes.c_int32)),
                ("block_table_stride", ctypes.c_size_t),
                ("lengths", ctypes.POINTER(ctypes.c_size_t))]


class PartialState(ctypes.Structure):
    _fields_ = [("accumulator", Matrix), ("max", ctypes.c_void_p), ("sum", ctypes.c_void_p),
                ("best", ctypes.POINTER(ctypes.c_size_t))]


class MultiHeadWeights(ctypes.Structure):
    _fields_ = [("heads", ctypes.c_size_t), ("w_q", ConstMatrix), ("w_k", ConstMatrix),
                ("w_v", ConstMatrix), ("w_o", ConstMatrix), ("b_q", ctypes.c_void_p),
                ("b_k", ctypes.c_void_p), ("b_v", ctypes.c_void_p), ("b_o", ctypes.c_void_p)]


class CrossValidationOptions(ctypes.Structure):
    _fields_ = [("folds", ctypes.c_size_t), ("scales", ctypes.POINTER(ctypes.c_double)),
                ("every_pair", ctypes.c_int)]


def load(path):
    global Mask, AttentionMask
    library = ctypes.CDLL(path)
    library.attnpool_mask_layout.argtypes = [ctypes.c_int]
    library.attnpool_mask_layout.restype = ctypes.c_char_p
    Mask, AttentionMask = mask_struct(library, False), mask_struct(library, True)
    P = ctypes.POINTER
    signatures = {
        "attnpool_last_error": ([], ctypes.c_char_p),
        "attnpool_last_error_argument": ([], ctypes.c_char_p),
        "attnpool_status_name": ([ctypes.c_int], ctypes.c_char_p),
        "attnpool_version": ([], ctypes.c_char_p),
        "attnpool_pool_spec_init": ([], PoolSpec),
        "attnpool_kernel_spec_init": ([], KernelSpec),
        "attnpool_kernel_name": ([ctypes.c_int], ctypes.c_char_p),
        "attnpool_kernel_from_name": ([ctypes.c_char_p, P(ctypes.c_int)], ctypes.c_int),
        "attnpool_pairwise_distances": (
            [ctypes.c_int, ctypes.c_int, P(ConstMatrix), P(ConstMatrix), P(Matrix),
             P(Execution)], ctypes.c_int),
        "attnpool_apply_kernel": (
            [ctypes.c_int, P(KernelSpec), ctypes.c_int, P(Matrix), ctypes.c_size_t,
             P(Execution)], ctypes.c_int),
        "attnpool_normalize": (
            [ctypes.c_int, ctypes.c_int, P(Matrix), P(Mask), ctypes.c_int,
             P(Execution)], ctypes.c_int),
        "attnpool_weighted_sum": (
            [ctypes.c_int, P(ConstMatrix), P(ConstMatrix), P(Matrix), P(Execution)],
            ctypes.c_int),
        "attnpool_pool": (
            [ctypes.c_int, P(PoolSpec), P(ConstMatrix), P(ConstMatrix), P(ConstMatrix),
             P(Matrix), P(Mask), P(Execution)], ctypes.c_int),
        "attnpool_pool_staged": (
            [ctypes.c_int, P(PoolSpec), P(ConstMatrix), P(ConstMatrix), P(ConstMatrix),
             P(Matrix), P(Matrix), P(Mask), P(Execution)], ctypes.c_int),
        "attnpool_pool_partial": (
            [ctypes.c_int, P(PoolSpec), P(ConstMatrix), P(ConstMatrix), P(ConstMatrix),
             ctypes.c_size_t, P(PartialState), P(Mask), P(Execution)], ctypes.c_int),
        "attnpool_pool_merge": (
            [ctypes.c_int, P(PoolSpec), P(PartialState), P(PartialState)], ctypes.c_int),
        "attnpool_pool_finish": (
            [ctypes.c_int, P(PoolSpec), P(PartialState), P(Matrix)], ctypes.c_int),
        "attnpool_scaled_dot_product_attention": (
            [ctypes.c_int, P(ConstTensor), P(ConstTensor), P(ConstTensor), P(Tensor),
             P(AttentionMask), P(ctypes.c_double), ctypes.c_int, P(Execution)],
            ctypes.c_int),
        "attnpool_scaled_dot_product_attention_varlen": (
            [ctypes.c_int, P(ConstTensor), P(ConstTensor), P(ConstTensor), P(Tensor),
             ctypes.c_size_t, P(ctypes.c_size_t), P(ctypes.c_size_t), P(AttentionMask),
             P(ctypes.c_double), ctypes.c_int, P(Execution)], ctypes.c_int),
        "attnpool_alibi_slopes": ([ctypes.c_size_t, P(ctypes.c_double)], ctypes.c_int),
        "attnpool_alibi_slopes_as": ([ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p],
                                     ctypes.c_int),
        "attnpool_scaled_dot_product_attention_paged": (
            [ctypes.c_int, P(ConstTensor), P(PagedCache), P(Tensor), ctypes.c_size_t,
             P(ctypes.c_size_t), P(AttentionMask), P(ctypes.c_double), ctypes.c_int,
             P(Execution)], ctypes.c_int),
        "attnpool_multi_head_attention": (
            [ctypes.c_int, P(MultiHeadWeights), P(ConstTensor), P(ConstTensor),
             P(ConstTensor), P(Tensor), P(AttentionMask), ctypes.c_int, P(Execution)],
            ctypes.c_int),
        "attnpool_linear": (
            [ctypes.c_int, P(ConstMatrix), P(ConstMatrix), ctypes.c_void_p, P(Matrix),
             P(Execution)], ctypes.c_int),
        "attnpool_nadaraya_watson_predict": (
            [ctypes.c_int, ctypes.c_int, P(ctypes.c_double), ctypes.c_size_t,
             P(ConstMatrix), P(ConstMatrix), P(ConstMatrix), P(Matrix), P(Matrix),
             ctypes.c_int, P(Execution)], ctypes.c_int),
        "attnpool_rule_of_thumb_bandwidth": (
            [ctypes.c_int, ctypes.c_int, P(ConstMatrix), P(ctypes.c_double)], ctypes.c_int),
        "attnpool_gaussian_bandwidth_grid": (
            [ctypes.c_double, ctypes.c_double, ctypes.c_size_t, P(ctypes.c_double)],
            ctypes.c_int),
        "attnpool_cross_validate": (
            [ctypes.c_int, ctypes.c_int, P(ConstMatrix), P(ConstMatrix),
             P(ctypes.c_double), ctypes.c_size_t, P(CrossValidationOptions),
             P(ctypes.c_double), P(ctypes.c_size_t), P(ctypes.c_size_t), P(Execution)],
            ctypes.c_int),
        "attnpool_compiled_targets": ([], ctypes.c_char_p),
        "attnpool_supported_targets": ([], ctypes.c_char_p),
        "attnpool_active_target": ([], ctypes.c_char_p),
        "attnpool_last_run_target": ([], ctypes.c_char_p),
        "attnpool_force_target": ([ctypes.c_char_p], ctypes.c_int),
        "attnpool_reset_target": ([], ctypes.c_int),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(library, name)
        function.argtypes = arguments
        function.restype = result
    return library


def dtype_code(array):
    return {np.dtype(np.float32): FLOAT32, np.dtype(np.float64): FLOAT64}[array.dtype]


def view(array, writable=False):
    """A C matrix view of a 2-D NumPy array whose rows may be strided."""
    assert array.ndim == 2
    assert array.shape[1] <= 1 or array.strides[1] == array.itemsize
    assert array.strides[0] % array.itemsize == 0 and array.strides[0] >= 0
    cls = Matrix if writable else ConstMatrix
    return cls(array.ctypes.data, array.shape[0], array.shape[1],
               array.strides[0] // array.itemsize)


def tensor(array, writable=False):
    """A C tensor view of a 4-D NumPy array whose last axis is contiguous."""
    assert array.ndim == 4
    assert array.shape[3] <= 1 or array.strides[3] == array.itemsize
    strides = [stride // array.itemsize for stride in array.strides[:3]]
    assert all(stride > 0 for stride in strides), "a stride of 0 means dense in C"
    cls = Tensor if writable else ConstTensor
    return cls(array.ctypes.data, *array.shape, *strides)


def last_error():
    return lib.attnpool_last_error().decode(), lib.attnpool_last_error_argument().decode()


def pool(queries, keys, values, distance="sqeuclidean", kernel="gaussian",
         bandwidth=1.0, scale=None, normalization="sum", empty_rows=0, mask=None,
         threads=0, fused_check=True):
    """The staged pipeline (status, out, weights); with fused_check, the fused
    kernel must return the same status, and the same output within 1e-5."""
    spec = lib.attnpool_pool_spec_init()
    spec.distance = DISTANCES[distance]
    spec.kernel.kernel = KERNELS[kernel]
    spec.kernel.bandwidth = bandwidth
    if scale is not None:
        spec.kernel.has_scale, spec.kernel.scale = 1, scale
    spec.normalization = NORMALIZATIONS[normalization]
    spec.empty_rows = empty_rows
    out = np.full((queries.shape[0], values.shape[1]), -777, queries.dtype)
    weights = np.full((queries.shape[0], keys.shape[0]), -777, queries.dtype)
    status = lib.attnpool_pool_staged(
        dtype_code(queries), ctypes.byref(spec), view(queries), view(keys),
        view(values), view(out, True), view(weights, True),
        ctypes.byref(mask) if mask is not None else None,
        ctypes.byref(Execution(threads)))
    if fused_check:
        staged_error = last_error()
        fused = np.full_like(out, -777)
        fused_status = lib.attnpool_pool(
            dtype_code(queries), ctypes.byref(spec), view(queries), view(keys),
            view(values), view(fused, True),
            ctypes.byref(mask) if mask is not None else None,
            ctypes.byref(Execution(threads)))
        assert fused_status == status, (fused_status, status, last_error())
        if status == OK:
            np.testing.assert_allclose(fused, out, rtol=1e-5, atol=1e-5)
        else:
            assert last_error()[1] == staged_error[1], (last_error(), staged_error)
            assert (fused == -777).all()
    return status, out, weights


def reference_distances(q, k, distance):
    q = q.astype(np.float64)
    k = k.astype(np.float64)
    if distance == "sqeuclidean":
        return ((q[:, None, :] - k[None, :, :]) ** 2).sum(-1)
    if distance == "euclidean":
        return np.sqrt(((q[:, None, :] - k[None, :, :]) ** 2).sum(-1))
    if distance == "manhattan":
        return np.abs(q[:, None, :] - k[None, :, :]).sum(-1)
    dot = q @ k.T
    if distance == "dot":
        return dot
    norms = np.linalg.norm(q, axis=1)[:, None] * np.linalg.norm(k, axis=1)[None, :]
    return np.divide(dot, norms, out=np.zeros_like(dot), where=norms > 0)


def softmax(logits, axis=-1):
    shifted = logits - logits.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def doubles(array):
    """A double* to a float64 NumPy array (kept alive by the caller)."""
    assert array.dtype == np.float64 and array.flags.c_contiguous
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


def sizes(array):
    assert array.dtype == np.uintp and array.flags.c_contiguous
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_size_t))


def nadaraya_watson(x, y, queries, bandwidths, kernel="gaussian", weights=False,
                    empty_rows=0, threads=0):
    """attnpool_nadaraya_watson_predict: (status, out, weights or None)."""
    h = np.ascontiguousarray(np.atleast_1d(bandwidths), np.float64)
    out = np.full((queries.shape[0], y.shape[1]), -777, queries.dtype)
    w = np.full((queries.shape[0], x.shape[0]), -777, queries.dtype) if weights else None
    status = lib.attnpool_nadaraya_watson_predict(
        dtype_code(x), KERNELS[kernel], doubles(h), h.size, view(x), view(y),
        view(queries), view(out, True), view(w, True) if weights else None, empty_rows,
        ctypes.byref(Execution(threads)))
    return status, out, w


def cross_validate(x, y, bandwidths, kernel="gaussian", folds=0, scales=None, threads=0,
                   every_pair=0):
    """attnpool_cross_validate: (status, scores, unpredictable, best)."""
    grid = np.ascontiguousarray(bandwidths, np.float64)
    scores = np.full(grid.size, -777.0)
    unpredictable = np.full(grid.size, 777, np.uintp)
    best = ctypes.c_size_t(777)
    scale_array = None if scales is None else np.ascontiguousarray(scales, np.float64)
    options = CrossValidationOptions(folds, doubles(scale_array) if scales is not None
                                     else None, every_pair)
    status = lib.attnpool_cross_validate(
        dtype_code(x), KERNELS[kernel], view(x), view(y), doubles(grid), grid.size,
        ctypes.byref(options), doubles(scores), sizes(unpredictable), ctypes.byref(best),
        ctypes.byref(Execution(threads)))
    return status, scores, unpredictable, best.value


def brute_force_cross_validation(x, y, h, kernel="gaussian", folds=0, scales=None):
    """Refits without each held-out point (or fold), in float64: (score, unpredictable)."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    if scales is not None:
        x = x / np.asarray(scales)
    n = x.shape[0]
    errors, missing = [], 0
    for i in range(n):
        train = (np.arange(n) != i) if folds == 0 else (np.arange(n) % folds != i % folds)
        r = np.sqrt(((x[train] - x[i]) ** 2).sum(1))
        w = kernel_formulas.weights(kernel, r / h)
        if w.sum() == 0:
            missing += 1
            continue
        errors.append(((y[i] - w @ y[train] / w.sum()) ** 2).sum())
    return (np.mean(errors) if errors else np.nan), missing


class CApiTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(20240607)

    def tearDown(self):
        lib.attnpool_reset_target()

    def rand(self, *shape, dtype=np.float32, scale=1.0):
        return (self.rng.standard_normal(shape) * scale).astype(dtype)

    def tolerance(self, dtype):
        return 2e-5 if dtype == np.float32 else 1e-12

    def test_distances(self):
        for dtype in (np.float32, np.float64):
            q, k = self.rand(9, 5, dtype=dtype), self.rand(13, 5, dtype=dtype)
            for name, code in DISTANCES.items():
                with self.subTest(dtype=dtype.__name__, distance=name):
                    out = np.empty((9, 13), dtype)
                    status = lib.attnpool_pairwise_distances(
                        dtype_code(q), code, view(q), view(k), view(out, True), None)
                    self.assertEqual(status, OK, last_error())
                    expected = reference_distances(q, k, name)
                    np.testing.assert_allclose(out, expected, rtol=self.tolerance(dtype),
                                               atol=self.tolerance(dtype) * 10)

    def test_kernels(self):
        r = np.abs(self.rand(6, 17, dtype=np.float64)) * 2
        h = 0.7
        u = r / h
        for name, value in KERNELS.items():
            if name in kernel_formulas.SCORE_KERNELS:
                continue
            with self.subTest(kernel=name):
                formula = kernel_formulas.weights(name, u)  # every kernel has one
                spec = lib.attnpool_kernel_spec_init()
                spec.kernel, spec.bandwidth = value, h
                # r² (sqeuclidean) for even enum values, r (euclidean) for
                # odd ones: both inputs over the kernels.
                squared = value % 2 == 0
                values = (r ** 2 if squared else r).copy()
                status = lib.attnpool_apply_kernel(
                    FLOAT64, ctypes.byref(spec),
                    DISTANCES["sqeuclidean" if squared else "euclidean"],
                    view(values, True), 3, None)
                self.assertEqual(status, OK, last_error())
                np.testing.assert_allclose(values, formula, rtol=1e-12, atol=2e-15)
        spec = lib.attnpool_kernel_spec_init()
        spec.kernel, spec.has_scale, spec.scale = KERNELS["exp"], 1, -0.3
        scores = self.rand(4, 9, dtype=np.float32)
        values = scores.copy()
        self.assertEqual(lib.attnpool_apply_kernel(
            FLOAT32, ctypes.byref(spec), DISTANCES["dot"], view(values, True), 4, None), OK)
        np.testing.assert_allclose(values, np.exp(-0.3 * scores.astype(np.float64)), rtol=1e-6)

    def test_normalize_with_causal_mask(self):
        a = self.rand(5, 7, dtype=np.float64)
        visible = np.arange(7)[None, :] <= np.arange(5)[:, None] + 1  # offset 1
        mask = Mask(causal=1, causal_offset=1)
        for name in ("softmax", "argmax"):
            with self.subTest(normalization=name):
                values = a.copy()
                status = lib.attnpool_normalize(FLOAT64, NORMALIZATIONS[name],
                                                view(values, True), ctypes.byref(mask), 0, None)
                self.assertEqual(status, OK, last_error())
                masked = np.where(visible, a, -np.inf)
                if name == "softmax":
                    expected = softmax(masked)
                else:
                    expected = np.zeros_like(a)
                    expected[np.arange(5), masked.argmax(axis=1)] = 1
                np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-300)

    def test_normalize_with_sliding_window_and_chunks(self):
        a = self.rand(6, 11, dtype=np.float64)
        position = np.arange(6)[:, None] + 3  # causal_offset 3
        keys = np.arange(11)[None, :]
        for left, right, chunk in ((2, 1, None), (None, 0, None), (4, None, None),
                                   (None, None, 4), (2, None, 3)):
            with self.subTest(left=left, right=right, chunk=chunk):
                window = {name: side for name, side in
                          (("window_left", left), ("window_right", right),
                           ("chunk", chunk))
                          if side is not None}
                mask = Mask(causal_offset=3, **window)
                values = a.copy()
                status = lib.attnpool_normalize(FLOAT64, NORMALIZATIONS["softmax"],
                                                view(values, True), ctypes.byref(mask), 0, None)
                self.assertEqual(status, OK, last_error())
                visible = np.ones(a.shape, bool)
                if left is not None:
                    visible &= keys >= position - left
                if right is not None:
                    visible &= keys <= position + right
                if chunk is not None:
                    visible &= keys // chunk == position // chunk
                expected = softmax(np.where(visible, a, -np.inf))
                np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-300)

    def test_weighted_sum_strided(self):
        big = self.rand(8, 12, dtype=np.float32)
        weights = big[:, :10]  # rows strided by 12
        values = self.rand(10, 3, dtype=np.float32)
        out = np.zeros((8, 3), np.float32)
        self.assertEqual(lib.attnpool_weighted_sum(
            FLOAT32, view(weights), view(values), view(out, True), None), OK, last_error())
        np.testing.assert_allclose(out, weights.astype(np.float64) @ values, rtol=1e-5,
                                   atol=1e-5)

    def test_nadaraya_watson(self):
        for dtype in (np.float32, np.float64):
            x_train = np.sort(self.rng.uniform(0, 5, 40)).astype(dtype)[:, None]
            y_train = (2 * np.sin(x_train) + x_train).astype(dtype)
            x_val = np.arange(0, 5, 0.1).astype(dtype)[:, None]
            h = 0.5
            status, out, weights = pool(x_val, x_train, y_train, bandwidth=h, threads=2)
            self.assertEqual(status, OK, last_error())
            logits = -((x_val.astype(np.float64) - x_train.T) ** 2) / (2 * h * h)
            expected_weights = softmax(logits)
            np.testing.assert_allclose(weights, expected_weights, rtol=self.tolerance(dtype) * 5,
                                       atol=1e-30)
            np.testing.assert_allclose(out, expected_weights @ y_train,
                                       rtol=self.tolerance(dtype) * 5)

    def test_scaled_dot_product_with_bias_and_lengths(self):
        q, k, v = self.rand(6, 8), self.rand(9, 8), self.rand(9, 4)
        bias = self.rand(6, 9)
        lengths = (ctypes.c_size_t * 6)(9, 1, 4, 0, 9, 7)
        mask = Mask(valid_lengths=lengths, bias=view(bias))
        status, out, weights = pool(q, k, v, distance="dot", kernel="exp",
                                    normalization="softmax", mask=mask)
        self.assertEqual(status, OK, last_error())
        logits = q.astype(np.float64) @ k.T / np.sqrt(8) + bias
        visible = np.arange(9)[None, :] < np.array(list(lengths))[:, None]
        rows = np.array(list(lengths)) > 0
        expected = np.zeros_like(logits)
        expected[rows] = softmax(np.where(visible, logits, -np.inf)[rows])
        np.testing.assert_allclose(weights[rows], expected[rows], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(out[rows], expected[rows] @ v, rtol=1e-4, atol=1e-5)
        self.assertTrue(np.isnan(out[3]).all())  # no key visible: a NaN row

    def test_leave_one_out_with_visible_mask(self):
        x = np.sort(self.rng.uniform(0, 5, 30))[:, None]
        y = 2 * np.sin(x) + x
        visible = (1 - np.eye(30)).astype(np.uint8)
        mask = Mask(visible=ConstMatrix(visible.ctypes.data, 30, 30, 30))
        status, out, weights = pool(x, x, y, bandwidth=0.3, mask=mask)
        self.assertEqual(status, OK, last_error())
        w = np.exp(-((x - x.T) ** 2) / (2 * 0.09)) * visible
        np.testing.assert_allclose(out, (w / w.sum(1, keepdims=True)) @ y, rtol=1e-12)
        self.assertTrue((np.diag(weights) == 0).all())

    def sdpa(self, q, k, v, mask=None, scale=None, empty_rows=0, out=None):
        """attnpool_scaled_dot_product_attention: (status, out)."""
        if out is None:
            out = np.full(q.shape[:3] + v.shape[3:], -777, q.dtype)
        status = lib.attnpool_scaled_dot_product_attention(
            dtype_code(q), tensor(q), tensor(k), tensor(v), tensor(out, True),
            ctypes.byref(mask) if mask is not None else None,
            ctypes.byref(ctypes.c_double(scale)) if scale is not None else None,
            empty_rows, None)
        return status, out

    def test_scaled_dot_product_attention_varlen(self):
        # Three sequences packed in (sum n, H, d) arrays, grouped heads,
        # causal with the ends aligned; the middle one has no query.
        heads, kv_heads, d, dv = 4, 2, 8, 3
        lengths = [(3, 10), (0, 4), (5, 5)]
        query_offsets = np.cumsum([0] + [n for n, _ in lengths]).astype(np.uintp)
        key_offsets = np.cumsum([0] + [m for _, m in lengths]).astype(np.uintp)
        q = self.rand(int(query_offsets[-1]), heads, d)
        k = self.rand(int(key_offsets[-1]), kv_heads, d)
        v = self.rand(int(key_offsets[-1]), kv_heads, dv)
        out = np.full((len(q), heads, dv), -777, np.float32)

        def packed(array, cls=ConstTensor):
            rows, h, cols = array.shape
            return cls(array.ctypes.data, 1, h, rows, cols, rows * h * cols, cols, h * cols)

        mask = AttentionMask(causal=1)
        status = lib.attnpool_scaled_dot_product_attention_varlen(
            FLOAT32, packed(q), packed(k), packed(v), packed(out, Tensor), len(lengths),
            query_offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_size_t)),
            key_offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_size_t)),
            ctypes.byref(mask), None, 0, None)
        self.assertEqual(status, OK, last_error())
        for b, (n, m) in enumerate(lengths):
            q0, k0 = int(query_offsets[b]), int(key_offsets[b])
            for h in range(heads):
                qs = q[q0:q0 + n, h].astype(np.float64)
                ks = k[k0:k0 + m, h // 2].astype(np.float64)
                vs = v[k0:k0 + m, h // 2].astype(np.float64)
                logits = qs @ ks.T / np.sqrt(d)
                logits[np.arange(m)[None, :] > np.arange(n)[:, None] + m - n] = -np.inf
                np.testing.assert_allclose(out[q0:q0 + n, h], softmax(logits) @ vs,
                                           rtol=1e-5, atol=1e-6)
        # The same keys and values in a paged cache (blocks of 3 rows in a
        # shuffled pool of (blocks, block_size, Hkv, d)): the same bits.
        block_size = 3
        used = [(m + block_size - 1) // block_size for _, m in lengths]
        order = np.random.default_rng(5).permutation(sum(used) + 2).astype(np.int32)
        table = np.full((len(lengths), max(used)), -1, np.int32)
        key_pool = np.zeros((len(order), block_size, kv_heads, d), np.float32)
        value_pool = np.zeros((len(order), block_size, kv_heads, dv), np.float32)
        next_block = 0
        for b, (_, m) in enumerate(lengths):
            for p in range(used[b]):
                table[b, p] = order[next_block]
                next_block += 1
                rows = slice(int(key_offsets[b]) + p * block_size,
                             min(int(key_offsets[b]) + m, int(key_offsets[b]) + (p + 1) * block_size))
                count_rows = rows.stop - rows.start
                key_pool[table[b, p], :count_rows] = k[rows]
                value_pool[table[b, p], :count_rows] = v[rows]

        def pool_tensor(pool):
            blocks, size, h, cols = pool.shape
            return ConstTensor(pool.ctypes.data, blocks, h, size, cols, size * h * cols, cols,
                               h * cols)

        key_lengths = np.array([m for _, m in lengths], np.uintp)
        cache = PagedCache(pool_tensor(key_pool), pool_tensor(value_pool),
                           table.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), table.shape[1],
                           key_lengths.ctypes.data_as(ctypes.POINTER(ctypes.c_size_t)))
        paged = np.full_like(out, -777)
        status = lib.attnpool_scaled_dot_product_attention_paged(
            FLOAT32, packed(q), ctypes.byref(cache), packed(paged, Tensor), len(lengths),
            query_offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_size_t)),
            ctypes.byref(mask), None, 0, None)
        self.assertEqual(status, OK, last_error())
        np.testing.assert_array_equal(paged, out)
        bad = np.array([0, 3, 2, 8], np.uintp)
        status = lib.attnpool_scaled_dot_product_attention_varlen(
            FLOAT32, packed(q), packed(k), packed(v), packed(out, Tensor), len(lengths),
            bad.ctypes.data_as(ctypes.POINTER(ctypes.c_size_t)),
            key_offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_size_t)), None, None, 0, None)
        self.assertEqual((status, last_error()[1]),
                         (INVALID_ARGUMENT, "sequences.query_offsets"))

    def test_scaled_dot_product_attention(self):
        batch, heads, kv_heads, n, m, d, dv = 2, 4, 2, 9, 13, 8, 5
        for dtype in (np.float32, np.float64):
            with self.subTest(dtype=dtype.__name__):
                q = self.rand(batch, heads, n, d, dtype=dtype)
                k = self.rand(batch, kv_heads, m, d, dtype=dtype)
                v = self.rand(batch, kv_heads, m, dv, dtype=dtype)
                bias = self.rand(1, heads, n, m, dtype=dtype)  # broadcast over batch
                lengths = (ctypes.c_size_t * batch)(m, 6)
                mask = AttentionMask(valid_lengths=lengths, causal=1, causal_offset=2,
                                     bias=tensor(bias), window_left=4)
                status, out = self.sdpa(q, k, v, mask=mask, scale=0.3)
                self.assertEqual(status, OK, last_error())
                group = heads // kv_heads
                k_rep = np.repeat(k.astype(np.float64), group, axis=1)
                v_rep = np.repeat(v.astype(np.float64), group, axis=1)
                logits = 0.3 * q.astype(np.float64) @ k_rep.transpose(0, 1, 3, 2) + bias
                visible = ((np.arange(m)[None, None, None, :] <
                            np.array(list(lengths))[:, None, None, None]) &
                           (np.arange(m)[None, None, None, :] <=
                            np.arange(n)[None, None, :, None] + 2) &
                           (np.arange(m)[None, None, None, :] >=
                            np.arange(n)[None, None, :, None] + 2 - 4))
                expected = softmax(np.where(visible, logits, -np.inf)) @ v_rep
                tolerance = self.tolerance(dtype) * 5
                np.testing.assert_allclose(out, expected, rtol=tolerance, atol=tolerance)
        # Gemma 2's soft-cap, ALiBi's standard slopes, per-head sinks, causal.
        slopes = (ctypes.c_double * heads)()
        self.assertEqual(lib.attnpool_alibi_slopes(heads, slopes), OK, last_error())
        self.assertEqual(list(slopes), [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8])
        q = self.rand(1, heads, n, d)
        k = self.rand(1, heads, m, d)
        v = self.rand(1, heads, m, dv)
        # The slopes in the call's dtype, as the mask takes them.
        slopes32 = np.zeros(heads, np.float32)
        self.assertEqual(lib.attnpool_alibi_slopes_as(FLOAT32, heads, slopes32.ctypes.data),
                         OK, last_error())
        np.testing.assert_array_equal(slopes32, np.array(list(slopes), np.float32))
        self.assertEqual(lib.attnpool_alibi_slopes_as(7, heads, slopes32.ctypes.data),
                         INVALID_ARGUMENT)
        self.assertEqual(last_error()[1], "dtype")
        sinks = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
        mask = AttentionMask(causal=1, causal_offset=4, softcap=1.5,
                             alibi_slopes=slopes32.ctypes.data, sinks=sinks.ctypes.data)
        status, out = self.sdpa(q, k, v, mask=mask)
        self.assertEqual(status, OK, last_error())
        scores = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / np.sqrt(d)
        distance = np.arange(m)[None, :] - (np.arange(n)[:, None] + 4)
        logits = (1.5 * np.tanh(scores / 1.5) +
                  slopes32.astype(np.float64)[None, :, None, None] * distance)
        logits = np.where(distance <= 0, logits, -np.inf)
        top = np.maximum(logits.max(axis=-1, keepdims=True), sinks[None, :, None, None])
        weights = np.exp(logits - top)
        weights /= weights.sum(axis=-1, keepdims=True) + np.exp(sinks[None, :, None, None] - top)
        np.testing.assert_allclose(out, weights @ v, rtol=1e-5, atol=1e-6)
        # (B, n, H, d) arrays, PyTorch's batch_first layout, seen as (B, H, n, d)
        # through the strides; the default scale 1/sqrt(d).
        q = self.rand(2, n, heads, d).transpose(0, 2, 1, 3)
        k = self.rand(2, m, heads, d).transpose(0, 2, 1, 3)
        v = self.rand(2, m, heads, dv).transpose(0, 2, 1, 3)
        out = np.full((2, n, heads, dv), -777, np.float32).transpose(0, 2, 1, 3)
        status, _ = self.sdpa(q, k, v, out=out)
        self.assertEqual(status, OK, last_error())
        expected = softmax(q.astype(np.float64) @ k.transpose(0, 1, 3, 2) / np.sqrt(d)) @ v
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
        # A bad argument: the status, its name, the output untouched.
        status, out = self.sdpa(q, self.rand(2, heads, m, d - 1), v)
        self.assertEqual((status, last_error()[1]), (INVALID_ARGUMENT, "keys.cols"))
        self.assertIn("keys.cols", last_error()[0])
        self.assertTrue((out == -777).all())

    def test_shards_merge_to_the_whole(self):
        n, m, d, dv, split = 10, 23, 4, 3, 9
        q, k, v = self.rand(n, d), self.rand(m, d), self.rand(m, dv)
        for kernel, normalization in (("exp", "softmax"), ("gaussian", "sum"),
                                      ("exp", "argmax")):
            with self.subTest(kernel=kernel, normalization=normalization):
                spec = lib.attnpool_pool_spec_init()
                spec.distance = DISTANCES["dot" if kernel == "exp" else "sqeuclidean"]
                spec.kernel.kernel = KERNELS[kernel]
                spec.normalization = NORMALIZATIONS[normalization]
                mask = Mask(causal=1, causal_offset=5)
                whole = np.full((n, dv), -777, np.float32)
                self.assertEqual(lib.attnpool_pool(
                    FLOAT32, ctypes.byref(spec), view(q), view(k), view(v),
                    view(whole, True), ctypes.byref(mask), None), OK, last_error())
                states, arrays = [], []
                for begin, end in ((0, split), (split, m)):
                    accumulator = np.zeros((n, dv), np.float32)
                    maxima, sums = np.zeros(n, np.float32), np.zeros(n, np.float32)
                    best = (ctypes.c_size_t * n)()
                    state = PartialState(view(accumulator, True), maxima.ctypes.data,
                                         sums.ctypes.data, best)
                    self.assertEqual(lib.attnpool_pool_partial(
                        FLOAT32, ctypes.byref(spec), view(q), view(k[begin:end]),
                        view(v[begin:end]), begin, ctypes.byref(state),
                        ctypes.byref(mask), None), OK, last_error())
                    states.append(state)
                    arrays.append((accumulator, maxima, sums, best))
                self.assertEqual(lib.attnpool_pool_merge(
                    FLOAT32, ctypes.byref(spec), ctypes.byref(states[0]),
                    ctypes.byref(states[1])), OK, last_error())
                out = np.full((n, dv), -777, np.float32)
                self.assertEqual(lib.attnpool_pool_finish(
                    FLOAT32, ctypes.byref(spec), ctypes.byref(states[0]), view(out, True)),
                    OK, last_error())
                np.testing.assert_allclose(out, whole, rtol=1e-5, atol=1e-6)
                if normalization == "softmax":  # and against NumPy
                    visible = np.arange(m)[None, :] <= np.arange(n)[:, None] + 5
                    logits = q.astype(np.float64) @ k.T / np.sqrt(d)
                    np.testing.assert_allclose(
                        out, softmax(np.where(visible, logits, -np.inf)) @ v,
                        rtol=1e-5, atol=1e-5)
        # A bad argument: later's accumulator of the wrong height.
        short = np.zeros((n - 1, dv), np.float32)
        later = PartialState(view(short, True), states[1].max, states[1].sum, states[1].best)
        before = arrays[0][0].copy()
        self.assertEqual(lib.attnpool_pool_merge(FLOAT32, ctypes.byref(spec),
                                                 ctypes.byref(states[0]),
                                                 ctypes.byref(later)), INVALID_ARGUMENT)
        self.assertEqual(last_error()[1], "later.accumulator.rows")
        np.testing.assert_array_equal(arrays[0][0], before)

    def test_multi_head_attention_and_linear(self):
        batch, n, m, d, heads, dh, d_out = 2, 6, 8, 5, 2, 3, 4
        x_q = self.rand(batch, 1, n, d, dtype=np.float64)
        x_kv = self.rand(batch, 1, m, d, dtype=np.float64)
        w = {name: self.rand(d if name != "w_o" else heads * dh,
                             heads * dh if name != "w_o" else d_out, dtype=np.float64)
             for name in ("w_q", "w_k", "w_v", "w_o")}
        b = {name: self.rand(heads * dh if name != "b_o" else d_out, dtype=np.float64)
             for name in ("b_q", "b_k", "b_v", "b_o")}
        weights = MultiHeadWeights(heads, *(view(w[name]) for name in
                                            ("w_q", "w_k", "w_v", "w_o")),
                                   *(b[name].ctypes.data for name in
                                     ("b_q", "b_k", "b_v", "b_o")))
        out = np.full((batch, 1, n, d_out), -777.0)
        status = lib.attnpool_multi_head_attention(
            FLOAT64, ctypes.byref(weights), tensor(x_q), tensor(x_kv), tensor(x_kv),
            tensor(out, True), None, 0, None)
        self.assertEqual(status, OK, last_error())

        def split(x):  # (B, rows, H*dh) -> (B, H, rows, dh)
            return x.reshape(x.shape[0], x.shape[1], heads, dh).transpose(0, 2, 1, 3)
        pq = split(x_q[:, 0] @ w["w_q"] + b["b_q"])
        pk = split(x_kv[:, 0] @ w["w_k"] + b["b_k"])
        pv = split(x_kv[:, 0] @ w["w_v"] + b["b_v"])
        heads_out = softmax(pq @ pk.transpose(0, 1, 3, 2) / np.sqrt(dh)) @ pv
        concat = heads_out.transpose(0, 2, 1, 3).reshape(batch, n, heads * dh)
        expected = concat @ w["w_o"] + b["b_o"]
        np.testing.assert_allclose(out[:, 0], expected, rtol=1e-12, atol=1e-12)

        x = self.rand(7, d, dtype=np.float64)
        linear_out = np.zeros((7, heads * dh))
        self.assertEqual(lib.attnpool_linear(FLOAT64, view(x), view(w["w_q"]),
                                             b["b_q"].ctypes.data, view(linear_out, True),
                                             None), OK, last_error())
        np.testing.assert_allclose(linear_out, x @ w["w_q"] + b["b_q"], rtol=1e-12,
                                   atol=1e-12)

    # ------------------------------------------------------------ regression

    def test_nadaraya_watson_predict(self):
        for dtype in (np.float32, np.float64):
            with self.subTest(dtype=dtype.__name__):
                x = np.sort(self.rng.uniform(0, 5, 40)).astype(dtype)[:, None]
                y = (2 * np.sin(x) + x + self.rng.standard_normal(x.shape)).astype(dtype)
                q = np.arange(-1, 6, 0.1).astype(dtype)[:, None]  # past both ends too
                h = 0.4
                status, out, weights = nadaraya_watson(x, y, q, h, weights=True, threads=2)
                self.assertEqual(status, OK, last_error())
                logits = -((q.astype(np.float64) - x.T) ** 2) / (2 * h * h)
                expected_weights = softmax(logits)
                tolerance = self.tolerance(dtype) * 5
                np.testing.assert_allclose(weights, expected_weights, rtol=tolerance,
                                           atol=1e-30)
                np.testing.assert_allclose(out, expected_weights @ y, rtol=tolerance)
                # Without the weights (the fused kernel): the same.
                status, fused, _ = nadaraya_watson(x, y, q, h)
                self.assertEqual(status, OK, last_error())
                np.testing.assert_allclose(fused, out, rtol=tolerance)
        # Per-dimension bandwidths on 3-D x with two outputs.
        x, y = self.rand(60, 3, dtype=np.float64), self.rand(60, 2, dtype=np.float64)
        q = self.rand(25, 3, dtype=np.float64)
        h = np.array([0.5, 1.0, 2.0])
        status, out, _ = nadaraya_watson(x, y, q, h)
        self.assertEqual(status, OK, last_error())
        w = np.exp(-((((q[:, None, :] - x[None]) / h) ** 2).sum(-1)) / 2)
        np.testing.assert_allclose(out, (w / w.sum(1, keepdims=True)) @ y, rtol=1e-12)
        # A narrow triangular window: empty rows are zero on request.
        status, out, _ = nadaraya_watson(x, y, q, 0.3, kernel="triangular", empty_rows=1)
        self.assertEqual(status, OK, last_error())
        r = np.sqrt(((q[:, None, :] - x[None]) ** 2).sum(-1))
        w = np.maximum(1 - r / 0.3, 0)
        sums = w.sum(1, keepdims=True)
        self.assertTrue((sums == 0).any())
        expected = np.divide(w @ y, sums, out=np.zeros((25, 2)), where=sums > 0)
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)

    def test_bandwidth_rules_and_grid(self):
        x = self.rand(50, 3, dtype=np.float64) * np.array([1.0, 0.1, 5.0])
        n, d = x.shape
        iqr = np.percentile(x, 75, axis=0) - np.percentile(x, 25, axis=0)
        sigma = np.minimum(x.std(axis=0, ddof=1), iqr / 1.349)
        expected = {"silverman": (4 / (d + 2)) ** (1 / (d + 4)) * sigma * n ** (-1 / (d + 4)),
                    "scott": 1.059 * sigma * n ** (-1 / (d + 4))}
        for rule, code in RULES.items():
            for dtype in (np.float32, np.float64):
                with self.subTest(rule=rule, dtype=dtype.__name__):
                    data = x.astype(dtype)
                    out = np.full(d, -777.0)
                    self.assertEqual(lib.attnpool_rule_of_thumb_bandwidth(
                        dtype_code(data), code, view(data), doubles(out)), OK, last_error())
                    np.testing.assert_allclose(
                        out, expected[rule], rtol=1e-5 if dtype == np.float32 else 1e-12)
        grid = np.full(9, -777.0)
        self.assertEqual(lib.attnpool_gaussian_bandwidth_grid(0.1, 1.0, 9, doubles(grid)), OK)
        np.testing.assert_allclose(1 / grid ** 2, np.linspace(100, 1, 9), rtol=1e-13)
        self.assertEqual((grid[0], grid[-1]), (0.1, 1.0))
        # Bad arguments: the status, the name, the outputs untouched.
        out = np.full(3, -777.0)
        constant = np.ones((10, 3))
        self.assertEqual(lib.attnpool_rule_of_thumb_bandwidth(
            FLOAT64, RULES["scott"], view(constant), doubles(out)), INVALID_ARGUMENT)
        self.assertEqual(last_error()[1], "x")
        self.assertIn("constant", last_error()[0])
        self.assertTrue((out == -777).all())
        self.assertEqual(lib.attnpool_gaussian_bandwidth_grid(0.1, 1.0, 0, doubles(grid)),
                         INVALID_ARGUMENT)
        self.assertEqual(last_error()[1], "count")

    def test_cross_validate_leave_one_out_vs_brute_force(self):
        n = 30
        x = np.sort(self.rng.uniform(0, 5, n))[:, None]
        y = 2 * np.sin(x) + x + self.rng.standard_normal((n, 1))
        grid = np.full(12, -777.0)
        self.assertEqual(lib.attnpool_gaussian_bandwidth_grid(0.1, 1.5, 12, doubles(grid)), OK)
        for dtype in (np.float32, np.float64):
            with self.subTest(dtype=dtype.__name__):
                xs, ys = x.astype(dtype), y.astype(dtype)
                status, scores, unpredictable, best = cross_validate(xs, ys, grid, threads=2)
                self.assertEqual(status, OK, last_error())
                expected = [brute_force_cross_validation(xs, ys, h)[0] for h in grid]
                np.testing.assert_allclose(scores, expected,
                                           rtol=2e-5 if dtype == np.float32 else 1e-12)
                self.assertTrue((unpredictable == 0).all())
                self.assertEqual(best, int(np.argmin(scores)))
                # One thread: bitwise the same.
                _, single, _, _ = cross_validate(xs, ys, grid, threads=1)
                np.testing.assert_array_equal(single, scores)
        # 2-D x with per-dimension scales, two outputs, 4-fold, an unsorted grid.
        x2 = self.rand(24, 2, dtype=np.float64) * np.array([1.0, 3.0])
        y2 = np.column_stack([np.sin(x2[:, 0]), np.cos(x2[:, 1])])
        grid2 = np.array([0.9, 0.3, 0.6, 1.7])
        status, scores, _, best = cross_validate(x2, y2, grid2, folds=4, scales=[1.0, 3.0])
        self.assertEqual(status, OK, last_error())
        expected = [brute_force_cross_validation(x2, y2, h, folds=4, scales=[1.0, 3.0])[0]
                    for h in grid2]
        np.testing.assert_allclose(scores, expected, rtol=1e-12)
        self.assertEqual(best, int(np.argmin(scores)))
        # Boxcar: a width too narrow leaves points unpredictable and is never best.
        grid3 = np.array([0.05, 0.8, 2.5])
        status, scores, unpredictable, best = cross_validate(x, y, grid3, kernel="boxcar")
        self.assertEqual(status, OK, last_error())
        reference = [brute_force_cross_validation(x, y, h, kernel="boxcar") for h in grid3]
        np.testing.assert_allclose(scores, [score for score, _ in reference], rtol=1e-12)
        np.testing.assert_array_equal(unpredictable, [missing for _, missing in reference])
        self.assertGreater(unpredictable[0], 0)
        self.assertEqual(best, 1 + int(np.argmin(scores[1:])))
        # Every pair visited: a compact kernel skips only zero weights.
        _, every, _, _ = cross_validate(x, y, grid3, kernel="boxcar", every_pair=1)
        np.testing.assert_array_equal(every, scores)
        status, _, _, best = cross_validate(x, y, grid3[:1], kernel="boxcar")
        self.assertEqual((status, best), (OK, NO_BANDWIDTH))

    def test_regression_errors_leave_outputs_untouched(self):
        x, y, q = self.rand(20, 2), self.rand(20, 1), self.rand(5, 2)
        status, out, weights = nadaraya_watson(x, y, q, [0.5, 0.5, 0.5], weights=True)
        self.assertEqual((status, last_error()[1]), (INVALID_ARGUMENT, "bandwidth_count"))
        self.assertIn("bandwidth_count", last_error()[0])
        self.assertTrue((out == -777).all() and (weights == -777).all())
        status, out, _ = nadaraya_watson(x, y, q, [0.5, 0.0])
        self.assertEqual((status, last_error()[1]), (INVALID_ARGUMENT, "bandwidths"))
        self.assertTrue((out == -777).all())
        status, out, _ = nadaraya_watson(x, y, self.rand(5, 3), 0.5)
        self.assertEqual((status, last_error()[1]), (INVALID_ARGUMENT, "queries.cols"))
        self.assertTrue((out == -777).all())
        status, scores, unpredictable, best = cross_validate(x, y, [0.5, 1.0], folds=21)
        self.assertEqual((status, last_error()[1]), (INVALID_ARGUMENT, "options.folds"))
        self.assertIn("options.folds", last_error()[0])
        self.assertTrue((scores == -777).all() and (unpredictable == 777).all())
        self.assertEqual(best, 777)
        status, scores, _, _ = cross_validate(x, y, [0.5, 1.0], scales=[1.0, -2.0])
        self.assertEqual((status, last_error()[1]), (INVALID_ARGUMENT, "options.scales"))
        self.assertTrue((scores == -777).all())
        status, scores, _, _ = cross_validate(x, y, [0.5, 1.0], kernel="exp")
        self.assertEqual((status, last_error()[1]), (INVALID_ARGUMENT, "kernel"))

    def test_every_supported_target(self):
        q, k, v = self.rand(17, 3), self.rand(33, 3), self.rand(33, 2)
        targets = lib.attnpool_supported_targets().decode().split()
        self.assertTrue(targets)
        self.assertTrue(set(targets) <= set(lib.attnpool_compiled_targets().decode().split()))
        for target in targets:
            with self.subTest(target=target):
                self.assertEqual(lib.attnpool_force_target(target.encode()), OK)
                self.assertEqual(lib.attnpool_active_target().decode(), target)
                status, out, _ = pool(q, k, v, kernel="epanechnikov", bandwidth=2.0,
                                      empty_rows=1)
                self.assertEqual(status, OK, last_error())
                self.assertEqual(lib.attnpool_last_run_target().decode(), target)
                r = np.sqrt(reference_distances(q, k, "sqeuclidean"))
                w = np.maximum(1 - (r / 2) ** 2, 0)
                sums = w.sum(1, keepdims=True)
                expected = np.divide(w @ v, sums, out=np.zeros((17, 2)), where=sums > 0)
                np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
        self.assertEqual(lib.attnpool_force_target(b"no-such-isa"), UNSUPPORTED_TARGET)
        self.assertEqual(last_error()[1], "target")

    def test_errors_leave_outputs_untouched(self):
        q, k, v = self.rand(4, 3), self.rand(5, 2), self.rand(5, 2)
        status, out, weights = pool(q, k, v)
        self.assertEqual(status, INVALID_ARGUMENT)
        message, argument = last_error()
        self.assertEqual(argument, "keys.cols")
        self.assertIn("keys.cols", message)
        self.assertTrue((out == -777).all() and (weights == -777).all())
        status, out, _ = pool(q, self.rand(5, 3), v, bandwidth=float("nan"))
        self.assertEqual((status, last_error()[1]), (INVALID_ARGUMENT, "kernel.bandwidth"))
        self.assertTrue((out == -777).all())
        status, _, _ = pool(q, self.rand(5, 3), v, threads=-2)
        self.assertEqual((status, last_error()[1]), (INVALID_ARGUMENT, "execution.threads"))
        kernel = ctypes.c_int()
        self.assertEqual(lib.attnpool_kernel_from_name(b"gausian", ctypes.byref(kernel)),
                         INVALID_ARGUMENT)
        self.assertIn("gaussian", last_error()[0])  # the known names
        self.assertEqual(lib.attnpool_status_name(INVALID_ARGUMENT), b"invalid argument")
        self.assertTrue(lib.attnpool_version())


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    LIBRARY_PATH = sys.argv.pop(1)
    lib = load(LIBRARY_PATH)
    for value in range(256):
        name = lib.attnpool_kernel_name(value)
        if name is None:
            break
        KERNELS[name.decode()] = value
    unittest.main(verbosity=1)
