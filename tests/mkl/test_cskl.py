"""CSKL (math.md §5): capped-simplex geometry, directions, inner SVMs, the optimum
against cvxpy for every weight update and inner SVM, sparsity facts, exact=True,
the estimator and bad input."""

import math
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernfw import CSKLClassifier, LpMKLClassifier, OnlineMKLClassifier
from kernfw.estimators._multiclass_decomposition import binary_problems
from kernfw.fw import armijo_step
from kernfw.fw.capped_simplex import (
    check_t,
    project_capped_simplex,
    sum_top_t,
    top_t_vertex,
)
from kernfw.kernels import make_operator
from kernfw.operators import Gram, MultiKernel
from kernfw.solvers.mkl.cskl import (
    exact_selection,
    frank_wolfe_direction,
    projected_gradient_direction,
    reduced_gradient_direction,
    solve_cskl,
)
from kernfw.solvers.mkl.inner_svm import KernelWeightObjective, coding_matrix, make_inner_svm
from kernfw.solvers.simplex_qp import L2SVMKernel

N_POINTS = 40
SPECS = [("rbf", {"gamma": 0.5, "columns": [j]}) for j in range(6)] + [
    "linear",
    ("poly", {"degree": 2}),
]
UPDATES = ("projected_gradient", "reduced_gradient", "frank_wolfe")


def _data(n=N_POINTS, seed=0, n_classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    score = X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)
    if n_classes == 2:
        return X, np.where(score > 0, 1, -1)
    return X, np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))


@pytest.fixture(scope="module")
def problem():
    X, y = _data()
    K = make_operator(X, SPECS, normalization="trace")
    return K, y, [op.dense() for op in K.operators]


@pytest.fixture(scope="module")
def references(problem):
    """cvxpy optima, computed once per (svm, t)."""
    pytest.importorskip("cvxpy")
    from kernfw.reference import cskl_reference

    _, y, grams = problem
    cache = {}

    def get(svm, t):
        if (svm, t) not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # Clarabel "inaccurate"
                cache[svm, t] = cskl_reference(grams, y, t, svm=svm, C=1.0, nu=0.3)
        return cache[svm, t]

    return get


# -- capped simplex ---------------------------------------------------------------------------
@pytest.mark.cvxpy
def test_projection_matches_cvxpy():
    import cvxpy as cp

    from kernfw.reference.common import solve_problem

    rng = np.random.default_rng(1)
    for trial in range(25):
        m = int(rng.integers(2, 9))
        t = float(rng.integers(1, m + 1)) if trial % 3 == 0 else rng.uniform(0.2, m)
        v = rng.normal(size=m) * rng.choice([0.1, 1.0, 5.0])
        if trial % 5 == 0:
            v = np.round(v)  # ties at breakpoints
        proj = project_capped_simplex(v, t)
        x = cp.Variable(m)
        best = solve_problem(
            cp.Problem(cp.Minimize(cp.sum_squares(x - v)), [x >= 0, x <= 1, cp.sum(x) == t])
        )
        assert np.all(proj >= 0) and np.all(proj <= 1)
        assert proj.sum() == pytest.approx(t, abs=1e-12)
        assert np.sum((proj - v) ** 2) <= best + 1e-8


def test_projection_fixes_points_of_the_set_and_moves_others():
    gamma = np.array([1.0, 0.25, 0.75, 0.0])
    np.testing.assert_allclose(project_capped_simplex(gamma, 2.0), gamma, atol=1e-15)
    np.testing.assert_allclose(
        project_capped_simplex(np.array([2.0, 0.3, 0.1]), 1.5), [1.0, 0.35, 0.15]
    )
    np.testing.assert_allclose(project_capped_simplex(np.array([5.0, -3.0, 0.0]), 3.0), 1.0)


