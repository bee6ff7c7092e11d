"""The fit plan: solver, backend, kernel-value type, Gram budget, approximation and seeds
are resolved once, before the operator is built, and the operator is built from them."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification, make_regression

import kernfw.estimators._base as base
from kernfw import L2SVC, L2SVR, MinimumEnclosingBall, MultiClassSVM
from kernfw.estimators._plan import FitPlan, gram_budget
from kernfw.kernels import COLUMN_GRAM_MAX_MB, make_operator
from kernfw.operators import Gram
from kernfw.solvers.simplex_qp.exact import EXACT_MAX


@pytest.fixture
def built(monkeypatch):
    """The keyword arguments of every ``make_operator`` call of the estimators."""
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return make_operator(*args, **kwargs)

    monkeypatch.setattr(base, "make_operator", spy)
    return calls


def _classification(n, d=5, seed=0):
    return make_classification(n, d, n_informative=3, n_redundant=0, random_state=seed)


@pytest.mark.parametrize(
    "n,kernel,sparse,approx,solver,dtype",
    [
        (EXACT_MAX, "rbf", False, None, "active_set", None),  # exact: float64 values
        (EXACT_MAX + 1, "rbf", False, None, "mfw", np.float32),
        (200, "linear", False, None, "dcd", np.float32),  # features: vertex coordinates
        (200, "linear", True, None, "dcd", np.float32),
        (200, "rbf", False, "nystroem", "dcd", np.float32),
    ],
)
def test_l2svc_plan_resolves_auto_from_the_shape(built, n, kernel, sparse, approx, solver, dtype):
    X, y = _classification(n)
    X = sp.csr_matrix(X) if sparse else X
    clf = L2SVC(kernel=kernel, approx=approx, n_components=20, random_state=0).fit(X, y)
    plan = clf._plan
    assert isinstance(plan, FitPlan) and plan.solver == clf.solver_ == solver
    assert plan.backend == "local" and plan.approx == approx and plan.dtype is dtype
    assert built[-1]["gram_dtype"] is dtype and built[-1]["approx"] == approx
    assert built[-1]["gram_max_mb"] == plan.gram_max_mb == COLUMN_GRAM_MAX_MB


def test_frank_wolfe_solvers_keep_approximated_features_in_float64(built):
    X, y = _classification(200)
    for est in (L2SVC(solver="mfw"), MinimumEnclosingBall(nu=0), L2SVR(solver="mfw")):
        est.set_params(approx="nystroem", n_components=20, random_state=0)
        est.fit(X, y.astype(float))
        assert est._plan.dtype is np.float64 and built[-1]["gram_dtype"] is np.float64
        assert est.kernel_approx_.n_components == 20
    for est in (L2SVC(), L2SVR()):  # "auto": the coordinate passes, on float32 features
        est.set_params(approx="nystroem", n_components=20, random_state=0)
        est.fit(X, y.astype(float))
        assert est.solver_ == "dcd" and est._plan.dtype is np.float32
    mc = MultiClassSVM(approx="nystroem", n_components=20, random_state=0).fit(X, y)
    assert mc._plan.dtype is np.float32 and built[-1]["gram_dtype"] is np.float32


def test_the_ball_plans_the_exact_solve_on_the_rows_of_positive_weight(built):
    X = np.random.default_rng(0).normal(size=(EXACT_MAX + 6, 3))
    w = np.ones(len(X))
    w[:6] = 0.0  # EXACT_MAX rows count: the exact solve, and float64 values for it
    ball = MinimumEnclosingBall(nu=0).fit(X, sample_weight=w)
    assert ball._plan.solver == ball.solver_ == "active_set" and ball._plan.dtype is None
    assert built[-1]["gram_dtype"] is None
    removed = MinimumEnclosingBall(nu=0).fit(X[6:])
    assert removed.solver_ == "active_set"
    assert ball.radius_ == pytest.approx(removed.radius_, rel=1e-9)
    full = MinimumEnclosingBall(nu=0).fit(X)
    assert full._plan.solver == "mfw" and full._plan.dtype is np.float32


def test_wide_inputs_get_the_large_gram_budget(built):
    X, y = _classification(120, d=60)
    clf = L2SVC(cache_size=300).fit(X, y)
    assert clf._plan.gram_max_mb == 300.0 == built[-1]["gram_max_mb"]
    assert gram_budget(X.tolist(), 300) == 300.0  # read before validation: lists too
    assert gram_budget(None, 300) == COLUMN_GRAM_MAX_MB


def test_seeds_are_resolved_once():
    X, y = _classification(200)
    gen = np.random.default_rng(3)
    plan = L2SVC(random_state=gen)._fit_plan(X)
    assert plan.solver_seed is gen and isinstance(plan.approx_seed, int)
    plan = L2SVC(random_state=np.random.RandomState(0))._fit_plan(X)
    assert isinstance(plan.solver_seed, int)
    assert isinstance(plan.approx_seed, np.random.RandomState)
    assert L2SVC(random_state=7)._fit_plan(X)[-2:] == (7, 7)


@pytest.mark.parametrize("cls", [L2SVC, MinimumEnclosingBall, L2SVR, MultiClassSVM])
def test_approx_is_refused_once_for_grams_and_operators(cls):
    X, y = make_regression(30, 4, random_state=0)
    y = (y > 0).astype(int) if cls in (L2SVC, MultiClassSVM) else y
    K = X @ X.T
    with pytest.raises(ValueError, match="kernel='precomputed' gives no features"):
        cls(kernel="precomputed", approx="nystroem").fit(K, y)
    with pytest.raises(ValueError, match="a KernelOperator gives no features"):
        cls(kernel=Gram(K), approx="nystroem").fit(None, y)


@pytest.mark.parametrize("cls", [L2SVC, MinimumEnclosingBall])
def test_the_dask_backend_is_planned_without_a_cluster(cls):
    X, y = _classification(100)
    with pytest.raises(ValueError, match="runs on the local backend only"):
        cls(backend="dask", approx="nystroem")._fit_plan(X)
    with pytest.raises(ValueError, match="runs locally only"):
        cls(backend="dask", solver="active_set")._fit_plan(X)
    plan = cls(backend="dask", tol=1e-3)._fit_plan(X)
    assert plan.backend == "dask" and plan.solver == "mfw" and plan.dtype is None


def test_small_problems_run_to_the_rounding_floor(built):
    """One rule (math.md §0): at most ``SMALL_PROBLEM_MAX`` examples are solved to the
    rounding floor whatever ``tol`` (``EXACT_MAX`` is that size), with float64 kernel
    values; above it a fit stops at ``tol``.  ``converged_`` states the tolerance."""
    from kernfw import StructuredSVM
    from kernfw.estimators._plan import stopping_tol
    from kernfw.fw import SMALL_PROBLEM_MAX, StoppingRule

    assert EXACT_MAX == SMALL_PROBLEM_MAX == 64
    rule = stopping_tol(3e-2, SMALL_PROBLEM_MAX)
    assert isinstance(rule, StoppingRule) and rule.to_floor and rule.tol == 3e-2
    assert rule.scale is None  # the problem's own scale, filled in by the iterate
    assert stopping_tol(3e-2, SMALL_PROBLEM_MAX + 1) == 3e-2 and stopping_tol(0.0, 10) == 0.0
    for n in (SMALL_PROBLEM_MAX, 3 * SMALL_PROBLEM_MAX):
        X, y = make_classification(n, 5, n_informative=3, n_classes=3, random_state=0)
        for est in (MultiClassSVM(), StructuredSVM(random_state=0)):
            h = est.fit(X, y).history_
            met = h["gap"] + h["rounding"] <= est.tol * h["primal"]
            first = int(np.argmax(met))  # the first certificate that met tol
            assert est.converged_ and met[-1] and est.duality_gap_ == h["gap"].min()
            if n <= SMALL_PROBLEM_MAX:  # on past tol, until the floor or no longer falling
                assert len(h["gap"]) > first + 10 and est.duality_gap_ < h["gap"][first] / 2
            else:
                assert len(h["gap"]) == first + 1
        assert MultiClassSVM().fit(X, y)._plan.dtype is (None if n <= 64 else np.float32)
