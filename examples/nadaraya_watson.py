"""Attention pooling by similarity, the seed's figures with attnpool: the
four kernels and four Gaussian widths, each with its Nadaraya–Watson fit and
its attention weights, and the width cross-validation picks.
Usage: python nadaraya_watson.py [OUT_DIR]"""
import sys

import matplotlib
import numpy as np

import attnpool

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
rng = np.random.default_rng(0)
x_train = np.sort(rng.uniform(0, 5, 40))[:, None]
y_train = 2 * np.sin(x_train) + x_train + rng.normal(0, 0.5, (40, 1))
x_val = np.arange(0, 5, 0.1)[:, None]


def show(fits, name):  # a column per fit: the curve over the data, the weights
    fig, axes = plt.subplots(2, len(fits), figsize=(3 * len(fits), 5.5), squeeze=False)
    for (title, (y_hat, weights)), (top, bottom) in zip(fits.items(), axes.T):
        top.plot(x_val, 2 * np.sin(x_val) + x_val, "k--", x_val, y_hat, "C0")
        top.plot(x_train, y_train, "o", alpha=0.4)
        top.set_title(title)
        bottom.imshow(weights, cmap="Reds")
    fig.savefig(f"{out_dir}/{name}.png")


pool = lambda **kw: attnpool.attention_pool(x_val, x_train, y_train, return_weights=True, **kw)
show({k: pool(kernel=k) for k in ("gaussian", "boxcar", "constant", "triangular")}, "kernels")
show({f"h = {h}": pool(bandwidth=h) for h in (0.1, 0.2, 0.5, 1.0)}, "widths")
model = attnpool.NadarayaWatson(bandwidth="cv_ls").fit(x_train, y_train)
show({f"cv_ls: h = {model.bandwidth_[0]:.2f}": model.predict(x_val, return_weights=True)},
     "cross_validated")
print("figures in", out_dir)
