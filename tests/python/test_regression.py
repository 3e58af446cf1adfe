"""NadarayaWatson and cross_validate: against statsmodels' KernelReg at
fixed bandwidths, against a NumPy leave-one-out, and scikit-learn's
check_estimator."""
import pickle

import numpy as np
import pytest

import attnpool
import kernel_formulas
from conftest import close, rng_for


def data(n=300, d=1, seed=("data",)):
    rng = rng_for(*seed, n, d)
    x = rng.uniform(-2, 2, size=(n, d))
    y = np.sin(2 * x).sum(1) + 0.2 * rng.standard_normal(n)
    return x, y


def numpy_predict(kernel, h, x, y, queries):
    r = np.sqrt((((queries[:, None, :] - x[None, :, :]) / h) ** 2).sum(-1))
    w = kernel_formulas.weights(kernel, r)
    with np.errstate(invalid="ignore"):
        return (w @ y) / w.sum(1)


@pytest.mark.parametrize("kernel", kernel_formulas.DISTANCE_KERNELS)
def test_predict_matches_numpy(target, kernel):
    x, y = data(d=2)
    queries = np.linspace(-2, 2, 21)[:, None].repeat(2, axis=1)
    model = attnpool.NadarayaWatson(kernel, bandwidth=[0.4, 0.7]).fit(x, y)
    got, weights = model.predict(queries, return_weights=True)
    want = numpy_predict(kernel, np.array([0.4, 0.7]), x, y, queries)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    close(np.nan_to_num(got), np.nan_to_num(want), np.float64, scale=1e3)
    assert weights.shape == (21, 300)


@pytest.mark.parametrize("d", [1, 3])
def test_matches_statsmodels_kernelreg(d):
    kernel_regression = pytest.importorskip("statsmodels.nonparametric.kernel_regression")
    x, y = data(n=200, d=d, seed=("statsmodels",))
    h = np.full(d, 0.35)
    reference = kernel_regression.KernelReg(y, x, var_type="c" * d, reg_type="lc", bw=h)
    queries = x[:25] + 0.05
    want = reference.fit(queries)[0]
    got = attnpool.NadarayaWatson("gaussian", bandwidth=h).fit(x, y).predict(queries)
    close(got, want, np.float64, scale=1e3)


def test_cv_ls_matches_a_numpy_leave_one_out():
    # The search runs in float32 (scores within 2e-5 relative, the
    # cross_validate contract): held to 1e-4 here.
    x, y = data(n=1500)
    model = attnpool.NadarayaWatson(bandwidth="cv_ls").fit(x, y)
    scales = attnpool.bandwidth_rule(x)
    for h, score in zip(model.cv_grid_[::5], model.cv_scores_[::5]):
        r = np.abs(x - x.T) / (h * scales[0])
        w = np.exp(-r ** 2 / 2)
        np.fill_diagonal(w, 0)
        loo = (w @ y) / w.sum(1)
        close(score, np.mean((loo - y) ** 2), np.float64, scale=1e6)
    best = np.argmin(model.cv_scores_)
    close(model.bandwidth_, model.cv_grid_[best] * scales, np.float64)


def test_cross_validate_k_fold_and_rules():
    x, y = data(n=120, d=2)
    result = attnpool.cross_validate(x, y, [0.2, 0.4, 0.8], folds=5)
    assert result["scores"].shape == (3,) and result["best"] in (0, 1, 2)
    silverman, scott = attnpool.bandwidth_rule(x), attnpool.bandwidth_rule(x, "scott")
    sigma = x.std(axis=0, ddof=1)
    assert silverman.shape == (2,) and np.all(silverman > 0) and np.all(scott > 0)
    close(scott, 1.059 * sigma * 120 ** (-1 / 6), np.float64, scale=1e3)


def test_estimator_contract():
    x, y = data(n=80)
    model = attnpool.NadarayaWatson(kernel="epanechnikov", bandwidth="silverman")
    assert model.get_params()["kernel"] == "epanechnikov"
    model.set_params(bandwidth=0.5)
    fitted = model.fit(x, y)
    assert fitted is model and model.n_features_in_ == 1
    assert model.score(x, y) > 0.5
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(x), model.predict(x))
    two = model.fit(x, np.stack([y, -y], axis=1)).predict(x[:5])
    assert two.shape == (5, 2)
    with pytest.raises(ValueError, match="features"):
        model.predict(np.ones((3, 2)))
    with pytest.raises(ValueError, match="bandwidth"):
        attnpool.NadarayaWatson(bandwidth="wild").fit(x, y)


def test_scikit_learn_check_estimator():
    estimator_checks = pytest.importorskip("sklearn.utils.estimator_checks")
    results = estimator_checks.check_estimator(attnpool.NadarayaWatson(), on_fail=None)
    failed = [(r["check_name"], r["exception"]) for r in results if r["status"] == "failed"]
    assert not failed


@pytest.mark.parametrize("dtype,power", [(np.float32, p) for p in (-30, -20, 20, 30)]
                         + [(np.float64, p) for p in (-300, -200, 200, 300)])
def test_any_magnitude_fits_as_data_near_one(dtype, power):
    # Data scaled by 10^power: the rules, the cv_ls search and the
    # predictions are those of the same data near 1 (no square underflows
    # into a constant feature, h = 1 and the mean of every y).
    rng = np.random.default_rng(20261207)
    unit = rng.standard_normal((150, 2))
    y = (np.sin(unit[:, 0]) + 0.1 * rng.standard_normal(150)).astype(dtype)
    scaled = (unit * 10.0 ** power).astype(dtype)
    unit = unit.astype(dtype)
    tolerance = 1e-3 if dtype == np.float32 else 1e-9
    for bandwidth in ("silverman", "cv_ls"):
        want = attnpool.NadarayaWatson(bandwidth=bandwidth).fit(unit, y)
        got = attnpool.NadarayaWatson(bandwidth=bandwidth).fit(scaled, y)
        np.testing.assert_allclose(got.bandwidth_ / 10.0 ** power, want.bandwidth_,
                                   rtol=tolerance)
        np.testing.assert_allclose(got.predict(scaled), want.predict(unit),
                                   rtol=tolerance, atol=tolerance)
