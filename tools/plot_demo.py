#!/usr/bin/env python3
"""Draws the figures of attnpool-demo from the numbers it wrote.

usage: plot_demo.py DIR

DIR holds summary.json and the .npy files of tools/attnpool_demo.cc; the
figures go to DIR as PNG and SVG:
  kernels            the kernel shapes on [-2.5, 2.5]
  <case>_fits_kernels, <case>_fits_widths
                     fitted curve, truth and training points, one panel each
  <case>_weights_kernels, <case>_weights_widths
                     attention-weight heatmaps (queries x training points)
  <case>_loo         leave-one-out error against the width, the chosen width
                     and its fit
Needs python3-numpy and python3-matplotlib (Debian).
"""
import json
import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

UMASK = os.umask(0)
os.umask(UMASK)

TITLES = {"gaussian": "Gaussian", "boxcar": "Boxcar", "constant": "Constant",
          "triangular": "Triangular"}


def edges(centers):
    """Cell edges around sorted centers: midpoints, and half a gap outside."""
    centers = np.asarray(centers, dtype=np.float64)
    if len(centers) == 1:
        return np.array([centers[0] - 0.5, centers[0] + 0.5])
    middle = (centers[1:] + centers[:-1]) / 2
    return np.concatenate(([2 * centers[0] - middle[0]], middle,
                           [2 * centers[-1] - middle[-1]]))


def figure(panels, height):
    return plt.subplots(1, panels, figsize=(3.2 * panels, height),
                        layout="constrained")


# Figures drawn into temporary files, renamed into place together at the end
# (commit), so that a failure leaves the figures of before.
PENDING = []


def save(fig, directory, name):
    for extension in ("png", "svg"):
        path = os.path.join(directory, f"{name}.{extension}")
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
        with os.fdopen(handle, "wb") as f:
            fig.savefig(f, format=extension, dpi=90, bbox_inches="tight")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, 0o666 & ~UMASK)
        PENDING.append((temporary, path))
    plt.close(fig)
    return name


def commit():
    for temporary, path in PENDING:
        os.replace(temporary, path)


def discard():
    for temporary, _ in PENDING:
        os.unlink(temporary)


