#!/usr/bin/env python3
"""The Python package's speed against its goals, one core, in one run:
  call overhead   attention_pool on 1 × 1 × 1 (µs per call);
  large shapes    the package's rate against the library called through
                  its C API (libattnpool_c.so, ctypes: the C++ rate plus a
                  negligible call) on the same arrays;
  SDPA            4096² × 64 float32 against PyTorch's
                  scaled_dot_product_attention (when PyTorch is installed);
  NW cv_ls        NadarayaWatson(bandwidth="cv_ls").fit().predict() at
                  n = 2000 against statsmodels KernelReg(bw="cv_ls") (when
                  installed; minutes), and leave-one-out over 32 bandwidths
                  at n = 10⁵, 1-D.
Medians of repeated runs. usage: bench_python.py [--quick] [path/to/libattnpool_c.so]
(run in the venv of tools/test-python.sh; OMP_NUM_THREADS=1 is set here)."""
import os

os.environ["OMP_NUM_THREADS"] = "1"

import ctypes  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import attnpool  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
QUICK = "--quick" in sys.argv
rows = []


def median_seconds(call, repeats=5, number=1):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            call()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def report(name, seconds, baseline=None, baseline_seconds=None, goal=""):
    ratio = "" if baseline_seconds is None else f"{baseline_seconds / seconds:.3g}"
    rows.append((name, seconds, baseline or "-", baseline_seconds, ratio, goal))
    print(f"{name}: {seconds * 1e3:.4g} ms" +
          (f"; {baseline} {baseline_seconds * 1e3:.4g} ms, ratio {ratio}" if ratio else ""),
          flush=True)


def overhead():
    q = np.ones((1, 1), np.float32)
    seconds = median_seconds(lambda: attnpool.attention_pool(q, q, q, threads=1),
                             repeats=7, number=20000)
    report("attention_pool 1x1x1 call", seconds, goal="≤ 3 µs")


def large_shapes(library_path):
    import test_c_api
    lib = test_c_api.lib = test_c_api.load(library_path)
    rng = np.random.default_rng(1)
    n = 1024 if QUICK else 4096
    q = rng.standard_normal((n, 64), dtype=np.float32)
    k = rng.standard_normal((n, 64), dtype=np.float32)
    v = rng.standard_normal((n, 64), dtype=np.float32)
    out = np.empty_like(q)
    spec = lib.attnpool_pool_spec_init()
    spec.distance = test_c_api.DISTANCES["dot"]
    kernel = ctypes.c_int()
    lib.attnpool_kernel_from_name(b"exp", ctypes.byref(kernel))
    spec.kernel.kernel = kernel.value
    spec.normalization = test_c_api.NORMALIZATIONS["softmax"]
    views = (test_c_api.view(q), test_c_api.view(k), test_c_api.view(v),
             test_c_api.view(out, True))
    execution = test_c_api.Execution(1)

    def native():
        status = lib.attnpool_pool(test_c_api.FLOAT32, ctypes.byref(spec), *views, None,
                                   ctypes.byref(execution))
        assert status == test_c_api.OK

    def package():
        attnpool.attention_pool(q, k, v, distance="dot", kernel="exp",
                                normalize="softmax", out=out, threads=1)

    # Alternating, so that both see the same machine.
    python, c_api = [], []
    for _ in range(9):
        python.append(median_seconds(package, repeats=1))
        c_api.append(median_seconds(native, repeats=1))
    report(f"attention_pool dot/exp/softmax {n}x{n}x64 float32",
           statistics.median(python), "C API (C++ rate)", statistics.median(c_api),
           "≥ 0.97")


def sdpa_against_pytorch():
    """W2 (1 × 4096² × 64) and W4 (8 heads × 1024² × 64), float32, one thread:
    the two calls timed in turn, so that both see the same machine state."""
    try:
        import torch
    except ImportError:
        print("SDPA: PyTorch not installed, skipped")
        return
    torch.set_num_threads(1)
    rng = np.random.default_rng(2)
    shapes = [(1, 1024 if QUICK else 4096), (8, 256 if QUICK else 1024)]
    for heads, n in shapes:
        q, k, v = (rng.standard_normal((1, heads, n, 64), dtype=np.float32)
                   for _ in range(3))
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
        out = np.empty_like(q)

        def ours():
            attnpool.scaled_dot_product_attention(q, k, v, out=out, threads=1)

        def theirs():
            with torch.no_grad():
                torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)

        ours(), theirs()  # warm-up
        times = {ours: [], theirs: []}
        for _ in range(7):
            for call in (ours, theirs):
                times[call].append(median_seconds(call, repeats=1))
        report(f"SDPA {heads}x{n}x{n}x64 float32", statistics.median(times[ours]),
               f"PyTorch {torch.__version__}", statistics.median(times[theirs]),
               "≥ 1.2")