@pytest.mark.cvxpy
def test_top_t_vertex_is_the_lp_maximizer():
    import cvxpy as cp

    from kernfw.reference.common import solve_problem

    rng = np.random.default_rng(2)
    for t in (1.0, 2.0, 2.5, 0.4, 5.0):
        d = rng.normal(size=5)
        s = top_t_vertex(d, t)
        x = cp.Variable(5)
        best = solve_problem(cp.Problem(cp.Maximize(d @ x), [x >= 0, x <= 1, cp.sum(x) == t]))
        assert s @ d == pytest.approx(best, abs=1e-8)
        assert sum_top_t(d, t) == pytest.approx(best, abs=1e-8)
        assert s.sum() == pytest.approx(t) and s.min() >= 0 and s.max() <= 1


def test_top_t_vertex_structure_and_ties():
    d = np.array([0.5, 3.0, 2.0, 1.0])
    np.testing.assert_array_equal(top_t_vertex(d, 2.5), [0, 1, 1, 0.5])
    np.testing.assert_array_equal(top_t_vertex(np.ones(3), 1.0), [1, 0, 0])  # stable ties
    assert sum_top_t(d, 2.0) == 5.0


@pytest.mark.parametrize("t", [0, -1.0, 4.5, math.inf])
def test_check_t_rejects_values_outside_0_p(t):
    with pytest.raises((ValueError, TypeError), match="t must"):
        check_t(t, 4)


# -- directions and line search -------------------------------------------------------------
def test_reduced_gradient_direction_is_descent_and_feasible():
    rng = np.random.default_rng(3)
    for _ in range(20):
        gamma = project_capped_simplex(rng.normal(size=6), 2.5)
        gamma[np.abs(gamma) < 1e-12] = 0.0
        grad = rng.normal(size=6)
        D, tau_max = reduced_gradient_direction(gamma, grad)
        free = (gamma > 0) & (gamma < 1)
        mu = int(np.argmax(np.where(free, np.minimum(gamma, 1 - gamma), -np.inf)))
        others = np.delete(D, mu)
        assert grad @ D == pytest.approx(-np.sum(others**2))
        assert D.sum() == pytest.approx(0.0, abs=1e-12)
        new = gamma + tau_max * D
        assert new.min() >= -1e-12 and new.max() <= 1 + 1e-12


def test_reduced_gradient_is_zero_at_a_kkt_point():
    gamma = np.array([1.0, 0.5, 0.5, 0.0])
    grad = np.array([-3.0, -2.0, -2.0, -1.0])  # ties on the free kernels
    D, _ = reduced_gradient_direction(gamma, grad)
    np.testing.assert_array_equal(D, 0.0)
    D, tau = reduced_gradient_direction(np.array([1.0, 0.0, 1.0]), np.array([-1.0, -2.0, -3.0]))
    np.testing.assert_array_equal(D, [-1.0, 1.0, 0.0])  # vertex: swap a (at 0) and b (at 1)
    assert tau == 1.0


def test_projected_gradient_and_fw_directions():
    gamma = np.full(4, 0.5)
    grad = np.array([-4.0, -1.0, 0.0, 2.0])
    D, tau = projected_gradient_direction(gamma, grad, 2.0)
    assert tau == 1.0 and grad @ D < 0
    np.testing.assert_allclose(gamma + D, project_capped_simplex(gamma - grad / 4.0, 2.0))
    D, tau = frank_wolfe_direction(gamma, grad, 2.0)
    np.testing.assert_array_equal(gamma + D, [1, 1, 0, 0])


def test_armijo_step_accepts_sufficient_decrease_and_falls_back():
    tau, val = armijo_step(lambda s: (s - 0.3) ** 2, 0.09, -0.6, 1.0)
    assert tau == 0.5 and val == pytest.approx(0.04)
    assert val <= 0.09 + 1e-4 * tau * -0.6
    tau, val = armijo_step(lambda s: 1.0 + s, 1.0, -1.0, 1.0, max_backtracks=3)
    assert tau == 0.0 and val == 1.0  # no decrease anywhere


# -- inner SVMs -------------------------------------------------------------------------------
def _problems(y, m, scheme):
    return [(p.classes, p.index, p.y) for p in binary_problems(y, m, scheme)]


