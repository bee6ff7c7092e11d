"""Minimum enclosing ball: the simplex-QP solver (FW / MFW, math.md §2.3–§2.7) and
``MinimumEnclosingBall``."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from sklearn.metrics.pairwise import pairwise_kernels, rbf_kernel
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernfw.estimators.meb import MinimumEnclosingBall
from kernfw.fw import StoppingRule
from kernfw.kernels import make_operator
from kernfw.operators import Gram, KernelFunction, KernelOperator
from kernfw.solvers.simplex_qp import L2SVMKernel, SimplexQPIterate, solve_simplex_qp
from kernfw.solvers.simplex_qp import _numba as _core

KERNELS = [
    ("linear", {}),
    ("rbf", {"gamma": 0.5}),
    ("poly", {"gamma": 0.5, "degree": 2, "coef0": 1.0}),
]


def _points(n=50, d=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def _gram(X, kernel, params):
    return pairwise_kernels(X, metric=kernel, **params)


def _f(K, q, alpha):
    return q @ alpha - alpha @ K @ alpha


def _center_distance(K, a, b):
    """‖c_a − c_b‖ for the centres c = Σ α_i z_i of two weight vectors."""
    d = a - b
    return float(np.sqrt(max(d @ K @ d, 0.0)))


class ForbidMatmat(KernelOperator):
    """Wraps an operator; counts column fetches and refuses anything n × n."""

    def __init__(self, base):
        self.base, self.n, self.dtype = base, base.n, base.dtype
        self.calls = 0
        self.fetched = 0

    def diag(self):
        return self.base.diag()

    def columns(self, idx):
        idx = np.atleast_1d(idx)
        self.calls += 1
        self.fetched += idx.size
        return self.base.columns(idx)

    def matmat(self, V):
        raise AssertionError("the solver must not call matmat")

    def dense(self):
        raise AssertionError("the solver must not form the n x n matrix")

    def cross(self, X_new, idx=None):
        return self.base.cross(X_new, idx)

    def subset(self, idx):
        return ForbidMatmat(self.base.subset(idx))


# -- the solver against cvxpy -------------------------------------------------------------
@pytest.mark.cvxpy
@pytest.mark.parametrize("kernel,params", KERNELS)
@pytest.mark.parametrize("solver", ["mfw", "lsfw"])
def test_meb_radius_matches_cvxpy(kernel, params, solver):
    from kernfw.reference import meb_reference

    X = _points(50, seed=1)
    K = _gram(X, kernel, params)
    ref = meb_reference(K)
    op = Gram(K)
    r2 = ref["radius2"]
    if solver == "lsfw":  # sublinear: check the certified bracket dual ≤ r*² ≤ primal
        res = solve_simplex_qp(op, q=op.diag(), solver="lsfw", tol=StoppingRule(1e-4, "dual"))
        assert res.converged
        assert res.dual <= r2 * (1 + 1e-8) and r2 <= res.primal * (1 + 1e-8)
        return
    res = solve_simplex_qp(op, q=op.diag(), solver=solver, tol=1e-10)
    assert res.converged
    # |P − P*| ≤ max(gap, 1e-7) + 1e-6 |P*|, and the dual never exceeds the optimum
    assert abs(res.primal - r2) <= max(res.gap, 1e-7) + 1e-6 * r2
    assert res.dual <= r2 * (1 + 1e-8)
    assert abs(res.dual - r2) <= 1e-6 * r2
    # same centre: ‖c − c*‖² = (α − α*)ᵀ K (α − α*)
    diff = res["alpha"] - ref["alpha"]
    assert diff @ K @ diff <= 1e-6 * r2


def test_meb_of_three_points_is_known():
    Z = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.5]])
    op = Gram(Z @ Z.T)
    res = solve_simplex_qp(op, q=op.diag(), tol=1e-12)
    assert res.dual == pytest.approx(1.0, abs=1e-12)  # radius 1 around (1, 0)
    np.testing.assert_allclose(res["alpha"], [0.5, 0.5, 0.0], atol=1e-12)
    np.testing.assert_array_equal(res["support"], [0, 1])


# -- closed-form pieces --------------------------------------------------------------------
def _iterate(K, q, solver="mfw", **kw):
    return SimplexQPIterate(Gram(K), q, solver, None, None, **kw)


def test_cvm_initialization_is_the_two_point_ball():
    X = _points(30, seed=2)
    K = X @ X.T
    it = _iterate(K, np.diag(K).copy())
    far = int(np.argmax(np.sum((X - X[0]) ** 2, axis=1)))
    np.testing.assert_array_equal(np.sort(it.active.indices()), np.sort([0, far]))
    np.testing.assert_allclose(it.alpha[[0, far]], 0.5)
    # r₀² = ¼ ‖z_a − z_b‖²
    assert it.objective() == pytest.approx(0.25 * np.sum((X[0] - X[far]) ** 2), rel=1e-12)


def test_fw_vertex_is_the_farthest_point_and_gap_is_its_excess():
    X = _points(40, seed=3)
    K = X @ X.T
    it = _iterate(K, np.diag(K).copy())
    for t in range(15):
        it.step(t)
    alpha = it.alpha
    c = alpha @ X
    dist2 = np.sum((X - c) ** 2, axis=1)
    i, gap = it._fw_vertex()
    assert dist2[i] == pytest.approx(dist2.max(), rel=1e-12)
    # FW gap = ‖z_{i*} − c‖² − r² (math.md §2.4)
    assert gap == pytest.approx(dist2.max() - _f(K, np.diag(K), alpha), rel=1e-9)
    # away vertex: the nearest support point
    j = it._away_vertex()
    support = it.active.indices()
    assert dist2[j] == pytest.approx(dist2[support].min(), rel=1e-12)


@pytest.mark.parametrize("q_kind", ["diag", "zero"])
def test_every_step_is_an_exact_line_search(q_kind):
    """Each FW / away step maximizes f along its direction (1-D numerical check)."""
    X = _points(25, seed=4)
    K = rbf_kernel(X, gamma=0.3)
    q = np.diag(K).copy() if q_kind == "diag" else None
    qv = np.zeros(len(K)) if q is None else q
    it = _iterate(K, q)
    kinds = set()
    for t in range(60):
        before = it.alpha
        it._fw_vertex()
        n_away = it.n_away
        it.step(t)
        after = it.alpha
        d = after - before
        if not np.any(d):
            continue
        away = it.n_away > n_away
        kinds.add("away" if away else "fw")
        if away:  # d ∝ α − e_j; the largest feasible step keeps α ≥ 0
            j = int(np.argmin(d))
            direction = before - np.eye(len(K))[j]
            t_max = before[j] / (1 - before[j])
        else:
            i = int(np.argmax(d))
            direction = np.eye(len(K))[i] - before
            t_max = 1.0
        gamma = np.linalg.norm(d) / np.linalg.norm(direction)
        line = minimize_scalar(
            lambda s: -_f(K, qv, before + s * direction),
            bounds=(0, t_max),
            method="bounded",
            options={"xatol": 1e-12},
        )
        assert _f(K, qv, after) >= -line.fun - 1e-12
        assert 0 <= gamma <= t_max + 1e-12
    assert kinds == {"fw", "away"}


def test_drop_step_lands_exactly_on_the_face():
    X = _points(30, seed=5)
    K = rbf_kernel(X, gamma=0.5)
    it = _iterate(K, None)
    drops = 0
    for t in range(400):
        before = set(it.active.indices().tolist())
        n_drop = it.n_drop
        it.step(t)
        if it.n_drop > n_drop:
            drops += 1
            gone = before - set(it.active.indices().tolist())
            assert len(gone) == 1
            assert it.alpha[gone.pop()] == 0.0
    assert drops > 0
    alpha = it.alpha
    assert np.all(alpha >= 0) and alpha.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_array_equal(np.flatnonzero(alpha), np.sort(it.active.indices()))


def test_maintained_gradient_matches_a_fresh_product():
    X = _points(60, seed=6)
    K = rbf_kernel(X, gamma=0.2)
    op = Gram(K)
    res = solve_simplex_qp(op, q=op.diag(), tol=1e-9, check_every=1)
    np.testing.assert_allclose(res["v"], K @ res["alpha"], atol=1e-13)
    assert res.dual == pytest.approx(_f(K, np.diag(K), res["alpha"]), abs=1e-13)
    # primal = max_i ‖z_i − c‖² = dual + gap
    dist2 = np.diag(K) - 2 * K @ res["alpha"] + res["alpha"] @ K @ res["alpha"]
    assert res.primal == pytest.approx(dist2.max(), abs=1e-12)


def test_one_column_per_iteration_and_no_matmat():
    X = _points(300, d=4, seed=7)
    op = ForbidMatmat(KernelFunction(X, "rbf", gamma=0.5, cache_size=1.0))
    res = solve_simplex_qp(op, q=op.diag(), tol=1e-6)
    assert res.converged
    assert op.fetched <= res.n_iter + 2  # two for the CVM start, then ≤ one per step
    assert op.calls == op.fetched


def test_kernel_function_backend_agrees_with_gram():
    X = _points(120, seed=8)
    gram = make_operator(X, "rbf", gamma=0.4, backend="gram")
    func = make_operator(X, "rbf", gamma=0.4, backend="function", cache_size=0.05)
    a = solve_simplex_qp(gram, q=gram.diag(), tol=1e-10)
    b = solve_simplex_qp(func, q=func.diag(), tol=1e-10)
    assert a.converged and b.converged
    assert abs(a.dual - b.dual) <= a.gap + b.gap
    # Bădoiu–Clarkson: ‖c − c*‖² ≤ R(c)² − r*² ≤ gap for any centre c
    assert _center_distance(gram.dense(), a["alpha"], b["alpha"]) <= np.sqrt(a.gap) + np.sqrt(b.gap)


def test_radius_stop_is_the_one_plus_epsilon_ball():
    X = _points(200, d=5, seed=9)
    op = Gram(rbf_kernel(X, gamma=0.3))
    eps = 1e-3
    res = solve_simplex_qp(op, q=op.diag(), tol=eps)
    assert res.converged
    r2, R2 = res.dual, res.primal  # r_k² and max_i ‖z_i − c_k‖²
    assert np.sqrt(R2) <= (1 + eps) * np.sqrt(r2) * (1 + 1e-12)
    exact = solve_simplex_qp(op, q=op.diag(), tol=1e-12)
    assert r2 <= exact.dual * (1 + 1e-12) and exact.dual <= R2 * (1 + 1e-12)
    assert res.n_iter < exact.n_iter


def test_relative_stop():
    X = _points(80, seed=10)
    op = Gram(rbf_kernel(X, gamma=0.3))
    res = solve_simplex_qp(op, q=op.diag(), tol=StoppingRule(1e-4, "dual"), check_every=1)
    assert res.converged and res.gap <= 1e-4 * abs(res.dual)
    assert res.history["gap"][-2] > 1e-4 * abs(res.history["dual"][-2])


def test_warm_start_from_the_optimum_stops_at_once():
    X = _points(60, seed=11)
    op = Gram(rbf_kernel(X, gamma=0.3))
    res = solve_simplex_qp(op, q=op.diag(), tol=1e-10)
    again = solve_simplex_qp(op, q=op.diag(), tol=1e-9, alpha0=res["alpha"])
    assert again.n_iter == 0
    assert again.dual == pytest.approx(res.dual, rel=1e-12)
    uniform = solve_simplex_qp(op, q=op.diag(), tol=1e-10, alpha0=np.full(60, 1 / 60))
    assert uniform.dual == pytest.approx(res.dual, rel=1e-9)


def test_a_single_point_is_its_own_ball():
    op = Gram(np.full((1, 1), 2.0))
    for stop in (StoppingRule(1e-6, "absolute"), StoppingRule(1e-6, "dual"), 1e-6):
        res = solve_simplex_qp(op, q=op.diag(), tol=stop)
        assert res.converged and res.n_iter == 0 and res.dual == 0.0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_random_state_picks_the_first_point():
    X = _points(50, seed=12)
    op = Gram(X @ X.T)
    a = solve_simplex_qp(op, q=op.diag(), max_iter=0, random_state=3)
    b = solve_simplex_qp(op, q=op.diag(), max_iter=0, random_state=3)
    np.testing.assert_array_equal(a["alpha"], b["alpha"])
    assert a["support"].size == 2


def test_history_records_coreset_and_steps():
    X = _points(60, seed=13)
    op = Gram(rbf_kernel(X, gamma=0.5))
    res = solve_simplex_qp(op, q=op.diag(), tol=1e-10, check_every=1)
    h = res.history
    assert h["iteration"].tolist() == list(range(res.n_iter + 1))
    assert h["coreset"][-1] == res["support"].size
    assert np.all(np.diff(h["dual"]) >= -1e-14)  # ascent steps
    assert np.all(h["dual"] <= h["primal"] + 1e-14)
    assert h["away_steps"][-1] > 0 and "delta" in h and "radius2" in h


def test_bad_inputs():
    op = Gram(rbf_kernel(_points(10)))
    with pytest.raises(ValueError, match="tol"):
        solve_simplex_qp(op, tol=0.0)
    with pytest.raises(ValueError, match="tol"):
        solve_simplex_qp(op, tol=-1.0)
    with pytest.raises(ValueError, match="solver"):
        solve_simplex_qp(op, solver="pfw")
    with pytest.raises(ValueError, match="q must"):
        solve_simplex_qp(op, q=np.ones(3))
    with pytest.raises(ValueError, match="simplex"):
        solve_simplex_qp(op, alpha0=np.ones(10))
    with pytest.raises(ValueError, match="nonnegative"):
        solve_simplex_qp(op, alpha0=np.r_[-1.0, 2.0, np.zeros(8)])
    with pytest.raises(ValueError, match="max_iter"):
        solve_simplex_qp(op, max_iter=-1)
    with pytest.raises(TypeError, match="KernelOperator"):
        solve_simplex_qp(np.eye(10))
    poly = Gram(pairwise_kernels(_points(10), metric="poly", degree=2))
    with pytest.raises(ValueError, match="constant"):
        solve_simplex_qp(
            L2SVMKernel(poly, np.r_[np.ones(5), -np.ones(5)], 1.0), tol=StoppingRule(1e-6, "radius")
        )


# -- the estimator --------------------------------------------------------------------------
def test_ball_contains_the_training_points_and_predicts_novelty():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 2))
    ball = MinimumEnclosingBall(nu=0, gamma=0.5, tol=1e-6).fit(X)
    assert ball.converged_
    assert ball.radius_lower_ <= ball.radius_ <= (1 + 1e-6) * ball.radius_lower_ * (1 + 1e-12)
    assert np.all(ball.decision_function(X) >= -1e-10)
    far = rng.normal(size=(20, 2)) * 0.1 + 8.0
    np.testing.assert_array_equal(ball.predict(far), -1)
    assert ball.predict(np.zeros((1, 2)))[0] == 1
    # decision = R² − ‖φ(x) − c‖² from the dense kernel
    Xt = rng.normal(size=(30, 2)) * 2
    alpha = np.zeros(150)
    alpha[ball.support_] = ball.dual_coef_[0]
    K = rbf_kernel(X, gamma=0.5)
    dist2 = 1 - 2 * rbf_kernel(Xt, X, gamma=0.5) @ alpha + alpha @ K @ alpha
    np.testing.assert_allclose(ball.decision_function(Xt), ball.radius_**2 - dist2, atol=1e-12)
    np.testing.assert_allclose(ball.score_samples(Xt) - ball.offset_, ball.decision_function(Xt))
    assert ball.dual_coef_.sum() == pytest.approx(1.0)
    np.testing.assert_array_equal(ball.support_vectors_, X[ball.support_])


@pytest.mark.cvxpy
@pytest.mark.parametrize("kernel,params", KERNELS)
def test_estimator_radius_matches_cvxpy(kernel, params):
    from kernfw.reference import meb_reference

    X = _points(40, seed=14)
    ref = meb_reference(_gram(X, kernel, params))
    ball = MinimumEnclosingBall(nu=0, kernel=kernel, tol=1e-9, **params).fit(X)
    assert ball.radius_lower_**2 <= ref["radius2"] * (1 + 1e-8)
    assert ball.radius_**2 == pytest.approx(ref["radius2"], rel=1e-6)


def test_precomputed_reads_only_the_support_columns():
    X = _points(80, seed=15)
    Xt = _points(10, seed=16) * 1.5
    gamma = 0.4
    ball = MinimumEnclosingBall(nu=0, gamma=gamma, tol=1e-8).fit(X)
    pre = MinimumEnclosingBall(nu=0, kernel="precomputed", tol=1e-8).fit(rbf_kernel(X, gamma=gamma))
    K_test = rbf_kernel(Xt, X, gamma=gamma)
    off = np.setdiff1d(np.arange(80), pre.support_)
    K_test[:, off] = 1e6  # never read
    np.testing.assert_allclose(
        pre.decision_function(K_test), ball.decision_function(Xt), atol=1e-10
    )
    assert pre.radius_ == pytest.approx(ball.radius_, rel=1e-10)


def test_precomputed_with_a_nonconstant_diagonal_cannot_score_new_points():
    X = _points(30, seed=17)
    pre = MinimumEnclosingBall(nu=0, kernel="precomputed").fit(X @ X.T)
    with pytest.raises(ValueError, match="self-similarities"):
        pre.decision_function(X[:3] @ X.T)


def test_kernel_operator_and_float32_inputs():
    X = _points(60, seed=18)
    op = KernelFunction(X, "rbf", gamma=0.5)
    a = MinimumEnclosingBall(nu=0, kernel=op, tol=1e-8).fit(None)
    b = MinimumEnclosingBall(nu=0, gamma=0.5, tol=1e-8).fit(X)
    c = MinimumEnclosingBall(nu=0, gamma=0.5, tol=1e-5).fit(X.astype(np.float32))
    assert a.radius_ == pytest.approx(b.radius_, rel=1e-10)
    np.testing.assert_allclose(a.decision_function(X[:5]), b.decision_function(X[:5]), atol=1e-10)
    assert c.radius_ == pytest.approx(b.radius_, rel=1e-4)


def test_estimator_bad_parameters():
    X = _points(20)
    with pytest.raises(ValueError, match="tol"):
        MinimumEnclosingBall(tol=0).fit(X)
    with pytest.raises(ValueError, match="solver"):
        MinimumEnclosingBall(solver="sgd").fit(X)


_NO_TRAINING_OUTLIERS = (
    "the hard ball (nu=0) contains every training point by definition, so "
    "predict(X_train) has no -1; nu > 0 passes these checks"
)
_PRECOMPUTED_DIAG = (
    "precomputed kernels need a constant training diagonal for k(x, x) of "
    "new points; the checks use linear Grams"
)


def _expected_failures(estimator):
    failures = {}
    if estimator.nu == 0:
        failures["check_outliers_train"] = _NO_TRAINING_OUTLIERS
        failures["check_outliers_fit_predict"] = _NO_TRAINING_OUTLIERS
    if estimator.kernel == "precomputed":
        for check in (
            "check_fit_score_takes_y",
            "check_estimators_dtypes",
            "check_dtype_object",
            "check_f_contiguous_array_estimator",
            "check_classifier_data_not_an_array",
            "check_methods_sample_order_invariance",
            "check_methods_subset_invariance",
            "check_dict_unchanged",
            "check_fit_idempotent",
        ):
            failures[check] = _PRECOMPUTED_DIAG
        # these checks fit raw features (300 × 2), not a Gram, whatever the pairwise tag says
        for check in ("check_outliers_fit_predict", "check_outliers_train"):
            failures[check] = "the check passes features, not a Gram"
        # the check passes K − mean(K), an indefinite Gram: kernfw raises NotPSDError
        failures["check_positive_only_tag_during_fit"] = "indefinite precomputed Gram"
    return failures


@parametrize_with_checks(
    [
        MinimumEnclosingBall(),
        MinimumEnclosingBall(nu=0),
        MinimumEnclosingBall(nu=0.1),
        MinimumEnclosingBall(kernel="precomputed", nu=0.1),
    ],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_check_estimator_passes_at_the_no_argument_construction():
    """As a user runs it: every check passes for ``MinimumEnclosingBall()`` (the ν-soft ball at
    ``nu=0.5``, as ``OneClassSVM()``); the hard ball stays available as ``nu=0``."""
    from sklearn.utils.estimator_checks import check_estimator

    ball = MinimumEnclosingBall()
    assert ball.nu == 0.5
    results = check_estimator(ball, on_fail=None)
    failed = [r["check_name"] for r in results if r["status"] == "failed"]
    assert failed == [] and len(results) > 40
    X = _points(200, 2)
    outside = np.mean(ball.fit(X).predict(X) == -1)
    assert 0.45 <= outside <= 0.5  # at most ν, and close to it
    assert np.all(MinimumEnclosingBall(nu=0).fit(X).predict(X) == 1)  # the hard ball


# -- compiled backend (numba) = numpy path ------------------------------------------------
def _both_backends(monkeypatch, solve):
    """``solve()`` with the columns from the operator (``Q.columns``) and from its column
    view (evaluated in the compiled step), each to its ``max_iter`` budget: no stop at the
    rounding floor, whose timing is BLAS-dependent."""
    monkeypatch.setattr("kernfw.fw.stopping.StoppingRule.at_floor", lambda *args: False)
    with monkeypatch.context() as m:
        m.setattr(SimplexQPIterate, "_column_source", lambda self, view: None)
        operator_run = solve()
    return operator_run, solve()


def _assert_same_trajectory(a, b, solver):
    """Runs ``a`` (numpy) and ``b`` (compiled) agree to rounding: every certified dual
    value and primal, coreset size and away-step count, and the final α, v."""
    assert a.n_iter == b.n_iter  # the budget, not a BLAS-dependent stop
    scale = abs(a.dual) + a.history["primal"].max()
    for key in ("dual", "primal"):
        np.testing.assert_allclose(b.history[key], a.history[key], rtol=0, atol=1e-10 * scale)
    np.testing.assert_array_equal(b.history["coreset"], a.history["coreset"])
    np.testing.assert_array_equal(b.history["away_steps"], a.history["away_steps"])
    np.testing.assert_allclose(b["alpha"], a["alpha"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(b["v"], a["v"], rtol=0, atol=1e-10 * np.abs(a["v"]).max())
    if solver == "mfw":
        assert a.history["drop_steps"][-1] > 0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("problem", ["meb", "l2svm", "l2svm_poly"])
@pytest.mark.parametrize("solver", ["mfw", "lsfw"])
def test_compiled_iterates_equal_numpy_iterates(monkeypatch, problem, solver):
    """Same trajectory to rounding: every certified dual value, gap and coreset size,
    and the final α, v (FW and MFW; MEB and L2-SVM, constant and non-constant diagonal)."""
    pytest.importorskip("numba")
    X = _points(150, d=4, seed=21)
    y = np.where(X[:, 0] + 0.4 * X[:, 1] > 0, 1.0, -1.0)
    kernel, params = (
        ("poly", {"gamma": 0.5, "degree": 2, "coef0": 1.0})
        if problem == "l2svm_poly"
        else ("rbf", {"gamma": 0.5})
    )
    K = Gram(_gram(X, kernel, params))
    op = K if problem == "meb" else L2SVMKernel(K, y, 2.0)
    q = op.diag() if problem == "meb" else None

    def solve():
        # 1500 steps: > 2 refreshes of the maintained scalars, drop steps, a γ = 1 step
        return solve_simplex_qp(
            op, q=q, solver=solver, tol=1e-13, max_iter=1500, check_every=1, random_state=4
        )

    _assert_same_trajectory(*_both_backends(monkeypatch, solve), solver)


def test_compiled_backend_reaches_the_same_certified_optimum(monkeypatch):
    pytest.importorskip("numba")
    X = _points(300, d=5, seed=22)
    op = KernelFunction(X, "rbf", gamma=0.2, cache_size=0.2)
    a, b = _both_backends(monkeypatch, lambda: solve_simplex_qp(op, q=op.diag(), tol=1e-9))
    assert a.converged and b.converged
    assert abs(a.dual - b.dual) <= a.gap + b.gap
    assert _center_distance(op.dense(), a["alpha"], b["alpha"]) <= np.sqrt(a.gap) + np.sqrt(b.gap)


# -- random_state must move the start ----------------------------------------------------
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_random_state_changes_the_start_point():
    X = _points(50, seed=12)
    op = Gram(X @ X.T)
    starts = {}
    for seed in (None, 3, 5):
        res = solve_simplex_qp(op, q=op.diag(), max_iter=0, random_state=seed)
        a = 0 if seed is None else int(np.random.default_rng(seed).integers(50))
        assert a in res["support"]  # the start pair contains the chosen point
        starts[seed] = tuple(res["support"])
    assert len(set(starts.values())) == 3
    # the estimator passes its random_state on
    fits = [
        MinimumEnclosingBall(nu=0, kernel="linear", solver="mfw", max_iter=0, random_state=s).fit(X)
        for s in (3, 5)
    ]
    assert tuple(fits[0].support_) == starts[3] and tuple(fits[1].support_) == starts[5]
    again = MinimumEnclosingBall(
        nu=0, kernel="linear", solver="mfw", max_iter=0, random_state=3
    ).fit(X)
    np.testing.assert_array_equal(again.support_, fits[0].support_)


# -- decisions robust to round-off (points on the sphere) -----------------------------------
@pytest.mark.parametrize("tol", [1e-4, 1e-6])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_training_points_on_the_sphere_are_inliers_in_any_batch(dtype, kernel, tol):
    X = (3 * np.random.RandomState(0).uniform(size=(20, 3))).astype(dtype)
    ball = MinimumEnclosingBall(nu=0, kernel=kernel, tol=tol, solver="mfw").fit(X)
    # kernel values are kept in float32 at tol >= 1e-4 (the default), else in X's type
    assert ball._gram_dtype() == (np.float32 if tol >= 1e-4 else None)
    values = ball._gram_dtype() or dtype
    whole = ball.predict(X)
    assert np.all(whole == 1)
    for i in range(len(X)):  # one point at a time, and in reverse order
        assert ball.predict(X[i : i + 1])[0] == 1
    assert np.all(ball.predict(X[::-1]) == 1)
    assert ball.predict(X[4:5])[0] == whole[4]  # the issue's reproducer
    # the slack is round-off sized (of the kernel values): a point 1 % outside the
    # sphere is an outlier
    eps = np.finfo(values).eps
    assert 0 < ball.boundary_tol_ <= 1e3 * eps * (1 + ball.radius_**2 + ball.center_norm2_)
    # the sphere passes through the farthest training point (what made it fragile)
    assert abs(ball.distance2(X).max() - ball.radius_**2) <= ball.boundary_tol_


def test_a_point_just_outside_the_sphere_is_an_outlier():
    X = 3 * np.random.RandomState(0).uniform(size=(20, 3))
    ball = MinimumEnclosingBall(nu=0, kernel="linear", tol=1e-10).fit(X)
    centre = ball.dual_coef_[0] @ X[ball.support_]
    far = X[ball.support_[0]]
    outside = centre + 1.01 * (far - centre)
    assert ball.predict(outside[None, :])[0] == -1
    assert ball.predict((centre + 0.99 * (far - centre))[None, :])[0] == 1


# -- indefinite Q: no certificate ----------------------------------------------------------
def test_indefinite_matrix_raises_instead_of_certifying(monkeypatch):
    from kernfw.operators.psd import NotPSDError

    X = _points(40, seed=23)
    # K − 0.5·I with a wide RBF (K ≈ 1): the line search meets dᵀQd < 0 at once
    op = Gram(rbf_kernel(X, gamma=0.01) - 0.5 * np.eye(40), check=False)
    with pytest.raises(NotPSDError, match="negative curvature"):
        solve_simplex_qp(op, q=op.diag(), tol=1e-8)
    with pytest.raises(NotPSDError, match="negative curvature"):
        solve_simplex_qp(L2SVMKernel(op, np.where(X[:, 0] > 0, 1.0, -1.0), 100.0), tol=1e-8)
    # a narrow RBF: the directions FW takes have positive curvature, so the estimator's
    # cheap spectrum check on an operator kernel is what refuses it
    narrow = Gram(rbf_kernel(X, gamma=0.5) - 0.5 * np.eye(40), check=False)
    with pytest.raises(NotPSDError, match="positive semidefinite"):
        MinimumEnclosingBall(kernel=narrow).fit(X)


# -- the CVM baseline ------------------------------------------------------------------------
@pytest.mark.cvxpy
@pytest.mark.parametrize("kernel,params", KERNELS)
def test_cvm_reaches_the_cvxpy_optimum_within_its_certified_gap(kernel, params):
    from kernfw.reference import meb_reference

    X = _points(60, seed=24)
    K = _gram(X, kernel, params)
    r2 = meb_reference(K)["radius2"]
    op = Gram(K)
    cvm = solve_simplex_qp(op, q=op.diag(), solver="cvm", tol=StoppingRule(1e-8, "absolute"))
    mfw = solve_simplex_qp(op, q=op.diag(), solver="mfw", tol=StoppingRule(1e-8, "absolute"))
    assert cvm.converged and cvm.gap <= 1e-8
    # the certified bracket dual ≤ r*² ≤ primal holds (to the reference's accuracy)
    assert cvm.dual <= r2 + 1e-7 * r2 and r2 <= cvm.primal + 1e-7 * r2
    assert abs(cvm.dual - mfw.dual) <= cvm.gap + mfw.gap + 1e-12 * r2
    # every iteration adds one point: the core set is the iteration count + the start pair
    assert cvm.history["coreset"][-1] <= cvm.n_iter + 2
    assert np.all(np.diff(cvm.history["dual"]) >= -1e-12 * r2)


def test_cvm_radius_rule_and_estimator():
    X = _points(200, d=5, seed=25)
    op = Gram(rbf_kernel(X, gamma=0.3))
    eps = 1e-3
    res = solve_simplex_qp(op, q=op.diag(), solver="cvm", tol=eps)
    assert res.converged
    assert np.sqrt(res.primal) <= (1 + eps) * np.sqrt(res.dual) * (1 + 1e-12)
    exact = solve_simplex_qp(op, q=op.diag(), tol=1e-12)
    assert res.dual <= exact.dual * (1 + 1e-12) <= res.primal * (1 + 1e-12)
    ball = MinimumEnclosingBall(nu=0, solver="cvm", gamma=0.3, tol=eps).fit(X)
    assert ball.converged_ and np.all(ball.predict(X) == 1)
    # the estimator's tol is the relative gap on r²: (R² − r²)/r² ≤ tol
    assert ball.duality_gap_ <= eps * ball.dual_objective_
    assert ball.radius_**2 <= (1 + eps) * ball.radius_lower_**2 * (1 + 1e-12)
    assert ball.radius_lower_ <= np.sqrt(exact.dual) * (1 + 1e-9) <= ball.radius_ * (1 + 1e-9)


def test_default_tol_is_the_cvm_radius_rule_at_eps_1e_4():
    """tol = 2ε + ε² is the (1+ε) radius rule: the default certifies R ≤ (1 + 1e-4) r."""
    X = _points(300, d=5, seed=26)
    ball = MinimumEnclosingBall(nu=0, gamma=0.3).fit(X)
    assert ball.tol == 2e-4 and ball.converged_
    assert ball.radius_ <= (1 + 1e-4) * ball.radius_lower_
    assert ball.duality_gap_ <= ball.tol * ball.dual_objective_


# -- compiled steps that evaluate the columns themselves (operator column views) ----------
def _column_view_operator(source, problem, X, y):
    if source == "rbf":
        K = KernelFunction(X, "rbf", gamma=0.5, cache_size=0.05)  # a cache of 43 columns
    elif source == "gram_fortran":  # e.g. the weighted sum of MKL kernels
        K = Gram(np.asfortranarray(_gram(X, "rbf", {"gamma": 0.5})))
    else:
        K = Gram(_gram(X, "rbf", {"gamma": 0.5}))
    return K if problem == "meb" else L2SVMKernel(K, y, 2.0)


def _evaluate_column(it, src, j, out, scratch):
    """Column ``j`` of a compiled iterate's column source, evaluated by the compiled code."""
    from kernfw.solvers.simplex_qp import _numba as mod

    mod.evaluate_column(src, it._con[mod.SQ_NORMS], it._con[mod.LABELS], it._st, j, out, scratch)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("source", ["rbf", "gram", "gram_fortran"])
