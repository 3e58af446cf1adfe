#!/usr/bin/env python3
"""tools/bench_report.py on a short run of a benchmark binary: the tables,
the plots, and bench_summary.py reading the same JSON; and the names of
every benchmark binary: each baseline has an attnpool entry of the same
work to be compared with (names hard-coded from --benchmark_list_tests, and
those of the binaries built beside the one given).

usage: test_bench_report.py path/to/bench_distance
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

BINARY = None
TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools")
sys.path.insert(0, TOOLS)
import bench_common  # noqa: E402

# Names as the binaries list them (--benchmark_list_tests; one target): each
# binary's baselines with their counterparts, and entries whose variant,
# shape and threads coincide across stages.
NAMES = {
    "bench_distance": [
        "distance/AVX3/sqeuclidean/4096x4096x128/threads:1/real_time",
        "distance/AVX3/dot/4096x4096x128/threads:1/real_time",
        "baseline/faiss/sqeuclidean/4096x4096x128/threads:1/real_time",
        "baseline/naive/sqeuclidean/4096x4096x128/threads:1/real_time",
        "distance/AVX3/sqeuclidean/4096x4096x128/threads:2/real_time",
        "baseline/faiss/sqeuclidean/4096x4096x128/threads:2/real_time",
    ],
    "bench_math": [
        "math/AVX3/exp/float/4096",
        "math/AVX3/exp/double/4096",
        "baseline/hwy_AVX3/exp/float/4096",
        "baseline/libmvec/exp/float/4096",
        "baseline/std/exp/float/4096",
        "math/AVX3/tanh/float/1048576",
        "baseline/hwy_AVX3/tanh/float/1048576",
        "baseline/std/tanh/float/1048576",
    ],
    "bench_stages": [
        "kernel/AVX3/gaussian/4096x4096/threads:1/real_time",
        "normalize/AVX3/sum/4096x4096/threads:1/real_time",
        "kernel_normalize/AVX3/gaussian_sum/4096x4096/threads:1/real_time",
        "kernel_normalize/AVX3/gaussian_sum/4096x4096/threads:2/real_time",
        "baseline/naive/gaussian_sum/4096x4096/threads:1/real_time",
    ],
    "bench_fused": [
        "fused/AVX3/W2_sdpa/1x4096x4096x64x64/threads:1/real_time",
        "staged/AVX3/W2_sdpa/1x4096x4096x64x64/threads:1/real_time",
        "fused/AVX3/W5_decode/8x1x65536x64x64/threads:1/real_time",
    ],
    "bench_regression": [
        "loo/AVX3/gaussian_32/n:20000/threads:1/real_time",
        "loo_every/AVX3/gaussian_32/n:20000/threads:1/real_time",
        "plain/AVX3/predict/n:20000x20000/threads:1/real_time",
        "loo_each/AVX3/gaussian_32/n:2000/threads:1/real_time",
        "loo/AVX3/gaussian_32/n:2000/threads:1/real_time",
    ],
    "bench_layers": [
        "layers/AVX3/tanh/4096/threads:1/real_time",
        "layers/AVX3/linear/4096x512x512/threads:1/real_time",
        "baseline/openblas_sgemm/linear/4096x512x512/threads:1/real_time",
        "layers/AVX3/multi_head/1024x512x8/threads:2/real_time",
        "baseline/openblas/multi_head/1024x512x8/threads:2/real_time",
        "layers/AVX3/additive/1024x1024x128/threads:1/real_time",
    ],
    "bench_weighted_sum": [
        "weighted_sum/AVX3/float/4096x4096x64/threads:1/real_time",
        "baseline/openblas_sgemm/float/4096x4096x64/threads:1/real_time",
        "baseline/naive/float/4096x4096x64/threads:1/real_time",
    ],
}


def entries(names, rate=lambda name: 1.0):
    """Entries of these names (run names), rate `rate(name)` each."""
    data = {"benchmarks": [{"name": n, "run_name": n, "items_per_second": rate(n)}
                           for n in names]}
    return bench_common.medians(data)


class NamesTest(unittest.TestCase):
    def check_names(self, binary, names):
        parsed = entries(names)
        self.assertEqual(len(parsed), len(names), f"{binary}: unparsed names")
        unmatched = bench_common.unmatched_baselines(parsed)
        self.assertEqual(
            unmatched, [],
            f"{binary}: baselines without an attnpool entry of the same variant, "
            f"shape and threads: {[(b.who, b.variant, b.shape, b.threads) for b in unmatched]}")

    def test_hard_coded_names(self):
        for binary, names in NAMES.items():
            self.check_names(binary, names)

    def test_binaries_built_here(self):
        if BINARY is None:
            self.skipTest("no benchmark binary given")
        listed = 0
        for binary in NAMES:
            path = os.path.join(os.path.dirname(BINARY), binary)
            if not os.access(path, os.X_OK):
                continue
            names = subprocess.run([path, "--benchmark_list_tests"], check=True,
                                   capture_output=True, text=True,
                                   timeout=60).stdout.split()
            self.check_names(binary, names)
            listed += 1
        self.assertGreater(listed, 0)

    def test_groups_keep_stages_apart(self):
        rates = {"fused/AVX3/W2_sdpa/1x4096x4096x64x64/threads:1/real_time": 3.0,
                 "staged/AVX3/W2_sdpa/1x4096x4096x64x64/threads:1/real_time": 1.0,
                 "loo/AVX3/gaussian_32/n:20000/threads:1/real_time": 5.0,
                 "loo_every/AVX3/gaussian_32/n:20000/threads:1/real_time": 2.0,
                 "kernel/AVX3/gaussian/4096x4096/threads:1/real_time": 7.0,
                 "kernel_normalize/AVX3/gaussian_sum/4096x4096/threads:1/real_time": 4.0,
                 "baseline/naive/gaussian_sum/4096x4096/threads:1/real_time": 0.5,
                 "baseline/naive/unknown/4096x4096/threads:1/real_time": 0.25}
        rows = bench_common.group(entries(rates, rates.get), "items_per_second")
        self.assertEqual(rows[("fused", "W2_sdpa", "1x4096x4096x64x64", "1")], {"AVX3": 3.0})
        self.assertEqual(rows[("staged", "W2_sdpa", "1x4096x4096x64x64", "1")], {"AVX3": 1.0})
        self.assertEqual(rows[("loo", "gaussian_32", "n:20000", "1")], {"AVX3": 5.0})
        self.assertEqual(rows[("loo_every", "gaussian_32", "n:20000", "1")], {"AVX3": 2.0})
        self.assertEqual(rows[("kernel", "gaussian", "4096x4096", "1")], {"AVX3": 7.0})
        self.assertEqual(rows[("kernel_normalize", "gaussian_sum", "4096x4096", "1")],
                         {"AVX3": 4.0, "baseline:naive": 0.5})
        self.assertEqual(rows[("baseline", "unknown", "4096x4096", "1")],
                         {"baseline:naive": 0.25})
        with tempfile.TemporaryDirectory(prefix="attnpool-summary-") as out:
            path = os.path.join(out, "fake.json")
            with open(path, "w") as f:
                json.dump({"benchmarks": [{"name": n, "run_name": n, "items_per_second": r * 1e9}
                                          for n, r in rates.items()]}, f)
            summary = subprocess.run(
                [sys.executable, os.path.join(TOOLS, "bench_summary.py"), path],
                check=True, capture_output=True, text=True).stdout
        lines = [line.split()[:5] for line in summary.splitlines()[1:]]
        self.assertIn(["fused", "W2_sdpa", "1x4096x4096x64x64", "1", "AVX3"], lines)
        self.assertIn(["staged", "W2_sdpa", "1x4096x4096x64x64", "1", "AVX3"], lines)
        self.assertIn(["loo_every", "gaussian_32", "n:20000", "1", "AVX3"], lines)
        self.assertIn("naive 0.500 (AVX3 = 8.00x)", summary)


class BenchReportTest(unittest.TestCase):
    def test_report(self):
        if BINARY is None:
            self.skipTest("no benchmark binary given")
        with tempfile.TemporaryDirectory(prefix="attnpool-report-") as out:
            # Small shapes, one repetition: a second or two.
            subprocess.run(
                [sys.executable, os.path.join(TOOLS, "bench_report.py"), "-o", out,
                 "--repetitions", "1", "--min-time", "0.001", "--svg", "--filter",
                 "(distance|baseline)/[^/]+/(sqeuclidean|dot)/4096x4096x(1|3)/threads:1",
                 BINARY], check=True, timeout=300)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("## bench_distance", report)
            self.assertIn("### bench_distance: distance / sqeuclidean", report)
            self.assertIn("| shape | threads |", report)
            self.assertIn("naive (baseline)", report)
            self.assertIn("best ÷ naive", report)
            self.assertIn("| 4096x4096x1 | 1 |", report)
            self.assertIn("| 4096x4096x3 | 1 |", report)
            for name in ("bench_distance_distance_sqeuclidean", "bench_distance_distance_dot"):
                self.assertIn(f"({name}.png)", report)
                for extension in ("png", "svg"):
                    self.assertGreater(os.path.getsize(os.path.join(out, f"{name}.{extension}")),
                                       5000)
            summary = subprocess.run(
                [sys.executable, os.path.join(TOOLS, "bench_summary.py"),
                 os.path.join(out, "bench_distance.json")],
                check=True, capture_output=True, text=True).stdout
            self.assertIn("sqeuclidean  4096x4096x1", summary)
            self.assertIn("naive", summary)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=1)
