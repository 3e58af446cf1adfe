#!/usr/bin/env python3
"""Writes the seed inputs of tests/fuzz/corpus (layout: tests/fuzz/fuzz_api.cc).

Each seed picks a function, element type, shapes across the block sizes,
a spec and a mask; values come from a fixed pseudo-random stream. Run from
anywhere; it rewrites only the seed-* files (failures found by fuzzing are
kept as crash-* / regression-* files next to them).
"""
import os
import random

APIS = ["pairwise_distances", "apply_kernel", "normalize", "weighted_sum",
        "attention_pool_staged", "attention_pool_staged/workspace"]
ATTENTION_POOL = 6  # its index in the API table
LAYERS = 8  # "attention_layers", past the table (tests/fuzz/fuzz_layers.cc)
CROSS_VALIDATE = 9  # "cross_validate" (tests/fuzz/fuzz_regression.cc)


def size(n):
    """The byte that DecodeSize maps to n."""
    if n < 25:
        return n
    return 224 + (n - 25) // 9


def decoded(byte):
    """The size that DecodeSize reads from a byte."""
    return byte % 25 if byte < 224 else 25 + 9 * (byte - 224)


def seed(api, double, n, m, d, dv, distance, kernel, bandwidth, scale,
         normalization, flags=0, padding=1, offset=1, threads=2, causal=3,
         extras=0, sides=0, adjustments=0, elements=0, rng=None):
    sizes = [decoded(size(x)) for x in (n, m, d, dv)]
    # A large input: bit 128 of the flags, layout and threads bytes.
    large = 128 if sizes[0] * sizes[1] * (sizes[2] + sizes[3] + 1) > 1 << 12 else 0
    head = [api, flags | large | (1 if double else 0), size(n), size(m), size(d),
            size(dv), padding + 4 * offset + large, threads | large, distance, kernel,
            bandwidth, scale, normalization, causal & 0xFF, extras, sides, adjustments,
            elements]
    body = [rng.randrange(256) for _ in range(4096 - len(head))]
    return bytes(head + body)


def layer_seed(flags, heads, kv, sequences, dk, dv, threads=1, causal=0,
               sides=0, adjustments=0, elements=0, block=15, scale=0,
               values=4, seed=(1, 2, 3, 4), dense=0, additive=0, multi_head=0):
    """An "attention_layers" input: Hq = heads, kv the index of Hkv among
    Hq's divisors, sequences a list of (queries byte, keys byte), dense the
    dense batch's byte, additive its additive attention's (1 + 2·h: h
    hidden units), multi_head its multi-head attention's."""
    head = [LAYERS, flags, heads - 1, kv, len(sequences) - 1, dk, dv, threads,
            causal & 0xFF, sides, adjustments, elements, block - 1, scale,
            values] + list(seed)
    extras = [additive, multi_head]
    while extras and extras[-1] == 0:
        extras.pop()
    return bytes(head + [b for pair in sequences for b in pair] + [dense] +
                 extras)


