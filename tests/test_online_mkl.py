"""Online MKL (math.md §4): proxes vs cvxpy, kernelized = explicit iterates, the batch
objective over epochs, weights on the informative kernels, the estimator, bad input."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernfw import OnlineMKLClassifier
from kernfw.kernels import make_operator
from kernfw.operators import Gram
from kernfw.solvers.mkl.online import (batch_objective, initial_radius, prox_squared_l1,
                                       prox_squared_l21, solve_online_mkl, structured_hinge)

LAM = 0.05
SPECS = [("linear", {"columns": [0, 1]}), ("linear", {"columns": [2, 3]}),
         ("rbf", {"gamma": 0.5, "columns": [4, 5]}), ("rbf", {"gamma": 0.5, "columns": [6, 7]})]
INFORMATIVE = [0, 1]


def _data(n=60, seed=0):
    """Three classes; groups 0 and 1 see the class centres, groups 2 and 3 only noise."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    X = np.hstack([centers[y] + 0.7 * rng.normal(size=(n, 2)),
                   centers[y][:, ::-1] + rng.normal(size=(n, 2)),
                   rng.normal(size=(n, 4))])
    return X, y


@pytest.fixture(scope="module")
def problem():
    X, y = _data()
    return X, y, make_operator(X, SPECS, normalization="trace")


# -- proximal operators ------------------------------------------------------------------------
@pytest.mark.cvxpy
@pytest.mark.parametrize("tau", [0.01, 0.3, 3.0])
def test_prox_squared_l1_matches_cvxpy(tau):
    from kernfw.reference import prox_squared_l1_reference

    v = np.random.default_rng(1).normal(size=7)
    np.testing.assert_allclose(prox_squared_l1(v, tau), prox_squared_l1_reference(v, tau),
                               atol=1e-8)


@pytest.mark.cvxpy
@pytest.mark.parametrize("tau", [0.01, 0.3, 3.0])
def test_prox_squared_l21_matches_cvxpy(tau):
    from kernfw.reference import prox_squared_l21_reference

    rng = np.random.default_rng(2)
    groups = [rng.normal(size=3), 0.1 * rng.normal(size=2), rng.normal(size=4), np.zeros(2)]
    ours = prox_squared_l21(groups, tau)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = prox_squared_l21_reference(groups, tau)
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, atol=1e-8)


def test_prox_zeros_whole_groups_and_is_optimal():
    groups = [np.array([3.0, 4.0]), np.array([0.1, 0.0]), np.array([0.0, 1.0])]
    tau = 0.5
    out = prox_squared_l21(groups, tau)
    assert np.all(out[1] == 0)                                  # a whole group switched off
    np.testing.assert_allclose(out[0] / np.linalg.norm(out[0]), [0.6, 0.8])   # direction kept

    def value(th):
        fit = sum(np.sum((a - g) ** 2) for a, g in zip(th, groups))
        return 0.5 * fit + 0.5 * tau * sum(np.linalg.norm(a) for a in th) ** 2

    rng = np.random.default_rng(3)
    for _ in range(200):
        other = [a + 0.05 * rng.normal(size=a.shape) for a in out]
        assert value(other) >= value(out) - 1e-12
    # one coordinate: argmin ½(u − a)² + (τ/2)u² = a / (1 + τ); the largest entry survives
    assert prox_squared_l1(np.array([2.0]), 3.0)[0] == pytest.approx(0.5)
    np.testing.assert_allclose(prox_squared_l1(np.array([1.0, -0.1]), 1.0), [0.5, 0.0])


def test_structured_hinge_and_objective():
    scores = np.array([[2.0, 0.0, 0.5], [0.0, 0.2, 0.1]])
    y = np.array([0, 1])
    np.testing.assert_allclose(structured_hinge(scores, y), [0.0, 0.9])
    assert batch_objective(scores, np.array([1.0, 2.0]), y, 0.1) == pytest.approx(0.45 + 0.45)
    assert initial_radius(0.5) == pytest.approx(2.0)


