"""Vertex-coordinate passes of the L2-SVM on explicit features (math.md §2.13): ``solver="dcd"``."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize_scalar
from sklearn.exceptions import ConvergenceWarning

from kernfw.estimators.l2svc import L2SVC
from kernfw.fw import StoppingRule
from kernfw.operators import Features, Gram
from kernfw.solvers.simplex_qp import choose_l2svm_solver, solve_l2svm
from kernfw.solvers.simplex_qp._coordinate_numba import vertex_step
from kernfw.solvers.simplex_qp.coordinate import CoordinateIterate


def _binary(n=60, d=4, seed=0, noise=0.8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] - 0.7 * X[:, 1] + noise * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _modified_gram(X, y, C):
    X = X.astype(np.float64)
    K = X @ X.T if not sp.issparse(X) else (X @ X.T).toarray()
    return np.outer(y, y) * (K + 1) + np.eye(len(y)) / C


def _sparse(n=80, d=30, seed=1):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=seed)
    y = np.where(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


# -- the optimum against cvxpy --------------------------------------------------------------
@pytest.mark.cvxpy
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("layout", ["dense", "float32", "sparse"])
def test_dcd_reaches_the_cvxpy_optimum(C, layout):
    from kernfw.reference import l2svm_reference

    X, y = _sparse() if layout == "sparse" else _binary(50, seed=2)
    if layout == "float32":
        X = X.astype(np.float32)
    K = (X @ X.T).toarray() if sp.issparse(X) else X.astype(np.float64) @ X.astype(np.float64).T
    ref = l2svm_reference(K, y, C)
    # coordinate passes converge linearly, slowly at large C on few features
    res = solve_l2svm(
        Features(X), y, C, solver="dcd", tol=StoppingRule(1e-11, "absolute"), max_iter=20000
    )
    P = ref["objective"]
    assert res.converged
    assert res.gap >= 0.0
    assert abs(res.dual - P) <= 1e-6 * abs(P)
    assert res.dual <= P + 1e-8  # a dual value never exceeds the optimum
    assert abs(res.primal - P) <= max(res.gap, 1e-7) + 1e-6 * abs(P)
    sol = res.solution
    assert sol["rho"] == pytest.approx(ref["rho"], rel=1e-6)
    assert sol["b"] == pytest.approx(ref["b"], abs=1e-6 * max(1.0, abs(ref["b"])))
    np.testing.assert_allclose(sol["alpha"] / C, ref["xi"], atol=1e-5 * np.abs(ref["xi"]).max())
    # the certificate's K̃α is the modified kernel's, computed from α alone
    np.testing.assert_allclose(sol["v"], _modified_gram(X, y, C) @ sol["alpha"], atol=1e-10)


def test_dcd_and_mfw_agree_on_the_relative_gap_certificate():
    X, y = _binary(120, seed=3)
    dcd = solve_l2svm(Features(X), y, 2.0, solver="dcd", tol=1e-9)
    mfw = solve_l2svm(Features(X), y, 2.0, solver="mfw", tol=1e-9)
    assert dcd.converged and mfw.converged
    assert dcd.gap <= 1e-9 * abs(dcd.dual) and dcd.gap >= 0.0
    assert dcd.dual == pytest.approx(mfw.dual, rel=2e-9)
    assert dcd.solution["b"] == pytest.approx(mfw.solution["b"], rel=1e-4, abs=1e-8)


# -- the direction: the certificate's vertex is the LP over the simplex ------------------------
@pytest.mark.cvxpy
def test_the_certificate_is_the_fw_gap_of_an_lp_over_the_simplex():
    import cvxpy as cp

    X, y = _binary(40, seed=4)
    C = 1.5
    Kt = _modified_gram(X, y, C)
    rng = np.random.default_rng(5)
    alpha = rng.dirichlet(np.ones(40) * 0.3)
    it = CoordinateIterate(X, y, C, alpha, rng)
    cert = it.certificate()
    g = -2.0 * Kt @ alpha  # gradient of D(α) = −αᵀK̃α
    s = cp.Variable(40)
    lp = cp.Problem(cp.Maximize(g @ (s - alpha)), [s >= 0, cp.sum(s) == 1])
    lp.solve()
    assert cert.dual == pytest.approx(-alpha @ Kt @ alpha, rel=1e-12)
    assert cert.gap == pytest.approx(lp.value, rel=1e-7)
    assert cert.primal == pytest.approx(cert.dual + lp.value, rel=1e-7)


# -- the line search: a 1-D maximization along e_i − α ---------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_vertex_step_is_the_one_dimensional_maximum(seed):
    X, y = _binary(15, seed=seed)
    Kt = _modified_gram(X, y, 0.7)
    rng = np.random.default_rng(seed)
    alpha = rng.dirichlet(np.ones(15) * 0.5)
    alpha[rng.integers(15)] = 0.0
    alpha /= alpha.sum()
    v = Kt @ alpha
    rho = alpha @ v
    for i in range(15):
        d = -alpha.copy()
        d[i] += 1.0
        low = -alpha[i] / (1.0 - alpha[i])  # the away bound: α_i = 0 after the step

        def minus_dual(gamma, d=d):
            a = alpha + gamma * d
            return a @ Kt @ a

        best = minimize_scalar(
            minus_dual, bounds=(low, 1.0), method="bounded", options={"xatol": 1e-12}
        )
        gamma = vertex_step(rho, v[i], Kt[i, i], alpha[i], 0.0)
        assert low - 1e-15 <= gamma <= 1.0
        assert minus_dual(gamma) <= best.fun + 1e-12
        assert gamma == pytest.approx(best.x, abs=1e-6)


def test_steps_keep_alpha_on_the_simplex_and_drop_exactly():
    X, y = _binary(200, seed=6, noise=2.0)
    it = CoordinateIterate(X, y, 1.0, None, np.random.default_rng(0))
    it.configure_runs(1e-12, 1, 100)
    for t in range(5):
        it.step(t)
        sol = it.solution()
        assert np.all(sol["alpha"] >= 0.0)
        assert sol["alpha"].sum() == pytest.approx(1.0, abs=1e-12)
    assert it.state[0]["drop_steps"] > 0  # some points left the support exactly
    assert np.count_nonzero(it.beta) < 200


def test_a_step_to_a_vertex_keeps_the_optimum():
    """Point 0 far out: the first step jumps to another vertex (γ = 1): the optimum is the
    one of MFW."""
    X, y = _binary(40, seed=7)
    X[0] *= 50.0
    ref = solve_l2svm(Features(X), y, 1.0, solver="mfw", tol=StoppingRule(1e-12, "absolute"))
    res = solve_l2svm(
        Features(X), y, 1.0, solver="dcd", tol=StoppingRule(1e-10, "absolute"), max_iter=20000
    )
    assert res.converged
    assert res.dual == pytest.approx(ref.dual, rel=1e-8)


# -- budgets and errors --------------------------------------------------------------------------
def test_shrinking_visits_the_support_and_the_low_margins_only(monkeypatch):
    """After a certificate the passes visit the support and the points with
    ``v_i < ρ + G/2`` (math.md §2.13); without shrinking the same optimum."""
    X, y = _binary(400, d=5, seed=4, noise=0.3)
    res = solve_l2svm(
        Features(X), y, 1.0, solver="dcd", tol=StoppingRule(1e-10, "absolute"), max_iter=5000
    )
    active, coreset = res.history["active"], res.history["coreset"]
    assert res.converged and active[0] == 400
    assert np.all(active[1:] >= coreset[:-1])  # the support at the last certificate is kept
    assert active[-1] < 0.8 * 400  # most points are far off the support
    monkeypatch.setattr(CoordinateIterate, "_shrink", lambda self: None)
    full = solve_l2svm(
        Features(X), y, 1.0, solver="dcd", tol=StoppingRule(1e-10, "absolute"), max_iter=5000
    )
    assert np.all(full.history["active"] == 400)
    assert abs(res.dual - full.dual) <= res.gap + full.gap + 1e-12 * abs(full.dual)


def test_tiny_budget_warns_and_returns_a_certified_iterate():
    X, y = _binary(300, seed=9, noise=2.0)
    with pytest.warns(ConvergenceWarning):
        res = solve_l2svm(Features(X), y, 1.0, solver="dcd", tol=1e-14, max_iter=1)
    assert not res.converged and res.n_iter <= 1
    assert res.gap >= 0.0
    assert res.solution["alpha"].sum() == pytest.approx(1.0)


def test_dcd_bad_inputs():
    X, y = _binary(30)
    with pytest.raises(ValueError, match="explicit features"):
        solve_l2svm(Gram(X @ X.T), y, 1.0, solver="dcd")
    with pytest.raises(ValueError, match="stops on"):
        solve_l2svm(Features(X), y, 1.0, solver="dcd", tol=StoppingRule(1e-3, "radius"))
    with pytest.raises(ValueError, match="max_iter"):
        solve_l2svm(Features(X), y, 1.0, solver="dcd", max_iter=-1)
    with pytest.raises(ValueError, match="tol"):
        solve_l2svm(Features(X), y, 1.0, solver="dcd", tol=0.0)
    with pytest.raises(ValueError, match="binary labels"):
        solve_l2svm(Features(X), np.where(y > 0, 2.0, -1.0), 1.0, solver="dcd")
    with pytest.raises(ValueError, match="runs locally only"):
        L2SVC(kernel="linear", solver="dcd", backend="dask").fit(X, y)


# -- the automatic choice ------------------------------------------------------------------------
def test_auto_picks_dcd_on_features_and_mfw_on_kernels(monkeypatch):
    X, y = _binary(80, seed=10)
    assert choose_l2svm_solver(Features(X)) == "dcd"
    assert choose_l2svm_solver(Gram(X @ X.T)) == "mfw"
    assert L2SVC(kernel="linear").fit(X, y).solver_ == "dcd"
    assert L2SVC().fit(X, y).solver_ == "mfw"  # RBF: a Gram or on-the-fly columns
    assert L2SVC(kernel="linear", solver="mfw").fit(X, y).solver_ == "mfw"


def test_estimator_dcd_matches_mfw_binary_and_multiclass():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(240, 5))
    y3 = np.argmax(X[:, :3] + 0.5 * rng.normal(size=(240, 3)), axis=1)
    for y in (y3 > 0, y3):
        a = L2SVC(kernel="linear", solver="dcd", tol=1e-8).fit(X, y)
        b = L2SVC(kernel="linear", solver="mfw", tol=1e-10).fit(X, y)
        assert np.all(a.converged_)
        np.testing.assert_allclose(a.dual_objective_, b.dual_objective_, rtol=1e-7)
        np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-4, atol=1e-8)
        da, db = a.decision_function(X), b.decision_function(X)
        np.testing.assert_allclose(da, db, atol=1e-4 * np.abs(db).max())
        assert np.all(np.asarray(a.n_iter_) >= 1)


# -- combinations of feature blocks (approximated kernels in MKL) -----------------------------
def test_a_combination_of_feature_blocks_is_explicit_features():
    import pickle

    from kernfw.operators import MultiKernel

    rng = np.random.default_rng(12)
    X1, X2 = rng.normal(size=(50, 3)), rng.normal(size=(50, 4)).astype(np.float32)
    y = np.where(X1[:, 0] + X2[:, 1] > 0, 1.0, -1.0)
    mk = MultiKernel(
        [Features(X1), Features(X2), Features(rng.normal(size=(50, 2)))], [0.3, 2.0, 0.0]
    )
    F = mk.features()
    assert F.shape == (50, 7)  # zero weight: no block
    np.testing.assert_allclose(F @ F.T, mk.dense(), rtol=1e-5, atol=1e-5)
    assert mk.features() is F  # built once per operator
    assert "_features" not in pickle.loads(pickle.dumps(mk)).__dict__
    assert MultiKernel([Features(X1), Gram(X1 @ X1.T)]).features() is None
    assert choose_l2svm_solver(mk) == "dcd"
    dcd = solve_l2svm(mk, y, 1.0, solver="auto", tol=1e-9)
    mfw = solve_l2svm(mk, y, 1.0, solver="mfw", tol=1e-9)
    assert dcd.converged and mfw.converged
    assert dcd.dual == pytest.approx(mfw.dual, rel=1e-6)  # float32 block: rounded products


# -- weighted column blocks: Σ_r c_r X_{B_r} X_{B_r}ᵀ without scaling X --------------------------
def _blocks(X, ranges, weights):
    from kernfw.solvers.simplex_qp.coordinate import FeatureBlockWeights

    starts = np.array([s for s, _ in ranges], dtype=np.int64)
    ends = np.array([e for _, e in ranges], dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    Xd = X.astype(np.float64)
    sq = sum(
        c * np.einsum("ij,ij->i", Xd[:, s:e], Xd[:, s:e]) for (s, e), c in zip(ranges, weights)
    )
    return FeatureBlockWeights(starts, ends, weights, sq)


@pytest.mark.cvxpy
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_weighted_blocks_reach_the_cvxpy_optimum_of_the_weighted_kernel(dtype):
    """Blocks (0, 3) at weight 0.3 and (5, 9) at 2.5 of a 9-column X (columns 3–4 left out):
    the optimum of K = 0.3 X_{:3}X_{:3}ᵀ + 2.5 X_{5:}X_{5:}ᵀ, and the scaled concatenation's."""
    from kernfw.reference import l2svm_reference
    from kernfw.solvers.simplex_qp import solve_l2svm_blocks

    rng = np.random.default_rng(21)
    X = rng.normal(size=(50, 9)).astype(dtype)
    y = np.where(X[:, 0] - X[:, 6] + 0.5 * rng.normal(size=50) > 0, 1.0, -1.0)
    ranges, weights = [(0, 3), (5, 9)], [0.3, 2.5]
    Xd = X.astype(np.float64)
    K = 0.3 * Xd[:, :3] @ Xd[:, :3].T + 2.5 * Xd[:, 5:] @ Xd[:, 5:].T
    ref = l2svm_reference(K, y, 2.0)
    res = solve_l2svm_blocks(
        X, _blocks(X, ranges, weights), y, 2.0, tol=StoppingRule(1e-11, "absolute"), max_iter=20000
    )
    P = ref["objective"]
    assert res.converged and res.gap >= 0.0
    assert abs(res.dual - P) <= 1e-6 * abs(P) and res.dual <= P + 1e-8
    assert res.solution["rho"] == pytest.approx(ref["rho"], rel=1e-6)
    np.testing.assert_allclose(res.solution["alpha"] / 2.0, ref["xi"], atol=1e-5 * ref["xi"].max())
    Kt = np.outer(y, y) * (K + 1) + np.eye(50) / 2.0
    np.testing.assert_allclose(res.solution["v"], Kt @ res.solution["alpha"], atol=1e-9)
    scaled = np.hstack([np.sqrt(0.3) * Xd[:, :3], np.sqrt(2.5) * Xd[:, 5:]])
    dcd = solve_l2svm(
        Features(scaled), y, 2.0, solver="dcd", tol=StoppingRule(1e-11, "absolute"), max_iter=20000
    )
    assert dcd.dual == pytest.approx(res.dual, rel=1e-8)