def layer_seeds():
    """Seeds of "attention_layers": decode and prefill, grouped heads, long
    contexts split into key chunks, every mask feature, element types, dense
    batches with valid lengths, biases and visibilities."""
    causal, left, right, cap, alibi, sinks, zero = 2, 4, 8, 16, 32, 64, 128
    decode = lambda m: (5, m)  # one query
    return [
        # Grouped decode, Hq 4 over 2, short contexts, one empty.
        layer_seed(causal | sinks, 4, 1, [decode(40), decode(100), decode(0)],
                   dk=31, dv=15, adjustments=16, dense=1 + 2 * 1 + 8 * 2,
                   additive=1 + 2 * 16, multi_head=1 + 2 * 3 + 16 * 2 + 128),
        # Long contexts (8192 and 10192 keys), float, int8, bf16/f16.
        layer_seed(causal | cap | alibi, 2, 0, [decode(248), decode(250)],
                   dk=7, dv=3, adjustments=2),
        layer_seed(causal | sinks, 2, 0, [decode(249), decode(30)], dk=7,
                   dv=3, elements=3 + 4 * 3, threads=2),
        layer_seed(alibi, 1, 0, [decode(248)], dk=15, dv=7,
                   elements=1 + 4 * 2, adjustments=4),
        # Prefill, windows on both sides, bf16 keys and f16 values.
        layer_seed(causal | left | right | alibi | sinks, 2, 1,
                   [(140, 60), (150, 90)], dk=15, dv=9, sides=3 + 8 * 5,
                   elements=1 + 4 * 2, causal=-2, adjustments=37,
                   dense=1 + 2 * 2 + 8 * 3 + 32, additive=1 + 2 * 7,
                   multi_head=1 + 2 * 7 + 16 * 5),
        # Double, every mask feature, empty rows zero.
        layer_seed(1 | causal | left | right | cap | alibi | sinks | zero, 3,
                   1, [(135, 50), (5, 7), (100, 0)], dk=9, dv=4, sides=2 + 8,
                   adjustments=0x5B, dense=1 + 2 * 3 + 8 * 1 + 32,
                   additive=1, multi_head=1 + 2 * 1 + 16 * 3 + 128),
        # Blocks of one row, no value columns, non-finite values.
        layer_seed(causal, 2, 1, [(140, 40), (5, 17)], dk=4, dv=223, block=1,
                   values=128 + 4),
        # int8 keys, float values, two threads, a forced small-block tuning.
        layer_seed(causal | left, 4, 2, [decode(90), (160, 100), decode(3)],
                   dk=23, dv=11, elements=3, threads=4 * 21 + 2, sides=6),
        # f16, Hq 6 over 3, five sequences (no queries, no keys, decode).
        layer_seed(cap | sinks, 6, 2,
                   [(100, 30), decode(0), (133, 70), decode(111), (140, 5)],
                   dk=5, dv=5, elements=2 + 4 * 2, adjustments=0x27, block=7),
        # A scale of −1, empty rows zero, queries before every key.
        layer_seed(causal | zero, 2, 0, [(145, 20), decode(9)], dk=10, dv=6,
                   scale=3, causal=-7, dense=1 + 2 * 1,
                   additive=1 + 2 * 39),
        # Whole vectors: dk = dv = 64, multi-query decode.
        layer_seed(causal | sinks | alibi, 4, 0, [decode(30), (100, 64)],
                   dk=227, dv=227, elements=1 + 4 * 1, adjustments=0x31),
    ]


def cv_seed(flags, n, d, dy, kernel, folds=2, count=1, h=24, ratio=8,
            threads=1, data=0x2B, targets=4, seed=(5, 6, 7, 8), scales=()):
    """A "cross_validate" input: n points (2..97, or with flag 128 2 + 4·k),
    the kernel's index among those of distances (gaussian, boxcar,
    triangular, epanechnikov, biweight, triweight, tricube, cosine)."""
    n_byte = (n - 2) // 4 if flags & 128 else n - 2
    return bytes([CROSS_VALIDATE, flags, n_byte, d, dy - 1, kernel, folds - 2,
                  count - 1, h, ratio, threads - 1, data, targets] +
                 list(seed) + list(scales))