def test_ovo_coefficients_unpack_libsvm_layout():
    X, y = _data(n=45, n_classes=3)
    K = Gram(np.exp(-0.3 * ((X[:, None] - X[None]) ** 2).sum(-1)))
    svm = make_inner_svm("c", y, 3, C=1.0, tol=1e-10, problems=_problems(y, 3, "ovo"))
    assert svm.ovo  # one libsvm call for all pairs
    sol = svm.solve(K)
    for code, v, b in zip(svm.codes, sol.coef, sol.intercept):
        sub = code != 0
        model = SVC(C=1.0, kernel="precomputed", tol=1e-10).fit(K.K[np.ix_(sub, sub)], code[sub])
        expected = np.zeros(45)
        expected[np.flatnonzero(sub)[model.support_]] = model.dual_coef_[0]
        np.testing.assert_allclose(v, expected, atol=1e-8)
        assert b == pytest.approx(model.intercept_[0], abs=1e-8)


@pytest.mark.parametrize("svm", ["c", "nu", "l2"])
def test_inner_value_is_the_svm_dual(problem, svm):
    K, y, grams = problem
    gamma = np.linspace(0.1, 0.9, K.p)
    inner = make_inner_svm(svm, (y > 0).astype(int), 2, C=1.0, nu=0.3, tol=1e-10)
    ev = KernelWeightObjective(K, inner).evaluate(gamma)
    Kg = sum(g * G for g, G in zip(gamma, grams))
    v = ev.solution.coef[0]
    alpha = np.abs(v)
    if svm == "c":
        expected = alpha.sum() - 0.5 * v @ Kg @ v
        assert alpha.max() <= 1.0 + 1e-9
    elif svm == "nu":
        expected = -0.5 * v @ Kg @ v
        assert alpha.sum() == pytest.approx(0.3) and alpha.max() <= 1 / y.size + 1e-12
    else:
        expected = -L2SVMKernel(Gram(Kg), y, 1.0).quad(alpha)
        assert alpha.sum() == pytest.approx(1.0)
    assert ev.value == pytest.approx(expected, rel=1e-10)
    assert abs(v.sum()) < 1e-8 or svm == "l2"
    assert ev.solution.inner_gap < 1e-5 * max(1.0, abs(expected))


# -- the optimum against cvxpy ------------------------------------------------------------------
def _check_against_reference(res, ref, converged_rel=None):
    """J* ∈ [dual, primal + inner gap], and primal − J* ≤ G (math.md §5.3, §6)."""
    J_star = ref["value"]
    scale = abs(J_star)
    inner_gap = res.history["inner_gap"][-1]
    assert res.dual <= J_star + 1e-7 * scale
    assert res.primal >= J_star - inner_gap - 1e-7 * scale
    assert res.primal - J_star <= res.gap + 1e-7 * scale
    if converged_rel is not None:
        assert abs(res.primal - J_star) <= converged_rel * scale


@pytest.mark.cvxpy
@pytest.mark.parametrize("svm", ["c", "nu", "l2"])
@pytest.mark.parametrize("update", UPDATES)
def test_cskl_optimum_matches_cvxpy(problem, references, svm, update):
    K, y, _ = problem
    # the FW (LP) direction zig-zags (math.md §5.3): it is run to tol=1e-3, the others to 1e-5;
    # each must converge and then be within its tol of the cvxpy optimum
    tol = 1e-3 if update == "frank_wolfe" else 1e-5
    res = solve_cskl(K, y, 2.0, svm=svm, nu=0.3, solver=update, tol=tol, max_iter=100)
    ref = references(svm, 2.0)
    assert res.converged and res.gap <= tol * abs(res.primal)
    _check_against_reference(res, ref, converged_rel=tol)
    gamma = res["gamma"]
    assert gamma.sum() == pytest.approx(2.0) and gamma.min() >= 0 and gamma.max() <= 1


@pytest.mark.cvxpy
@pytest.mark.parametrize("t", [1.0, 2.5, 3.0])
def test_cskl_optimum_for_several_t(problem, references, t):
    K, y, _ = problem
    res = solve_cskl(K, y, t, svm="c", tol=1e-6, max_iter=100)
    assert res.converged
    _check_against_reference(res, references("c", t), converged_rel=2e-6)


