#!/usr/bin/env python3
"""Leave-one-out bandwidth selection: statsmodels against attnpool.

Times, in the same run, on data of the same distribution (the seed's: x
uniform on [0, 5], y = 2 sin x + x + N(0, 0.5^2), n = 2000 by default; each
side draws its own sample):

  statsmodels  KernelReg(y, x, var_type='c', reg_type='lc', bw='cv_ls'):
               Nelder-Mead over h, each step a leave-one-out score computed
               point by point in Python (Debian python3-statsmodels);
  attnpool     cross_validate over 32 Gaussian bandwidths evenly spaced in
               1/h^2 on [0.03, 0.6] (the powers path), via the benchmark binary
               bench_regression (entries loo/<TARGET>/gaussian_32/n:<n>, one
               thread), median of --repeats runs.

Prints both times, the number of bandwidths each scored, the chosen
bandwidths, and the ratios (goal of issue #5: attnpool >= 100x faster at
n = 2000). statsmodels' Gaussian kernel is exp(-u^2/2) with u = r/h, the
same h as attnpool's.

  /usr/bin/python3 bench/baseline_statsmodels.py --bench build/bench/bench_regression
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def seed_data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 5, n)
    y = 2 * np.sin(x) + x + rng.normal(0, 0.5, n)
    return x, y


def time_statsmodels(x, y, repeats):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    evaluations = [0]
    original = KernelReg.cv_loo

    def counted(self, bw, func):
        evaluations[0] += 1
        return original(self, bw, func)

    KernelReg.cv_loo = counted
    times, bandwidth = [], None
    try:
        for _ in range(repeats):
            evaluations[0] = 0
            start = time.perf_counter()
            model = KernelReg(y, x, var_type="c", reg_type="lc", bw="cv_ls")
            times.append(time.perf_counter() - start)
            bandwidth = float(model.bw[0])
    finally:
        KernelReg.cv_loo = original
    return statistics.median(times), evaluations[0], bandwidth


def time_attnpool(bench, n, repeats, target):
    pattern = "^loo/%s/gaussian_32/n:%d/threads:1(/real_time)?$" % (target or "[^/]+", n)
    command = [bench, "--benchmark_filter=" + pattern,
               "--benchmark_format=json",
               "--benchmark_repetitions=%d" % repeats,
               "--benchmark_report_aggregates_only=true"]
    env = dict(os.environ, ATTNPOOL_BENCH_THREADS="1")
    result = subprocess.run(command, check=True, capture_output=True,
                            text=True, env=env)
    rows = {}
    for entry in json.loads(result.stdout)["benchmarks"]:
        # (Google Benchmark reports no aggregates for a single repetition.)
        single = repeats == 1 and entry.get("run_type") == "iteration"
        if entry.get("aggregate_name") != "median" and not single:
            continue
        name = entry["run_name"]
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[entry["time_unit"]]
        rows[name.split("/")[1]] = (entry["real_time"] * scale, entry.get("h"))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", default="build/bench/bench_regression",
                        help="the bench_regression binary")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each side; the median is reported")
    parser.add_argument("--target", default=None,
                        help="attnpool target (default: every supported one)")
    args = parser.parse_args()

    x, y = seed_data(args.n, 1)
    ours = time_attnpool(args.bench, args.n, args.repeats, args.target)
    if not ours:
        sys.exit("no loo/.../n:%d entry ran in %s" % (args.n, args.bench))
    theirs, evaluations, their_h = time_statsmodels(x, y, args.repeats)
    print("n = %d, one thread, median of %d" % (args.n, args.repeats))
    print("  statsmodels KernelReg cv_ls: %9.3f s  (%d LOO evaluations, "
          "h = %.4f)" % (theirs, evaluations, their_h))
    for target, (seconds, h) in ours.items():
        print("  attnpool %-7s 32-bw LOO: %9.5f s  (h = %.4f)  "
              "%7.0fx faster; per bandwidth scored %7.0fx"
              % (target, seconds, h if h is not None else float("nan"),
                 theirs / seconds,
                 (theirs / evaluations) / (seconds / 32)))


if __name__ == "__main__":
    main()