def cv_seeds():
    """Seeds of "cross_validate": the Gaussian's powers path over every
    chunk width and past one key block, its one-exp path (uneven, equal and
    forbidden powers), every compact kernel, folds, scales, ties on a grid,
    an outlier, no coordinates."""
    double, kfold, scaled, uneven, no_powers, grid, outlier, large = (
        1, 2, 4, 8, 16, 32, 64, 128)
    return [
        # Powers, 33 bandwidths (chunks 2, 2, 4, 8, 8, 8, 1), leave-one-out.
        cv_seed(0, 44, 2, 1, 0, count=33, h=16, ratio=40),
        # Powers in double, 5 folds, scales, an outlier, ties on a grid.
        cv_seed(double | kfold | scaled | grid | outlier, 60, 3, 2, 0,
                folds=5, count=17, h=30, ratio=20, threads=2,
                scales=(4, 6, 4 + 128)),
        # Past one key block (512 points): powers with one and three
        # outputs, a compact kernel.
        cv_seed(large, 602, 1, 1, 0, count=2, h=8, threads=2, data=0x40),
        cv_seed(large | double | kfold, 562, 2, 3, 0, folds=3, count=3,
                h=40, threads=3),
        cv_seed(large | grid, 542, 1, 2, 3, count=2, h=20, data=0x31),
        # One exp per bandwidth: uneven, equal bandwidths, forbidden powers.
        cv_seed(uneven | outlier, 70, 4, 1, 0, count=12, h=12, ratio=60),
        cv_seed(double, 50, 2, 2, 0, count=6, h=20, ratio=250),
        cv_seed(no_powers | kfold, 64, 1, 1, 0, folds=7, count=9, h=24),
        # The compact kernels: ties on a grid (the boxcar's step), uneven
        # grids, folds, scales of 1.3·2^k, outliers.
        cv_seed(grid, 80, 1, 1, 1, count=5, h=28, ratio=10),
        cv_seed(uneven | kfold, 75, 2, 1, 2, folds=4, count=8, h=36),
        cv_seed(double | scaled | outlier, 66, 2, 3, 3, count=4, h=44,
                scales=(128 + 3, 5)),
        cv_seed(grid | kfold, 55, 3, 1, 4, folds=10, count=3, h=50,
                threads=2),
        cv_seed(double | uneven, 44, 1, 2, 5, count=7, h=26, ratio=30),
        cv_seed(outlier, 97, 5, 1, 6, count=4, h=33, threads=3),
        cv_seed(kfold | scaled, 40, 2, 1, 7, folds=2, count=5, h=41,
                scales=(2, 128 + 7)),
        # No coordinates: every pair at distance 0.
        cv_seed(0, 20, 0, 2, 0, count=3, h=18),
        cv_seed(kfold, 9, 0, 1, 2, folds=3, count=2),
    ]


def regressions():
    """Inputs that reproduce defects fixed while this fuzz target was written
    (each failed before its fix; see the comments)."""
    one, half, nan, inf, ninf = 141, 133, 250, 251, 252
    head = lambda api, flags, n, m, d, dv, distance, kernel, h, scale, norm: [
        api, flags, n, m, d, dv, 0, 1, distance, kernel, h, scale, norm, 0, 0, 0, 0, 0]
    q = [8] + [one, half] * 30                      # 3 × 20
    k = [8] + [half] * 40 + [half] * 19 + [nan] + [one] * 20   # key 2 has a NaN
    return {
        # Gram form of (squared) Euclidean distances (d ≥ 16) turned a NaN
        # coordinate into a distance of 0 on x86 (Max drops NaN).
        "regression-gram-nan-sqeuclidean": head(0, 2, 3, 4, 20, 1, 0, 0, 0, 0, 0) + q + k,
        "regression-gram-nan-euclidean": head(0, 2, 3, 4, 20, 1, 1, 0, 0, 0, 0) + q + k,
        "regression-gram-nan-pipeline": head(4, 2, 3, 4, 20, 2, 0, 0, 3, 0, 1) + q + k + [8] + [one] * 8,
        # `none` kept the other weights of a row with a NaN.
        "regression-none-nan-row": head(2, 2, 2, 5, 0, 0, 0, 0, 0, 0, 0) + [8, one, nan, half, one, one] + [one] * 5,
        # `sum` left valid-length-hidden weights of a NaN row at 0.
        "regression-sum-nan-hidden": head(2, 2 | 4, 2, 5, 0, 0, 0, 0, 0, 0, 1) + [8, one, nan, one, one, one] + [one] * 5 + [3, 5],
        # EMU128 (clang builds): a row of −inf wrote one past the row under
        # argmax and gave NaN instead of the empty-row policy under softmax.
        "regression-emu128-argmax-all-neginf": head(2, 2, 2, 5, 0, 0, 0, 0, 0, 0, 3) + [8] + [ninf] * 5 + [one, half, 150, one, one],
        "regression-emu128-softmax-all-neginf": head(2, 2 | 64, 2, 5, 0, 0, 0, 0, 0, 0, 2) + [8] + [ninf] * 5 + [one] * 5,
    }