@pytest.mark.parametrize("problem", ["meb", "l2svm"])
@pytest.mark.parametrize("solver", ["mfw", "lsfw"])
def test_compiled_column_step_iterates_equal_numpy_iterates(monkeypatch, source, problem, solver):
    """The compiled step that evaluates RBF / Gram columns itself (fused distances, exp,
    L2-SVM transform, its own LRU cache) follows the numpy path's trajectory."""
    pytest.importorskip("numba")
    from kernfw.solvers.simplex_qp.solve import make_iterate

    X = _points(150, d=4, seed=21)
    y = np.where(X[:, 0] + 0.4 * X[:, 1] > 0, 1.0, -1.0)
    op = _column_view_operator(source, problem, X, y)
    q = op.diag() if problem == "meb" else None
    it = make_iterate(op, q, solver, None, None)
    assert it._source is not None  # the compiled column step is used

    def solve():
        return solve_simplex_qp(
            op, q=q, solver=solver, tol=1e-13, max_iter=1500, check_every=1, random_state=4
        )

    _assert_same_trajectory(*_both_backends(monkeypatch, solve), solver)


def test_compiled_column_cache_evicts_and_serves_the_operator_columns(monkeypatch):
    """The compiled column of every index equals the operator's (within a few ulps; the
    L2-SVM's without its diagonal term 1/C, which the step adds in float64), through cache
    misses, evictions (a one-column cache) and hits."""
    pytest.importorskip("numba")
    from kernfw.solvers.simplex_qp.solve import make_iterate

    X = _points(300, d=7, seed=5) * 3.0
    y = np.where(X[:, 1] > 0, 1.0, -1.0)
    for problem in ("meb", "l2svm"):
        for cache_mb in (0.0, 1.0):
            K = KernelFunction(X, "rbf", gamma=0.05, cache_size=cache_mb)
            op = K if problem == "meb" else L2SVMKernel(K, y, 0.5)
            it = make_iterate(op, None, "fw", None, None)
            src, slab, slot_of, slots = it._source
            assert slab.shape[0] == (1 if cache_mb == 0 else 300)
            ref = op.dense()
            out, scratch = np.empty(300), np.empty(300)
            for j in (0, 17, 299, 17):
                _evaluate_column(it, src, j, out, scratch)
                expected = ref[:, j].copy()
                if problem == "l2svm":
                    expected[j] -= 1.0 / 0.5
                np.testing.assert_allclose(out, expected, rtol=4e-16 * 8, atol=1e-15)
    # a 1-column cache: every request is a miss, and the solver still converges
    res = solve_simplex_qp(op, tol=1e-8)
    assert res.converged