# -- the algorithm ---------------------------------------------------------------------------
def test_kernelized_iterates_equal_explicit_features():
    """Linear kernels on column groups = explicit feature groups (math.md §4.4)."""
    X, y = _data()
    groups = [[0, 1], [2, 3], [4, 5], [6, 7]]
    K = make_operator(X, [("linear", {"columns": g}) for g in groups])
    a = solve_online_mkl(K, y, lam=LAM, eta0=0.5, n_epochs=15, random_state=0, radius="auto")
    b = solve_online_mkl(X, y, lam=LAM, eta0=0.5, n_epochs=15, random_state=0, radius="auto",
                   groups=groups)
    np.testing.assert_allclose(a.history["primal"], b.history["primal"], atol=1e-10)
    np.testing.assert_allclose(a["norms"], b["norms"], atol=1e-10)
    np.testing.assert_array_equal(a.history["mistakes"], b.history["mistakes"])
    # the maintained group norms equal ‖θ_k‖ recomputed from the coefficients
    support, coef = a["support"], a["coef"]
    for k, g in enumerate(groups):
        theta = X[support][:, g].T @ coef[k]                       # (d_k, m)
        assert np.linalg.norm(theta) == pytest.approx(a["norms"][k], abs=1e-9)
        np.testing.assert_allclose(theta, b["theta"][k], atol=1e-9)


@pytest.mark.cvxpy
def test_batch_objective_decreases_over_epochs_toward_the_optimum(problem):
    from kernfw.reference import online_mkl_reference

    X, y, K = problem
    res = solve_online_mkl(K, y, lam=LAM, eta0=0.5, n_epochs=50, random_state=0)
    F = res.history["primal"]
    assert F.shape == (51,) and F[0] == pytest.approx(1.0)      # θ = 0: F(0) = 1
    assert F[1] < F[0] and F[10] < F[1] and F[50] < F[10]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = online_mkl_reference([op.dense() for op in K.operators], y, LAM)
    assert np.all(F >= ref["value"] - 1e-7)                        # F* is a lower bound
    assert F[50] - ref["value"] < 0.01               # math.md §4.5: about 1e-2 after 50 epochs
    assert F[-1] == pytest.approx(res.primal)
    np.testing.assert_allclose(res["beta"], ref["beta"], atol=0.05)


@pytest.mark.cvxpy
def test_cost_sensitive_hinge_matches_cvxpy(problem):
    from kernfw.reference import online_mkl_objective, online_mkl_reference

    X, y, K = problem
    cost = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 1.0], [3.0, 1.0, 0.0]])
    res = solve_online_mkl(K, y, lam=LAM, eta0=0.5, n_epochs=40, random_state=0, cost=cost,
                     radius="auto")
    F = res.history["primal"]
    assert F[0] == pytest.approx(np.mean(cost[y].max(axis=1)))      # F(0)
    scores = sum(op.columns(res["support"]) @ res["coef"][k] for k, op in enumerate(K.operators))
    assert F[-1] == pytest.approx(online_mkl_objective(scores, res["norms"], y, LAM, cost))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = online_mkl_reference([op.dense() for op in K.operators], y, LAM, cost=cost)
    assert ref["value"] - 1e-7 <= F[-1] <= ref["value"] + 0.03
    assert np.linalg.norm(res["norms"]) <= initial_radius(LAM, y, cost) + 1e-12
    with pytest.raises(ValueError, match="zero diagonal"):
        solve_online_mkl(K, y, cost=np.ones((3, 3)))


def test_weights_concentrate_on_informative_kernels(problem):
    X, y, K = problem
    res = solve_online_mkl(K, y, lam=LAM, eta0=0.5, n_epochs=30, random_state=0)
    beta = res["beta"]
    assert beta.sum() == pytest.approx(1.0)
    assert beta[INFORMATIVE].sum() > 0.95
    assert beta[2:].max() < 0.03


def test_ball_projection_bounds_the_norm(problem):
    X, y, K = problem
    res = solve_online_mkl(K, y, lam=LAM, eta0=5.0, n_epochs=5, random_state=0, radius=0.5)
    assert np.linalg.norm(res["norms"]) <= 0.5 + 1e-12
    free = solve_online_mkl(K, y, lam=LAM, eta0=5.0, n_epochs=5, random_state=0)
    assert np.linalg.norm(free["norms"]) > 0.5


