#!/usr/bin/env python3
"""'attnpool pool' under mpiexec: each rank reads only its part of the keys
and values (checked from the kernel's view: the bytes read), rank 0 writes
the result of the whole sequence, a file that shrinks during the run ends
it with an error or not at all, never with SIGBUS, and one rank's error
(its files, its options, its command) stops every rank with one message
instead of a hang.

usage: test_cli_mpi.py path/to/attnpool path/to/mpiexec
(the environment of tests/CMakeLists.txt's ATTNPOOL_MPI_ENVIRONMENT)
"""
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

CLI = MPIEXEC = None
PAGE = os.sysconf("SC_PAGE_SIZE")
TIMEOUT = 120  # a hang fails the test


def data_offset(path):
    """Bytes before the data of a version 1.0 .npy file."""
    with open(path, "rb") as f:
        prefix = f.read(10)
    return 10 + int.from_bytes(prefix[8:10], "little")


class CliMpiTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        rng = np.random.default_rng(20261127)
        self.n, self.m, self.d, self.dv = 40, 30011, 16, 4
        self.arrays = {
            "q": rng.standard_normal((self.n, self.d)).astype(np.float32),
            "k": rng.standard_normal((self.m, self.d)).astype(np.float32),
            "v": rng.standard_normal((self.m, self.dv)).astype(np.float32),
            "lengths": (np.arange(self.n) * 997) % (self.m + 1),
        }
        for name, array in self.arrays.items():
            np.save(self.path(name + ".npy"), array)

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def pool_args(self, out, *extra):
        return ["pool", "--queries", self.path("q.npy"), "--keys", self.path("k.npy"),
                "--values", self.path("v.npy"), "-o", self.path(out), "--distance", "dot",
                "--kernel", "exp", "--causal", "--causal-offset", str(self.m - self.n),
                "--valid-lengths", self.path("lengths.npy"), *extra]

    def run_ranks(self, ranks, args, expect=0, env=None):
        result = subprocess.run([MPIEXEC, "-n", str(ranks), CLI, *args], capture_output=True,
                                text=True, timeout=TIMEOUT, env=env)
        if result.returncode != expect:
            self.fail("mpiexec -n %d attnpool %s: exit %d, expected %d\n%s" % (
                ranks, " ".join(args), result.returncode, expect, result.stderr))
        return result

    def test_split_keys_equals_one_process(self):
        subprocess.run([CLI, *self.pool_args("one.npy")], check=True, timeout=TIMEOUT)
        whole = np.load(self.path("one.npy"))
        for ranks in (1, 2, 3, 4):
            for reduction in ("tree", "rank_order"):
                with self.subTest(ranks=ranks, reduction=reduction):
                    for name in ("split.npy", "again.npy"):
                        if os.path.exists(self.path(name)):
                            os.remove(self.path(name))
                    self.run_ranks(ranks, self.pool_args("split.npy", "--reduction", reduction))
                    split = np.load(self.path("split.npy"))
                    self.assertEqual(split.dtype, np.float32)
                    np.testing.assert_array_equal(np.isnan(split), np.isnan(whole))
                    np.testing.assert_allclose(split, whole, rtol=2e-5, atol=2e-6)
                    if reduction == "rank_order":  # the same bits again
                        self.run_ranks(ranks, self.pool_args("again.npy", "--reduction",
                                                             reduction))
                        self.assertEqual(pathlib.Path(self.path("again.npy")).read_bytes(),
                                         pathlib.Path(self.path("split.npy")).read_bytes())

    def test_reduced_precision_parts(self):
        # bfloat16 keys (bit patterns) and int8 values with row scales: each
        # rank reads its rows of all three files.
        k = self.arrays["k"]
        np.save(self.path("k16.npy"), (k.view(np.uint32) >> 16).astype(np.uint16))
        v = self.arrays["v"]
        scales = (np.abs(v).max(axis=1) / 127).astype(np.float32)
        np.save(self.path("v8.npy"), np.round(v / scales[:, None]).astype(np.int8))
        np.save(self.path("v8_scales.npy"), scales)
        args = [("k16.npy" if a == self.path("k.npy") else a) for a in self.pool_args("x")]
        args = [self.path(a) if a == "k16.npy" else a for a in args]
        args = [self.path("v8.npy") if a == self.path("v.npy") else a for a in args]
        narrow = ["--keys-dtype", "bfloat16", "--value-scales", self.path("v8_scales.npy")]
        one = [a if a != self.path("x") else self.path("one.npy") for a in args]
        subprocess.run([CLI, *one, *narrow], check=True, timeout=TIMEOUT)
        whole = np.load(self.path("one.npy"))
        for ranks in (2, 3):
            with self.subTest(ranks=ranks):
                split = [a if a != self.path("x") else self.path("split.npy") for a in args]
                self.run_ranks(ranks, split + narrow)
                got = np.load(self.path("split.npy"))
                np.testing.assert_array_equal(np.isnan(got), np.isnan(whole))
                np.testing.assert_allclose(got, whole, rtol=2e-5, atol=2e-6)
                os.remove(self.path("split.npy"))

    def test_no_rank_reads_beyond_its_part(self):
        # From the kernel's count of the bytes each rank read (/proc/self/io):
        # the small files whole, the headers of k and v, and its own rows of
        # their data, never the other ranks' rows.
        report = self.path("io")
        os.mkdir(report)
        env = dict(os.environ, ATTNPOOL_IO_REPORT=report)
        ranks = 3
        self.run_ranks(ranks, self.pool_args("out.npy"), env=env)
        small_files = sum(os.path.getsize(self.path(name))
                          for name in ("q.npy", "lengths.npy"))
        headers = sum(data_offset(self.path(name)) for name in ("k.npy", "v.npy"))
        row_bytes = 4 * (self.d + self.dv)
        for rank in range(ranks):
            own = (self.m * (rank + 1) // ranks - self.m * rank // ranks) * row_bytes
            lines = pathlib.Path(report, "rank%d.txt" % rank).read_text().split("\n")
            read = int(lines[0].split()[1])
            with self.subTest(rank=rank):
                self.assertGreaterEqual(read, own)
                self.assertLessEqual(read, small_files + headers + own + 2 * PAGE)

    def test_a_file_that_shrinks_during_the_run(self):
        # The keys truncated once every rank has read its inputs (their I/O
        # reports are written then, before a run of about a second): the
        # result is the one without the truncation; on a mapped file, a
        # rank died of SIGBUS there. Truncated before the run: a clear
        # error, no output.
        rng = np.random.default_rng(20261207)
        m = 400000
        np.save(self.path("q2.npy"), rng.standard_normal((2000, self.d)).astype(np.float32))
        keys = rng.standard_normal((m, self.d)).astype(np.float32)
        np.save(self.path("v2.npy"), rng.standard_normal((m, self.dv)).astype(np.float32))
        report = self.path("io")
        os.mkdir(report)
        env = dict(os.environ, ATTNPOOL_IO_REPORT=report)

        def args(out):
            return ["pool", "--queries", self.path("q2.npy"), "--keys", self.path("k2.npy"),
                    "--values", self.path("v2.npy"), "-o", self.path(out),
                    "--distance", "dot", "--kernel", "exp", "--reduction", "rank_order"]
        np.save(self.path("k2.npy"), keys)
        self.run_ranks(2, args("whole.npy"))
        process = subprocess.Popen([MPIEXEC, "-n", "2", CLI, *args("out.npy")],
                                   stderr=subprocess.PIPE, text=True, env=env)
        reports = [pathlib.Path(report, "rank%d.txt" % rank) for rank in (0, 1)]
        deadline = time.monotonic() + TIMEOUT
        while not all(r.exists() for r in reports) and process.poll() is None:
            self.assertLess(time.monotonic(), deadline, "no rank reported its reading")
            time.sleep(0.005)
        os.truncate(self.path("k2.npy"), 200)
        _, stderr = process.communicate(timeout=TIMEOUT)
        self.assertEqual(process.returncode, 0, stderr)
        np.testing.assert_array_equal(np.load(self.path("out.npy")),
                                      np.load(self.path("whole.npy")))
        os.remove(self.path("out.npy"))
        # Truncated before: every rank stops with the file's error.
        result = subprocess.run([MPIEXEC, "-n", "2", CLI, *args("out.npy")],
                                capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("--keys %s:" % self.path("k2.npy"), result.stderr)
        self.assertFalse(os.path.exists(self.path("out.npy")))

    def run_with_rank_1(self, bad, code, message):
        """Three ranks (MPMD), rank 1 alone on the command line `bad`: the
        job exits with `code` and one error line, naming rank 1 and holding
        `message`, and writes no output."""
        good = self.pool_args("out.npy")
        result = subprocess.run([MPIEXEC, "-n", "1", CLI, *good, ":", "-n", "1", CLI, *bad,
                                 ":", "-n", "1", CLI, *good],
                                capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(result.returncode, code, result.stderr)
        errors = [line for line in result.stderr.splitlines()
                  if line.startswith("attnpool: error:")]
        self.assertEqual(len(errors), 1, result.stderr)
        self.assertIn("rank 1: " + message, errors[0])
        self.assertFalse(os.path.exists(self.path("out.npy")))

    def test_failing_rank_stops_every_rank(self):
        # Rank 1 alone names a file that does not exist.
        bad = [self.path("missing.npy") if a == self.path("k.npy") else a
               for a in self.pool_args("out.npy")]
        self.run_with_rank_1(bad, 1, "--keys %s: cannot open" % self.path("missing.npy"))

    def test_one_rank_with_a_wrong_command_line_stops_every_rank(self):
        # Rank 1 alone (MPMD launch) has a wrong option, a command other
        # than 'pool', a bad option value, or asks for help: every rank
        # exits with its message and code, once, instead of waiting.
        good = self.pool_args("out.npy")
        for bad, message in (
                (good + ["--bogus"], "unknown option '--bogus'"),
                (["targets"], "under mpirun only 'pool' runs"),
                (["regress", "--help"], "under mpirun only 'pool' runs"),
                (good + ["--kernel", "gaussian"], "--kernel is given twice"),
                (["pool", "--help"], "--help: under mpirun")):
            with self.subTest(bad=" ".join(bad[:1] + bad[-2:])):
                self.run_with_rank_1(bad, 2, message)

    def test_mismatched_arguments_are_named(self):
        good = self.pool_args("out.npy")
        other = [("gaussian" if a == "exp" else a) for a in good]
        other = [a for a in other if a != "dot"]
        other = [a for a in other if a != "--distance"]
        result = subprocess.run([MPIEXEC, "-n", "1", CLI, *good, ":", "-n", "1", CLI, *other],
                                capture_output=True, text=True, timeout=TIMEOUT)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("differs across ranks", result.stderr)
        self.assertIn("spec.distance", result.stderr)
        self.assertFalse(os.path.exists(self.path("out.npy")))

    def test_refusals(self):
        for extra, message, code in (
                (["--weights", self.path("w.npy")], "--weights: not under mpirun", 1),
                (["--reduction", "sideways"], "--reduction: 'sideways'", 2)):
            with self.subTest(message=message):
                result = self.run_ranks(2, self.pool_args("out.npy", *extra), expect=code)
                self.assertEqual(result.stderr.count("attnpool: error:"), 1, result.stderr)
                self.assertIn(message, result.stderr)
        result = self.run_ranks(2, ["targets"], expect=2)
        self.assertIn("under mpirun only 'pool' runs", result.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    MPIEXEC = sys.argv.pop(2)
    CLI = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=1)