def plot_kernels(directory, kernels):
    grid = np.load(os.path.join(directory, "kernel_grid.npy"))
    shapes = np.load(os.path.join(directory, "kernel_shapes.npy"))
    fig, axes = figure(len(kernels), 2.6)
    for ax, kernel, shape in zip(axes, kernels, shapes):
        ax.plot(grid, shape, color="C0")
        ax.set_title(TITLES.get(kernel, kernel))
        ax.set_xlabel("query − key (h = 1)")
        ax.set_ylim(-0.05, 1.1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("weight")
    return save(fig, directory, "kernels")


def plot_fits(directory, case, prefix, fits, labels):
    x_train = np.load(os.path.join(directory, prefix + "x_train.npy"))
    y_train = np.load(os.path.join(directory, prefix + "y_train.npy"))
    x_val = np.load(os.path.join(directory, prefix + "x_val.npy"))
    y_truth = np.load(os.path.join(directory, prefix + "y_truth.npy"))
    fig, axes = figure(len(fits), 3.0)
    dense = len(x_train) > 200
    for ax, y_hat, label in zip(axes, fits, labels):
        ax.plot(x_train, y_train, "o", color="C2", alpha=0.25 if dense else 0.6,
                markersize=1.5 if dense else 3, label="training data",
                rasterized=dense)
        ax.plot(x_val, y_truth, color="C0", label="truth")
        ax.plot(x_val, y_hat, "--", color="C1", label="attention pooling")
        ax.set_title(label)
        ax.set_xlabel("x")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("y")
    axes[0].legend(loc="upper left", fontsize=7)
    return fig


def plot_weights(directory, prefix, weights, labels):
    x_train = np.load(os.path.join(directory, prefix + "x_train.npy"))
    x_val = np.load(os.path.join(directory, prefix + "x_val.npy"))
    fig, axes = figure(len(weights), 3.2)
    for ax, matrix, label in zip(axes, weights, labels):
        image = ax.pcolormesh(edges(x_train), edges(x_val), matrix, cmap="Reds",
                              shading="flat", rasterized=True)
        ax.invert_yaxis()
        ax.set_title(label)
        ax.set_xlabel("training input x (key)")
        fig.colorbar(image, ax=ax, location="bottom", shrink=0.8, aspect=30)
    axes[0].set_ylabel("validation input x (query)")
    return fig


def plot_loo(directory, prefix, case):
    widths = np.load(os.path.join(directory, prefix + "loo_widths.npy"))
    mse = np.load(os.path.join(directory, prefix + "loo_mse.npy"))
    rmse = np.load(os.path.join(directory, prefix + "loo_val_rmse.npy"))
    x_train = np.load(os.path.join(directory, prefix + "x_train.npy"))
    y_train = np.load(os.path.join(directory, prefix + "y_train.npy"))
    x_val = np.load(os.path.join(directory, prefix + "x_val.npy"))
    y_truth = np.load(os.path.join(directory, prefix + "y_truth.npy"))
    fit = np.load(os.path.join(directory, prefix + "fit_loo.npy"))
    chosen = case["loo"]["bandwidth"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 3.2), layout="constrained")
    left.semilogx(widths, mse, color="C3", label="leave-one-out MSE")
    left.semilogx(widths, rmse ** 2, color="C0", alpha=0.7,
                  label="MSE against the truth on the validation grid")
    left.axvline(chosen, color="k", linestyle=":",
                 label=f"chosen h = {chosen:.3g}")
    left.set_xlabel("Gaussian width h")
    left.set_ylabel("mean squared error")
    left.legend(fontsize=7)
    left.grid(alpha=0.3, which="both")
    dense = len(x_train) > 200
    right.plot(x_train, y_train, "o", color="C2", alpha=0.25 if dense else 0.6,
               markersize=1.5 if dense else 3, label="training data",
               rasterized=dense)
    right.plot(x_val, y_truth, color="C0", label="truth")
    right.plot(x_val, fit, "--", color="C1", label=f"Gaussian, h = {chosen:.3g}")
    right.set_xlabel("x")
    right.legend(loc="upper left", fontsize=7)
    right.grid(alpha=0.3)
    fig.suptitle(f"{case['train']} training points: width by leave-one-out "
                 "cross-validation", fontsize=10)
    return fig


def main(directory):
    with open(os.path.join(directory, "summary.json")) as f:
        summary = json.load(f)
    kernels = summary["kernels"]
    written = [plot_kernels(directory, kernels)]
    for case in summary["cases"]:
        name = case["name"]
        prefix = name + "_"
        kernel_labels = [f"{TITLES.get(k['kernel'], k['kernel'])}, RMSE {k['rmse']:.3f}"
                         for k in case["kernels"]]
        width_labels = [f"Gaussian h = {w['bandwidth']:g}, RMSE {w['rmse']:.3f}"
                        for w in case["widths"]]
        suffix = f" ({case['train']} training points)"
        for group, labels in (("kernels", kernel_labels), ("widths", width_labels)):
            fits = np.load(os.path.join(directory, f"{prefix}fit_{group}.npy"))
            fig = plot_fits(directory, case, prefix, fits, labels)
            fig.suptitle(f"Attention pooling by similarity: {group}{suffix}",
                         fontsize=10)
            written.append(save(fig, directory, f"{name}_fits_{group}"))
            if case["weights"]:
                weights = np.load(os.path.join(directory, f"{prefix}weights_{group}.npy"))
                fig = plot_weights(directory, prefix, weights,
                                   [label.split(",")[0] for label in labels])
                fig.suptitle(f"Attention weights: {group}{suffix}", fontsize=10)
                written.append(save(fig, directory, f"{name}_weights_{group}"))
        written.append(save(plot_loo(directory, prefix, case), directory, f"{name}_loo"))
    commit()
    print(f"figures: {len(written)} x (PNG, SVG) in {directory}: " + ", ".join(written))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        main(sys.argv[1])
    except BaseException:
        discard()
        raise