@pytest.mark.cvxpy
def test_exact_line_search_reaches_the_optimum(problem, references):
    K, y, _ = problem
    res = solve_cskl(K, y, 2.5, svm="c", line_search="exact", tol=1e-6, max_iter=60)
    assert res.converged
    _check_against_reference(res, references("c", 2.5), converged_rel=2e-6)


@pytest.mark.cvxpy
@pytest.mark.parametrize("svm, multi_class", [("c", "ovr"), ("c", "ovo"), ("l2", "ovr")])
def test_multiclass_shared_weights_match_cvxpy(svm, multi_class):
    from kernfw.reference import cskl_reference

    X, y = _data(n=30, seed=4, n_classes=3)
    K = make_operator(X, SPECS[:3] + ["linear"], normalization="trace")
    problems = _problems(y, 3, multi_class)
    res = solve_cskl(K, y, 1.5, svm=svm, problems=problems, tol=1e-6, max_iter=100)
    codes = coding_matrix(problems, y.size)
    assert res["coef"].shape[0] == codes.shape[0] == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = cskl_reference([op.dense() for op in K.operators], codes, 1.5, svm=svm)
    assert res.converged
    _check_against_reference(res, ref, converged_rel=1e-5)


# -- what t controls (math.md §5.4) ---------------------------------------------------------
@pytest.mark.parametrize("t", [1.0, 2.0, 2.5, 3.0])
def test_t_is_a_lower_bound_and_fractional_weights_tie(problem, t):
    K, y, _ = problem
    res = solve_cskl(K, y, t, svm="c", tol=1e-6, max_iter=200)
    assert res.converged
    gamma, d = res["gamma"], res["d"]
    assert np.count_nonzero(gamma) >= math.ceil(t)
    assert np.count_nonzero(gamma == 1.0) <= math.floor(t)
    frac = (gamma > 0) & (gamma < 1)
    scale = d.max()
    if np.any(frac):
        theta = d[frac].mean()
        assert np.ptp(d[frac]) <= 1e-4 * scale  # all fractional kernels tie
        assert np.all(d[gamma == 1.0] >= theta - 1e-4 * scale)
        assert np.all(d[gamma == 0.0] <= theta + 1e-4 * scale)


def test_more_than_t_kernels_are_selected_here(problem):
    """The honest statement of §5.4: t = 1 does not mean one kernel."""
    K, y, _ = problem
    res = solve_cskl(K, y, 1.0, svm="c", tol=1e-6)
    assert np.count_nonzero(res["gamma"]) > 1


@pytest.mark.parametrize("t", [1, 2, 3, 4, 5, 6, 7, 2.5])
def test_exact_keeps_exactly_ceil_t_kernels(problem, t):
    K, y, grams = problem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # rounded weights: not certified
        res = solve_cskl(K, y, t, svm="c", exact=True, tol=1e-4)
    gamma = res["gamma"]
    assert np.count_nonzero(gamma) == math.ceil(t)
    assert set(np.unique(gamma)) <= {0.0, 1.0}
    relaxed, _d = res["gamma_relaxed"], res["d"]
    kept = np.flatnonzero(gamma)
    assert relaxed[kept].min() >= np.delete(relaxed, kept).max() - 1e-12
    # retrained: the reported objective is the C-SVM dual on the kept kernels
    Kg = sum(grams[j] for j in kept)
    model = SVC(C=1.0, kernel="precomputed", tol=1e-8).fit(Kg, y)
    v = model.dual_coef_[0]
    Ks = Kg[np.ix_(model.support_, model.support_)]
    assert res.primal == pytest.approx(np.abs(v).sum() - 0.5 * v @ Ks @ v, rel=1e-5)


@pytest.mark.parametrize("t", [1.0, 2.5])
def test_exact_is_converged_only_if_its_own_gap_is_below_tol(problem, t):
    """issue 12: exact=True once reported converged_=True with duality_gap_=651."""
    K, y, _ = problem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = solve_cskl(K, y, t, svm="c", exact=True, tol=1e-4)
    assert res.converged == (res.gap <= 1e-4 * abs(res.primal))
    X, y = _data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = CSKLClassifier(SPECS, t=t, svm="c", exact=True, tol=1e-4).fit(X, y)
    assert not clf.converged_ or clf.duality_gap_ <= 1e-4 * abs(clf.objective_)
    if not clf.converged_:
        assert any(issubclass(w.category, ConvergenceWarning) for w in caught)