def test_compiled_rbf_column_underflows_to_zero_like_numpy(monkeypatch):
    """Far points: exp(−γ d²) below 1e-300 is 0 (numpy: a subnormal or 0)."""
    pytest.importorskip("numba")
    from kernfw.solvers.simplex_qp.solve import make_iterate

    X = np.array([[0.0], [1.0], [30.0], [40.0], [1e3]])
    K = KernelFunction(X, "rbf", gamma=1.0)
    it = make_iterate(K, K.diag(), "mfw", None, None)
    src = it._source[0]
    out, scratch = np.empty(5), np.empty(5)
    _evaluate_column(it, src, 0, out, scratch)
    ref = K.columns([0])[:, 0]
    np.testing.assert_allclose(out, ref, rtol=1e-15, atol=1e-300)
    assert out[3] == 0.0 and out[4] == 0.0 and out[1] == pytest.approx(np.exp(-1.0), rel=1e-15)


def test_operators_without_a_column_view_use_the_columns_protocol(monkeypatch):
    """Other kernels (poly, callables, float64 values of float32 features, sparse) keep
    the column requests."""
    pytest.importorskip("numba")
    import scipy.sparse as sp

    from kernfw.solvers.simplex_qp.solve import make_iterate

    X = _points(40, d=3, seed=2)
    ops = [
        KernelFunction(X, "poly", gamma=0.5),
        KernelFunction(X.astype(np.float32), "rbf", dtype=np.float64),
        KernelFunction(sp.csr_matrix(X), "rbf"),
        KernelFunction(X, lambda A, B: A @ B.T),
    ]
    for op in ops:
        it = make_iterate(op, op.diag(), "mfw", None, None)
        assert it._source is None
        res = solve_simplex_qp(op, q=op.diag(), tol=1e-8)
        assert res.converged


