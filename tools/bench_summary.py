#!/usr/bin/env python3
"""Summarizes a Google Benchmark JSON file of the attnpool benchmarks.

Entries are named <stage>/<TARGET>[/<variant>]/<shape>/threads:<t>
(baselines: baseline/<name>[/<variant>]/<shape>/threads:<t>). For each
(stage, variant, shape, threads) it prints the median rate of every target,
then of each baseline of the same variant, shape and threads with
attnpool's best target divided by it.
For Markdown tables and plots, see bench_report.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402


def main(path, counter="items_per_second"):
    _, entries = bench_common.load(path)
    rows = bench_common.group(entries, counter)
    unit = "GFLOP/s" if counter == "GFLOP/s" else "G items/s (pairs/s for distances)"
    scale = 1.0 if counter == "GFLOP/s" else 1e9  # the GFLOP/s counter is in G already
    print(f"{'stage':<16} {'variant':<12} {'shape':<16} {'thr':>3}  medians in {unit}")
    for (stage, variant, shape, threads), rates in sorted(rows.items()):
        targets = {k: v for k, v in rates.items() if not k.startswith("baseline:")}
        baselines = {k[9:]: v for k, v in rates.items() if k.startswith("baseline:")}
        text = "  ".join(f"{k} {v / scale:.3f}" for k, v in targets.items())
        line = f"{stage:<16} {variant:<12} {shape:<16} {threads:>3}  {text}"
        if baselines and not targets:  # (no attnpool entry of its work)
            line += "  |  " + "  ".join(f"{k} {v / scale:.3f}" for k, v in baselines.items())
        elif baselines:
            best_name, best = max(targets.items(), key=lambda kv: kv[1])
            line += "  |  " + "  ".join(
                f"{k} {v / scale:.3f} ({best_name} = {best / v:.2f}x)" if v else f"{k} -"
                for k, v in baselines.items())
        print(line)


if __name__ == "__main__":
    # usage: bench_summary.py FILE.json [--gflops]
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0] if args else "bench_distance.json",
         "GFLOP/s" if "--gflops" in sys.argv else "items_per_second")