def _gap_from_definition(res, grams, t):
    """``G = c (g_t(d) − γᵀd)`` rebuilt from the returned α alone (math.md §5.3).

    ``d_j = Σ_r v_rᵀ K_j v_r`` from the coefficients ``v = y∘α`` and the dense
    normalized Grams, ``g_t(d)`` by sorting (sum of the ⌊t⌋ largest plus the
    fraction of the next) — no solver code involved.
    """
    V = res["coef"]
    d = np.array([sum(float(v @ G @ v) for v in V) for G in grams])
    order = np.sort(d)[::-1]
    k = int(math.floor(t))
    g_t = order[:k].sum() + (t - k) * (order[k] if k < d.size else 0.0)
    return 0.5 * (g_t - float(res["gamma"] @ d)), d


@pytest.mark.parametrize("update", UPDATES)
@pytest.mark.parametrize("t", [1.0, 2.5])
def test_reported_gap_equals_its_definition(problem, update, t):
    """issue 12: halving the gap in the solver passed every test; this one recomputes it."""
    K, y, grams = problem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = solve_cskl(K, y, t, svm="c", solver=update, tol=1e-4, max_iter=5)
    G, d = _gap_from_definition(res, grams, t)
    np.testing.assert_allclose(res["d"], d, rtol=1e-9, atol=1e-12 * d.max())
    inner = res["svm"].inner_gap  # the certified gap of the inner solve (issue 23)
    assert inner >= 0
    assert res.gap == pytest.approx(G + inner, rel=1e-8, abs=1e-12 * d.max())
    # J_α(γ) is the C-SVM dual value at the returned α: 1ᵀα − ½ Σ_r v_rᵀ K_γ v_r; the
    # primal J_α(γ) + ε bounds J(γ), the dual J_α(γ) − G bounds J* from below
    Kg = sum(g * G_ for g, G_ in zip(res["gamma"], grams))
    J = np.abs(res["coef"]).sum() - 0.5 * sum(float(v @ Kg @ v) for v in res["coef"])
    assert res.primal == pytest.approx(J + inner, rel=1e-9)
    assert res.dual == pytest.approx(J - G, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        lambda: CSKLClassifier("precomputed", svm="c"),
        lambda: LpMKLClassifier("precomputed", svm="c"),
        lambda: OnlineMKLClassifier("precomputed", random_state=0),
    ],
)
def test_sparse_precomputed_grams(problem, make):
    """issue 12: sparse Grams raised "setting an array element with a sequence"."""
    _, y, grams = problem
    dense = make().fit(grams[:2], y)
    sparse = make().fit([sp.csr_matrix(G) for G in grams[:2]], y)
    np.testing.assert_allclose(sparse.kernel_weights_, dense.kernel_weights_, rtol=1e-10)
    np.testing.assert_array_equal(
        sparse.predict([sp.csr_matrix(G) for G in grams[:2]]), dense.predict(grams[:2])
    )
    with pytest.raises(ValueError, match="numeric 2-D array"):
        make().fit([grams[0], [[1.0, 2.0], [3.0]]], y)


def test_kernel_column_out_of_range_is_a_clear_error():
    X, y = _data()
    with pytest.raises(ValueError, match="column index 6 is out of range"):
        CSKLClassifier([("rbf", {"columns": [0, 6]}), "linear"]).fit(X, y)
    with pytest.raises(ValueError, match="select no feature"):
        CSKLClassifier([("rbf", {"columns": slice(10, 12)}), "linear"]).fit(X, y)


def test_exact_selection_breaks_ties_by_larger_d():
    gamma = np.array([0.5, 0.5, 1.0, 0.0])
    d = np.array([1.0, 2.0, 3.0, 0.0])
    np.testing.assert_array_equal(exact_selection(gamma, d, 2.0), [0, 1, 1, 0])
    np.testing.assert_array_equal(exact_selection(gamma, d, 1.2), [0, 1, 1, 0])
    np.testing.assert_array_equal(exact_selection(gamma, d, 2.2), [1, 1, 1, 0])


