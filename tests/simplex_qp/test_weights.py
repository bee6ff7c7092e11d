"""Per-example weights in the simplex-QP family (math.md §2.14): the weighted L2-SVM and the
weighted soft ball against cvxpy, integer weights against repeated rows, zero weights against
removed rows, and the errors."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import pairwise_kernels

from kernfw import L2SVC, MinimumEnclosingBall
from kernfw.operators import Features, Gram, KernelFunction
from kernfw.solvers.simplex_qp import L2SVMKernel, solve_l2svm, solve_simplex_qp, solve_soft_ball


def _binary(n, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.7 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _weights(n, seed=0, low=1, high=4):
    return np.random.default_rng(seed + 100).integers(low, high, size=n).astype(float)


#: the L2-SVM's solvers and the operator each runs on (the features for "dcd")
L2SVM_CASES = {
    "mfw": lambda X: Gram(pairwise_kernels(X, metric="rbf", gamma=0.5)),
    "mfw-columns": lambda X: KernelFunction(X, "rbf", gamma=0.5),
    "lsfw": lambda X: Gram(pairwise_kernels(X, metric="rbf", gamma=0.5)),
    "cvm": lambda X: Gram(pairwise_kernels(X, metric="rbf", gamma=0.5)),
    "active_set": lambda X: Gram(pairwise_kernels(X, metric="rbf", gamma=0.5)),
    "dcd": lambda X: Features(X),
}


def _kernel_of(case, X):
    if case == "dcd":
        return X @ X.T
    return pairwise_kernels(X, metric="rbf", gamma=0.5)


@pytest.mark.cvxpy
@pytest.mark.parametrize("case", list(L2SVM_CASES))
def test_weighted_l2svm_reaches_the_cvxpy_optimum_within_its_gap(case):
    from kernfw.reference import l2svm_reference

    X, y = _binary(50, seed=1)
    w = np.random.default_rng(5).uniform(0.2, 3.0, size=50)
    solver = case.split("-")[0]
    tol = 1e-3 if solver == "lsfw" else 1e-9
    res = solve_l2svm(L2SVM_CASES[case](X), y, 2.0, solver=solver, tol=tol, sample_weight=w)
    ref = l2svm_reference(_kernel_of(case, X), y, 2.0, sample_weight=w)
    P = ref["objective"]
    assert res.converged
    # D ≤ P* ≤ P (up to the reference's accuracy), P − D = the certified gap
    assert res.dual <= P + 1e-6 * abs(P) and P <= res.primal + 1e-6 * abs(P)
    if solver != "lsfw":
        np.testing.assert_allclose(res.solution["alpha"], ref["alpha"], atol=1e-4)
    # the weighted modified kernel: v_i = y_i h(x_i) + α_i/(C w_i)
    alpha, v = res.solution["alpha"], res.solution["v"]
    h = (_kernel_of(case, X) + 1.0) @ (alpha * y)
    np.testing.assert_allclose(v, y * h + alpha / (2.0 * w), atol=1e-10)


@pytest.mark.parametrize("solver", ["mfw", "cvm", "active_set", "dcd"])
def test_integer_weights_equal_repeated_rows(solver):
    X, y = _binary(40, seed=2)
    w = _weights(40)
    reps = w.astype(int)
    Xr, yr = np.repeat(X, reps, axis=0), np.repeat(y, reps)
    make = Features if solver == "dcd" else (lambda Z: Gram(Z @ Z.T))
    weighted = solve_l2svm(make(X), y, 3.0, solver=solver, tol=1e-10, sample_weight=w)
    repeated = solve_l2svm(make(Xr), yr, 3.0, solver=solver, tol=1e-10)
    # the same optimum: values within the gaps, and the same decision function
    assert abs(weighted.dual - repeated.dual) <= weighted.gap + repeated.gap + 1e-12
    a, ar = weighted.solution["alpha"], repeated.solution["alpha"]
    h = X @ (X.T @ (a * y)) + a @ y
    hr = X @ (Xr.T @ (ar * yr)) + ar @ yr
    np.testing.assert_allclose(h, hr, atol=1e-5 * np.abs(h).max())


def test_the_column_source_reads_the_per_example_diagonal():
    """The compiled core's column source and the operator's columns agree with weights."""
    X, y = _binary(300, seed=3)
    w = np.random.default_rng(1).uniform(0.1, 5.0, size=300)
    K = pairwise_kernels(X, metric="rbf", gamma=0.5)
    on_the_fly = solve_l2svm(
        KernelFunction(X, "rbf", gamma=0.5), y, 4.0, tol=1e-10, sample_weight=w
    )
    stored = solve_l2svm(Gram(K), y, 4.0, tol=1e-10, sample_weight=w)
    assert abs(on_the_fly.dual - stored.dual) <= on_the_fly.gap + stored.gap + 1e-9
    Kt = L2SVMKernel(Gram(K), y, 4.0, w)
    np.testing.assert_allclose(Kt.diag(), 1.0 + 1.0 + 1.0 / (4.0 * w))
    np.testing.assert_allclose(Kt.columns([3, 7])[[3, 7], [0, 1]], 2.0 + 1.0 / (4.0 * w[[3, 7]]))
    np.testing.assert_allclose(Kt.matmat(np.eye(300)[:, :2]), Kt.columns([0, 1]))


def test_bad_weights_are_errors():
    X, y = _binary(30, seed=4)
    for bad in (np.r_[-1.0, np.ones(29)], np.r_[0.0, np.ones(29)], np.ones(29)):
        with pytest.raises(ValueError, match="weight"):
            solve_l2svm(Gram(X @ X.T), y, 1.0, sample_weight=bad)
    for est in (L2SVC(), MinimumEnclosingBall()):
        with pytest.raises(ValueError, match="[Nn]egative"):
            est.fit(X, y, sample_weight=np.r_[-1.0, np.ones(29)])
        with pytest.raises(ValueError, match="zero"):
            est.fit(X, y, sample_weight=np.zeros(30))


# -- estimators ---------------------------------------------------------------------------------
@pytest.mark.parametrize("solver", ["mfw", "active_set", "dcd"])
def test_l2svc_zero_weights_are_removed_rows(solver):
    X, y = _binary(120, seed=6)
    w = _weights(120, seed=6, low=0, high=3)
    kernel = "linear" if solver == "dcd" else "rbf"
    params = dict(kernel=kernel, solver=solver, tol=1e-10, gamma=0.5, max_iter=10**6)
    weighted = L2SVC(**params).fit(X, y, sample_weight=(w > 0).astype(float))
    removed = L2SVC(**params).fit(X[w > 0], y[w > 0])
    np.testing.assert_allclose(
        weighted.decision_function(X), removed.decision_function(X), rtol=1e-5, atol=1e-7
    )
    assert np.all(w[weighted.support_] > 0)  # support_ indexes the rows given


def test_l2svc_class_weight_balanced_is_the_formula_and_helps_the_minority():
    from sklearn.datasets import make_classification
    from sklearn.metrics import balanced_accuracy_score

    X, y = make_classification(400, 5, weights=[0.9], flip_y=0.05, random_state=0)
    n, counts = y.size, np.bincount(y)
    manual = {k: n / (2 * counts[k]) for k in (0, 1)}
    balanced = L2SVC(class_weight="balanced", tol=1e-8, gamma=0.2).fit(X, y)
    by_dict = L2SVC(class_weight=manual, tol=1e-8, gamma=0.2).fit(X, y)
    np.testing.assert_allclose(balanced.decision_function(X), by_dict.decision_function(X))
    # the class weights multiply the sample weights
    sw = np.where(y == 1, manual[1], manual[0])
    by_sw = L2SVC(tol=1e-8, gamma=0.2).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(
        balanced.decision_function(X), by_sw.decision_function(X), rtol=1e-6, atol=1e-9
    )
    plain = L2SVC(tol=1e-8, gamma=0.2).fit(X, y)
    score = balanced_accuracy_score
    assert score(y, balanced.predict(X)) > score(y, plain.predict(X))


def test_l2svc_multiclass_integer_weights_equal_repeated_rows():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(90, 3))
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=90), [-0.5, 0.5])
    w = _weights(90, seed=7, low=0, high=3)
    for scheme in ("ovo", "ovr"):
        params = dict(tol=1e-10, gamma=0.5, multi_class=scheme, solver="mfw", max_iter=10**6)
        weighted = L2SVC(**params).fit(X, y, sample_weight=w)
        repeated = L2SVC(**params).fit(np.repeat(X, w.astype(int), 0), np.repeat(y, w.astype(int)))
        np.testing.assert_allclose(
            weighted.decision_function(X), repeated.decision_function(X), atol=1e-4
        )


# -- the ball -------------------------------------------------------------------------------------
@pytest.mark.cvxpy
@pytest.mark.parametrize("solver", ["pairwise", "active_set"])
def test_weighted_soft_ball_reaches_the_cvxpy_optimum_within_its_gap(solver):
    from kernfw.reference import soft_ball_reference

    X = np.random.default_rng(8).normal(size=(60, 2))
    K = pairwise_kernels(X, metric="rbf", gamma=0.5)
    w = np.random.default_rng(9).uniform(0.2, 3.0, size=60)
    res = solve_soft_ball(Gram(K), 0.3, tol=1e-9, sample_weight=w, solver=solver)
    ref = soft_ball_reference(K, 0.3, sample_weight=w)
    P = ref["objective"]
    assert res.converged
    assert res.dual <= P + 1e-6 * abs(P) and P <= res.primal + 1e-6 * abs(P)
    caps = w / (0.3 * w.sum())
    alpha = res.solution["alpha"]
    assert np.all(alpha <= caps * (1 + 1e-12)) and alpha.sum() == pytest.approx(1.0)
    # the weighted fraction of training points outside the radius is at most ν
    d = np.diag(K) - 2 * K @ alpha + alpha @ K @ alpha
    assert w[d > res.solution["radius2"] * (1 + 1e-9)].sum() <= 0.3 * w.sum()


@pytest.mark.parametrize("nu", [0.0, 0.3])
def test_ball_integer_weights_equal_repeated_rows_and_zero_removed(nu):
    X = np.random.default_rng(10).normal(size=(80, 2))
    w = _weights(80, seed=10, low=0, high=4)
    reps = w.astype(int)
    params = dict(nu=nu, gamma=0.5, tol=1e-10, max_iter=10**6)
    weighted = MinimumEnclosingBall(**params).fit(X, sample_weight=w)
    repeated = MinimumEnclosingBall(**params).fit(np.repeat(X, reps, axis=0))
    assert abs(weighted.radius_ - repeated.radius_) <= 1e-4 * repeated.radius_
    np.testing.assert_allclose(
        weighted.decision_function(X), repeated.decision_function(X), atol=1e-4
    )
    assert np.all(w[weighted.support_] > 0)


@pytest.mark.cvxpy
def test_hard_ball_weights_other_than_zero_change_nothing():
    from kernfw.reference import meb_reference

    X = np.random.default_rng(11).normal(size=(70, 2))
    K = X @ X.T
    w = _weights(70, seed=11, low=0, high=5)
    weighted = solve_simplex_qp(Gram(K[np.ix_(w > 0, w > 0)]), q=np.diag(K)[w > 0], tol=1e-10)
    plain = MinimumEnclosingBall(nu=0, kernel="linear", tol=1e-10).fit(X, sample_weight=w > 0)
    scaled = MinimumEnclosingBall(nu=0, kernel="linear", tol=1e-10).fit(X, sample_weight=w)
    ref = meb_reference(K, sample_weight=w)
    assert weighted.dual <= ref["radius2"] * (1 + 1e-6) <= weighted.primal * (1 + 1e-6) + 1e-9
    assert scaled.radius_ == pytest.approx(plain.radius_, rel=1e-9)
    assert scaled.radius_**2 == pytest.approx(ref["radius2"], rel=1e-5)