# -- float32 kernel values: the compiled float32 RBF column -----------------------------------
def test_float32_rbf_column_matches_the_operator_to_float32_rounding(monkeypatch):
    """A float32 ``KernelFunction`` gets the compiled float32 column (differences of
    features, float32 ``exp``): within 1e-6 of the float64 kernel, cached in float32."""
    pytest.importorskip("numba")
    from kernfw.solvers.simplex_qp.solve import make_iterate

    X = _points(300, d=7, seed=5) * 3.0
    y = np.where(X[:, 1] > 0, 1.0, -1.0)
    for problem in ("meb", "l2svm"):
        K = KernelFunction(X, "rbf", gamma=0.05, cache_size=1.0, dtype=np.float32)
        op = K if problem == "meb" else L2SVMKernel(K, y, 0.5)
        it = make_iterate(op, None, "fw", None, None)
        src, slab, _, _ = it._source
        assert src.dtype == np.float32 and slab.dtype == np.float32
        assert it._st["source"] == _core.SOURCE_RBF32
        exact = KernelFunction(X, "rbf", gamma=0.05)
        ref = exact.dense() if problem == "meb" else L2SVMKernel(exact, y, 0.5).dense()
        out = np.empty(300, dtype=np.float32)
        for j in (0, 17, 299):
            _evaluate_column(it, src, j, out, np.empty(300))
            expected = ref[:, j].copy()
            if problem == "l2svm":  # the diagonal term 1/C is added by the step, in float64
                expected[j] -= 1.0 / 0.5
            np.testing.assert_allclose(out, expected, rtol=2e-6, atol=1e-6)
    # the operator's own float32 columns (numpy path) are the float64 values rounded
    np.testing.assert_array_equal(K.columns([3]), exact.columns([3]).astype(np.float32))
    # far points underflow to 0 as in float64
    far = KernelFunction(np.array([[0.0], [1.0], [30.0]]), "rbf", gamma=1.0, dtype=np.float32)
    it = make_iterate(far, far.diag(), "mfw", None, None)
    out = np.empty(3, dtype=np.float32)
    _evaluate_column(it, it._source[0], 0, out, np.empty(3))
    assert out[0] == 1.0 and out[2] == 0.0 and out[1] == pytest.approx(np.exp(-1.0), rel=1e-6)