def test_t_equal_p_is_the_uniform_sum(problem):
    K, y, _ = problem
    res = solve_cskl(K, y, float(K.p), svm="c")
    # G = 0 (Γ is one point): the gap is the inner solve's (issue 23)
    assert res.converged and res.n_iter == 0 and res.gap == res["svm"].inner_gap
    np.testing.assert_array_equal(res["gamma"], 1.0)


def test_history_records_every_outer_iteration(problem):
    K, y, _ = problem
    res = solve_cskl(K, y, 2.0, svm="c", tol=1e-6)
    h = res.history
    for key in ("primal", "dual", "gap", "step", "n_kernels", "inner_gap", "svm_solves"):
        assert h[key].shape == (res.n_iter + 1,)
    J = h["primal"] - h["inner_gap"]  # the primal is J + ε (issue 23)
    assert np.all(np.diff(J) <= 1e-9 * abs(J[0]))  # J decreases
    assert np.all(h["dual"] <= h["primal"])


def test_stalled_run_warns_and_returns_the_best_iterate(problem):
    K, y, _ = problem
    with pytest.warns(ConvergenceWarning, match="CSKL"):
        res = solve_cskl(K, y, 2.0, svm="c", solver="frank_wolfe", tol=1e-12, max_iter=3)
    assert not res.converged and res.gap == res.history["gap"].min()


# -- bad input --------------------------------------------------------------------------------
def test_bad_input_is_rejected(problem):
    K, y, grams = problem
    with pytest.raises(ValueError, match=r"t must lie in \(0, p\]"):
        solve_cskl(K, y, 0.0)
    with pytest.raises(ValueError, match=r"t must lie in \(0, p\]"):
        solve_cskl(K, y, K.p + 0.5)
    with pytest.raises(ValueError, match="empty kernel list"):
        solve_cskl([], y, 1.0)
    with pytest.raises(ValueError, match="different sizes"):
        solve_cskl([Gram(grams[0]), Gram(grams[1][:30, :30])], y, 1.0)
    with pytest.raises(ValueError, match="solver"):
        solve_cskl(K, y, 1.0, solver="newton")
    y3 = _data(n=K.n, n_classes=3)[1]
    with pytest.raises(ValueError, match="svm='c' only"):
        solve_cskl(K, y3, 1.0, svm="l2", problems=_problems(y3, 3, "ovo"))
    with pytest.raises(ValueError, match="nu=0.99 is infeasible"):
        solve_cskl(K, y, 1.0, svm="nu", nu=0.99)
    with pytest.raises(ValueError, match="two classes"):
        solve_cskl(K, np.ones(y.size), 1.0)
    with pytest.raises(ValueError, match="shape"):
        solve_cskl(K, y[:-1], 1.0)


def test_estimator_bad_input(problem):
    X, y = _data()
    _, _, grams = problem
    with pytest.raises(ValueError, match=r"t must lie in \(0, p\]"):
        CSKLClassifier(SPECS[:3], t=3.5).fit(X, y)
    with pytest.raises(ValueError, match="empty kernel list"):
        CSKLClassifier([]).fit(X, y)
    with pytest.raises(ValueError, match="empty kernel list"):
        CSKLClassifier("precomputed").fit([], y)
    with pytest.raises(ValueError, match="different sizes"):
        CSKLClassifier("precomputed").fit([grams[0], grams[1][:30, :30]], y)
    with pytest.raises(ValueError, match="square"):
        CSKLClassifier("precomputed").fit([grams[0][:, :30]], y)
    with pytest.raises(TypeError, match="list"):
        CSKLClassifier("precomputed").fit(grams[0], y)
    with pytest.raises(ValueError, match="t"):
        CSKLClassifier(SPECS, t=0).fit(X, y)
    clf = CSKLClassifier("precomputed", svm="c").fit(grams, y)
    with pytest.raises(ValueError, match="expected 8 test Gram"):
        clf.predict(grams[:3])
    with pytest.raises(ValueError, match="n_train"):
        clf.predict([G[:, :10] for G in grams])


