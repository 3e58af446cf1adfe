"""Reading the Google Benchmark JSON of the attnpool benchmarks.

Entries are named <stage>/<TARGET>[/<variant>]/<shape>[/threads:<t>]
[/real_time]; the baselines measured in the same binary are named
baseline/<name>[/<variant>]/<shape>[/threads:<t>]. A baseline is compared
with every attnpool entry of the same variant, shape and threads (its
counterpart, doing the same work), so a binary names each baseline's
variant and shape as those of that entry. Shared by bench_summary.py
(medians and ratios in the terminal) and bench_report.py (Markdown tables
and plots).
"""
import json
import math
import re
from collections import namedtuple

# stage: "distance", "kernel", ... ("baseline" for baselines); who: the
# target ("AVX2") or the baseline's name ("faiss"); threads: "1", or "-"
# when the entry has none; counters: the entry's numbers (items_per_second,
# GFLOP/s, real_time, ...).
Entry = namedtuple("Entry", "stage who variant shape threads counters")

FALLBACK_TARGETS = ("SCALAR", "EMU128")


def is_baseline(entry):
    return entry.stage == "baseline"


def parse_name(run_name):
    """(stage, who, variant, shape, threads) of an entry name, or None."""
    parts = run_name.split("/")
    if parts and parts[-1] == "real_time":
        parts = parts[:-1]
    threads = "-"
    if parts and parts[-1].startswith("threads:"):
        threads = parts[-1][len("threads:"):]
        parts = parts[:-1]
    if len(parts) < 3:
        return None
    stage, who, shape = parts[0], parts[1], parts[-1]
    variant = "/".join(parts[2:-1]) or "-"
    return stage, who, variant, shape, threads


def medians(data):
    """The entries of a benchmark JSON document (already loaded): the median
    aggregates when it has repetitions, else the single runs."""
    benchmarks = data.get("benchmarks", [])
    aggregated = any(b.get("aggregate_name") for b in benchmarks)
    entries = []
    for b in benchmarks:
        if aggregated and b.get("aggregate_name") != "median":
            continue
        if b.get("error_occurred"):
            continue
        parsed = parse_name(b.get("run_name", b.get("name", "")))
        if parsed is None:
            continue
        counters = {k: v for k, v in b.items() if isinstance(v, (int, float))}
        entries.append(Entry(*parsed, counters))
    return entries


def load(path):
    """(context, entries) of a benchmark JSON file."""
    with open(path) as f:
        data = json.load(f)
    return data.get("context", {}), medians(data)


def same_work(baseline, entry):
    """Whether attnpool's `entry` is a counterpart of `baseline`."""
    return (not is_baseline(entry) and
            (entry.variant, entry.shape, entry.threads) ==
            (baseline.variant, baseline.shape, baseline.threads))


def unmatched_baselines(entries):
    """The baselines of `entries` that no attnpool entry is compared with."""
    return [b for b in entries if is_baseline(b)
            and not any(same_work(b, e) for e in entries)]


def group(entries, counter):
    """{(stage, variant, shape, threads): {who: rate}}, as bench_summary
    prints them: one row per attnpool stage, with the baselines of the same
    work as "baseline:name" in each; a baseline without a counterpart in a
    row of its own (stage "baseline")."""
    rows = {}
    for e in entries:
        if not is_baseline(e):
            key = (e.stage, e.variant, e.shape, e.threads)
            rows.setdefault(key, {})[e.who] = e.counters.get(counter, 0)
    for b in entries:
        if not is_baseline(b):
            continue
        keys = [key for key in rows if key[0] != "baseline" and
                key[1:] == (b.variant, b.shape, b.threads)]
        for key in keys or [("baseline", b.variant, b.shape, b.threads)]:
            rows.setdefault(key, {})["baseline:" + b.who] = b.counters.get(counter, 0)
    return rows


def shape_size(shape):
    """Work size of a shape text ("4096x4096x128" -> 2147483648) for sorting."""
    numbers = [int(n) for n in re.findall(r"\d+", shape)]
    return math.prod(numbers) if numbers else 0


def shape_key(shape):
    return (shape_size(shape), shape)


def thread_key(threads):
    return (0, int(threads)) if threads.isdigit() else (1, threads)
