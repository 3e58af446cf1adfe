#!/usr/bin/env python3
"""The attnpool command line on .npy files: results against NumPy formulas,
.npy round trips, and a clear message and exit code for every malformed
input.

usage: test_cli.py path/to/attnpool
"""
import os
import pwd
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import unittest

import numpy as np

import kernel_formulas

CLI = None


def bfloat16_bits(x):
    """float32 → bfloat16 bit patterns, rounding to nearest even."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bfloat16_held(bits):
    """The float32 values bfloat16 bit patterns hold."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def int8_rows(x):
    """Per-row symmetric int8 quantization: (int8 rows, float32 scales)."""
    scales = (np.abs(x).max(axis=-1) / np.float32(127)).astype(np.float32)
    scales[scales == 0] = 1
    return np.rint(x / scales[..., None]).astype(np.int8), scales


def float8_e5m2_rows(x):
    """Rows scaled into OCP E5M2 (binary16's upper byte, the lower byte
    dropped): (uint8 patterns, float32 scales, the float32 values held)."""
    scales = (np.abs(x).max(axis=-1) / np.float32(57344)).astype(np.float32)
    scales[scales == 0] = 1
    half = (x / scales[..., None]).astype(np.float16).view(np.uint16)
    bits = (half >> 8).astype(np.uint8)
    values = (bits.astype(np.uint16) << 8).view(np.float16).astype(np.float32)
    return bits, scales, (scales[..., None] * values).astype(np.float32)