def test_float32_values_reach_the_float64_optimum_within_the_tolerance(monkeypatch):
    """MEB with float32 kernel values (the default at tol >= 1e-4): the certified radius
    brackets the exact (float64) optimum up to float32 rounding of the kernel."""
    X = _points(400, d=5, seed=31)
    exact = KernelFunction(X, "rbf", gamma=0.3)
    r2_star = solve_simplex_qp(exact, q=exact.diag(), tol=StoppingRule(1e-12, "absolute")).dual
    single = KernelFunction(X, "rbf", gamma=0.3, dtype=np.float32)
    res = solve_simplex_qp(single, q=single.diag(), tol=1e-4)
    assert res.converged
    rounding = 1e-6  # |K32 − K| ≤ ~2e-7 on the simplex
    assert res.dual <= r2_star + rounding and r2_star <= res.primal + rounding
    assert np.sqrt(res.primal) <= (1 + 1e-4) * np.sqrt(res.dual) * (1 + 1e-12)
    # the estimator at its defaults keeps float32 values and says so in its slack
    ball = MinimumEnclosingBall(nu=0, gamma=0.3).fit(X)
    assert ball._gram_dtype() == np.float32
    assert ball.radius_lower_**2 <= r2_star + rounding <= ball.radius_**2 + 2 * rounding


