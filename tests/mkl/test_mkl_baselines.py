"""MKL baselines (math.md §5.5): l1-MKL, lp-MKL (closed-form update) and the uniform sum."""

import warnings

import numpy as np
import pytest
from sklearn.svm import SVC

from kernfw import LpMKLClassifier
from kernfw.kernels import make_operator
from kernfw.solvers.mkl.baselines import lp_update, solve_l1_mkl, solve_lp_mkl, solve_uniform_mkl

SPECS = [("rbf", {"gamma": 0.5, "columns": [j]}) for j in range(5)] + [
    "linear",
    ("poly", {"degree": 2}),
]


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1, -1)
    return X, y


@pytest.fixture(scope="module")
def problem():
    X, y = _data()
    K = make_operator(X, SPECS, normalization="trace")
    return K, y, [op.dense() for op in K.operators]


def _reference(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Clarabel "inaccurate"
        return fn(*args, **kwargs)


def _check(res, J_star):
    """J* ∈ [dual, primal + inner gap] and primal − J* ≤ gap."""
    scale = abs(J_star)
    assert res.dual <= J_star + 1e-7 * scale
    assert res.primal >= J_star - res.history["inner_gap"][-1] - 1e-7 * scale
    assert res.primal - J_star <= res.gap + 1e-7 * scale


@pytest.mark.cvxpy
@pytest.mark.parametrize("svm", ["c", "l2"])
@pytest.mark.parametrize("p", [1.0, 4 / 3, 2.0, 4.0])
def test_lp_mkl_matches_cvxpy(problem, svm, p):
    from kernfw.reference import lp_mkl_reference

    K, y, grams = problem
    res = solve_lp_mkl(K, y, p, svm=svm, tol=1e-5, max_iter=300)
    ref = _reference(lp_mkl_reference, grams, y, p, svm=svm)
    assert res.converged
    _check(res, ref["value"])
    assert abs(res.primal - ref["value"]) <= 2e-5 * abs(ref["value"])
    assert np.linalg.norm(res["gamma"], p) == pytest.approx(1.0)


@pytest.mark.cvxpy
@pytest.mark.parametrize("svm", ["c", "nu", "l2"])
def test_l1_mkl_is_cskl_with_t_one_and_matches_cvxpy(problem, svm):
    from kernfw.reference import cskl_reference, l1_mkl_reference

    K, y, grams = problem
    res = solve_l1_mkl(K, y, svm=svm, nu=0.3, tol=1e-5, max_iter=200)
    ref = _reference(l1_mkl_reference, grams, y, svm=svm, nu=0.3)
    ref_t1 = _reference(cskl_reference, grams, y, 1.0, svm=svm, nu=0.3)
    assert ref["value"] == pytest.approx(ref_t1["value"], rel=1e-6)
    assert res.converged and res["gamma"].sum() == pytest.approx(1.0)
    _check(res, ref["value"])


def test_uniform_is_one_svm_on_the_sum(problem):
    K, y, grams = problem
    res = solve_uniform_mkl(K, y, svm="c", inner_tol=1e-10)
    inner = res["svm"].inner_gap  # G = 0 up to rounding: the gap is the inner solve's
    assert res.n_iter == 0 and res.converged
    assert abs(res.gap - inner) <= 1e-12 * abs(res.primal)
    np.testing.assert_array_equal(res["gamma"], 1.0)
    model = SVC(C=1.0, kernel="precomputed", tol=1e-10).fit(sum(grams), y)
    v = model.dual_coef_[0]
    Ks = sum(grams)[np.ix_(model.support_, model.support_)]
    assert res.primal - inner == pytest.approx(np.abs(v).sum() - 0.5 * v @ Ks @ v, rel=1e-8)


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0, 3.0])
def test_lp_update_minimizes_the_weighted_block_norms(p):
    """θ ← argmin_{θ ≥ 0, ‖θ‖_p ≤ 1} Σ_j ‖w_j‖²/θ_j with ‖w_j‖² = θ_j² d_j."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(1)
    theta, d = rng.uniform(0.1, 1, 5), rng.uniform(0.1, 3, 5)
    theta /= np.linalg.norm(theta, p)
    w2 = theta**2 * d
    new = lp_update(theta, d, p)
    assert np.linalg.norm(new, p) == pytest.approx(1.0)
    best = np.sum(w2 / new)
    for _ in range(200):  # random feasible competitors
        other = rng.uniform(0.01, 1, 5)
        other /= np.linalg.norm(other, p)
        assert np.sum(w2 / other) >= best - 1e-12
    res = minimize(
        lambda z: np.sum(w2 / np.abs(z)),
        new,
        constraints=[{"type": "eq", "fun": lambda z: np.linalg.norm(z, p) - 1}],
    )
    assert res.fun >= best - 1e-7


def test_lp_update_keeps_theta_without_signal():
    theta = np.full(3, 3**-0.5)
    np.testing.assert_array_equal(lp_update(theta, np.zeros(3), 2.0), theta)


def test_lp_objective_decreases_monotonically(problem):
    K, y, _ = problem
    res = solve_lp_mkl(K, y, 2.0, svm="c", tol=1e-7, max_iter=50)
    J = res.history["primal"]
    assert np.all(np.diff(J) <= 1e-9 * abs(J[0]))
    assert res.history["gap"][-1] < res.history["gap"][0]


def test_selected_kernel_counts(problem):
    """p > 1 uses every kernel; t = 1 (l1) is sparse here."""
    K, y, _ = problem
    dense = solve_lp_mkl(K, y, 2.0, svm="c")
    sparse = solve_l1_mkl(K, y, svm="c", tol=1e-5)
    assert np.count_nonzero(dense["gamma"]) == K.p
    assert np.count_nonzero(sparse["gamma"]) < K.p


def test_bad_input(problem):
    K, y, grams = problem
    with pytest.raises(ValueError, match="p must be"):
        solve_lp_mkl(K, y, 0.5)
    with pytest.raises(ValueError, match="empty kernel list"):
        solve_lp_mkl([], y, 2.0)
    with pytest.raises(ValueError, match="svm"):
        solve_lp_mkl(K, y, 2.0, svm="hinge")
    X, y = _data()
    with pytest.raises(ValueError, match="p"):
        LpMKLClassifier(SPECS, p=0.5).fit(X, y)
    with pytest.raises(ValueError, match="different sizes"):
        LpMKLClassifier("precomputed").fit([grams[0], grams[1][:20, :20]], y)
    with pytest.raises(ValueError, match="empty kernel list"):
        LpMKLClassifier([]).fit(X, y)


def test_estimator(problem):
    X, y = _data()
    clf = LpMKLClassifier(SPECS, p=2.0, svm="c", tol=1e-6).fit(X, y)
    assert np.linalg.norm(clf.kernel_weights_) == pytest.approx(1.0)
    assert clf.selected_kernels_.size == len(SPECS)
    assert clf.score(X, y) > 0.85
    K, _, _ = problem
    h = (
        K.with_weights(clf.kernel_weights_).dense()[:, clf.support_] @ clf.dual_coef_[0]
        + clf.intercept_[0]
    )
    np.testing.assert_allclose(clf.decision_function(X), h, atol=1e-10)
    grams = [op.dense() for op in make_operator(X, SPECS).operators]
    pre = LpMKLClassifier("precomputed", p=2.0, svm="c", tol=1e-6).fit(grams, y)
    np.testing.assert_allclose(pre.kernel_weights_, clf.kernel_weights_, atol=1e-8)
    np.testing.assert_allclose(pre.decision_function(grams), clf.decision_function(X), atol=1e-6)