# -- the estimator ----------------------------------------------------------------------------
def test_precomputed_equals_kernel_specs():
    X, y = _data()
    Xtr, Xte, ytr = X[:30], X[30:], y[:30]
    specs = SPECS[:4] + ["linear"]
    a = CSKLClassifier(specs, t=2.0, svm="c", tol=1e-6).fit(Xtr, ytr)
    K_train = make_operator(Xtr, specs)  # raw, unnormalized kernels
    grams = [op.dense() for op in K_train.operators]
    tests = [op.cross(Xte) for op in K_train.operators]
    b = CSKLClassifier("precomputed", t=2.0, svm="c", tol=1e-6).fit(np.array(grams), ytr)
    np.testing.assert_allclose(a.kernel_weights_, b.kernel_weights_, atol=1e-8)
    np.testing.assert_allclose(a.decision_function(Xte), b.decision_function(tests), atol=1e-6)
    assert a.n_features_in_ == 6 and not hasattr(b, "n_features_in_")


def test_decision_function_is_the_svm_on_k_gamma():
    X, y = _data()
    clf = CSKLClassifier(SPECS, t=2.0, svm="c", tol=1e-6).fit(X, y)
    K = make_operator(X, SPECS, normalization="trace")
    Kg = K.with_weights(clf.kernel_weights_).dense()
    h = Kg[:, clf.support_] @ clf.dual_coef_[0] + clf.intercept_[0]
    np.testing.assert_allclose(clf.decision_function(X), h, atol=1e-10)
    assert clf.score(X, y) > 0.85
    assert np.all(clf.predict(X) == np.where(h > 0, 1, -1))


@pytest.mark.parametrize(
    "svm, multi_class", [("l2", "ovr"), ("c", "ovo"), ("nu", "ovr"), ("c", "ddag")]
)
def test_multiclass_estimator(svm, multi_class):
    X, y = _data(n=60, seed=5, n_classes=3)
    labels = np.array(["a", "b", "c"])[y]
    clf = CSKLClassifier(
        SPECS[:2] + ["linear"], t=1.5, svm=svm, nu=0.2, tol=1e-2, multi_class=multi_class
    ).fit(X, labels)
    assert clf.decision_function(X).shape == (60, 3)
    assert clf.score(X, labels) > 0.7
    assert list(clf.classes_) == ["a", "b", "c"]
    assert len(clf.binary_problems_) == 3 == clf.dual_coef_.shape[0]
    assert clf.n_support_.sum() == clf.support_.size


def test_ovo_prediction_is_libsvms_on_the_learned_kernel():
    """One-vs-one through the shared decomposition = SVC(kernel="precomputed") on K_γ."""
    X, y = _data(n=60, seed=5, n_classes=3)
    clf = CSKLClassifier(SPECS[:3], t=1.5, svm="c", multi_class="ovo", tol=1e-4).fit(X, y)
    K = make_operator(X, SPECS[:3], normalization="trace").with_weights(clf.kernel_weights_)
    svc = SVC(C=1.0, kernel="precomputed", tol=1e-10).fit(K.dense(), y)
    np.testing.assert_allclose(
        clf.decision_function(X), svc.decision_function(K.dense()), atol=1e-5
    )
    ddag = CSKLClassifier(SPECS[:3], t=1.5, svm="c", multi_class="ddag", tol=1e-4).fit(X, y)
    np.testing.assert_allclose(ddag.kernel_weights_, clf.kernel_weights_)
    assert np.mean(ddag.predict(X) == clf.predict(X)) > 0.95


def test_fitted_attributes_and_pickle():
    X, y = _data()
    clf = CSKLClassifier(SPECS, t=2.0, exact=True).fit(X, y)
    assert clf.kernel_weights_.shape == (8,)
    np.testing.assert_array_equal(clf.selected_kernels_, np.flatnonzero(clf.kernel_weights_))
    assert clf.selected_kernels_.size == 2
    assert clf.relaxed_kernel_weights_.sum() == pytest.approx(2.0)
    assert clf.objective_ == clf.primal_objective_ and clf.duality_gap_ >= 0
    assert set(clf.history_) >= {"primal", "gap", "n_kernels"}
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.decision_function(X), clf.decision_function(X))
    assert clone(clf).get_params() == clf.get_params()


