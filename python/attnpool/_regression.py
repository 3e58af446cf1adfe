"""Nadaraya–Watson regression: the scikit-learn-style estimator, the
rules of thumb for its bandwidth, and cross-validation of a bandwidth
grid."""

from __future__ import annotations

import numbers
from typing import Optional, Union

import numpy as np

from . import _core
from ._checks import threads_of

try:  # scikit-learn's bases when it is installed: clone, pipelines, tags
    from sklearn.base import BaseEstimator, RegressorMixin
except ImportError:  # the same contract, without scikit-learn
    import inspect

    class BaseEstimator:
        @classmethod
        def _get_param_names(cls):
            signature = inspect.signature(cls.__init__)
            return sorted(p for p in signature.parameters if p != "self")

        def get_params(self, deep=True):
            return {name: getattr(self, name) for name in self._get_param_names()}

        def set_params(self, **params):
            for name, value in params.items():
                if name not in self._get_param_names():
                    raise ValueError(f"Invalid parameter {name!r} for estimator {self!r}")
                setattr(self, name, value)
            return self

        def __repr__(self):
            args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
            return f"{type(self).__name__}({args})"

    class RegressorMixin:
        def score(self, X, y, sample_weight=None):
            """R² of the predictions at X against y."""
            y = np.asarray(y, dtype=np.float64)
            residual = y - self.predict(X)
            weights = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight)
            weights = weights.reshape((-1,) + (1,) * (y.ndim - 1))
            total = y - np.average(y, axis=0, weights=weights[:, 0] if y.ndim > 1 else weights)
            return 1 - (weights * residual ** 2).sum() / (weights * total ** 2).sum()

try:
    from sklearn.exceptions import NotFittedError
except ImportError:
    class NotFittedError(ValueError, AttributeError):
        """predict before fit."""


def _check_array(name: str, array, *, ndim: int, dtype=None) -> np.ndarray:
    """`array` as a finite float32/float64 array of `ndim` dimensions (y: 1 or
    2), with scikit-learn's messages."""
    if hasattr(array, "tocsr") or type(array).__module__.startswith("scipy.sparse"):
        raise TypeError(f"{name}: sparse data is not supported; pass a dense array")
    values = np.asarray(array)
    if values.dtype.kind == "c":
        raise ValueError(f"{name}: Complex data not supported")
    if dtype is not None:
        values = values.astype(dtype, copy=False)
    elif values.dtype not in (np.float32, np.float64):
        values = values.astype(np.float64)
    if ndim == 2 and values.ndim != 2:
        raise ValueError(
            f"{name}: Expected 2D array, got {values.ndim}D array instead. Reshape "
            "your data with array.reshape(-1, 1) for a single feature")
    if values.ndim == 0:
        raise ValueError(f"{name}: Expected array-like (array or non-string "
                         "sequence), got a scalar")
    if values.shape[0] == 0:
        raise ValueError(f"{name}: Found array with 0 sample(s) (shape={values.shape}) "
                         "while a minimum of 1 is required.")
    if values.ndim == 2 and values.shape[1] == 0:
        raise ValueError(f"{name}: Found array with 0 feature(s) (shape={values.shape}) "
                         "while a minimum of 1 is required.")
    if not np.isfinite(values).all():
        raise ValueError(f"{name}: Input {name} contains NaN or infinity")
    return values


BandwidthSpec = Union[str, float, np.ndarray]