def test_long_runs_keep_finite_lazy_scales():
    """Thousands of rounds of shrinking: the lazy scale factors are folded, not underflowed."""
    X, y = _data(n=30)
    K = make_operator(X, SPECS, normalization="trace")
    res = solve_online_mkl(K, y, lam=1.0, eta0=2.0, n_epochs=120, random_state=1)
    assert np.all(np.isfinite(res["coef"])) and np.all(np.isfinite(res.history["primal"]))


# -- the estimator ----------------------------------------------------------------------------
def test_estimator_scores_and_weights(problem):
    X, y, K = problem
    clf = OnlineMKLClassifier(SPECS, lam=LAM, eta=0.5, n_epochs=30, random_state=0).fit(X, y)
    res = solve_online_mkl(K, y, lam=LAM, eta0=0.5, n_epochs=30, random_state=0)
    np.testing.assert_allclose(clf.kernel_weights_, res["beta"])
    assert clf.objective_ == pytest.approx(res.primal)
    assert clf.duality_gap_ == np.inf
    assert clf.score(X, y) > 0.9
    np.testing.assert_array_equal(clf.selected_kernels_, np.flatnonzero(res["beta"]))
    # scores are Σ_k K_k(X, X_S) B_k
    scores = sum(op.cross(X, clf.support_) @ clf.dual_coef_[k]
                 for k, op in enumerate(K.operators))
    np.testing.assert_allclose(clf.decision_function(X), scores, atol=1e-10)
    assert clf.history_["primal"].shape == (31,)


def test_precomputed_equals_specs():
    X, y = _data()
    Xtr, Xte, ytr = X[:45], X[45:], y[:45]
    a = OnlineMKLClassifier(SPECS, lam=LAM, n_epochs=5, random_state=0).fit(Xtr, ytr)
    raw = make_operator(Xtr, SPECS)
    grams = [op.dense() for op in raw.operators]
    tests = [op.cross(Xte) for op in raw.operators]
    b = OnlineMKLClassifier("precomputed", lam=LAM, n_epochs=5, random_state=0).fit(grams, ytr)
    np.testing.assert_allclose(a.kernel_weights_, b.kernel_weights_, atol=1e-12)
    np.testing.assert_allclose(a.decision_function(Xte), b.decision_function(tests), atol=1e-9)


def test_binary_decision_and_pickle():
    X, y = _data()
    yb = np.where(y == 0, "pos", "neg")
    clf = OnlineMKLClassifier(SPECS, lam=LAM, n_epochs=5, random_state=0).fit(X, yb)
    dec = clf.decision_function(X)
    assert dec.shape == (60,)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(dec > 0).astype(int)])
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.decision_function(X), dec)
    assert clone(clf).get_params() == clf.get_params()


def test_bad_input(problem):
    X, y, K = problem
    with pytest.raises(ValueError, match="empty kernel list"):
        solve_online_mkl([], y)
    with pytest.raises(ValueError, match="empty kernel list"):
        OnlineMKLClassifier([]).fit(X, y)
    with pytest.raises(ValueError, match="different sizes"):
        solve_online_mkl([Gram(np.eye(60)), Gram(np.eye(50))], y)
    with pytest.raises(ValueError, match="lam must be"):
        solve_online_mkl(K, y, lam=0.0)
    with pytest.raises(ValueError, match="n_epochs"):
        solve_online_mkl(K, y, n_epochs=0)
    with pytest.raises(ValueError, match="radius"):
        solve_online_mkl(K, y, radius=-1.0)
    with pytest.raises(ValueError, match="labels"):
        solve_online_mkl(K, y[:-1])
    with pytest.raises(ValueError, match="lam"):
        OnlineMKLClassifier(SPECS, lam=-1.0).fit(X, y)
    clf = OnlineMKLClassifier("precomputed", n_epochs=1).fit(
        [op.dense() for op in K.operators], y)
    with pytest.raises(ValueError, match="expected 4 test Gram"):
        clf.predict([np.zeros((3, 60))])


@parametrize_with_checks([OnlineMKLClassifier(["linear", "rbf"], n_epochs=2, random_state=0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)
