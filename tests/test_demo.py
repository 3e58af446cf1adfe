#!/usr/bin/env python3
"""attnpool-demo end to end: the summary, the numbers, and the figures.

usage: test_demo.py path/to/attnpool-demo
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

DEMO = None


class DemoTest(unittest.TestCase):
    def test_demo(self):
        with tempfile.TemporaryDirectory(prefix="attnpool-demo-") as out:
            result = subprocess.run([DEMO, "--out", out, "--large", "400", "--threads", "2"],
                                    capture_output=True, text=True, timeout=300)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            text = result.stdout
            for expected in ("seed case: 40 training points", "large case: 400 training",
                             "boxcar", "triangular", "constant", "chosen h =",
                             "RMSE vs truth", "target ", "pooling calls in", "figures:"):
                self.assertIn(expected, text)
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
            seed, large = summary["cases"]
            self.assertEqual((seed["train"], seed["queries"]), (40, 50))
            self.assertEqual([k["kernel"] for k in seed["kernels"]],
                             ["gaussian", "boxcar", "constant", "triangular"])
            self.assertEqual([w["bandwidth"] for w in seed["widths"]], [0.1, 0.2, 0.5, 1])
            # More data, a better fit: a well-chosen width tracks the truth.
            self.assertLess(large["loo"]["rmse"], 0.3)
            self.assertLess(large["loo"]["rmse"], seed["loo"]["rmse"])
            self.assertTrue(0.02 <= seed["loo"]["bandwidth"] <= 2)
            # Averaging everything is the worst fit.
            constant = [k for k in large["kernels"] if k["kernel"] == "constant"][0]
            self.assertEqual(max(k["rmse"] for k in large["kernels"]), constant["rmse"])
            figures = ["kernels", "seed_fits_kernels", "seed_weights_kernels",
                       "seed_fits_widths", "seed_weights_widths", "seed_loo",
                       "large_fits_kernels", "large_fits_widths", "large_loo"]
            for name in figures:
                for extension, magic in (("png", b"\x89PNG"), ("svg", b"<?xml")):
                    path = os.path.join(out, f"{name}.{extension}")
                    with open(path, "rb") as f:
                        self.assertEqual(f.read(len(magic)), magic, path)
                    self.assertGreater(os.path.getsize(path), 5000, path)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    DEMO = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=1)
