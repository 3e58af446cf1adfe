#!/usr/bin/env python3
"""The cost model of attnpool::mpi (docs/distributed.md), as tables of
predicted times for 16 to 1024 ranks, from per-rank rates measured by
bench/compare and bench/mpi_scaling and an interconnect's latency and
bandwidth. Pure Python; every constant is an argument.

usage: mpi_cost_model.py [--pair-rate 6.0e9] [--flop-rate 1.85e11]
         [--merge-rate 1.4e8] [--merge-rate-64 2e7] [--latency 2e-6]
         [--bandwidth 12.5e9]
"""
import argparse
import math


def tree_reduction(ranks, rows, columns, latency, bandwidth, merge_rate,
                   element=4):
    """Split-keys reduction (Reduction::tree): ceil(log2 P) steps, each one
    message of rows x (columns + 2) values and one merge of `rows` rows."""
    steps = math.ceil(math.log2(ranks)) if ranks > 1 else 0
    message = rows * (columns + 2) * element
    return steps * (latency + message / bandwidth + rows / merge_rate)


def rank_order_reduction(ranks, rows, columns, latency, bandwidth, merge_rate,
                         element=4):
    """Reduction::rank_order: the root receives and merges P - 1 states."""
    message = rows * (columns + 2) * element
    return (ranks - 1) * (latency + message / bandwidth + rows / merge_rate)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--pair-rate", type=float, default=6.0e9,
                        help="1-D Gaussian N-W pairs/s of one rank (one core)")
    parser.add_argument("--flop-rate", type=float, default=1.85e11,
                        help="attention FLOP/s of one rank, d = 64")
    parser.add_argument("--merge-rate", type=float, default=1.4e8,
                        help="merged state rows/s, dv = 1")
    parser.add_argument("--merge-rate-64", type=float, default=2.0e7,
                        help="merged state rows/s, dv = 64")
    parser.add_argument("--latency", type=float, default=2e-6, help="seconds")
    parser.add_argument("--bandwidth", type=float, default=12.5e9, help="bytes/s")
    a = parser.parse_args()
    ranks = [16, 32, 64, 128, 256, 512, 1024]

    print("(a) Nadaraya-Watson, 1-D Gaussian, 2e4 queries over 1e10 training "
          "points, split keys, tree reduction")
    print("| ranks | compute s | reduction s | share of communication |")
    print("|---|---|---|---|")
    n, points = 2e4, 1e10
    for p in ranks:
        compute = n * points / p / a.pair_rate
        reduce = tree_reduction(p, n, 1, a.latency, a.bandwidth, a.merge_rate)
        print("| %d | %.4g | %.3g | %.1e |" % (p, compute, reduce,
                                                reduce / (compute + reduce)))
    # Communication overtakes when n*N/(P*rate) < log2(P)*(step).
    step = tree_reduction(2, n, 1, a.latency, a.bandwidth, a.merge_rate)
    p = 2
    while n * points / p / a.pair_rate > math.log2(p) * step:
        p *= 2
    print("communication passes compute at about 2^%d ranks\n" % math.log2(p))

    print("(b) self-attention over a 1e7-token context, d = dv = 64, no mask")
    print("| ranks | compute s | ring: per step compute / transfer | "
          "split keys: tree reduction s |")
    print("|---|---|---|---|")
    context, d = 1e7, 64
    flops = 4 * context * context * d
    for p in ranks:
        compute = flops / p / a.flop_rate
        step_compute = compute / p
        step_transfer = a.latency + context / p * (2 * d) * 4 / a.bandwidth
        split = tree_reduction(p, context, d, a.latency, a.bandwidth, a.merge_rate_64)
        print("| %d | %.4g | %.3g s / %.3g s | %.3g |" % (
            p, compute, step_compute, step_transfer, split))
    # The ring's transfer outgrows its step's compute when
    # flops/(P^2 rate) < context/P * 2d * 4 / bandwidth.
    crossover = flops / a.flop_rate * a.bandwidth / (context * 2 * d * 4)
    print("ring: a step's transfer outgrows its compute (no longer hidden) "
          "beyond %.2g ranks" % crossover)
    p = 2
    while flops / p / a.flop_rate > tree_reduction(p, context, d, a.latency,
                                                   a.bandwidth, a.merge_rate_64):
        p *= 2
    print("split keys: the reduction passes compute at about 2^%d ranks"
          % math.log2(p))


if __name__ == "__main__":
    main()
