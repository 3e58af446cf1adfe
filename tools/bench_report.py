#!/usr/bin/env python3
"""Benchmark report: runs attnpool benchmark binaries (or reads their JSON)
and renders Markdown tables and plots.

usage: bench_report.py [options] INPUT...

INPUT is a benchmark binary (build/bench/bench_distance, ...), run here with
JSON output saved next to the report, or a JSON file a binary wrote
(--benchmark_out=FILE --benchmark_out_format=json).

For every binary and (stage, variant) the report has a table whose rows are
shapes and thread counts and whose columns are the targets (AVX3, AVX2, ...)
and the baselines of the same variant, shape and threads measured in the
same run, with attnpool's best target divided by each baseline; and a plot of the rate against the shape, one line
per target, baselines dashed, one panel per thread count. Written to
OUT/report.md with the plots as OUT/<binary>_<stage>_<variant>.png (and .svg).

options:
  -o, --out DIR        where to write (default bench-report)
  --filter REGEX       --benchmark_filter for the binaries
  --repetitions N      repetitions per entry; the medians are reported (default 3)
  --min-time S         --benchmark_min_time in seconds (default 0.1)
  --counter NAME       items_per_second (default) or GFLOP/s
  --no-plots           tables only (no matplotlib needed)
  --svg                also write each plot as SVG
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402
from bench_common import is_baseline, same_work, shape_key, thread_key  # noqa: E402

UNITS = {"items_per_second": ("G items/s", 1e9), "GFLOP/s": ("GFLOP/s", 1.0)}


def run_binary(binary, out_dir, args):
    name = os.path.basename(binary)
    json_path = os.path.join(out_dir, name + ".json")
    command = [binary, f"--benchmark_out={json_path}", "--benchmark_out_format=json",
               f"--benchmark_repetitions={args.repetitions}",
               f"--benchmark_min_time={args.min_time}"]
    if args.filter:
        command.append(f"--benchmark_filter={args.filter}")
    if args.repetitions > 1:
        command.append("--benchmark_report_aggregates_only=true")
    # OpenBLAS's core-type overrides slow FAISS's sgemm: unset for the baselines.
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    print(f"running {' '.join(command)}", file=sys.stderr)
    result = subprocess.run(command, env=env, stdout=subprocess.DEVNULL)
    if result.returncode != 0:
        sys.exit(f"bench_report: {binary} failed with exit code {result.returncode}")
    return name, json_path


def fmt(value, scale):
    if not value:
        return "–"
    value /= scale
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def sorted_targets(names, context_order):
    """Targets best first as the binary lists them (AVX3, AVX2, ..., SCALAR)."""
    order = {name: i for i, name in enumerate(context_order)}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


def tables(source, entries, counter):
    unit, scale = UNITS.get(counter, (counter, 1.0))
    lines = []
    stages = sorted({(e.stage, e.variant) for e in entries if not is_baseline(e)})
    baselines_all = [e for e in entries if is_baseline(e)]
    target_order = []
    for e in entries:  # the binaries register targets best first
        if not is_baseline(e) and e.who not in target_order:
            target_order.append(e.who)
    for stage, variant in stages:
        mine = [e for e in entries if e.stage == stage and e.variant == variant]
        keys = sorted({(e.shape, e.threads) for e in mine},
                      key=lambda k: (shape_key(k[0]), thread_key(k[1])))
        theirs = [b for b in baselines_all if any(same_work(b, e) for e in mine)]
        targets = sorted_targets({e.who for e in mine}, target_order)
        baselines = sorted({e.who for e in theirs})
        rate = {(e.who, e.shape, e.threads): e.counters.get(counter, 0) for e in mine}
        base = {(e.who, e.shape, e.threads): e.counters.get(counter, 0) for e in theirs}
        title = f"{stage} / {variant}" if variant != "-" else stage
        lines.append(f"### {source}: {title} ({unit}, median)\n")
        header = ["shape", "threads"] + targets + [f"{b} (baseline)" for b in baselines]
        header += [f"best ÷ {b}" for b in baselines]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * 2 + "---:|" * (len(header) - 2))
        for shape, threads in keys:
            row = [shape, threads]
            values = [rate.get((t, shape, threads), 0) for t in targets]
            best = max(values) if values else 0
            best_target = targets[values.index(best)] if best else "-"
            for value in values:
                text = fmt(value, scale)
                row.append(f"**{text}**" if value and value == best else text)
            for b in baselines:
                row.append(fmt(base.get((b, shape, threads), 0), scale))
            for b in baselines:
                reference = base.get((b, shape, threads), 0)
                row.append(f"{best / reference:.2f}× ({best_target})"
                           if reference and best else "–")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return lines


def plots(source, entries, counter, out_dir, svg):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    unit, scale = UNITS.get(counter, (counter, 1.0))
    written = []
    stages = sorted({(e.stage, e.variant) for e in entries if not is_baseline(e)})
    target_order = []
    for e in entries:
        if not is_baseline(e) and e.who not in target_order:
            target_order.append(e.who)
    for stage, variant in stages:
        mine = [e for e in entries if e.stage == stage and e.variant == variant]
        shapes = sorted({e.shape for e in mine}, key=shape_key)
        thread_counts = sorted({e.threads for e in mine}, key=thread_key)
        theirs = [b for b in entries
                  if is_baseline(b) and any(same_work(b, e) for e in mine)]
        fig, axes = plt.subplots(1, len(thread_counts), squeeze=False,
                                 figsize=(max(4.5, 1.2 * len(shapes) + 2.5) * len(thread_counts), 3.6),
                                 layout="constrained")
        for ax, threads in zip(axes[0], thread_counts):
            positions = range(len(shapes))
            for index, target in enumerate(sorted_targets({e.who for e in mine}, target_order)):
                values = {e.shape: e.counters.get(counter, 0) / scale
                          for e in mine if e.who == target and e.threads == threads}
                ys = [values.get(s, float("nan")) or float("nan") for s in shapes]
                ax.plot(positions, ys, "o-", color=f"C{index}", label=target)
            for index, baseline in enumerate(sorted({e.who for e in theirs})):
                values = {e.shape: e.counters.get(counter, 0) / scale
                          for e in theirs if e.who == baseline and e.threads == threads}
                ys = [values.get(s, float("nan")) or float("nan") for s in shapes]
                ax.plot(positions, ys, "s--", color="0.2" if index == 0 else f"C{index + 6}",
                        alpha=0.8, label=f"{baseline} (baseline)")
            ax.set_xticks(list(positions))
            ax.set_xticklabels(shapes, rotation=20, fontsize=8)
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("shape")
            ax.set_ylabel(unit)
            ax.set_title(f"threads: {threads}" if threads != "-" else "")
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
        title = f"{stage} / {variant}" if variant != "-" else stage
        fig.suptitle(f"{source}: {title}", fontsize=10)
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in f"{source}_{stage}_{variant}")
        path = os.path.join(out_dir, safe + ".png")
        fig.savefig(path, dpi=90)
        if svg:
            fig.savefig(os.path.join(out_dir, safe + ".svg"))
        plt.close(fig)
        written.append((title, os.path.basename(path)))
    return written


def describe(context):
    parts = []
    if context.get("host_name"):
        parts.append(context["host_name"])
    if context.get("num_cpus"):
        parts.append(f"{context['num_cpus']} CPUs at {context.get('mhz_per_cpu', '?')} MHz")
    caches = [f"L{c['level']} {c['type'][0].lower()}{c['size'] // 1024} KiB"
              for c in context.get("caches", []) if "size" in c]
    if caches:
        parts.append(", ".join(caches))
    if context.get("date"):
        parts.append(context["date"])
    return "; ".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog=__doc__.split("\n\n", 1)[1].split("options:")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", metavar="INPUT")
    parser.add_argument("-o", "--out", default="bench-report")
    parser.add_argument("--filter")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=0.1)
    parser.add_argument("--counter", default="items_per_second",
                        choices=sorted(UNITS))
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--svg", action="store_true")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    lines = ["# attnpool benchmark report", ""]
    for item in args.inputs:
        if item.endswith(".json"):
            source, path = os.path.splitext(os.path.basename(item))[0], item
        elif os.path.isfile(item) and os.access(item, os.X_OK):
            source, path = run_binary(item, args.out, args)
        else:
            sys.exit(f"bench_report: {item} is neither a .json file nor an executable")
        context, entries = bench_common.load(path)
        if not entries:
            sys.exit(f"bench_report: {path} has no attnpool benchmark entries")
        lines += [f"## {source}", ""]
        if describe(context):
            lines += [f"Machine: {describe(context)}. The rate is "
                      f"{UNITS[args.counter][0]}; bold: the best target.", ""]
        lines += tables(source, entries, args.counter)
        if not args.no_plots:
            for title, png in plots(source, entries, args.counter, args.out, args.svg):
                lines += [f"![{source}: {title}]({png})", ""]
    report = os.path.join(args.out, "report.md")
    with open(report, "w") as f:
        f.write("\n".join(lines))
    print(f"bench_report: wrote {report}")


if __name__ == "__main__":
    main()