def main():
    rng = random.Random(20261126)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(here, exist_ok=True)
    for name in os.listdir(here):
        if name.startswith("seed-"):
            os.remove(os.path.join(here, name))
    seeds = []
    # Every function, both types, a few shapes, every distance / kernel /
    # normalization somewhere, masks and specials on some.
    shapes = [(3, 5, 2, 4), (17, 33, 16, 9), (7, 70, 40, 70), (100, 13, 3, 25),
              (1, 1, 1, 1), (0, 4, 3, 2), (5, 0, 3, 2)]
    for api in range(len(APIS)):
        for k, (n, m, d, dv) in enumerate(shapes):
            for double in (False, True):
                flags = (2 if k % 3 == 0 else 0) | ((k % 4) << 2) | (
                    64 if k % 2 else 0) | (16 if k % 3 == 1 else 0) | (
                        32 if k % 5 == 2 else 0)
                seeds.append(seed(api, double, n, m, d, dv, distance=k % 5,
                                  kernel=(k + api) % 6, bandwidth=(k + 3) % 8,
                                  scale=k % 8, normalization=(k + double) % 4,
                                  flags=flags, padding=k % 4,
                                  offset=(k + 1) % 4, threads=k % 4,
                                  causal=k - 3, extras=(k * 7 + api) % 32,
                                  sides=k * 9 + 2, adjustments=k * 37 + api,
                                  rng=rng))
    # attention_pool over keys and values of every element type pair (keys
    # b % 4, values b / 4 % 4), float, on each fused path's shapes.
    narrow_shapes = [(20, 60, 16, 7), (2, 300, 64, 64), (30, 50, 3, 2),
                     (9, 40, 1, 1)]
    for k, (n, m, d, dv) in enumerate(narrow_shapes):
        for elements in (1, 2, 3, 4 * 3 + 1, 4 * 1 + 2, 4 * 2):
            seeds.append(seed(ATTENTION_POOL, False, n, m, d, dv, distance=3 if k < 2 else 0,
                              kernel=k % 2 * 5, bandwidth=k + 2, scale=k % 3,
                              normalization=2 if k < 2 else 1,
                              flags=(8 if k == 0 else 0) | (4 if k == 2 else 0),
                              padding=k % 4, offset=(k + 2) % 4, threads=2,
                              causal=k, extras=(k * 5) % 32, sides=k * 9 + 3,
                              adjustments=k * 21, elements=elements, rng=rng))
    seeds += layer_seeds()
    # bf16 queries beside bf16 keys (bit 16 of the element byte): the bf16
    # dot-product tile where the CPU has one, checked against the reference.
    bf16_rng = random.Random(20261128)
    for k, (n, m, d, dv) in enumerate([(40, 300, 64, 16), (13, 70, 13, 5),
                                       (9, 33, 1, 3), (100, 20, 32, 32)]):
        seeds.append(seed(ATTENTION_POOL, False, n, m, d, dv, distance=3,
                          kernel=5, bandwidth=3, scale=k % 3,
                          normalization=2 if k != 3 else 1,
                          flags=8 if k % 2 == 0 else 0, padding=k % 4,
                          offset=(k + 1) % 4, threads=2, causal=k,
                          extras=(k * 11) % 32, sides=k * 9 + 1,
                          adjustments=k * 13, elements=1 + 16 + 4 * (k % 2),
                          rng=bf16_rng))
    seeds += cv_seeds()
    for index, data in enumerate(seeds):
        with open(os.path.join(here, "seed-%03d" % index), "wb") as out:
            out.write(data)
    for name, data in regressions().items():
        with open(os.path.join(here, name), "wb") as out:
            out.write(bytes(data))
    print("wrote %d seeds and %d regression inputs to %s" %
          (len(seeds), len(regressions()), here))


if __name__ == "__main__":
    main()
