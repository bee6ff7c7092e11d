"""Per-example weights of CSKL and lp-MKL (math.md §5.8): the weighted inner SVMs, the
outer objective and its certificate against cvxpy; integer weights = repeated rows, zero
weights = removed rows; class weights; the weighted kernel statistics."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from kernfw import CSKLClassifier, LpMKLClassifier
from kernfw.kernels import make_operator
from kernfw.solvers.mkl.baselines import solve_lp_mkl
from kernfw.solvers.mkl.cskl import solve_cskl

SPECS = [("rbf", {"gamma": 0.5, "columns": [j]}) for j in range(4)] + ["linear"]


def _data(n=40, seed=0, n_classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    score = X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=n)
    if n_classes == 2:
        return X, np.where(score > 0, 1, -1)
    return X, np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))


def _weights(n, seed=1, low=1):
    return np.random.default_rng(seed).integers(low, 5, size=n).astype(float)


def _reference(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Clarabel "inaccurate"
        return fn(*args, **kwargs)


def _check(res, J_star):
    """J* ∈ [dual, primal] and primal − J* ≤ gap: the weighted certificate holds."""
    scale = abs(J_star)
    assert res.dual <= J_star + 1e-7 * scale
    assert res.primal >= J_star - 1e-7 * scale
    assert res.primal - J_star <= res.gap + 1e-7 * scale


# -- the solvers against cvxpy --------------------------------------------------------------
@pytest.mark.cvxpy
@pytest.mark.parametrize("n", [40, 90])  # exact inner solves (n <= 64), and iterative ones
@pytest.mark.parametrize("svm", ["l2", "c", "nu"])
@pytest.mark.parametrize("t", [1.0, 2.0])
def test_weighted_cskl_reaches_the_weighted_cvxpy_optimum(svm, t, n):
    from kernfw.reference import cskl_reference

    X, y = _data(n)
    K = make_operator(X, SPECS, normalization="trace")
    grams = [op.dense() for op in K.operators]
    w = _weights(n)
    res = solve_cskl(K, y, t, svm=svm, nu=0.3, tol=1e-5, max_iter=300, sample_weight=w)
    ref = _reference(cskl_reference, grams, y, t, svm=svm, nu=0.3, sample_weight=w)
    assert res.converged
    _check(res, ref["value"])
    plain = _reference(cskl_reference, grams, y, t, svm=svm, nu=0.3)["value"]
    assert abs(plain - ref["value"]) > 10 * res.gap  # the weights change the problem


@pytest.mark.cvxpy
@pytest.mark.parametrize("svm", ["l2", "c"])
def test_weighted_lp_mkl_reaches_the_weighted_cvxpy_optimum(svm):
    from kernfw.reference import lp_mkl_reference

    X, y = _data()
    K = make_operator(X, SPECS, normalization="trace")
    grams = [op.dense() for op in K.operators]
    w = _weights(y.size)
    res = solve_lp_mkl(K, y, 2.0, svm=svm, tol=1e-5, max_iter=300, sample_weight=w)
    ref = _reference(lp_mkl_reference, grams, y, 2.0, svm=svm, sample_weight=w)
    assert res.converged
    _check(res, ref["value"])


@pytest.mark.cvxpy
def test_weighted_one_vs_rest_reaches_the_weighted_cvxpy_optimum():
    """Three classes, one binary L2-SVM per class sharing γ: J and d summed (math.md §5.8)."""
    from kernfw.reference import cskl_reference
    from kernfw.solvers.mkl.inner_svm import coding_matrix, one_vs_rest

    X, y = _data(n=36, n_classes=3)
    K = make_operator(X, SPECS, normalization="trace")
    w = _weights(y.size)
    res = solve_cskl(K, y, 1.0, svm="l2", tol=1e-5, max_iter=300, sample_weight=w)
    codes = coding_matrix(one_vs_rest(y, 3), y.size)
    ref = _reference(cskl_reference, [op.dense() for op in K.operators], codes, 1.0, svm="l2",
                     sample_weight=w)  # fmt: skip
    assert res.converged
    _check(res, ref["value"])


def test_the_inner_l2svm_objective_is_the_weighted_dual_value():
    """J = a(α) − γᵀd with a(α) = −(1ᵀv)² − Σ α_i²/(C w_i): the value the certificate uses
    equals −αᵀK̃α of the weighted kernel K̃ = Y(K_γ + 11ᵀ)Y + diag(1/(C w))."""
    X, y = _data()
    K = make_operator(X, SPECS, normalization="trace")
    w = _weights(y.size)
    res = solve_cskl(K, y, 1.0, svm="l2", C=2.0, tol=1e-6, sample_weight=w)
    alpha = np.abs(res["coef"][0])
    K_g = sum(g * op.dense() for g, op in zip(res["gamma"], K.operators))
    Kt = np.outer(y, y) * (K_g + 1.0) + np.diag(1.0 / (2.0 * w))
    J = -alpha @ Kt @ alpha
    assert res.primal - res.history["inner_gap"][-1] == pytest.approx(J, rel=1e-10)


# -- the estimators ---------------------------------------------------------------------------
def _repeat(X, y, w):
    rows = np.repeat(np.arange(y.size), w.astype(int))
    return X[rows], y[rows]


@pytest.mark.parametrize(
    "est",
    [
        CSKLClassifier(SPECS, tol=1e-6),
        CSKLClassifier(SPECS, svm="c", tol=1e-6),
        CSKLClassifier(SPECS, svm="c", multi_class="ovo", tol=1e-6),
        LpMKLClassifier(SPECS, tol=1e-6),
        CSKLClassifier(tol=1e-6),  # the default kernels: γ_scale of the weighted rows
    ],
    ids=["cskl-l2", "cskl-c", "cskl-c-ovo", "lp-l2", "cskl-default-kernels"],
)
def test_integer_weights_are_repeated_rows_and_zero_weights_removed_rows(est):
    """Small problems: exact inner solves, so the weighted fit and the fit on repeated rows
    take the same outer steps and agree to rounding (math.md §5.8); zero-weight rows are
    left out and ``support_`` indexes the rows given."""
    X, y = _data(n=30, n_classes=3 if est.get_params().get("multi_class") == "ovo" else 2)
    w = _weights(y.size, low=0)
    assert np.any(w == 0)
    weighted = est.fit(X, y, sample_weight=w)
    d_weighted = weighted.decision_function(X)
    gamma = weighted.kernel_weights_.copy()
    support = weighted.support_.copy()
    repeated = est.fit(*_repeat(X, y, w))
    np.testing.assert_allclose(d_weighted, repeated.decision_function(X), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gamma, repeated.kernel_weights_, rtol=1e-7, atol=1e-10)
    assert np.all(w[support] > 0)
    kept = w > 0
    removed = est.fit(X[kept], y[kept], sample_weight=w[kept])
    np.testing.assert_allclose(d_weighted, removed.decision_function(X), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(np.flatnonzero(kept)[removed.support_], support)


def test_precomputed_kernels_with_zero_weights_predict_from_test_grams_of_all_rows():
    X, y = _data(n=30)
    ops = make_operator(X, SPECS).operators  # raw kernels: the estimator normalizes them
    grams = [op.dense() for op in ops]
    w = _weights(y.size, low=0)
    by_features = CSKLClassifier(SPECS, tol=1e-6).fit(X, y, sample_weight=w)
    by_grams = CSKLClassifier("precomputed", tol=1e-6).fit(grams, y, sample_weight=w)
    assert by_grams.n_train_ == y.size
    np.testing.assert_array_equal(by_grams.support_, by_features.support_)
    np.testing.assert_allclose(
        by_grams.decision_function(grams), by_features.decision_function(X), rtol=1e-8
    )


def test_balanced_class_weight_is_the_matching_sample_weights():
    from sklearn.utils.class_weight import compute_sample_weight

    X, y = _data(n=40)
    y = np.where(np.arange(40) < 8, 1, -1)  # 8 : 32
    s = _weights(40)
    balanced = CSKLClassifier(SPECS, class_weight="balanced", tol=1e-6).fit(X, y, sample_weight=s)
    # Σs / (m Σ_{y_i=k} s_i), scikit-learn's formula with the sample weights
    c = {k: s.sum() / (2 * s[y == k].sum()) for k in (-1, 1)}
    explicit = CSKLClassifier(SPECS, tol=1e-6).fit(X, y, sample_weight=s * np.vectorize(c.get)(y))
    np.testing.assert_allclose(
        balanced.decision_function(X), explicit.decision_function(X), rtol=1e-9
    )
    plain = CSKLClassifier(SPECS, class_weight="balanced", tol=1e-6).fit(X, y)
    np.testing.assert_allclose(
        plain.decision_function(X),
        CSKLClassifier(SPECS, tol=1e-6)
        .fit(X, y, sample_weight=compute_sample_weight("balanced", y))
        .decision_function(X),
        rtol=1e-9,
    )
    unweighted = CSKLClassifier(SPECS, tol=1e-6).fit(X, y)
    assert np.mean(balanced.predict(X) == 1) > np.mean(unweighted.predict(X) == 1)


def test_larger_problems_weighted_and_repeated_agree_within_the_certified_gaps():
    """Above 64 points the inner L2-SVMs run pairwise FW to a tolerance: the weighted and the
    repeated fits both certify J within their gaps, so their objectives agree within them."""
    X, y = _data(n=90)
    w = _weights(y.size)
    est = CSKLClassifier(SPECS, tol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = est.fit(X, y, sample_weight=w)
        J_w, gap_w = weighted.objective_, weighted.duality_gap_
        repeated = est.fit(*_repeat(X, y, w))
    assert abs(J_w - repeated.objective_) <= gap_w + repeated.duality_gap_


def test_bad_weights_are_clear_errors():
    X, y = _data(n=30)
    with pytest.raises(ValueError, match="(?i)negative"):
        CSKLClassifier(SPECS).fit(X, y, sample_weight=-np.ones(30))
    with pytest.raises(ValueError, match="non-zero"):
        LpMKLClassifier(SPECS).fit(X, y, sample_weight=np.zeros(30))
    with pytest.raises(ValueError, match="shape"):
        CSKLClassifier(SPECS).fit(X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="nu=0.9 is infeasible"):
        w = np.where(y > 0, 10.0, 1.0)  # the weighted side -1 is small
        CSKLClassifier(SPECS, svm="nu", nu=0.9).fit(X, y, sample_weight=w)


# -- the weighted statistics of the kernels ------------------------------------------------
@pytest.mark.parametrize("normalization", ["trace", "center"])
@pytest.mark.parametrize("kernel", ["linear", "rbf", ("poly", {"degree": 2})])
def test_weighted_kernel_statistics_are_those_of_the_repeated_rows(kernel, normalization):
    X, _ = _data(n=20)
    w = _weights(20)
    rows = np.repeat(np.arange(20), w.astype(int))
    weighted = make_operator(X, kernel, normalization=normalization, sample_weight=w)
    repeated = make_operator(X[rows], kernel, normalization=normalization)
    first = np.searchsorted(rows, np.arange(20))  # the first copy of each row
    np.testing.assert_allclose(
        weighted.dense(), repeated.dense()[np.ix_(first, first)], rtol=1e-10, atol=1e-12
    )
    X_new = X[:3] + 0.1
    np.testing.assert_allclose(
        weighted.cross(X_new), repeated.cross(X_new)[:, first], rtol=1e-10, atol=1e-12
    )