def test_weighted_blocks_bad_inputs():
    from kernfw.solvers.simplex_qp import solve_l2svm_blocks

    X, y = _binary(30, seed=3)
    with pytest.raises(ValueError, match="positive"):
        solve_l2svm_blocks(X, _blocks(X, [(0, 2)], [0.0]), y, 1.0)
    with pytest.raises(ValueError, match="dense"):
        CoordinateIterate(
            sp.csr_matrix(X), y, 1.0, None, np.random.default_rng(0), 0,
            blocks=_blocks(X, [(0, 2)], [1.0]),
        )  # fmt: skip


# -- a linear term: max qᵀα − αᵀQα with Q = ZZᵀ + diag(c) (the regression's form) ---------------
def _linear_term_problem(seed, m=24):
    """Coordinates sharing rows (two signed copies and a zero point), diagonal terms, a
    linear term; the dense ``Q``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(10, 3))
    rows = np.r_[rng.integers(0, 10, m - 1), 0]
    y = np.r_[rng.choice([-1.0, 1.0], m - 1), 0.0]  # the last coordinate: z = 0
    inv_c = np.r_[rng.uniform(0.1, 1.0, m - 1), 0.0]
    q = np.r_[rng.normal(size=m - 1), 0.0]
    Z = y[:, None] * np.hstack([X[rows], np.ones((m, 1))])
    return X, rows, y, inv_c, q, Z @ Z.T + np.diag(inv_c)


@pytest.mark.parametrize("seed", range(4))
def test_vertex_step_with_a_linear_term_is_the_one_dimensional_maximum(seed):
    *_, q, Q = _linear_term_problem(seed)
    m = q.size
    rng = np.random.default_rng(seed)
    alpha = rng.dirichlet(np.ones(m) * 0.5)
    v = Q @ alpha
    rho = alpha @ v
    for i in range(m):
        d = -alpha.copy()
        d[i] += 1.0
        low = -alpha[i] / (1.0 - alpha[i])

        def minus_f(gamma, d=d):
            a = alpha + gamma * d
            return a @ Q @ a - q @ a

        best = minimize_scalar(
            minus_f, bounds=(low, 1.0), method="bounded", options={"xatol": 1e-12}
        )
        gamma = vertex_step(rho, v[i], Q[i, i], alpha[i], q[i] - q @ alpha)
        assert low - 1e-15 <= gamma <= 1.0
        assert minus_f(gamma) <= best.fun + 1e-12


@pytest.mark.cvxpy
def test_linear_term_certificate_is_the_lp_gap_and_passes_reach_the_optimum():
    import cvxpy as cp

    from kernfw.solvers.simplex_qp import VertexCoordinateIterate

    X, rows, y, inv_c, q, Q = _linear_term_problem(7)
    m = q.size
    rng = np.random.default_rng(3)
    alpha = rng.dirichlet(np.ones(m))
    it = VertexCoordinateIterate(X, rows, y, inv_c, q, alpha, rng)
    cert = it.certificate()
    g = q - 2.0 * Q @ alpha
    s = cp.Variable(m)
    lp = cp.Problem(cp.Maximize(g @ (s - alpha)), [s >= 0, cp.sum(s) == 1])
    lp.solve()
    assert cert.dual == pytest.approx(q @ alpha - alpha @ Q @ alpha, rel=1e-12)
    assert cert.gap == pytest.approx(lp.value, rel=1e-7)
    a = cp.Variable(m)
    qp = cp.Problem(cp.Maximize(q @ a - cp.quad_form(a, cp.psd_wrap(Q))), [a >= 0, cp.sum(a) == 1])
    qp.solve()
    it.configure_runs(StoppingRule(1e-12, "absolute"), 10, 20000)
    for t in range(2000):
        it.step(t)
        cert = it.certificate()
        if cert.gap <= 1e-12:
            break
    assert cert.gap <= 1e-12 and cert.dual == pytest.approx(qp.value, abs=1e-7)