class NadarayaWatson(RegressorMixin, BaseEstimator):
    """Nadaraya–Watson kernel regression: ŷ(x) = Σ_j K(‖x − x_j‖/h) y_j /
    Σ_j K(‖x − x_j‖/h), on attnpool's fused kernel.

    kernel: one of the kernels of distances (gaussian, boxcar, triangular,
        epanechnikov, biweight, triweight, tricube, cosine).
    bandwidth: a float (one h for every feature), an array of one h per
        feature, "silverman" or "scott" (rules of thumb per feature), or
        "cv_ls" (least-squares cross-validation: leave-one-out, or
        ``folds``-fold, over a grid along the Silverman bandwidths'
        direction, refined once around the best).
    folds: 0 for leave-one-out, k ≥ 2 for k-fold (point i in fold i mod k).
    empty_rows: "nan" or "zero", the prediction where every weight is 0
        (a compact kernel with no training point in reach).
    threads: OpenMP threads per call (None: the OpenMP default).

    Fitted attributes: ``bandwidth_`` (one per feature), ``n_features_in_``,
    ``cv_scores_`` and ``cv_grid_`` with "cv_ls".
    """

    def __init__(self, kernel: str = "gaussian", bandwidth: BandwidthSpec = "cv_ls",
                 folds: int = 0, empty_rows: str = "nan",
                 threads: Optional[int] = None):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.folds = folds
        self.empty_rows = empty_rows
        self.threads = threads

    def fit(self, X, y) -> "NadarayaWatson":
        """Keeps the training points X (n, d) and targets y (n,) or (n,
        outputs), and chooses the bandwidth; returns self."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, "
                             "but the target y is None")
        X = _check_array("X", X, ndim=2)
        y = _check_array("y", y, ndim=1, dtype=X.dtype)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y: has {y.shape[0]} samples, X has {X.shape[0]}")
        if y.ndim > 2:
            raise ValueError(f"y: has {y.ndim} dimensions, expected 1 or 2")
        self.n_features_in_ = X.shape[1]
        self._y_1d = y.ndim == 1
        self.X_ = np.ascontiguousarray(X)
        self.y_ = np.ascontiguousarray(y.reshape(len(y), -1))
        self.bandwidth_ = self._choose_bandwidth()
        return self

    def _choose_bandwidth(self) -> np.ndarray:
        spec, d = self.bandwidth, self.n_features_in_
        if isinstance(spec, str):
            if spec in ("silverman", "scott"):
                return self._rule(spec)
            if spec == "cv_ls":
                return self._cross_validated()
            raise ValueError(f"bandwidth: unknown rule {spec!r} "
                             "(silverman, scott, cv_ls, a float or an array)")
        h = np.asarray(spec, dtype=np.float64).reshape(-1)
        if h.size == 1:
            h = np.repeat(h, d)
        if h.size != d:
            raise ValueError(f"bandwidth: has {h.size} entries, X has {d} features")
        return h

    def _rule(self, rule: str) -> np.ndarray:
        if self.X_.shape[0] < 2:
            return np.ones(self.n_features_in_)  # no spread to measure
        # (A range, not a standard deviation: no square to underflow for
        # data near 1e-30 in float32.) A constant feature's rule is
        # undefined: h = 1.
        varying = np.ptp(self.X_, axis=0) > 0
        h = np.ones(self.n_features_in_)
        if varying.any():
            h[varying] = _core.rule_of_thumb(rule, np.ascontiguousarray(self.X_[:, varying]))
        return h

    def _cross_validated(self) -> np.ndarray:
        """Least-squares cross-validation of multipliers m of Silverman's
        bandwidths (h = m·h_silverman per feature). The search runs in
        float32 on centred, scaled data: the scores do not change with a
        shift of X or y, and float32's accuracy (2e-5 relative,
        cross_validate's contract) is far finer than the grid's steps.
        Coarse: 16 log-spaced multipliers in [1/32, 8] on every ⌊n/250⌋-th
        point (250 to 499 points; all of them for n < 500), moved to all n
        points by the optimal rate n^(-1/(d+4)). Fine: 24 multipliers in
        [m/1.6, 1.6·m], evenly spaced in 1/h² (one pass serves them all),
        recentred while the best is at an end (twice at most)."""
        scales = self._rule("silverman")
        n, d = self.X_.shape
        if n < 2:
            return scales
        x = ((self.X_ - self.X_.mean(axis=0)) / scales).astype(np.float32)
        y = (self.y_ - self.y_.mean(axis=0)).astype(np.float32)
        stride = max(1, n // 250)
        if n // stride < max(2, self.folds):
            stride = 1
        coarse = self._cv(x[::stride], y[::stride], np.geomspace(1 / 32, 8, 16))
        multiplier = 1.0 if coarse["best"] is None else coarse["best_bandwidth"]
        multiplier *= (len(x[::stride]) / n) ** (1 / (d + 4))
        for _ in range(3):
            grid = _core.gaussian_bandwidth_grid(multiplier / 1.6, multiplier * 1.6, 24)
            fine = self._cv(x, y, grid)
            if fine["best"] is None:
                break
            multiplier = fine["best_bandwidth"]
            if 0 < fine["best"] < len(grid) - 1:
                break
        self.cv_grid_ = np.asarray(fine["bandwidths"])
        self.cv_scores_ = np.asarray(fine["scores"])
        return multiplier * scales

    def _cv(self, x, y, grid) -> dict:
        return _core.cross_validate(self.kernel, x, y, [float(h) for h in grid],
                                    int(self.folds), [], threads_of(self.threads))

    def predict(self, X, return_weights: bool = False):
        """Predictions at X (n, d): (n,) when fitted on a 1-D y, else (n,
        outputs). With ``return_weights``, also the (n, n_train) weights."""
        if not hasattr(self, "bandwidth_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' first.")
        X = _check_array("X", X, ndim=2, dtype=self.X_.dtype)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} "
                             f"is expecting {self.n_features_in_} features as input")
        out = np.empty((X.shape[0], self.y_.shape[1]), dtype=self.X_.dtype)
        weights = (np.empty((X.shape[0], self.X_.shape[0]), dtype=self.X_.dtype)
                   if return_weights else None)
        _core.nadaraya_watson_predict(self.kernel, list(self.bandwidth_), self.X_,
                                      self.y_, np.ascontiguousarray(X), out, weights,
                                      self.empty_rows, threads_of(self.threads))
        prediction = out[:, 0] if self._y_1d else out
        return (prediction, weights) if return_weights else prediction

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


def cross_validate(X, y, bandwidths, *, kernel: str = "gaussian", folds: int = 0,
                   scales=None, threads: Optional[int] = None) -> dict:
    """Cross-validation scores of Nadaraya–Watson over a bandwidth grid, in
    one pass: leave-one-out (folds=0) or k-fold (point i in fold i mod k).

    Returns a dict: ``bandwidths`` (the grid), ``scores`` (mean held-out
    squared error per bandwidth), ``unpredictable`` (points with no weight,
    per bandwidth), ``best`` (index of the least score, None if none) and
    ``best_bandwidth``. ``scales``: per-feature factors (grid value h means
    bandwidths h·scales).
    """
    X = _check_array("X", X, ndim=2)
    y = _check_array("y", y, ndim=1, dtype=X.dtype)
    y = np.ascontiguousarray(y.reshape(len(y), -1))
    grid = [float(h) for h in np.asarray(bandwidths, dtype=np.float64).reshape(-1)]
    result = _core.cross_validate(kernel, np.ascontiguousarray(X), y, grid, int(folds),
                                  [] if scales is None else [float(s) for s in scales],
                                  threads_of(threads))
    result["scores"] = np.asarray(result["scores"])
    result["bandwidths"] = np.asarray(result["bandwidths"])
    result["unpredictable"] = np.asarray(result["unpredictable"])
    return result


def bandwidth_rule(X, rule: str = "silverman") -> np.ndarray:
    """Rule-of-thumb bandwidths, one per feature: "silverman" or "scott"."""
    return np.asarray(_core.rule_of_thumb(rule, _check_array("X", X, ndim=2)))