def test_kernel_function_dtype():
    X = _points(30, d=3, seed=3)
    K = KernelFunction(X, "rbf", gamma=0.5, dtype=np.float32)
    assert K.dtype == np.float32 and K.columns([1, 2]).dtype == np.float32
    assert K.columns([4]).dtype == np.float32 and K.subset([0, 1, 2]).dtype == np.float32
    assert K.column_source().matrix.dtype == np.float32
    assert KernelFunction(X.astype(np.float32), "rbf").dtype == np.float32
    with pytest.raises(ValueError, match="float32 or float64"):
        KernelFunction(X, "rbf", dtype=np.int64)
    op = make_operator(X, "rbf", backend="function", gram_dtype=np.float32)
    assert isinstance(op, KernelFunction) and op.dtype == np.float32


# -- runs of steps between certificates --------------------------------------------------------
@pytest.mark.parametrize("stop", ["gap", "relative", "radius"])
def test_runs_stop_at_the_first_iteration_that_passes(monkeypatch, stop):
    """A run of ``check_every`` steps ends where the O(1) estimate of the stopping rule
    holds, so certifying every 100 steps stops at the same iteration, with the same
    iterate, as certifying every step (no overshoot), on both paths."""
    X = _points(300, d=4, seed=8)
    op = KernelFunction(X, "rbf", gamma=0.4)
    scale = {"gap": "absolute", "relative": "dual", "radius": "radius"}[stop]
    tol = StoppingRule({"gap": 1e-6, "relative": 1e-6, "radius": 1e-5}[stop], scale)
    every, runs = (solve_simplex_qp(op, q=op.diag(), tol=tol, check_every=c) for c in (1, 100))
    assert every.converged and runs.converged
    assert runs.n_iter == every.n_iter > 100
    np.testing.assert_allclose(runs["alpha"], every["alpha"], rtol=0, atol=1e-12)
    assert len(runs.history["gap"]) < every.n_iter // 50
    # a run ends after 100 steps, at the refresh of the maintained scalars, or converged
    steps = np.diff(runs.history["iteration"])
    assert np.all(steps >= 1) and np.all(steps <= 100)