def nadaraya_watson():
    rng = np.random.default_rng(3)
    n = 500 if QUICK else 2000
    x = rng.uniform(0, 5, (n, 1))
    y = 2 * np.sin(x[:, 0]) + x[:, 0] + rng.normal(0, 0.5, n)
    queries = np.linspace(0, 5, 100)[:, None]
    ours = median_seconds(lambda: attnpool.NadarayaWatson(bandwidth="cv_ls", threads=1)
                          .fit(x, y).predict(queries))
    try:
        from statsmodels.nonparametric.kernel_regression import KernelReg
    except ImportError:
        report(f"NadarayaWatson cv_ls n={n}", ours)
        print("statsmodels not installed: no baseline")
    else:
        fitted = []
        theirs = median_seconds(lambda: fitted.append(
            KernelReg(y, x, "c", reg_type="lc", bw="cv_ls")), repeats=1)
        theirs += median_seconds(lambda: fitted[0].fit(queries), repeats=1)
        report(f"NadarayaWatson cv_ls n={n} fit+predict", ours,
               "statsmodels KernelReg cv_ls", theirs, "≥ 1000")
        # The same criterion at both choices, in float64: is ours as good?
        h_ours = attnpool.NadarayaWatson(bandwidth="cv_ls").fit(x, y).bandwidth_[0]
        h_theirs = float(fitted[0].bw[0])
        scores = attnpool.cross_validate(x, y, [h_ours, h_theirs])["scores"]
        print(f"  chosen h: attnpool {h_ours:.4g} (leave-one-out MSE {scores[0]:.6g}), "
              f"statsmodels {h_theirs:.4g} (MSE {scores[1]:.6g})")
    big = 10_000 if QUICK else 100_000
    x = rng.uniform(0, 5, (big, 1))
    y = 2 * np.sin(x[:, 0]) + x[:, 0] + rng.normal(0, 0.5, big)
    model = attnpool.NadarayaWatson(bandwidth="cv_ls", threads=1)
    seconds = median_seconds(lambda: model.fit(x, y), repeats=3)
    report(f"NadarayaWatson cv_ls fit, n={big} 1-D (16 bandwidths on a subsample, then "
           f"{len(model.cv_grid_)} on all)", seconds, goal="< 10 s")
    silverman = attnpool.bandwidth_rule(x)[0]
    grid = attnpool._core.gaussian_bandwidth_grid(silverman / 8, 2 * silverman, 32)
    seconds = median_seconds(lambda: attnpool.cross_validate(x, y, grid, threads=1),
                             repeats=3)
    report(f"cross_validate, leave-one-out, 32 bandwidths in [h/8, 2h] (h Silverman's), "
           f"n={big} 1-D float64", seconds, goal="< 10 s")


def main():
    arguments = [a for a in sys.argv[1:] if a != "--quick"]
    library = arguments[0] if arguments else os.path.join(HERE, "..", "build",
                                                           "libattnpool_c.so")
    print(f"attnpool {attnpool.__version__}, target {attnpool.active_target()}, "
          f"one thread" + (" (quick)" if QUICK else ""))
    overhead()
    if os.path.exists(library):
        large_shapes(library)
    else:
        print(f"{library} not found: build the C API (tools/test.sh) for the C++ rate")
    sdpa_against_pytorch()
    nadaraya_watson()
    print("\n| measure | attnpool | baseline | baseline time | speed ratio | goal |")
    print("|---|---|---|---|---|---|")
    for name, seconds, baseline, baseline_seconds, ratio, goal in rows:
        b = "-" if baseline_seconds is None else f"{baseline_seconds * 1e3:.4g} ms"
        print(f"| {name} | {seconds * 1e3:.4g} ms | {baseline} | {b} | {ratio or '-'} | {goal} |")


if __name__ == "__main__":
    main()