def test_verbose_prints_one_line_per_iteration(capsys):
    X, y = _data()
    clf = CSKLClassifier(SPECS[:3], svm="c", verbose=1).fit(X, y)
    err = capsys.readouterr().err
    assert err.count("[CSKLClassifier]") >= clf.n_iter_ >= 1


@parametrize_with_checks(
    [
        CSKLClassifier(["linear", "rbf"], max_iter=2, tol=1e-2),
        CSKLClassifier(["linear", ("rbf", {"gamma": 0.5})], svm="c", multi_class="ovo", max_iter=2),
        LpMKLClassifier(["linear", "rbf"], max_iter=2, tol=1e-2),
    ]
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_multikernel_input_needs_no_recomputation(problem):
    """The weights are changed with ``with_weights``: the base operators are shared."""
    K, y, _ = problem
    res = solve_cskl(K, y, 2.0, svm="c")
    op = K.with_weights(res["gamma"])
    assert all(a is b for a, b in zip(op.operators, K.operators))
    assert isinstance(op, MultiKernel)


def test_default_kernel_family_needs_no_arguments():
    from kernfw.estimators.mkl import default_kernels

    X, y = _data(n=60)
    clf = CSKLClassifier().fit(X, y)
    assert clf.n_kernels_ == len(default_kernels(X)) == 5
    assert clf.kernel_weights_.sum() == pytest.approx(1.0)
    assert clf.score(X, y) >= 0.9
    assert LpMKLClassifier().fit(X, y).n_kernels_ == 5


def test_the_kernels_alias_is_gone():
    with pytest.raises(TypeError, match="kernels"):
        CSKLClassifier(kernels=SPECS[:3])


@pytest.mark.parametrize("precomputed", [False, True])
def test_decision_function_reads_the_selected_kernels(precomputed):
    """The fitted predictor keeps only the kernels with γ_j > 0 (on the support); its
    decisions equal Σ_j γ_j K_j(test, S) · dual_coef_ᵀ + intercept_ over all kernels."""
    X, y = _data(n=80, n_classes=3)
    Xtr, Xte, ytr = X[:60], X[60:], y[:60]
    ops = make_operator(Xtr, SPECS, normalization="trace").operators
    if precomputed:
        clf = CSKLClassifier("precomputed", t=1.0).fit([op.dense() for op in ops], ytr)
        test = [op.cross(Xte) for op in ops]
        scores = clf.decision_function(test)
    else:
        clf = CSKLClassifier(SPECS, t=1.0).fit(Xtr, ytr)
        scores = clf.decision_function(Xte)
    assert 0 < clf.selected_kernels_.size < len(SPECS)  # some kernel has weight 0
    K = sum(g * op.cross(Xte) for g, op in zip(clf.kernel_weights_, ops))
    expected = K[:, clf.support_] @ clf.dual_coef_.T + clf.intercept_
    np.testing.assert_allclose(scores, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "est",
    [
        CSKLClassifier(),
        LpMKLClassifier(),
        LpMKLClassifier(kernel=["linear", ("rbf", {"gamma": 0.02})], multi_class="ovr"),
        CSKLClassifier(approx="nystroem", n_components=40, random_state=0),
        OnlineMKLClassifier(random_state=0),
    ],
    ids=["cskl", "lpmkl", "lpmkl-ovr", "cskl-nystroem", "online"],
)
def test_sparse_csr_input_gives_the_dense_fit(est):
    # the kernels of sparse rows come from the operators (sklearn.metrics.pairwise)
    X, y = load_digits(return_X_y=True)
    X, y = X[:240] / 16.0, y[:240]
    dense = clone(est).fit(X, y)
    sparse = clone(est).fit(sp.csr_matrix(X), y)
    d = dense.decision_function(X)
    np.testing.assert_allclose(
        sparse.decision_function(sp.csr_matrix(X)), d, atol=1e-4 * abs(d).max()
    )
    np.testing.assert_array_equal(sparse.predict(sp.csr_matrix(X)), dense.predict(X))
    np.testing.assert_allclose(sparse.kernel_weights_, dense.kernel_weights_, atol=1e-6)
