#!/usr/bin/env python3
"""tools/bench_report.py on a short run of a benchmark binary: the tables,
the plots, and bench_summary.py reading the same JSON.

usage: test_bench_report.py path/to/bench_distance
"""
import os
import subprocess
import sys
import tempfile
import unittest

BINARY = None
TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools")


class BenchReportTest(unittest.TestCase):
    def test_report(self):
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