def test_compiled_argmin_is_numpys_first_index_of_the_minimum():
    """The compiled vertex search (count below the running minimum, then scan the block)
    returns ``np.argmin``: ties keep the first index, across and within blocks."""
    pytest.importorskip("numba")
    from kernfw.solvers.simplex_qp import _numba as mod

    rng = np.random.default_rng(0)
    cases = [
        rng.random(50_000),
        np.linspace(1.0, 0.0, 3000),
        np.ones(1000),
        rng.random(7),
        np.array([3.0, 1.0, 1.0, 2.0]),
        -rng.random(1025),
        np.array([5.0]),
        np.r_[np.full(600, 2.0), 1.0, np.full(600, 1.0)],
    ]
    for x in cases:
        assert mod._argmin(x) == int(np.argmin(x))


def test_weighted_mkl_gram_is_served_by_the_compiled_column_step(monkeypatch):
    """The dense ``K_γ`` of the MKL solvers' inner SVM (a Fortran-ordered sum) gets the
    compiled column step, not a column request per iteration (CSKL on digits: 3.7 → 1.3 s)."""
    pytest.importorskip("numba")
    from kernfw.operators import MultiKernel
    from kernfw.solvers.simplex_qp.solve import make_iterate

    X = _points(60, d=3, seed=9)
    mk = MultiKernel([Gram(rbf_kernel(X, gamma=g)) for g in (0.1, 1.0)])
    K = Gram(mk.with_weights(np.array([0.3, 0.7])).dense(), check=False)
    assert K.K.flags.f_contiguous and not K.K.flags.c_contiguous
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    it = make_iterate(L2SVMKernel(K, y, 1.0), None, "mfw", None, None)
    assert it._source is not None