def softmax(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def npy_bytes(descr, shape, data=b"", fortran=False, version=(1, 0), header=None):
    """A .npy file written by hand, so that it can be made wrong."""
    if header is None:
        header = "{'descr': '%s', 'fortran_order': %s, 'shape': %r, }" % (
            descr, "True" if fortran else "False", tuple(shape))
    size_format = "<H" if version[0] == 1 else "<I"
    prefix_size = 6 + 2 + struct.calcsize(size_format)
    padding = (64 - (prefix_size + len(header) + 1) % 64) % 64
    text = (header + " " * padding + "\n").encode("latin1")
    return (b"\x93NUMPY" + bytes(version) + struct.pack(size_format, len(text)) + text
            + data)


def nadaraya_watson(x, y, q, h, kernel="gaussian"):
    """The regression in float64: x (n, d), y (n, dy), q (m, d), h scalar or (d,)."""
    x, y, q = (np.asarray(a, np.float64).reshape(len(a), -1) for a in (x, y, q))
    u = np.sqrt((((q[:, None, :] - x[None]) / np.asarray(h)) ** 2).sum(-1))
    w = kernel_formulas.weights(kernel, u)
    return w / w.sum(1, keepdims=True) @ y, w / w.sum(1, keepdims=True)


def brute_force_cross_validation(x, y, h, kernel="gaussian", folds=0):
    """Refits without each held-out point (or fold): (score, unpredictable)."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    y = np.asarray(y, np.float64).reshape(len(y), -1)
    n = len(x)
    errors, missing = [], 0
    for i in range(n):
        train = np.arange(n) != i if folds == 0 else np.arange(n) % folds != i % folds
        w = kernel_formulas.weights(kernel, np.sqrt(((x[train] - x[i]) ** 2).sum(1)) / h)
        if w.sum() == 0:
            missing += 1
        else:
            errors.append(((y[i] - w @ y[train] / w.sum()) ** 2).sum())
    return (np.mean(errors) if errors else np.nan), missing


def regress_stdout(text):
    """The printed cross-validation curve (rows of h, score, unpredictable) and
    the chosen bandwidth(s) of 'attnpool regress'."""
    curve, chosen = [], None
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("bandwidth: "):
            chosen = [float(word) for word in line.split("(")[0].split()[1:]]
        else:
            h, score, unpredictable = line.split()
            curve.append((float(h), float(score), int(unpredictable)))
    return np.array(curve).reshape(-1, 3), chosen


def _link(target, name):
    return lambda at: os.symlink(at(target), at(name))


def _mode(name, mode):
    return lambda at: os.chmod(at(name), mode)


def _steps(*steps):
    return lambda at: [step(at) for step in steps]


def _is(kind, name):
    return lambda test, at: test.assertTrue(kind(os.lstat(at(name)).st_mode), name)


def _has_mode(name, mode):
    return lambda test, at: test.assertEqual(os.stat(at(name)).st_mode & 0o777, mode)


def _nothing(at):
    pass


def _snapshot(folder):
    """name -> (lstat, the bytes of a regular file or None)."""
    def content(path):
        if not stat.S_ISREG(os.stat(path).st_mode) if os.path.exists(path) else True:
            return None
        with open(path, "rb") as f:
            return f.read()
    return {name: (os.lstat(os.path.join(folder, name)),
                   content(os.path.join(folder, name)))
            for name in os.listdir(folder)}


# tools/output_files.h's cases: setup(at), the options after the inputs, and
# either the error or what was written and checked.
OUTPUT_CASES = [
    dict(name="an input", setup=_nothing, args=["-o", "x.npy"],
         error="is the file of the input --keys"),
    dict(name="an input's hard link", setup=lambda at: os.link(at("y.npy"), at("l.npy")),
         args=["-o", "l.npy"], error="is the file of the input --values"),
    dict(name="an input's symbolic link", setup=_link("q.npy", "l.npy"),
         args=["-o", "l.npy"], error="is the file of the input --queries"),
    dict(name="one new file twice", setup=_nothing,
         args=["-o", "new.npy", "--weights", "./new.npy"], error="is also -o's file"),
    dict(name="one file twice, through a link", setup=_link("old.npy", "l.npy"),
         args=["-o", "old.npy", "--weights", "l.npy"], error="is also -o's file"),
    dict(name="read-only", setup=_mode("old.npy", 0o444), args=["-o", "old.npy"],
         error="is read-only (mode 0444)"),
    dict(name="a directory", setup=lambda at: os.mkdir(at("d.npy")),
         args=["-o", "d.npy"], error="is a directory"),
    dict(name="the second output fails", setup=_nothing,
         args=["-o", "old.npy", "--weights", "no/such.npy"], error="cannot create"),
    dict(name="mode 0600 kept", setup=_mode("old.npy", 0o600), args=["-o", "old.npy"],
         written=["old.npy"], check=_has_mode("old.npy", 0o600)),
    dict(name="mode 0640 kept", setup=_mode("old.npy", 0o640), args=["-o", "old.npy"],
         written=["old.npy"], check=_has_mode("old.npy", 0o640)),
    dict(name="a link's target", setup=_link("old.npy", "l.npy"), args=["-o", "l.npy"],
         written=["old.npy"], check=_is(stat.S_ISLNK, "l.npy")),
    dict(name="a dangling link's target", setup=_link("new.npy", "l.npy"),
         args=["-o", "l.npy"], written=["new.npy"], check=_is(stat.S_ISLNK, "l.npy")),
    dict(name="a FIFO, in place", setup=lambda at: os.mkfifo(at("f.npy")), fifo="f.npy",
         args=["-o", "f.npy"], check=_is(stat.S_ISFIFO, "f.npy")),
    # A device node like /dev/null's, made in the scratch folder (root).
    dict(name="a device, in place", root=True,
         setup=lambda at: os.mknod(at("null.npy"), 0o666 | stat.S_IFCHR, os.makedev(1, 3)),
         args=["-o", "null.npy"], check=_is(stat.S_ISCHR, "null.npy")),
]


class CliTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory(prefix="attnpool-cli-")
        self.dir = self.directory.name
        self.rng = np.random.default_rng(7)

    def tearDown(self):
        self.directory.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def save(self, name, array):
        np.save(self.path(name), array)
        return self.path(name)

    def write(self, name, content):
        with open(self.path(name), "wb") as f:
            f.write(content)
        return self.path(name)

    def stored_variants(self, x, stem, dtype_option, scales_option):
        """float16, bfloat16-bit, int8 and float8 (row scales) files of x:
        name -> (the CLI arguments that pass them, the float32 values they
        hold)."""
        bits = bfloat16_bits(x)
        x8, scales = int8_rows(x)
        f8, f8_scales, f8_held = float8_e5m2_rows(x)
        return {
            "e5m2": ([self.save(f"{stem}f8.npy", f8), dtype_option, "float8_e5m2",
                      scales_option, self.save(f"{stem}f8s.npy", f8_scales)], f8_held),
            "f16": ([self.save(f"{stem}16.npy", x.astype(np.float16))],
                    x.astype(np.float16).astype(np.float32)),
            "bf16": ([self.save(f"{stem}b.npy", bits), dtype_option, "bfloat16"],
                     bfloat16_held(bits)),
            "int8": ([self.save(f"{stem}8.npy", x8), scales_option,
                      self.save(f"{stem}s.npy", scales)],
                     (scales[:, None] * x8.astype(np.float32)).astype(np.float32))}

    def assert_bf16_tile_result(self, on_tile, largest_value):
        """narrow.npy against held.npy (the float call on the values the narrow
        inputs hold): float32, within a score rounding where the bf16
        dot-product tile ran (on_tile), else bitwise."""
        narrow, held = np.load(self.path("narrow.npy")), np.load(self.path("held.npy"))
        self.assertEqual(narrow.dtype, np.float32)
        if on_tile:
            np.testing.assert_allclose(narrow, held, rtol=0, atol=1e-4 * largest_value)
        else:
            np.testing.assert_array_equal(narrow, held)

    def run_cli(self, *args, expect=0, env=None):
        result = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60,
                                env=None if env is None else {**os.environ, **env})
        self.assertEqual(result.returncode, expect,
                         f"attnpool {' '.join(args)}\nstdout: {result.stdout}\n"
                         f"stderr: {result.stderr}")
        return result

    def nw_inputs(self, dtype=np.float32, n=50, m=40):
        x = np.sort(self.rng.uniform(0, 5, m)).astype(dtype)
        y = (2 * np.sin(x) + x + self.rng.standard_normal(m)).astype(dtype)
        q = np.arange(0, 5, 5 / n).astype(dtype)
        return (self.save("x.npy", x), self.save("y.npy", y), self.save("q.npy", q),
                x, y, q)

    # ------------------------------------------------------------ good input

    def test_nadaraya_watson_round_trip(self):
        for dtype in (np.float32, np.float64):
            with self.subTest(dtype=dtype.__name__):
                x_path, y_path, q_path, x, y, q = self.nw_inputs(dtype)
                result = self.run_cli(
                    "pool", "--queries", q_path, "--keys", x_path, "--values", y_path,
                    "--kernel", "gaussian", "--bandwidth", "0.5", "-o", self.path("out.npy"),
                    "--weights", self.path("w.npy"), "--time", "--threads", "2")
                self.assertIn("compute", result.stderr)
                out, w = np.load(self.path("out.npy")), np.load(self.path("w.npy"))
                self.assertEqual(out.dtype, dtype)
                self.assertEqual(out.shape, q.shape)  # 1-D values: 1-D output
                self.assertEqual(w.shape, (len(q), len(x)))
                expected_w = softmax(-((q[:, None].astype(np.float64) - x[None, :]) ** 2) / 0.5)
                tolerance = 1e-5 if dtype == np.float32 else 1e-12
                np.testing.assert_allclose(w, expected_w, rtol=tolerance * 10, atol=1e-30)
                np.testing.assert_allclose(out, expected_w @ y, rtol=tolerance * 10)

    def test_reduced_precision_keys_and_values(self):
        # float16 ('<f2'), bfloat16 bits ('<u2' with --keys-dtype) and int8
        # ('|i1' with row scales): bitwise the float32 run on the values
        # they hold, but for the int8 values of these 6-query calls'
        # decodes, whose scales fold into their weights (element.h): within
        # a rounding of each weight·scale.
        q = self.rng.standard_normal((6, 8)).astype(np.float32)
        k = self.rng.standard_normal((40, 8)).astype(np.float32)
        v = self.rng.standard_normal((40, 3)).astype(np.float32)
        bits = bfloat16_bits(k)
        scales = (np.abs(v).max(axis=1) / np.float32(127)).astype(np.float32)
        v8 = np.rint(v * (np.float32(127) / np.abs(v).max(axis=1))[:, None]).astype(np.int8)
        held_keys = {"f16": k.astype(np.float16).astype(np.float32),
                     "bf16": bfloat16_held(bits)}
        stored_keys = {"f16": (self.save("k16.npy", k.astype(np.float16)), []),
                       "bf16": (self.save("kb.npy", bits), ["--keys-dtype", "bfloat16"])}
        held_values = (scales[:, None] * v8.astype(np.float32)).astype(np.float32)
        spec = ["--distance", "dot", "--kernel", "exp", "--normalize", "softmax",
                "--causal", "--causal-offset", "30"]
        for name in ("f16", "bf16"):
            with self.subTest(keys=name):
                path, options = stored_keys[name]
                self.run_cli("pool", "--queries", self.save("q.npy", q), "--keys", path,
                             *options, "--values", self.save("v8.npy", v8),
                             "--value-scales", self.save("vs.npy", scales), *spec,
                             "-o", self.path("narrow.npy"))
                self.run_cli("pool", "--queries", self.path("q.npy"), "--keys",
                             self.save("kh.npy", held_keys[name]), "--values",
                             self.save("vh.npy", held_values), *spec, "-o",
                             self.path("held.npy"))
                np.testing.assert_allclose(np.load(self.path("narrow.npy")),
                                           np.load(self.path("held.npy")), rtol=0,
                                           atol=1e-6 * np.abs(held_values).max())
        # Queries stored narrow too, in calls of 6 rows (the tile path: d 16):
        # float16 and int8 queries bitwise the float32 run on the values they
        # hold; bfloat16 queries with bfloat16 keys take the bf16
        # dot-product tile where `attnpool targets` reports one (within a
        # score rounding), else bitwise.
        q2 = self.rng.standard_normal((12, 16)).astype(np.float32)
        k2_bits = bfloat16_bits(self.rng.standard_normal((40, 16)).astype(np.float32))
        self.save("kb2.npy", k2_bits)
        stored_queries = self.stored_variants(q2, "q", "--queries-dtype",
                                              "--query-scales")
        bf16_dot = "bf16 dot:  none" not in self.run_cli("targets").stdout
        for name, (options, held_queries) in stored_queries.items():
            with self.subTest(queries=name):
                self.run_cli("pool", "--queries", *options, "--keys", self.path("kb2.npy"),
                             "--keys-dtype", "bfloat16", "--values", self.path("v8.npy"),
                             "--value-scales", self.path("vs.npy"), *spec,
                             "--rows-per-call", "6", "-o", self.path("narrow.npy"))
                self.run_cli("pool", "--queries", self.save("qh.npy", held_queries),
                             "--keys", self.save("kh2.npy", bfloat16_held(k2_bits)),
                             "--values", self.path("vh.npy"), *spec, "-o",
                             self.path("held.npy"))
                self.assert_bf16_tile_result(name == "bf16" and bf16_dot,
                                             np.abs(held_values).max())
        base = ["pool", "-o", self.path("o.npy")]
        q32 = ["--queries", self.path("q.npy")]
        for args, message in [
                (q32 + ["--keys", self.path("kb.npy"), "--values", self.path("vh.npy")],
                 "give --keys-dtype bfloat16"),
                (q32 + ["--keys", self.path("k16.npy"), "--values", self.path("v8.npy")],
                 "give its row scales with --value-scales"),
                (q32 + ["--keys", self.path("kh.npy"), "--values", self.path("vh.npy"),
                        "--key-scales", self.path("vs.npy")],
                 "--key-scales applies to reduced-precision inputs only"),
                (["--queries", self.path("qb.npy"), "--keys", self.path("kh2.npy"),
                  "--values", self.path("vh.npy")],
                 "give --queries-dtype bfloat16"),
                (["--queries", self.path("q8.npy"), "--keys", self.path("kh2.npy"),
                  "--values", self.path("vh.npy")],
                 "give its row scales with --query-scales"),
                (["--queries", self.path("q16.npy"), "--keys", self.path("kh2.npy"),
                  "--values", self.path("vh.npy"), "--bias", self.save("b64.npy", np.zeros((12, 40)))],
                 "must be float32 beside reduced-precision inputs"),
                (q32 + ["--keys", self.path("k16.npy"), "--values", self.path("vh.npy"),
                        "--queries-dtype", "bfloat16"],
                 "--queries-dtype bfloat16 but --queries"),
                (q32 + ["--keys", self.path("k16.npy"), "--values", self.path("vh.npy"),
                        "--query-scales", self.path("qs.npy")],
                 "--query-scales applies to scaled --queries only"),
                (q32 + ["--keys", self.path("k16.npy"), "--values", self.path("vh.npy"),
                        "--weights", self.path("w.npy")],
                 "--weights: not with reduced-precision"),
                (["--queries", self.save("q64.npy", q.astype(np.float64)),
                  "--keys", self.path("k16.npy"), "--values", self.path("vh.npy")],
                 "must be float32 or reduced-precision beside reduced-precision")]:
            with self.subTest(message=message):
                self.expect_error(base + args, message)

    def test_sdpa_reduced_precision_caches(self):
        # (B, Hkv, m, d) caches of bfloat16 bits and int8 with (B, Hkv, m)
        # scales under grouped heads: the float32 run on the values they
        # hold (the int8 values' scales folded into the decodes' weights,
        # element.h: within a rounding of each weight·scale); the other
        # layers refuse them.
        q = self.rng.standard_normal((2, 4, 3, 8)).astype(np.float32)
        k = self.rng.standard_normal((2, 2, 30, 8)).astype(np.float32)
        v = self.rng.standard_normal((2, 2, 30, 5)).astype(np.float32)
        bits = bfloat16_bits(k)
        scales = (np.abs(v).max(axis=-1) / np.float32(127)).astype(np.float32)
        v8 = np.rint(v * (np.float32(127) / np.abs(v).max(axis=-1))[..., None]).astype(np.int8)
        held_k = bfloat16_held(bits)
        held_v = (scales[..., None] * v8.astype(np.float32)).astype(np.float32)
        common = ["sdpa", "--queries", self.save("q.npy", q), "--causal",
                  "--causal-offset", "27"]
        self.run_cli(*common, "--keys", self.save("kb.npy", bits), "--keys-dtype",
                     "bfloat16", "--values", self.save("v8.npy", v8), "--value-scales",
                     self.save("vs.npy", scales), "-o", self.path("narrow.npy"))
        self.run_cli(*common, "--keys", self.save("kh.npy", held_k), "--values",
                     self.save("vh.npy", held_v), "-o", self.path("held.npy"))
        np.testing.assert_allclose(np.load(self.path("narrow.npy")),
                                   np.load(self.path("held.npy")), rtol=0,
                                   atol=1e-6 * np.abs(held_v).max())
        # Queries narrow too (12 rows per head, d 16: the tile path):
        # float16 bitwise the float32 run on the values they hold; bfloat16
        # (with bfloat16 keys) within a score rounding where the bf16
        # dot-product tile runs, else bitwise.
        q3 = self.rng.standard_normal((1, 2, 12, 16)).astype(np.float32)
        k3_bits = bfloat16_bits(self.rng.standard_normal((1, 1, 40, 16)).astype(np.float32))
        v3 = self.rng.standard_normal((1, 1, 40, 5)).astype(np.float32)
        q_bits = bfloat16_bits(q3)
        bf16_dot = "bf16 dot:  none" not in self.run_cli("targets").stdout
        for name, stored, options, held_q in [
                ("f16", q3.astype(np.float16), [], q3.astype(np.float16).astype(np.float32)),
                ("bf16", q_bits, ["--queries-dtype", "bfloat16"], bfloat16_held(q_bits))]:
            with self.subTest(queries=name):
                self.run_cli("sdpa", "--queries", self.save("qn.npy", stored), *options,
                             "--causal", "--causal-offset", "28", "--keys",
                             self.save("kb3.npy", k3_bits), "--keys-dtype", "bfloat16",
                             "--values", self.save("v3.npy", v3), "-o", self.path("narrow.npy"))
                self.run_cli("sdpa", "--queries", self.save("qh.npy", held_q), "--causal",
                             "--causal-offset", "28", "--keys",
                             self.save("kh3.npy", bfloat16_held(k3_bits)), "--values",
                             self.path("v3.npy"), "-o", self.path("held.npy"))
                self.assert_bf16_tile_result(name == "bf16" and bf16_dot, np.abs(v3).max())
        self.expect_error(
            ["sdpa", "--queries", self.path("q.npy"), "--keys", self.path("kh.npy"),
             "--values", self.path("v8.npy"), "--value-scales",
             self.save("bad.npy", scales[:, :, :29]), "-o", self.path("out.npy")],
            "one scale per row of --values")
        self.expect_error(
            ["additive", "--queries", self.path("q.npy"), "--keys", self.path("kb.npy"),
             "--values", self.path("vh.npy"), "--w-q", self.save("w.npy", np.ones((8, 3), np.float32)),
             "--w-k", self.path("w.npy"), "--w-v", self.save("wv.npy", np.ones(3, np.float32)),
             "-o", self.path("out.npy")],
            "dtype uint16 is not supported")

    def test_sdpa_matrices_and_masks(self):
        n, m, d, dv = 37, 29, 8, 3
        q, k = self.rng.standard_normal((n, d)), self.rng.standard_normal((m, d))
        v = self.rng.standard_normal((m, dv))
        bias = self.rng.standard_normal((n, m))
        lengths = self.rng.integers(0, m + 1, n).astype(np.int64)
        lengths[0] = 0
        args = ["pool", "--queries", self.save("q.npy", q), "--keys", self.save("k.npy", k),
                "--values", self.save("v.npy", v), "--distance", "dot", "--kernel", "exp",
                "--normalize", "softmax", "--scale", "0.25", "-o", self.path("out.npy"),
                "--bias", self.save("b.npy", bias), "--valid-lengths",
                self.save("l.npy", lengths), "--empty-rows", "zero"]
        # Several library calls of 5 query rows each: the masks follow the rows.
        self.run_cli(*args, "--rows-per-call", "5", "--quiet")
        visible = np.arange(m)[None, :] < lengths[:, None]
        logits = np.where(visible, 0.25 * q @ k.T + bias, -np.inf)
        expected = np.zeros((n, dv))
        rows = lengths > 0
        expected[rows] = softmax(logits[rows]) @ v
        np.testing.assert_allclose(np.load(self.path("out.npy")), expected, rtol=1e-11,
                                   atol=1e-12)

    def test_hidden_padding_is_never_seen(self):
        """A KV cache padded past its valid lengths with NaN and +-inf: pool (fused), pool
        --weights (staged) and sdpa give the bits of the same call with finite padding."""
        n, m, d, dv, length = 6, 700, 16, 4, 300
        q = self.rng.standard_normal((n, d)).astype(np.float32)
        k = self.rng.standard_normal((m, d)).astype(np.float32)
        v = self.rng.standard_normal((m, dv)).astype(np.float32)
        lengths = self.rng.integers(1, length + 1, n).astype(np.int64)
        specials = np.array([np.nan, np.inf, -np.inf], np.float32)
        padded_k, padded_v = k.copy(), v.copy()
        padded_k[length:] = specials[np.arange((m - length) * d) % 3].reshape(-1, d)
        padded_v[length:] = specials[np.arange((m - length) * dv) % 3].reshape(-1, dv)
        common = ["--valid-lengths", self.save("l.npy", lengths)]
        runs = {
            "pool": ["pool", "--queries", self.save("q.npy", q), "--distance", "dot",
                     "--kernel", "exp", "--normalize", "softmax"],
            "pool --weights": ["pool", "--queries", self.path("q.npy"), "--distance", "dot",
                               "--kernel", "exp", "--normalize", "softmax",
                               "--weights", self.path("w.npy")],
            "sdpa": ["sdpa", "--queries", self.path("q.npy")],
        }
        for name, args in runs.items():
            with self.subTest(name):
                outputs = []
                for keys, values in ((k, v), (padded_k, padded_v)):
                    self.run_cli(*args, *common, "--keys", self.save("k.npy", keys),
                                 "--values", self.save("v.npy", values),
                                 "-o", self.path("out.npy"))
                    outputs.append(np.load(self.path("out.npy")))
                self.assertTrue(np.all(np.isfinite(outputs[0])))
                self.assertEqual(outputs[0].tobytes(), outputs[1].tobytes())

    def test_sliding_window_across_calls(self):
        # A band about position i + 2 (window 3 before, 1 after), fused and
        # staged, over calls of 5 rows (each call's offset moves the band).
        n, m = 17, 21
        x = np.sort(self.rng.uniform(0, 5, m))
        y = np.cos(x)[:, None]
        queries = self.rng.uniform(0, 5, n)
        scores = queries[:, None] * x[None, :]
        position = np.arange(n)[:, None] + 2
        shown = ((np.arange(m)[None, :] >= position - 3) &
                 (np.arange(m)[None, :] <= position + 1))
        logits = np.where(shown, scores / 1.0, -np.inf)
        p = np.exp(logits - logits.max(1, keepdims=True))
        expected = (p / p.sum(1, keepdims=True)) @ y
        for extra in ([], ["--weights", self.path("w.npy")]):
            with self.subTest(extra=extra):
                self.run_cli("pool", "--queries", self.save("q.npy", queries),
                             "--keys", self.save("x.npy", x), "--values",
                             self.save("y.npy", y), "--distance", "dot", "--kernel", "exp",
                             "--scale", "1", "--normalize", "softmax",
                             "--causal-offset", "2", "--window-left", "3",
                             "--window-right", "1", "--rows-per-call", "5",
                             "-o", self.path("out.npy"), *extra)
                np.testing.assert_allclose(np.load(self.path("out.npy")), expected,
                                           rtol=1e-12, atol=1e-12)
        # The same left side stated near the top of ptrdiff_t (query i at
        # 2^63 − 4 + i, 2^63 − 3 keys to the left: first key i − 1), where
        # the calls' moved offsets pass the type's end.
        left = np.arange(m)[None, :] >= np.arange(n)[:, None] - 1
        logits = np.where(left, scores, -np.inf)
        p = np.exp(logits - logits.max(1, keepdims=True))
        self.run_cli("pool", "--queries", self.path("q.npy"), "--keys",
                     self.path("x.npy"), "--values", self.path("y.npy"),
                     "--distance", "dot", "--kernel", "exp", "--scale", "1",
                     "--normalize", "softmax", "--causal-offset", str(2**63 - 4),
                     "--window-left", str(2**63 - 3), "--rows-per-call", "5",
                     "-o", self.path("out.npy"))
        np.testing.assert_allclose(np.load(self.path("out.npy")),
                                   (p / p.sum(1, keepdims=True)) @ y,
                                   rtol=1e-12, atol=1e-12)
        result = self.run_cli("pool", "--queries", self.path("q.npy"), "--keys",
                              self.path("x.npy"), "--values", self.path("y.npy"),
                              "--window-left", "-1", "-o", self.path("out.npy"), expect=2)
        self.assertIn("--window-left -1: must be >= 0", result.stderr)

    def test_score_adjustments_across_calls(self):
        # Soft-cap, ALiBi about position i + 2 and a sink, fused and staged,
        # over calls of 4 rows (each call's offset moves the positions).
        n, m = 13, 19
        x = np.sort(self.rng.uniform(0, 5, m))
        y = np.cos(x)[:, None]
        queries = self.rng.uniform(0, 5, n)
        scores = queries[:, None] * x[None, :]
        distance = np.arange(m)[None, :] - (np.arange(n)[:, None] + 2)
        logits = 3.0 * np.tanh(scores / 3.0) + 0.25 * distance
        top = np.maximum(logits.max(1, keepdims=True), 1.5)
        p = np.exp(logits - top)
        expected = p / (p.sum(1, keepdims=True) + np.exp(1.5 - top)) @ y
        for extra in ([], ["--weights", self.path("w.npy")]):
            with self.subTest(extra=extra):
                self.run_cli("pool", "--queries", self.save("q.npy", queries),
                             "--keys", self.save("x.npy", x), "--values",
                             self.save("y.npy", y), "--distance", "dot", "--kernel", "exp",
                             "--scale", "1", "--normalize", "softmax", "--softcap", "3",
                             "--causal-offset", "2", "--alibi-slope", "0.25",
                             "--sink", "1.5", "--rows-per-call", "4",
                             "-o", self.path("out.npy"), *extra)
                np.testing.assert_allclose(np.load(self.path("out.npy")), expected,
                                           rtol=1e-12, atol=1e-12)
        # Chunks of 4 keys, causal, with symmetric ALiBi (a no-op beside
        # causal's j ≤ p but for its sign: −slope·|j − p|).
        position = np.arange(n)[:, None] + 2
        key = np.arange(m)[None, :]
        logits = np.where((key <= position) & (key // 4 == position // 4),
                          scores - 0.5 * np.abs(key - position), -np.inf)
        p = np.exp(logits - logits.max(1, keepdims=True))
        expected = p / p.sum(1, keepdims=True) @ y
        self.run_cli("pool", "--queries", self.path("q.npy"), "--keys", self.path("x.npy"),
                     "--values", self.path("y.npy"), "--distance", "dot", "--kernel", "exp",
                     "--scale", "1", "--normalize", "softmax", "--causal",
                     "--causal-offset", "2", "--chunk", "4", "--alibi-slope", "0.5",
                     "--alibi-symmetric", "-o", self.path("out.npy"))
        np.testing.assert_allclose(np.load(self.path("out.npy")), expected,
                                   rtol=1e-12, atol=1e-12)
        for bad, message, code in (
                (["--chunk", "0"], "mask.chunk: is 0 but must be in [1, 2^62]", 1),
                (["--softcap", "0"], "mask.softcap: is 0 but must be finite, > 0 and "
                 "have a finite reciprocal (from --softcap)", 1),
                (["--kernel", "boxcar", "--sink", "1"], "mask.sink: joins a softmax", 1)):
            result = self.run_cli("pool", "--queries", self.path("q.npy"), "--keys",
                                  self.path("x.npy"), "--values", self.path("y.npy"),
                                  *bad, "-o", self.path("out.npy"), expect=code)
            self.assertIn(message, result.stderr)

    def test_causal_and_visible_masks_across_calls(self):
        n, m = 23, 23
        x = np.sort(self.rng.uniform(0, 5, m))
        y = np.sin(x)[:, None] * np.array([[1.0, -2.0]])
        visible = self.rng.random((n, m)) < 0.8
        args = ["pool", "--queries", self.save("x.npy", x.astype(np.float32)),
                "--keys", self.path("x.npy"),
                "--values", self.save("y.npy", y.astype(np.float32)),
                "--kernel", "triangular", "--bandwidth", "3", "--causal",
                "--causal-offset", "-1", "--visible", self.save("m.npy", visible),
                "-o", self.path("out.npy"), "--weights", self.path("w.npy"),
                "--rows-per-call", "4", "--progress"]
        result = self.run_cli(*args)
        self.assertIn("100%", result.stderr)  # the progress display
        shown = visible & (np.arange(m)[None, :] <= np.arange(n)[:, None] - 1)
        w = np.maximum(1 - np.abs(x[:, None] - x[None, :]) / 3, 0) * shown
        sums = w.sum(1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            expected = (w / sums) @ y
        out = np.load(self.path("out.npy"))
        self.assertEqual(out.shape, (n, 2))
        np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-5)  # NaN rows too
        self.assertTrue(np.isnan(out[0]).all())  # query 0 sees no key
        # Without --weights the fused kernel runs: the same result.
        fused_args = args[:args.index("-o")] + ["-o", self.path("fused.npy"),
                                                "--rows-per-call", "7", "--quiet"]
        self.run_cli(*fused_args)
        np.testing.assert_allclose(np.load(self.path("fused.npy")), out, rtol=2e-5,
                                   atol=2e-5)

    def test_every_isa_and_version_2_header(self):
        q = self.rng.standard_normal((9, 3)).astype(np.float32)
        k = self.rng.standard_normal((11, 3)).astype(np.float32)
        # Version 2.0 header (4-byte length), as numpy writes for huge headers.
        self.write("q2.npy", npy_bytes("<f4", q.shape, q.tobytes(), version=(2, 0)))
        self.save("k.npy", k)
        targets = self.run_cli("targets").stdout
        supported = targets.split("supported:")[1].split("\n")[0].split()
        self.assertTrue(supported)
        expected = ((q[:, None, :].astype(np.float64) - k[None]) ** 2).sum(-1)
        for target in supported:
            with self.subTest(target=target):
                self.run_cli("distances", "--queries", self.path("q2.npy"), "--keys",
                             self.path("k.npy"), "-o", self.path("d.npy"), "--isa", target,
                             "--time")
                np.testing.assert_allclose(np.load(self.path("d.npy")), expected, rtol=1e-5,
                                           atol=1e-5)

    def test_distances(self):
        q, k = self.rng.standard_normal((6, 4)), self.rng.standard_normal((5, 4))
        self.save("q.npy", q)
        self.save("k.npy", k)
        formulas = {
            "euclidean": np.sqrt(((q[:, None] - k[None]) ** 2).sum(-1)),
            "manhattan": np.abs(q[:, None] - k[None]).sum(-1),
            "dot": q @ k.T,
            "cosine": (q @ k.T) / np.outer(np.linalg.norm(q, axis=1), np.linalg.norm(k, axis=1)),
        }
        for name, expected in formulas.items():
            with self.subTest(distance=name):
                self.run_cli("distances", "--queries", self.path("q.npy"), "--keys",
                             self.path("k.npy"), f"--distance={name}", "-o", self.path("d.npy"))
                out = np.load(self.path("d.npy"))
                self.assertEqual(out.dtype, np.float64)
                np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)

    def test_distances_reduced_precision_keys(self):
        # float16, bfloat16 bits and int8 keys (row scales), rows per call
        # split: bitwise the float32 run on the values they hold.
        q = self.rng.standard_normal((9, 5)).astype(np.float32)
        k = self.rng.standard_normal((13, 5)).astype(np.float32)
        stored = self.stored_variants(k, "k", "--keys-dtype", "--key-scales")
        self.save("q.npy", q)
        for name, (options, held) in stored.items():
            for distance in ("sqeuclidean", "dot", "cosine"):
                with self.subTest(keys=name, distance=distance):
                    self.run_cli("distances", "--queries", self.path("q.npy"), "--keys",
                                 *options, "--distance", distance, "--rows-per-call", "4",
                                 "-o", self.path("narrow.npy"))
                    self.run_cli("distances", "--queries", self.path("q.npy"), "--keys",
                                 self.save("kh.npy", held), "--distance", distance,
                                 "-o", self.path("held.npy"))
                    narrow = np.load(self.path("narrow.npy"))
                    self.assertEqual(narrow.dtype, np.float32)
                    self.assertEqual(narrow.tobytes(), np.load(self.path("held.npy")).tobytes())
        base = ["distances", "-o", self.path("o.npy")]
        for args, message in [
                (["--queries", self.path("q.npy"), "--keys", self.path("kb.npy")],
                 "give --keys-dtype bfloat16"),
                (["--queries", self.path("q.npy"), "--keys", self.path("kf8.npy")],
                 "give --keys-dtype float8_e4m3fn or float8_e5m2"),
                (["--queries", self.path("q.npy"), "--keys", self.path("kf8.npy"),
                  "--keys-dtype", "bfloat16"],
                 "kf8.npy is uint8"),
                (["--queries", self.path("q.npy"), "--keys", self.path("kf8.npy"),
                  "--keys-dtype", "float8_e4m3fn"],
                 "kf8.npy is float8_e4m3fn: give its row scales with --key-scales"),
                (["--queries", self.path("q.npy"), "--keys", self.path("k8.npy")],
                 "give its row scales with --key-scales"),
                (["--queries", self.path("q.npy"), "--keys", self.path("kh.npy"),
                  "--key-scales", self.path("ks.npy")],
                 "--key-scales applies to reduced-precision keys only"),
                (["--queries", self.save("q64.npy", q.astype(np.float64)), "--keys",
                  self.path("k16.npy")],
                 "must be float32 beside reduced-precision keys")]:
            with self.subTest(message=message):
                self.expect_error(base + args, message)

    # ------------------------------------------------------------ layers

    def test_sdpa_packed_sequences(self):
        # (sum n, H, d) arrays with offsets; causal with each sequence's end
        # aligned; grouped heads.
        lengths = [(2, 9), (0, 3), (4, 4)]
        qo = np.cumsum([0] + [n for n, _ in lengths])
        ko = np.cumsum([0] + [m for _, m in lengths])
        q = self.rng.standard_normal((qo[-1], 4, 6)).astype(np.float32)
        k = self.rng.standard_normal((ko[-1], 2, 6)).astype(np.float32)
        v = self.rng.standard_normal((ko[-1], 2, 3)).astype(np.float32)
        self.run_cli("sdpa", "--queries", self.save("q.npy", q), "--keys",
                     self.save("k.npy", k), "--values", self.save("v.npy", v),
                     "--query-offsets", self.save("qo.npy", qo), "--key-offsets",
                     self.save("ko.npy", ko), "--causal", "-o", self.path("out.npy"))
        out = np.load(self.path("out.npy"))
        self.assertEqual(out.shape, (qo[-1], 4, 3))
        for b, (n, m) in enumerate(lengths):
            for h in range(4):
                qs = q[qo[b]:qo[b + 1], h].astype(np.float64)
                ks = k[ko[b]:ko[b + 1], h // 2].astype(np.float64)
                logits = qs @ ks.T / np.sqrt(6)
                logits[np.arange(m)[None, :] > np.arange(n)[:, None] + m - n] = -np.inf
                np.testing.assert_allclose(
                    out[qo[b]:qo[b + 1], h],
                    softmax(logits) @ v[ko[b]:ko[b + 1], h // 2], rtol=1e-5, atol=1e-6)
        # The same keys and values in a paged cache: (blocks, 2, Hkv, d)
        # pools, blocks in reverse order; the same output, bit for bit.
        used = [-(-m // 2) for _, m in lengths]
        table = np.zeros((len(lengths), max(used)), np.int64)
        key_pool = np.zeros((sum(used), 2, 2, 6), np.float32)
        value_pool = np.zeros((sum(used), 2, 2, 3), np.float32)
        block = sum(used)
        for b, (_, m) in enumerate(lengths):
            for p in range(used[b]):
                block -= 1
                table[b, p] = block
                rows = np.arange(p * 2, min(m, p * 2 + 2))
                key_pool[block, :len(rows)] = k[ko[b] + rows]
                value_pool[block, :len(rows)] = v[ko[b] + rows]
        self.run_cli("sdpa", "--queries", self.path("q.npy"), "--keys",
                     self.save("kp.npy", key_pool), "--values", self.save("vp.npy", value_pool),
                     "--query-offsets", self.path("qo.npy"), "--block-table",
                     self.save("bt.npy", table), "--key-lengths",
                     self.save("kl.npy", np.array([m for _, m in lengths])), "--causal",
                     "-o", self.path("paged.npy"))
        self.assertEqual(np.load(self.path("paged.npy")).tobytes(), out.tobytes())
        # bfloat16 keys and int8 values (row scales), packed and paged: bit
        # for bit the float32 runs on the values they hold.
        def held(bits=None, int8=None):
            if bits is not None:
                return bfloat16_held(bits)
            return (int8[1][..., None] * int8[0].astype(np.float32)).astype(np.float32)

        narrow_runs = {
            "packed": (k, v, ["--key-offsets", self.path("ko.npy")]),
            "paged": (key_pool, value_pool,
                      ["--block-table", self.path("bt.npy"), "--key-lengths",
                       self.path("kl.npy")])}
        for layout, (keys, values, options) in narrow_runs.items():
            with self.subTest(narrow=layout):
                bits, (v8, scales) = bfloat16_bits(keys), int8_rows(values)
                common = ["sdpa", "--queries", self.path("q.npy"), "--query-offsets",
                          self.path("qo.npy"), *options, "--causal"]
                self.run_cli(*common, "--keys", self.save("kb.npy", bits), "--keys-dtype",
                             "bfloat16", "--values", self.save("v8.npy", v8),
                             "--value-scales", self.save("vs.npy", scales), "-o",
                             self.path("narrow.npy"))
                self.run_cli(*common, "--keys", self.save("kh.npy", held(bits=bits)),
                             "--values", self.save("vh.npy", held(int8=(v8, scales))),
                             "-o", self.path("held.npy"))
                self.assertEqual(np.load(self.path("narrow.npy")).tobytes(),
                                 np.load(self.path("held.npy")).tobytes())
        self.expect_error(["sdpa", "--queries", self.save("q16.npy", q.astype(np.float16)),
                           "--keys", self.path("k.npy"), "--values", self.path("v.npy"),
                           "--query-offsets", self.path("qo.npy"), "--key-offsets",
                           self.path("ko.npy"), "-o", self.path("out.npy")],
                          "reduced-precision queries are taken without --query-offsets only")
        result = self.run_cli("sdpa", "--queries", self.path("q.npy"), "--keys",
                              self.path("k.npy"), "--values", self.path("v.npy"),
                              "--query-offsets", self.path("qo.npy"), "-o",
                              self.path("out.npy"), expect=2)
        self.assertIn("--key-offsets", result.stderr)
        result = self.run_cli("sdpa", "--queries", self.path("q.npy"), "--keys",
                              self.path("k.npy"), "--values", self.path("v.npy"),
                              "--query-offsets", self.save("bad.npy", np.array([0, 3, 2, 6])),
                              "--key-offsets", self.path("ko.npy"), "-o",
                              self.path("out.npy"), expect=1)
        self.assertIn("sequences.query_offsets", result.stderr)

    def test_sdpa_tensors_and_masks(self):
        batch, heads, kv_heads, n, m, d, dv = 2, 4, 2, 9, 12, 5, 3
        q = self.rng.standard_normal((batch, heads, n, d)).astype(np.float32)
        k = self.rng.standard_normal((batch, kv_heads, m, d)).astype(np.float32)
        v = self.rng.standard_normal((batch, kv_heads, m, dv)).astype(np.float32)
        bias = self.rng.standard_normal((1, heads, n, m)).astype(np.float32)
        lengths = np.array([m, 7], np.int64)
        self.run_cli("sdpa", "--queries", self.save("q.npy", q), "--keys",
                     self.save("k.npy", k), "--values", self.save("v.npy", v),
                     "--scale", "0.4", "--causal", "--causal-offset", "3",
                     "--valid-lengths", self.save("l.npy", lengths),
                     "--bias", self.save("b.npy", bias), "-o", self.path("out.npy"),
                     "--threads", "2")
        out = np.load(self.path("out.npy"))
        self.assertEqual((out.dtype, out.shape), (np.float32, (batch, heads, n, dv)))
        k64 = np.repeat(k.astype(np.float64), heads // kv_heads, axis=1)
        v64 = np.repeat(v.astype(np.float64), heads // kv_heads, axis=1)
        logits = 0.4 * q.astype(np.float64) @ k64.transpose(0, 1, 3, 2) + bias
        keys = np.arange(m)[None, None, None, :]
        visible = (keys < lengths[:, None, None, None]) & (
            keys <= np.arange(n)[None, None, :, None] + 3)
        logits = np.where(visible, logits, -np.inf)
        shifted = np.exp(logits - logits.max(-1, keepdims=True))
        expected = shifted / shifted.sum(-1, keepdims=True) @ v64
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)

        # Soft-capping, ALiBi's standard slopes (or given ones) and sinks.
        sinks = np.array([0.0, 1.0, -1.0, 2.0], np.float32)
        slopes = 2.0 ** -np.array([2.0, 4.0, 6.0, 8.0])
        for alibi in (["--alibi"], ["--alibi-slopes", self.save("a.npy", slopes)]):
            with self.subTest(alibi=alibi):
                self.run_cli("sdpa", "--queries", self.path("q.npy"), "--keys",
                             self.path("k.npy"), "--values", self.path("v.npy"),
                             "--causal", "--softcap", "2", *alibi, "--sinks",
                             self.save("s.npy", sinks), "-o", self.path("out.npy"))
                out = np.load(self.path("out.npy"))
                scores = q.astype(np.float64) @ k64.transpose(0, 1, 3, 2) / np.sqrt(d)
                distance = (np.arange(m)[None, :] - np.arange(n)[:, None])[None, None]
                logits = (2 * np.tanh(scores / 2) +
                          slopes.astype(np.float32)[None, :, None, None] * distance)
                logits = np.where(distance <= 0, logits, -np.inf)
                sink = sinks.astype(np.float64)[None, :, None, None]
                top = np.maximum(logits.max(-1, keepdims=True), sink)
                p = np.exp(logits - top)
                expected = p / (p.sum(-1, keepdims=True) + np.exp(sink - top)) @ v64
                np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
        result = self.run_cli("sdpa", "--queries", self.path("q.npy"), "--keys",
                              self.path("k.npy"), "--values", self.path("v.npy"),
                              "--sinks", self.save("s.npy", sinks[:3]), "-o",
                              self.path("out.npy"), expect=1)
        self.assertIn("one entry per query head", result.stderr)

        # 2-D float64: one sequence, per-query lengths, a visible mask, zero rows.
        q, k = self.rng.standard_normal((n, d)), self.rng.standard_normal((m, d))
        v = self.rng.standard_normal((m, dv))
        lengths = self.rng.integers(0, m + 1, n)
        lengths[2] = 0
        shown = self.rng.random((n, m)) < 0.7
        self.run_cli("sdpa", "--queries", self.save("q.npy", q), "--keys",
                     self.save("k.npy", k), "--values", self.save("v.npy", v),
                     "--valid-lengths", self.save("l.npy", lengths), "--visible",
                     self.save("m.npy", shown), "--empty-rows", "zero", "-o",
                     self.path("out.npy"), "--time")
        visible = shown & (np.arange(m)[None, :] < lengths[:, None])
        rows = visible.any(1)
        expected = np.zeros((n, dv))
        expected[rows] = softmax(np.where(visible, q @ k.T / np.sqrt(d), -np.inf)[rows]) @ v
        out = np.load(self.path("out.npy"))
        self.assertEqual((out.dtype, out.shape), (np.float64, (n, dv)))
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)

    def test_additive(self):
        batch, heads, n, m, dq, dk, dv, hidden = 2, 2, 6, 8, 4, 3, 2, 5
        q = self.rng.standard_normal((batch, heads, n, dq))
        k = self.rng.standard_normal((batch, heads, m, dk))
        v = self.rng.standard_normal((batch, heads, m, dv))
        w_q = self.rng.standard_normal((hidden, dq))
        w_k = self.rng.standard_normal((hidden, dk))
        w_v = self.rng.standard_normal(hidden)
        self.run_cli("additive", "--queries", self.save("q.npy", q), "--keys",
                     self.save("k.npy", k), "--values", self.save("v.npy", v), "--w-q",
                     self.save("wq.npy", w_q), "--w-k", self.save("wk.npy", w_k), "--w-v",
                     self.save("wv.npy", w_v), "--causal", "-o", self.path("out.npy"))
        scores = np.tanh((q @ w_q.T)[..., :, None, :] + (k @ w_k.T)[..., None, :, :]) @ w_v
        scores = np.where(np.arange(m)[None, :] <= np.arange(n)[:, None], scores, -np.inf)
        e = np.exp(scores - scores.max(-1, keepdims=True))
        expected = e / e.sum(-1, keepdims=True) @ v
        out = np.load(self.path("out.npy"))
        self.assertEqual(out.shape, (batch, heads, n, dv))
        np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)

    def mha_reference(self, heads, x_q, x_k, x_v, w, b):
        def split(x):  # (B, rows, H*dh) -> (B, H, rows, dh)
            return x.reshape(*x.shape[:2], heads, -1).transpose(0, 2, 1, 3)
        pq = split(x_q @ w["q"] + b.get("q", 0))
        pk = split(x_k @ w["k"] + b.get("k", 0))
        pv = split(x_v @ w["v"] + b.get("v", 0))
        logits = pq @ pk.transpose(0, 1, 3, 2) / np.sqrt(pq.shape[-1])
        e = np.exp(logits - logits.max(-1, keepdims=True))
        heads_out = e / e.sum(-1, keepdims=True) @ pv
        concat = heads_out.transpose(0, 2, 1, 3).reshape(*x_q.shape[:2], -1)
        return concat @ w["o"] + b.get("o", 0)

    def test_mha(self):
        batch, n, m, d, heads, dh, dvh, d_out = 2, 7, 9, 6, 3, 2, 4, 5
        x_q = self.rng.standard_normal((batch, n, d)).astype(np.float32)
        x_kv = self.rng.standard_normal((batch, m, d)).astype(np.float32)
        shapes = {"q": (d, heads * dh), "k": (d, heads * dh), "v": (d, heads * dvh),
                  "o": (heads * dvh, d_out)}
        w = {name: self.rng.standard_normal(shape).astype(np.float32)
             for name, shape in shapes.items()}
        b = {name: self.rng.standard_normal(shape[1]).astype(np.float32)
             for name, shape in shapes.items()}
        args = ["mha", "--heads", str(heads), "--queries", self.save("q.npy", x_q),
                "--keys", self.save("kv.npy", x_kv), "--values", self.path("kv.npy"),
                "-o", self.path("out.npy")]
        for name in shapes:
            args += [f"--w-{name}", self.save(f"w{name}.npy", w[name])]
        self.run_cli(*args, *sum(([f"--b-{name}", self.save(f"b{name}.npy", b[name])]
                                  for name in shapes), []))
        out = np.load(self.path("out.npy"))
        self.assertEqual((out.dtype, out.shape), (np.float32, (batch, n, d_out)))
        w64 = {name: a.astype(np.float64) for name, a in w.items()}
        b64 = {name: a.astype(np.float64) for name, a in b.items()}
        expected = self.mha_reference(heads, x_q.astype(np.float64),
                                      x_kv.astype(np.float64), x_kv.astype(np.float64),
                                      w64, b64)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
        # 2-D inputs, no biases, a causal mask (the same for every head).
        self.save("q.npy", x_q[0])
        self.save("kv.npy", x_q[0])
        self.run_cli(*args, "--causal")
        out = np.load(self.path("out.npy"))
        self.assertEqual(out.shape, (n, d_out))
        x = x_q[:1].astype(np.float64)
        expected_rows = [self.mha_reference(heads, x[:, i:i + 1], x[:, :i + 1],
                                            x[:, :i + 1], w64, {})[0, 0]
                         for i in range(n)]
        np.testing.assert_allclose(out, np.array(expected_rows), rtol=1e-4, atol=1e-4)

    def test_bad_layer_inputs(self):
        q4 = self.save("q4.npy", np.zeros((2, 4, 5, 3), np.float32))
        k4 = self.save("k4.npy", np.zeros((2, 2, 6, 3), np.float32))
        k4_narrow = self.save("k4n.npy", np.zeros((2, 2, 6, 2), np.float32))
        k4_heads = self.save("k4h.npy", np.zeros((2, 3, 6, 3), np.float32))
        v4 = self.save("v4.npy", np.zeros((2, 2, 6, 2), np.float32))
        v4_short = self.save("v4s.npy", np.zeros((2, 2, 5, 2), np.float32))
        q3 = self.save("q3.npy", np.zeros((2, 5, 3), np.float32))
        k2 = self.save("k2.npy", np.zeros((6, 3), np.float32))
        out = ["-o", self.path("out.npy")]
        sdpa = ["sdpa", "--queries", q4, "--keys", k4, "--values", v4] + out
        w_q = self.save("wq.npy", np.zeros((4, 3), np.float32))
        w_v = self.save("wv.npy", np.zeros(3, np.float32))
        additive = ["additive", "--queries", q4, "--keys", k4, "--values", v4,
                    "--w-q", w_q, "--w-k", w_q] + out
        mha_weights = {"q": (3, 4), "k": (3, 4), "v": (3, 4), "o": (4, 2)}
        mha = ["mha", "--queries", self.save("x.npy", np.zeros((5, 3), np.float32)),
               "--keys", self.path("x.npy"), "--values", self.path("x.npy")] + out
        for name, shape in mha_weights.items():
            mha += [f"--w-{name}", self.save(f"mw{name}.npy", np.zeros(shape, np.float32))]
        cases = [
            (["sdpa", "--queries", q4, "--keys", k4_narrow, "--values", v4] + out,
             "has 2 columns, expected 3", 1),
            (["sdpa", "--queries", q4, "--keys", k4, "--values", v4_short] + out,
             "has 5 rows, expected 6", 1),
            (["sdpa", "--queries", q4, "--keys", k4_heads,
              "--values", self.save("v4h.npy", np.zeros((2, 3, 6, 2), np.float32))] + out,
             "keys.heads: is 3 but must divide queries.heads (4) (from --keys)", 1),
            (["sdpa", "--queries", q3, "--keys", k4, "--values", v4] + out,
             "expected a 2-D or 4-D array, not 3-D", 1),
            (["sdpa", "--queries", q4, "--keys", k2, "--values", v4] + out,
             "is 2-D but --queries %s (shape (2, 4, 5, 3)) is 4-D" % q4, 1),
            (sdpa + ["--bias", self.save("b.npy", np.zeros((2, 3, 5, 6), np.float32))],
             "shape (2, 3, 5, 6), expected (5, 6) or (1 or 2, 1 or 4, 5, 6)", 1),
            (sdpa + ["--bias", self.save("b64.npy", np.zeros((5, 6)))],
             "is float64 but --queries", 1),
            (sdpa + ["--valid-lengths", self.save("l.npy", np.array([6, 7]))],
             "entry 1 is 7, outside [0, 6]", 1),
            (sdpa + ["--valid-lengths", self.save("l3.npy", np.array([1, 2, 3]))],
             "expected (2,): one entry per batch entry, or (2, 5): one per query", 1),
            (sdpa + ["--scale", "inf"], "scale: inf is not a finite float (from --scale)", 1),
            (sdpa + ["--bandwidth", "1"], "unknown option '--bandwidth' for 'attnpool sdpa'",
             2),
            (additive, "missing --w-v", 2),
            (additive + ["--w-v", self.save("wv4.npy", np.zeros(5, np.float32))],
             "expected shape (4,): one entry per row of --w-q", 1),
            (["additive", "--queries", q4, "--keys", k4, "--values", v4, "--w-q", w_q,
              "--w-k", self.save("wk.npy", np.zeros((4, 2), np.float32)), "--w-v", w_v]
             + out, "has 2 columns, expected 3", 1),
            (mha, "missing --heads", 2),
            (mha + ["--heads", "0"], "--heads 0: must be at least 1", 2),
            (mha + ["--heads", "3"], "weights.w_q.cols: is 4, not a multiple of the 3 heads "
             "(from --w-q)", 1),
            # (Before the ALiBi slopes of that many heads are made.)
            (mha + ["--heads", str(2**62), "--alibi"],
             "--heads 4611686018427387904: more heads than the 4 columns", 1),
            (mha + ["--heads", "2", "--b-k", self.save("bk.npy", np.zeros(3, np.float32))],
             "expected shape (4,): one entry per column of --w-k", 1),
            (mha + ["--heads", "2", "--w-o", self.path("mwq.npy")],
             "--w-o is given twice", 2),
        ]
        for args, message, code in cases:
            with self.subTest(message=message):
                self.expect_error(args, message, code)

    def test_empty_queries(self):
        x_path, y_path, _, _, _, _ = self.nw_inputs()
        self.save("q0.npy", np.zeros((0,), np.float32))
        self.run_cli("pool", "--queries", self.path("q0.npy"), "--keys", x_path,
                     "--values", y_path, "-o", self.path("out.npy"))
        self.assertEqual(np.load(self.path("out.npy")).shape, (0,))

    def test_rows_of_nothing(self):
        # A header claiming 2^63 rows of no column: nothing to compute, and
        # the command ends at once (it used to loop over the rows).
        self.save("k.npy", np.zeros((3, 0), np.float32))
        self.save("v.npy", np.zeros((3, 0), np.float32))
        for rows in (2**63, 2**64 - 1):
            with open(self.path("q.npy"), "wb") as f:
                f.write(npy_bytes("<f4", (rows, 0)))
            self.run_cli("pool", "--queries", self.path("q.npy"), "--keys",
                         self.path("k.npy"), "--values", self.path("v.npy"), "-o",
                         self.path("out.npy"))
            with open(self.path("out.npy"), "rb") as f:
                self.assertIn(b"(%d, 0)" % rows, f.read())
        self.run_cli("distances", "--queries", self.path("q.npy"), "--keys",
                     self.path("k.npy"), "-o", self.path("d.npy"), expect=1)

    def test_help(self):
        usage = self.run_cli("--help").stdout
        for word in ("pool", "distances", "regress", "sdpa", "additive", "mha", "targets",
                     "--help", "Example"):
            self.assertIn(word, usage)
        for command, options in (("sdpa", ("--scale", "--causal-offset", "--valid-lengths",
                                           "--bias")),
                                 ("additive", ("--w-q", "--w-k", "--w-v")),
                                 ("mha", ("--heads", "--w-o", "--b-q", "--b-o"))):
            command_help = self.run_cli(command, "--help").stdout
            for option in options:
                self.assertIn(option, command_help)
        pool_help = self.run_cli("pool", "--help").stdout
        for option in ("--queries", "--keys", "--values", "--distance", "--kernel",
                       "--bandwidth", "--normalize", "--weights", "--isa", "--threads",
                       "--time", "--valid-lengths", "--causal", "--visible", "--bias"):
            self.assertIn(option, pool_help)
        self.assertIn("usage", self.run_cli(expect=2).stderr)
        # The version CMake's project() states (the one place it is written).
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                               "CMakeLists.txt"), encoding="utf-8") as cmake:
            version = re.search(r"project\(attnpool VERSION ([0-9.]+)", cmake.read())[1]
        self.assertEqual(self.run_cli("--version").stdout, f"attnpool {version}\n")

    # ------------------------------------------------------------ regress

    def regress(self, x, y, q, *extra, expect=0):
        """Runs 'attnpool regress' on arrays: (result, output, curve, chosen)."""
        result = self.run_cli("regress", "--x", self.save("rx.npy", x), "--y",
                              self.save("ry.npy", y), "--queries", self.save("rq.npy", q),
                              "-o", self.path("out.npy"), *extra, expect=expect)
        out = np.load(self.path("out.npy")) if expect == 0 else None
        return (result, out) + regress_stdout(result.stdout)

    def test_regress_fixed_bandwidth_and_weights(self):
        for dtype in (np.float32, np.float64):
            with self.subTest(dtype=dtype.__name__):
                _, _, _, x, y, q = self.nw_inputs(dtype)
                result, out, curve, chosen = self.regress(
                    x, y, q, "--bandwidth", "0.4", "--weights", self.path("w.npy"),
                    "--time", "--threads", "2")
                self.assertEqual(chosen, [0.4])
                self.assertEqual(len(curve), 0)
                self.assertIn("compute", result.stderr)
                expected, expected_w = nadaraya_watson(x, y, q, 0.4)
                self.assertEqual((out.dtype, out.shape), (dtype, q.shape))  # 1-D y: 1-D out
                w = np.load(self.path("w.npy"))
                self.assertEqual((w.dtype, w.shape), (dtype, (len(q), len(x))))
                tolerance = 1e-5 if dtype == np.float32 else 1e-12
                np.testing.assert_allclose(w, expected_w, rtol=tolerance * 10, atol=1e-30)
                np.testing.assert_allclose(out, expected[:, 0], rtol=tolerance * 10)

    def test_regress_rules_of_thumb(self):
        n = 60
        x = self.rng.standard_normal((n, 2)) * np.array([1.0, 4.0])
        y = np.column_stack([np.sin(x[:, 0]), x[:, 1] / 4])
        q = self.rng.standard_normal((17, 2))
        iqr = np.percentile(x, 75, axis=0) - np.percentile(x, 25, axis=0)
        sigma = np.minimum(x.std(axis=0, ddof=1), iqr / 1.349)
        factors = {"silverman": (4 / 4) ** (1 / 6), "scott": 1.059}
        for rule in ("silverman", "scott", None):  # None: the default, Silverman's
            with self.subTest(rule=rule):
                extra = ["--bandwidth-rule", rule] if rule else []
                result, out, _, chosen = self.regress(x, y, q, *extra)
                h = factors[rule or "silverman"] * sigma * n ** (-1 / 6)
                np.testing.assert_allclose(chosen, h, rtol=1e-8)  # printed to 9 digits
                self.assertIn("rule of thumb", result.stdout)
                self.assertEqual(out.shape, (17, 2))
                np.testing.assert_allclose(out, nadaraya_watson(x, y, q, h)[0], rtol=1e-7)
        # Explicit per-dimension bandwidths.
        _, out, _, chosen = self.regress(x, y, q, "--bandwidth", "0.5,2")
        self.assertEqual(chosen, [0.5, 2.0])
        np.testing.assert_allclose(out, nadaraya_watson(x, y, q, [0.5, 2.0])[0], rtol=1e-12)

    def test_regress_cross_validation(self):
        _, _, _, x, y, q = self.nw_inputs(np.float64, m=40)
        # Leave-one-out on a grid even in 1/h^2.
        _, out, curve, chosen = self.regress(x, y, q, "--cv-grid", "0.1,1.5,12")
        self.assertEqual(curve.shape, (12, 3))
        np.testing.assert_allclose(1 / curve[:, 0] ** 2, np.linspace(100, 1 / 2.25, 12),
                                   rtol=1e-8)
        expected = [brute_force_cross_validation(x, y, h)[0] for h in curve[:, 0]]
        np.testing.assert_allclose(curve[:, 1], expected, rtol=1e-8)
        self.assertTrue((curve[:, 2] == 0).all())
        self.assertEqual(chosen, [curve[np.argmin(curve[:, 1]), 0]])
        np.testing.assert_allclose(out, nadaraya_watson(x, y, q, chosen[0])[0][:, 0],
                                   rtol=1e-7)
        # 4-fold with each compact kernel: narrow widths leave points unpredictable.
        for kernel in kernel_formulas.DISTANCE_KERNELS:
            if kernel == "gaussian":
                continue
            with self.subTest(kernel=kernel):
                _, out, curve, chosen = self.regress(x, y, q, "--cv-grid", "0.05,2,8",
                                                     "--folds", "4", "--kernel", kernel,
                                                     "--empty-rows", "zero")
                reference = [brute_force_cross_validation(x, y, h, kernel, 4)
                             for h in curve[:, 0]]
                np.testing.assert_array_equal(curve[:, 2],
                                              [missing for _, missing in reference])
                self.assertGreater(curve[0, 2], 0)
                np.testing.assert_allclose(curve[:, 1], [score for score, _ in reference],
                                           rtol=1e-8)
                complete = curve[curve[:, 2] == 0]
                self.assertEqual(chosen, [complete[np.argmin(complete[:, 1]), 0]])

    def test_regress_bad_input(self):
        _, _, _, x, y, q = self.nw_inputs(np.float32)
        paths = {"x": self.save("x.npy", x), "y": self.save("y.npy", y),
                 "q": self.save("q.npy", q),
                 "q2": self.save("q2.npy", np.zeros((5, 2), np.float32)),
                 "y64": self.save("y64.npy", y.astype(np.float64)),
                 "y_short": self.save("y_short.npy", y[:-1]),
                 "x_nan": self.save("x_nan.npy", np.where(np.arange(len(x)) == 3, np.nan, x)),
                 "x_constant": self.save("x_constant.npy", np.ones_like(x)),
                 "x_int": self.save("x_int.npy", np.arange(len(x)))}

        def args(x="x", y="y", q="q", *extra):
            return ["regress", "--x", paths[x], "--y", paths[y], "--queries", paths[q],
                    "-o", self.path("out.npy"), *extra]
        cases = [
            (args("x", "y", "q", "--bandwidth", "0.3", "--cv-grid", "0.1,1,4"),
             "--bandwidth, --bandwidth-rule and --cv-grid are alternatives: give one", 2),
            (args("x", "y", "q", "--folds", "3"), "--folds needs --cv-grid", 2),
            (args("x", "y", "q", "--kernel", "exp"),
             "--kernel exp: regression takes " + ", ".join(kernel_formulas.DISTANCE_KERNELS),
             2),
            (args("x", "y", "q", "--cv-grid", "0.1,1"),
             "--cv-grid 0.1,1: expected HMIN,HMAX,COUNT", 2),
            (args("x", "y", "q", "--cv-grid", "0.1,1,0"), "COUNT must be between 1", 2),
            (args("x", "y", "q", "--cv-grid", "0.1,1,4", "--folds", "1"),
             "--folds 1: must be at least 2", 2),
            (args("x", "y", "q", "--bandwidth-rule", "silvermann"),
             "--bandwidth-rule silvermann: use silverman or scott", 2),
            (args("x", "y", "q", "--bandwidth", "0.5,x"), "--bandwidth x: not a number", 2),
            (["regress", "--y", paths["y"], "--queries", paths["q"], "-o",
              self.path("out.npy")], "missing --x", 2),
            (args("x", "y", "q", "--cv-grid", "1,0.5,4"),
             "h_max: is 0.500000; it must be finite and ≥ h_min (from --cv-grid)", 1),
            (args("x", "y", "q", "--cv-grid", "0.1,1,4", "--folds", "41"),
             "options.folds: is 41; use 0 (leave-one-out) or 2 ≤ folds ≤ n = 40 "
             "(from --folds)", 1),
            (args("x", "y", "q", "--bandwidth", "0.5,0.2"),
             "--bandwidth 0.5,0.2: 2 values, expected 1", 1),
            (args("x", "y", "q", "--bandwidth", "-1"),
             "bandwidth: is -1; it must be finite, > 0", 1),
            (args("x", "y_short", "q"),
             "--y %s (shape (39,)) has 39 rows, expected 40" % paths["y_short"], 1),
            (args("x", "y", "q2"),
             "--queries %s (shape (5, 2)) has 2 columns, expected 1" % paths["q2"], 1),
            (args("x", "y64", "q"), "is float64 but --x %s is float32" % paths["x"], 1),
            (args("x_int", "y", "q"), "dtype int64 is not supported", 1),
            (args("x_nan", "y", "q", "--bandwidth", "0.5"),
             "x: element (3, 0) is not finite (from --x)", 1),
            (args("x_constant", "y", "q"), "column 0 is constant", 1),
        ]
        for arguments, message, code in cases:
            with self.subTest(message=message):
                self.expect_error(arguments, message, code)
        # No width of the grid predicts every point: the curve, then the error.
        result = self.run_cli(*args("x", "y", "q", "--kernel", "boxcar", "--cv-grid",
                                    "0.001,0.002,3"), expect=1)
        self.assertIn("every bandwidth leaves some point with no other training point",
                      result.stderr)
        self.assertIn("raise HMAX", result.stderr)
        curve, chosen = regress_stdout(result.stdout)
        self.assertEqual((curve.shape, chosen), ((3, 3), None))
        self.assertFalse(os.path.exists(self.path("out.npy")))
        # Help.
        help_text = self.run_cli("regress", "--help").stdout
        for option in ("--x", "--y", "--queries", "--bandwidth", "--bandwidth-rule",
                       "--cv-grid", "--folds", "--kernel", "--weights", "--isa",
                       "--threads", "--time"):
            self.assertIn(option, help_text)

    # ------------------------------------------------------------ bad input

    def expect_error(self, args, message, code=1):
        """Runs a failing command: the exit code, the message, and no output file."""
        out = self.path("out.npy")
        if os.path.exists(out):
            os.remove(out)
        result = self.run_cli(*args, expect=code)
        self.assertIn("attnpool: error: ", result.stderr)
        self.assertIn(message, result.stderr)
        self.assertFalse(os.path.exists(out), "a failed run wrote its output")
        self.assertEqual(result.stdout, "")
        return result.stderr

    def pool_args(self, queries=None, keys=None, values=None, *extra):
        x_path, y_path, q_path, _, _, _ = self.nw_inputs()
        return ["pool", "--queries", queries or q_path, "--keys", keys or x_path,
                "--values", values or y_path, "-o", self.path("out.npy"), *extra]

    def test_malformed_files(self):
        good = np.arange(12, dtype=np.float32).reshape(4, 3)
        cases = {
            # name: (file content, expected message)
            "int32.npy": (npy_bytes("<i4", (4, 3), good.astype(np.int32).tobytes()),
                          "dtype int32 is not supported: use float32 or float64"),
            # float16 keys and values are read; float16 queries are not
            "float16.npy": (npy_bytes("<f2", (4, 3), good.astype(np.float16).tobytes()),
                            "dtype float16 is not supported: use float32 or float64"),
            "complex.npy": (npy_bytes("<c8", (4, 3), bytes(96)), "dtype '<c8' is not supported"),
            "bigendian.npy": (npy_bytes(">f4", (4, 3), good.astype(">f4").tobytes()),
                              "big-endian"),
            "fortran.npy": (npy_bytes("<f4", (4, 3), good.tobytes(), fortran=True),
                            "Fortran order"),
            "short.npy": (npy_bytes("<f4", (4, 3), good.tobytes()[:40]),
                          "truncated data: shape (4, 3) of float32 needs 48 bytes, the file has 40"),
            "long.npy": (npy_bytes("<f4", (4, 3), good.tobytes() + b"\0" * 8),
                         "data after the 48 bytes"),
            "cut_header.npy": (npy_bytes("<f4", (4, 3), good.tobytes())[:30],
                               "truncated header"),
            "no_length.npy": (b"\x93NUMPY\x01\x00", "truncated header"),
            "empty.npy": (b"", "not a .npy file"),
            "text.npy": (b"0.5 1.5 2.5\n", "not a .npy file"),
            "version9.npy": (npy_bytes("<f4", (4, 3), good.tobytes(), version=(9, 0)),
                             "unsupported .npy format version 9.0"),
            "no_shape.npy": (npy_bytes("<f4", (4, 3), good.tobytes(),
                                       header="{'descr': '<f4', 'fortran_order': False}"),
                             "must have the keys"),
            "not_dict.npy": (npy_bytes("<f4", (4, 3), good.tobytes(), header="[1, 2, 3]"),
                             "malformed header"),
            "bad_shape.npy": (npy_bytes("<f4", (4, 3), good.tobytes(),
                                        header="{'descr': '<f4', 'fortran_order': False, "
                                               "'shape': (4, -3), }"),
                              "malformed header"),
            "structured.npy": (npy_bytes("", (4,), bytes(32),
                                         header="{'descr': [('a', '<f4'), ('b', '<f4')], "
                                                "'fortran_order': False, 'shape': (4,), }"),
                               "structured or object arrays are not supported"),
            "extra_key.npy": (npy_bytes("<f4", (4, 3), good.tobytes(),
                                        header="{'descr': '<f4', 'fortran_order': False, "
                                               "'shape': (4, 3), 'x': 1, }"),
                              "unexpected key 'x'"),
            # A shape of 4 TiB in a file of none: its size, before allocating.
            "claims_tib.npy": (npy_bytes("<f4", (2**40,), b""),
                               "needs 4398046511104 bytes, the file has 0"),
            # A byte no terminal should receive, shown as '?'.
            "control.npy": (npy_bytes("<f4", (4, 3), good.tobytes(),
                                      header="{'descr': '<f4\x1b[2J', 'fortran_order': "
                                             "False, 'shape': (4, 3), }"),
                            "dtype '<f4?[2J' is not supported"),
        }
        for name, (content, message) in cases.items():
            with self.subTest(file=name):
                path = self.write(name, content)
                stderr = self.expect_error(
                    ["distances", "--queries", path, "--keys", self.save("k.npy", good),
                     "-o", self.path("out.npy")], message)
                self.assertIn(f"--queries {path}", stderr)  # which file it was
        # numpy's own Fortran-order and big-endian files.
        self.save("f.npy", np.asfortranarray(good))
        self.expect_error(["distances", "--queries", self.path("f.npy"), "--keys",
                           self.path("k.npy"), "-o", self.path("out.npy")], "Fortran order")
        self.save("be.npy", good.astype(">f8"))
        self.expect_error(["distances", "--queries", self.path("be.npy"), "--keys",
                           self.path("k.npy"), "-o", self.path("out.npy")],
                          "save a.astype('<f8')")
        self.expect_error(["distances", "--queries", self.path("missing.npy"), "--keys",
                           self.path("k.npy"), "-o", self.path("out.npy")],
                          "cannot open: No such file or directory")

    def test_shape_and_dtype_mismatches(self):
        q3 = self.save("q3.npy", self.rng.standard_normal((5, 3)).astype(np.float32))
        k2 = self.save("k2.npy", self.rng.standard_normal((4, 2)).astype(np.float32))
        k3 = self.save("k3.npy", self.rng.standard_normal((4, 3)).astype(np.float32))
        v5 = self.save("v5.npy", self.rng.standard_normal((5, 2)).astype(np.float32))
        v4 = self.save("v4.npy", self.rng.standard_normal((4, 2)).astype(np.float32))
        v64 = self.save("v64.npy", self.rng.standard_normal((4, 2)))
        cube = self.save("cube.npy", np.zeros((2, 2, 2), np.float32))
        scalar = self.save("scalar.npy", np.float32(1))
        base = ["pool", "-o", self.path("out.npy")]
        cases = [
            (["--queries", q3, "--keys", k2, "--values", v4],
             "--keys %s (shape (4, 2)) has 2 columns, expected 3" % k2),
            (["--queries", q3, "--keys", k3, "--values", v5],
             "--values %s (shape (5, 2)) has 5 rows, expected 4" % v5),
            (["--queries", q3, "--keys", k3, "--values", v64],
             "is float64 but --queries %s is float32" % q3),
            (["--queries", cube, "--keys", k3, "--values", v4],
             "expected a 1-D or 2-D array, not 3-D"),
            (["--queries", scalar, "--keys", k3, "--values", v4],
             "expected a 1-D or 2-D array, not 0-D"),
        ]
        for args, message in cases:
            with self.subTest(message=message):
                self.expect_error(base + args, message)

    def test_bad_masks(self):
        n, m = 50, 40
        cases = [
            (["--valid-lengths", self.save("l1.npy", np.full(n, 41, np.int64))],
             "entry 0 is 41, outside [0, 40]"),
            (["--valid-lengths", self.save("l2.npy", np.full(n, -1, np.int64))],
             "entry 0 is -1"),
            (["--valid-lengths", self.save("l3.npy", np.full(n - 1, 3, np.int64))],
             "expected (50,): one entry per query"),
            (["--valid-lengths", self.save("l4.npy", np.full(n, 3.0))],
             "dtype float64 is not supported: use an integer array"),
            (["--visible", self.save("m1.npy", np.ones((n, m + 1), bool))],
             "shape (50, 41), expected (50, 40)"),
            (["--visible", self.save("m2.npy", np.ones((n, m), np.float32))],
             "use bool or uint8"),
            (["--bias", self.save("b1.npy", np.ones((n, 3), np.float32)),
              "--normalize", "softmax"], "expected (50, 40)"),
            (["--bias", self.save("b2.npy", np.ones((n, m), np.float32)),
              "--kernel", "boxcar"], "mask.bias"),
        ]
        for extra, message in cases:
            with self.subTest(message=message):
                self.expect_error(self.pool_args(None, None, None, *extra), message)

    def test_bad_command_lines(self):
        cases = [
            (self.pool_args(None, None, None, "--bandwidth", "-1"),
             "kernel.bandwidth: -1 is not a positive, finite, normal float "
             "(from --bandwidth)", 1),
            # Values as given, not rounded to 0.000000.
            (self.pool_args(None, None, None, "--bandwidth", "1e-300"),
             "kernel.bandwidth: 1e-300 is not a positive, finite, normal float "
             "(from --bandwidth)", 1),
            (self.pool_args(None, None, None, "--bandwidth", "wide"),
             "--bandwidth wide: not a number", 2),
            (self.pool_args(None, None, None, "--kernel", "gausian"),
             "--kernel: unknown name 'gausian' (known: gaussian,", 2),
            (self.pool_args(None, None, None, "--distance", "dot"),
             "gaussian needs a distance", 1),
            (self.pool_args(None, None, None, "--kernal", "boxcar"),
             "unknown option '--kernal' for 'attnpool pool' (did you mean --kernel?)", 2),
            (self.pool_args(None, None, None, "--isa", "bogus"),
             "--isa bogus: 'bogus' is not a compiled target", 2),
            (self.pool_args(None, None, None, "--threads", "0"),
             "--threads 0: must be between 1 and 4096", 2),
            (self.pool_args(None, None, None, "--empty-rows", "maybe"),
             "--empty-rows maybe: use nan or zero", 2),
            (self.pool_args(None, None, None, "--bandwidth"), "--bandwidth needs a value", 2),
            (["pool", "--queries", "q.npy", "-o", self.path("out.npy")], "missing --keys", 2),
            (["pool", "stray"], "unexpected argument 'stray'", 2),
            (["pool", "--time=1"], "--time takes no value", 2),
            (["frobnicate"], "unknown command 'frobnicate'", 2),
        ]
        for args, message, code in cases:
            with self.subTest(message=message):
                self.expect_error(args, message, code)

    def test_unwritable_output(self):
        x_path, y_path, q_path, _, _, _ = self.nw_inputs()
        result = self.run_cli("pool", "--queries", q_path, "--keys", x_path, "--values",
                              y_path, "-o", self.path("no/such/dir/out.npy"), expect=1)
        self.assertIn("cannot create", result.stderr)
        # Both outputs or neither, each error naming its option.
        self.expect_error(self.pool_args(None, None, None, "--weights",
                                         self.path("no/such/dir/w.npy")),
                          "--weights " + self.path("no/such/dir/w.npy") + ": cannot create")
        self.assertEqual([n for n in os.listdir(self.dir) if n.startswith("out.npy")], [])
        self.expect_error(self.pool_args(None, None, None, "--weights",
                                         self.path("out.npy")),
                          "--weights " + self.path("out.npy") + ": is also -o's file")

    def test_output_files(self):
        # tools/output_files.h: every output refused before anything is
        # written, or written whole; special files in place, links followed,
        # modes kept. Each case as this user and, run as root, again as an
        # unprivileged one (setpriv), in a scratch folder of its own.
        users = [None]
        if os.geteuid() == 0 and shutil.which("setpriv"):
            users.append(pwd.getpwnam("nobody"))
        for user in users:
            for case in OUTPUT_CASES:
                if case.get("root") and (os.geteuid() != 0 or user is not None):
                    continue
                with self.subTest(case=case["name"],
                                  user=user.pw_name if user else "self"):
                    self.run_output_case(case, user)

    def run_output_case(self, case, user):
        folder = tempfile.mkdtemp(dir=self.dir)
        cli = CLI
        if user is not None:
            # The user reaches the folder, and a copy of the program where
            # the build's folders are closed to it.
            os.chmod(self.dir, 0o711)
            if subprocess.run(["setpriv", f"--reuid={user.pw_uid}",
                               f"--regid={user.pw_gid}", "--clear-groups", "test", "-x",
                               CLI]).returncode != 0:
                cli = os.path.join(self.dir, "attnpool")
                if not os.path.exists(cli):
                    shutil.copy(CLI, cli)
        at = lambda name: os.path.join(folder, name)  # noqa: E731
        x = np.linspace(0, 5, 40, dtype=np.float32)
        np.save(at("x.npy"), x)
        np.save(at("y.npy"), 2 * np.sin(x) + x)
        np.save(at("q.npy"), np.linspace(0, 5, 7, dtype=np.float32))
        with open(at("old.npy"), "wb") as f:
            f.write(b"the old contents")
        case["setup"](at)
        if user is not None:
            os.chmod(folder, 0o777)
            for name in os.listdir(folder):
                os.chown(at(name), user.pw_uid, user.pw_gid, follow_symlinks=False)
        reader = None
        if "fifo" in case:  # a reader at the other end of the FIFO
            received = []

            def read():
                with open(at(case["fifo"]), "rb") as f:
                    received.append(f.read())
            reader = threading.Thread(target=read, daemon=True)
            reader.start()
        before = _snapshot(folder)
        args = ["pool", "--queries", at("q.npy"), "--keys", at("x.npy"),
                "--values", at("y.npy"), *[at(a) if a.endswith(".npy") or "/" in a
                                           else a for a in case["args"]]]
        command = [cli, *args]
        if user is not None:
            command = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                       "--clear-groups", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if reader is not None:
            reader.join(30)
        if "error" in case:
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertIn(case["error"], result.stderr)
            # Nothing written, nothing left behind.
            after = _snapshot(folder)
            self.assertEqual(sorted(after), sorted(before))
            for name, (status, content) in before.items():
                self.assertEqual(after[name][1], content, name)
                self.assertEqual(after[name][0].st_mode, status.st_mode, name)
                self.assertEqual(after[name][0].st_ino, status.st_ino, name)
            return
        self.assertEqual(result.returncode, 0, result.stderr)
        expected = subprocess.run([CLI, *args[:-2], "-o", at("expected.npy")],
                                  capture_output=True, text=True, timeout=60)
        self.assertEqual(expected.returncode, 0, expected.stderr)
        with open(at("expected.npy"), "rb") as f:
            expected_bytes = f.read()
        if reader is not None:
            self.assertEqual(received, [expected_bytes])
        for name in case.get("written", []):
            with open(at(name), "rb") as f:
                self.assertEqual(f.read(), expected_bytes, name)
        case["check"](self, at)
        leftovers = [n for n in os.listdir(folder) if ".tmp" in n or ".old" in n]
        self.assertEqual(leftovers, [])

    def test_bad_environment_is_not_an_option_error(self):
        # A bad ATTNPOOL_ISA or ATTNPOOL_TUNING is named as such, exit code 1,
        # with --isa given too; regress prints nothing before it.
        x_path, y_path, q_path, _, _, _ = self.nw_inputs()
        for variable in ("ATTNPOOL_ISA", "ATTNPOOL_TUNING"):
            with self.subTest(variable=variable):
                for extra in ((), ("--isa", "scalar")):
                    result = self.run_cli(*self.pool_args(None, None, None, *extra),
                                          expect=1, env={variable: "bogus"})
                    self.assertIn("attnpool: error: " + variable + ": ", result.stderr)
                    self.assertNotIn("--isa", result.stderr)
                result = self.run_cli("regress", "--x", x_path, "--y", y_path, "--queries",
                                      q_path, "-o", self.path("out.npy"), expect=1,
                                      env={variable: "bogus"})
                self.assertEqual(result.stdout, "")
                self.assertIn(variable, result.stderr)

    def test_temporary_files_are_created_exclusively(self):
        # Links planted under names a temporary file beside -o could take
        # (the next process ids, which the old out.npy.tmp<pid> used) are
        # neither followed nor replaced; the result gets the umask's mode.
        x_path, y_path, q_path, _, _, _ = self.nw_inputs()
        victim = self.write("victim.txt", b"untouched")
        with open("/proc/sys/kernel/ns_last_pid") as f:
            last = int(f.read())
        planted = [self.path("out.npy.tmp%d" % pid) for pid in range(last + 1, last + 65)]
        for link in planted:
            os.symlink(victim, link)
        old_mask = os.umask(0o027)
        try:
            self.run_cli("pool", "--queries", q_path, "--keys", x_path, "--values", y_path,
                         "-o", self.path("out.npy"))
        finally:
            os.umask(old_mask)
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), b"untouched")
        self.assertTrue(all(os.path.islink(link) for link in planted))
        self.assertEqual(os.stat(self.path("out.npy")).st_mode & 0o777, 0o640)
        self.assertEqual(sorted(n for n in os.listdir(self.dir) if n.startswith("out.npy")
                                and not os.path.islink(self.path(n))), ["out.npy"])

    def test_results_past_memory(self):
        # 2^32 rows of no columns: a file of a header only, a result of 2^64
        # entries (distances), or 2^32 × 2^32 weights.
        tall = self.write("tall.npy", npy_bytes("<f4", (2**32, 0), b""))
        self.expect_error(["distances", "--queries", tall, "--keys", tall, "-o",
                           self.path("out.npy")],
                          "-o: the result: shape (4294967296, 4294967296) overflows")
        self.expect_error(["pool", "--queries", tall, "--keys", tall, "--values", tall,
                           "-o", self.path("out.npy"), "--weights", self.path("w.npy")],
                          "--weights: the result: shape (4294967296, 4294967296)")

    def test_option_named_in_entry_errors(self):
        x_path, y_path, q_path, _, _, _ = self.nw_inputs()
        lengths = self.save("lengths.npy", np.array([1, 2**64 - 1] + [0] * 48,
                                                    dtype=np.uint64))
        self.expect_error(self.pool_args(None, None, None, "--valid-lengths", lengths),
                          "entry 1 is 18446744073709551615, outside [0, 40]")
        q, k, v = (self.save(name, self.rng.standard_normal((1, 2, 3, 4)).astype(np.float32))
                   for name in ("tq.npy", "tk.npy", "tv.npy"))
        self.expect_error(["sdpa", "--queries", q, "--keys", k, "--values", v, "-o",
                           self.path("out.npy"), "--alibi-slopes",
                           self.save("slopes.npy", np.array([np.nan, 1], np.float32))],
                          "(from --alibi-slopes)")
        self.expect_error(["distances", "--queries", q_path, "--keys",
                           self.save("k16.npy", np.ones((4, 3), np.float16)),
                           "--keys-dtype", "bf16", "-o", self.path("out.npy")],
                          "--keys-dtype: unknown name 'bf16'", 2)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    CLI = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=1)