def test_exactly_symmetric_gram_is_read_by_rows(monkeypatch):
    """An exactly symmetric C-ordered Gram is read through ``Kᵀ`` (its rows, contiguous);
    one asymmetric by a rounding error keeps its columns; both give the operator's columns."""
    pytest.importorskip("numba")
    from kernfw.solvers.simplex_qp.solve import make_iterate

    X = _points(80, d=3, seed=4)
    K = rbf_kernel(X, gamma=0.5)
    K = np.ascontiguousarray((K + K.T) / 2)
    skewed = K.copy()
    skewed[3, 7] = np.nextafter(skewed[3, 7], 2.0)
    for matrix, by_rows in ((K, True), (skewed, False)):
        op = Gram(matrix, check=False)
        it = make_iterate(op, op.diag(), "mfw", None, None)
        src = it._source[0]
        assert (src.base is matrix and src.flags.f_contiguous) == by_rows
        out = np.empty(80)
        for j in (0, 3, 7, 79):
            _evaluate_column(it, src, j, out, np.empty(80))
            np.testing.assert_array_equal(out, matrix[:, j])


# -- the ν-soft ball (math.md §2.9) -----------------------------------------------------------
@pytest.mark.parametrize("nu", [0.05, 0.2, 0.5])
def test_soft_ball_estimator_matches_cvxpy_and_bounds_outliers(nu):
    from kernfw.reference.meb import soft_ball_reference

    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(size=(45, 2)), rng.normal(loc=5.0, size=(5, 2))])
    ball = MinimumEnclosingBall(kernel="linear", nu=nu, tol=1e-9).fit(X)
    ref = soft_ball_reference(X @ X.T, nu)
    assert ball.converged_
    assert ball.dual_objective_ <= ref["objective"] * (1 + 1e-7)
    assert ball.primal_objective_ >= ref["objective"] * (1 - 1e-7)
    assert np.mean(ball.predict(X) == -1) <= nu
    assert ball.dual_coef_.max() <= 1.0 / (nu * X.shape[0]) * (1 + 1e-12)
    assert np.isnan(ball.radius_lower_)
    # the radius is the ⌈νn⌉-th largest training distance
    d = ball.distance2(X)
    k = int(np.ceil(nu * X.shape[0]))
    assert ball.radius_**2 == pytest.approx(np.sort(d)[-k], rel=1e-9)


def test_soft_ball_needs_the_pairwise_solver():
    X = np.random.RandomState(0).normal(size=(30, 2))
    with pytest.raises(ValueError, match="pairwise Frank-Wolfe"):
        MinimumEnclosingBall(nu=0.2, solver="cvm").fit(X)
    # nu * n <= 1 is the hard ball: every training point inside
    ball = MinimumEnclosingBall(nu=1 / 40).fit(X)
    assert np.all(ball.predict(X) == 1) and not np.isnan(ball.radius_lower_)


def test_float32_features_with_repeated_points_are_not_called_indefinite():
    """Repeated float32 points give dᵀQd ≈ −ε·scale by round-off alone: a PSD kernel, so
    the ball and the L2-SVM fit (and agree with the float64 fit) instead of NotPSDError."""
    from sklearn.datasets import make_classification

    from kernfw import L2SVC

    X, y = make_classification(n_samples=400, n_features=20, random_state=0)
    X, y = np.vstack([X, X[:50]]), np.concatenate([y, y[:50]])
    for make in (
        lambda: MinimumEnclosingBall(nu=0, kernel="linear", tol=1e-5),
        lambda: L2SVC(kernel="linear", solver="mfw", tol=1e-5),
    ):
        single = make().fit(X.astype(np.float32), y)
        double = make().fit(X, y)
        assert single.converged_
        np.testing.assert_allclose(single.dual_objective_, double.dual_objective_, rtol=1e-4)


# -- approximated kernels: far points are outliers (math.md §8.4) ---------------------------------
_FAR_BALLS = [
    ({"approx": "nystroem", "n_components": 300}, "nystroem-all"),
    ({"approx": "nystroem", "n_components": 30}, "nystroem-30"),
    ({"approx": "rff", "n_components": 300}, "rff"),
    ({"kernel": "poly", "degree": 2, "approx": "sketch", "n_components": 300}, "sketch"),
]


@pytest.mark.parametrize("nu", [0.0, 0.1])
@pytest.mark.parametrize("params", [p for p, _ in _FAR_BALLS], ids=[i for _, i in _FAR_BALLS])
def test_approximated_ball_puts_far_points_below_every_training_point(params, nu):
    """A point 50 standard deviations out scores below every training point.  With Nyström's
    ‖Φ(x)‖² as its self-similarity it scored +0.76 (an inlier) against a training minimum of
    0: far from the landmarks ‖Φ(x)‖² → 0 while k(x, x) = 1."""
    X = np.random.default_rng(0).normal(size=(300, 2))
    far = X[:5] + 50.0
    ball = MinimumEnclosingBall(nu=nu, random_state=0, **params).fit(X)
    train, outside = ball.decision_function(X), ball.decision_function(far)
    assert np.all(outside < train.min()), (outside, train.min())
    assert np.all(ball.predict(far) == -1)
    if nu == 0.0:  # the hard ball still contains every training point
        assert np.all(ball.predict(X) == 1)
    if params.get("n_components") == 300 and params["approx"] == "nystroem":
        # every point a landmark: the exact ball, far decisions included
        exact = MinimumEnclosingBall(nu=nu).fit(X)
        np.testing.assert_allclose(outside, exact.decision_function(far), atol=1e-3)
        assert outside.max() < -0.2


@pytest.mark.parametrize("normalize", [None, "trace", "center", "unit_diagonal"])
def test_exact_self_similarity_of_low_rank_features(normalize):
    """``exact_new_diag`` is k(x, x) under the normalization: ‖Φ(x)‖² when T is exact (every
    point a landmark), the kernel's own value where T misses it (far away)."""
    X = _points(40, 3)
    spec = ("rbf", {"gamma": 0.5} if normalize is None else {"gamma": 0.5, "normalize": normalize})
    op = make_operator(X, spec, approx="nystroem", n_components=40, random_state=0)
    np.testing.assert_allclose(op.exact_new_diag(X), op.new_diag(X), atol=1e-8)
    far = X[:3] + 100.0
    if normalize in (None, "trace"):  # the approximation's self-similarity vanishes there
        assert np.all(op.new_diag(far) < 1e-8)
    expected = {None: 1.0, "trace": op.stats.get("scale"), "unit_diagonal": 1.0}
    if normalize == "center":  # ‖Φ(x)‖² + 1 − ‖T(x)‖², with T(x) = 0 far away: ‖μ‖² + 1
        expected[normalize] = float(op.stats["mean"] @ op.stats["mean"]) + 1.0
    np.testing.assert_allclose(op.exact_new_diag(far), expected[normalize], rtol=1e-6)
