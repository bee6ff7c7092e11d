"""The L2-loss support vector regression (math.md §2.15): ``L2SVRKernel``, ``solve_l2svr``
and the ``L2SVR`` estimator."""

import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernfw.estimators.l2svr import L2SVR
from kernfw.kernels import make_operator
from kernfw.operators import Features, Gram
from kernfw.solvers.simplex_qp import L2SVRKernel, solve_l2svr


def _data(n=60, seed=0):
    X, y = make_friedman1(n_samples=n, n_features=5, noise=1.0, random_state=seed)
    return X, y - y.mean()


def _signed_gram(K, C, s):
    """The dense ``Q`` of math.md §2.15: the 2n signed points and the zero slack."""
    n = K.shape[0]
    sig = np.r_[np.ones(n), -np.ones(n)]
    idx = np.r_[np.arange(n), np.arange(n)]
    Q = np.zeros((2 * n + 1, 2 * n + 1))
    Q[: 2 * n, : 2 * n] = np.outer(sig, sig) * (K[np.ix_(idx, idx)] + 1)
    Q[np.arange(2 * n), np.arange(2 * n)] += 1.0 / (2 * C * s[idx])
    return Q


def _weights(n, seed=1):
    return np.random.default_rng(seed).uniform(0.5, 2.0, n)


def _slack(n):
    """The slack vertex ``e_{2n}`` (``γ = 0``): the FW start of problems above 200 points, given
    as a warm start so that small problems run the FW steps instead of the exact start."""
    alpha = np.zeros(2 * n + 1)
    alpha[-1] = 1.0
    return alpha


# -- the operator ----------------------------------------------------------------------------------
def test_signed_kernel_operator_matches_the_formula():
    X, _ = _data(20)
    K = pairwise_kernels(X, metric="rbf", gamma=0.3)
    s = _weights(20)
    op = L2SVRKernel(Gram(K), C=2.0, sample_weight=s)
    Q = _signed_gram(K, 2.0, s)
    np.testing.assert_allclose(op.dense(), Q, atol=1e-14)
    np.testing.assert_allclose(op.diag(), np.diag(Q), atol=1e-14)
    V = np.random.default_rng(1).normal(size=(41, 3))
    np.testing.assert_allclose(op.matmat(V), Q @ V, atol=1e-12)
    np.testing.assert_allclose(op.matmat(V[:, 0]), Q @ V[:, 0], atol=1e-12)
    np.testing.assert_allclose(op.columns([25, 2, 40]), Q[:, [25, 2, 40]], atol=1e-14)
    np.testing.assert_allclose(op.subset([1, 25, 40]).dense(), Q[np.ix_([1, 25, 40], [1, 25, 40])])
    kf = make_operator(X, "rbf", gamma=0.3, backend="function")
    cross = L2SVRKernel(kf, 2.0).cross(X[:4], [0, 23])  # σ_k (k(x, x_k) + 1)
    np.testing.assert_allclose(cross, (K[:4][:, [0, 3]] + 1) * [1, -1], atol=1e-14)


@pytest.mark.parametrize("backend", ["gram", "function"])
def test_compiled_columns_are_the_operators(backend):
    """The compiled column source (repeated base column, signs, slack) walks the iterates of
    the same problem through ``Q.columns`` (a Gram of the dense ``Q``: no column source)."""
    X, y = _data(40)
    op = make_operator(X, "rbf", gamma=0.3, backend=backend)
    assert L2SVRKernel(op, 1.0).column_source() is not None
    fast = solve_l2svr(op, y, 1.0, 0.1, tol=1e-9, alpha0=_slack(40))
    dense = Gram(pairwise_kernels(X, metric="rbf", gamma=0.3))
    plain = solve_l2svr(_NoSource(dense), y, 1.0, 0.1, tol=1e-9, alpha0=_slack(40))
    assert fast.n_iter > 100
    assert fast.dual == pytest.approx(plain.dual, rel=1e-9)
    np.testing.assert_allclose(fast.solution["coef"], plain.solution["coef"], atol=1e-5)


class _NoSource(Gram):
    """A Gram without a column source: the iterate asks ``Q.columns``."""

    def __init__(self, gram):
        super().__init__(gram.dense())

    def column_source(self):
        return None


# -- the solver against cvxpy ------------------------------------------------------------------------
def _prediction_bound(gap, K_diag):
    """``|f(x) − f*(x)| ≤ √(2·gap) · √(k(x, x) + 1)``: the primal is 1-strongly convex in
    ``(w, b)``, so ``½‖(w, b) − (w*, b*)‖² ≤ P(w, b) − P* ≤ gap``."""
    return np.sqrt(2.0 * gap) * np.sqrt(K_diag + 1.0)


@pytest.mark.cvxpy
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(
    "solver,tol,start",
    [("mfw", 1e-10, "slack"), ("mfw", 1e-2, "slack"), ("lsfw", 1e-2, "slack"), ("mfw", 0.3, None)],
    ids=["mfw", "mfw-loose", "lsfw", "exact-start"],
)
@pytest.mark.parametrize("C,epsilon", [(1.0, 0.1), (10.0, 0.5), (0.1, 0.0)])
def test_l2svr_matches_cvxpy(C, epsilon, solver, tol, start, weighted):
    from kernfw.reference import l2svr_reference

    X, y = _data(50, seed=2)
    s = _weights(50) if weighted else None
    K = pairwise_kernels(X, metric="rbf", gamma=0.4)
    ref = l2svr_reference(K, y, C, epsilon, s)
    alpha0 = None if start is None else _slack(50)
    res = solve_l2svr(Gram(K), y, C, epsilon, s, solver=solver, tol=tol, alpha0=alpha0)
    P = ref["objective"]
    if start is None:  # up to 200 points: the exact optimum, certified at once
        assert res.gap <= 1e-9 * abs(P) + res.rounding and res.n_iter >= 1
    assert res.converged
    slack = res.rounding + 1e-8 * abs(P)
    assert res.dual <= P + slack  # weak duality, and P* within the certified gap
    assert res.primal >= P - slack
    assert res.primal - res.dual == pytest.approx(res.gap, abs=1e-9 * abs(P))
    assert res.gap <= tol * abs(res.dual) + res.rounding
    sol = res.solution
    f = K[:, sol["support"]] @ sol["coef"][sol["support"]] + sol["b"]
    bound = _prediction_bound(res.gap + res.rounding, np.ones(50))
    assert np.all(np.abs(f - ref["f_train"]) <= bound + 1e-6 * np.abs(ref["f_train"]).max())
    if tol < 1e-8 or start is None:  # the multipliers too
        np.testing.assert_allclose(sol["gamma"][:50], ref["alpha"], atol=1e-4 * C)
        np.testing.assert_allclose(sol["gamma"][50:], ref["alpha_star"], atol=1e-4 * C)


def test_zero_gap_when_every_target_is_inside_the_tube():
    X, y = _data(20)
    res = solve_l2svr(Gram(pairwise_kernels(X)), 0.01 * np.sign(y), 1.0, 0.1)
    assert res.converged and res.gap == 0.0 and res.solution["support"].size == 0


def test_convergence_warning_at_a_tiny_budget():
    X, y = _data(80)
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        res = solve_l2svr(
            Gram(pairwise_kernels(X, metric="rbf")), y, 1.0, 0.1, max_iter=3, alpha0=_slack(80)
        )
    assert not res.converged and res.gap > 0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"C": 0.0}, "C must be"),
        ({"epsilon": -1.0}, "epsilon must be"),
        ({"sample_weight": -np.ones(10)}, "weights must be positive"),
        ({"solver": "cvm"}, "solver must be"),
    ],
)
def test_solver_rejects_bad_input(kwargs, match):
    X, y = _data(10)
    args = {"C": 1.0, "epsilon": 0.1, **kwargs}
    with pytest.raises(ValueError, match=match):
        solve_l2svr(Gram(pairwise_kernels(X)), y, **args)


# -- the estimator ---------------------------------------------------------------------------------
# at the defaults: the checks' problems (at most 200 points) are solved exactly first, so the
# sample-weight checks, which compare predictions to 1e-7, pass at tol=0.3
@parametrize_with_checks([L2SVR(), L2SVR(kernel="linear")])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_default_fit_beats_the_mean_and_is_certified():
    X, y = make_friedman1(n_samples=600, noise=1.0, random_state=0)
    reg = L2SVR().fit(X[:400], y[:400])
    assert reg.converged_ and reg.duality_gap_ <= 0.3 * abs(reg.dual_objective_) + 1e-9
    assert reg.score(X[400:], y[400:]) > 0.8
    assert reg.dual_coef_.shape == (1, reg.support_.size) == (1, reg.n_support_[0])


def test_backends_agree():
    """precomputed Gram, on-the-fly RBF and a ready operator: the same fit."""
    X, y = _data(80)
    Xt = _data(20, seed=5)[0]
    fits = [
        L2SVR(gamma=0.3, tol=1e-9).fit(X, y).predict(Xt),
        L2SVR(kernel="precomputed", tol=1e-9)
        .fit(pairwise_kernels(X, metric="rbf", gamma=0.3), y)
        .predict(pairwise_kernels(Xt, X, metric="rbf", gamma=0.3)),
        L2SVR(kernel=make_operator(X, "rbf", gamma=0.3, backend="function"), tol=1e-9)
        .fit(X, y)
        .predict(Xt),
    ]
    for f in fits[1:]:
        np.testing.assert_allclose(f, fits[0], atol=1e-4)


def test_linear_kernel_on_sparse_features_matches_dense():
    import scipy.sparse as sp

    X, y = _data(60)
    dense = L2SVR(kernel="linear", tol=1e-9).fit(X, y)
    sparse = L2SVR(kernel="linear", tol=1e-9).fit(sp.csr_matrix(X), y)
    assert isinstance(make_operator(sp.csr_matrix(X), "linear"), Features)
    np.testing.assert_allclose(sparse.predict(X), dense.predict(X), atol=1e-4)


def test_zero_weights_remove_rows_and_integer_weights_repeat_them():
    X, y = _data(40)
    s = np.random.default_rng(0).integers(0, 3, 40)
    weighted = L2SVR(tol=1e-12).fit(X, y, sample_weight=s)
    repeated = L2SVR(tol=1e-12).fit(np.repeat(X, s, axis=0), np.repeat(y, s))
    np.testing.assert_allclose(weighted.predict(X), repeated.predict(X), rtol=1e-5, atol=1e-6)
    assert np.all(s[weighted.support_] > 0)


def test_approximated_kernel():
    X, y = make_friedman1(n_samples=400, noise=1.0, random_state=0)
    reg = L2SVR(approx="nystroem", n_components=100, random_state=0).fit(X[:300], y[:300])
    assert reg.kernel_approx_ is not None and reg.converged_
    exact = L2SVR().fit(X[:300], y[:300]).score(X[300:], y[300:])
    assert reg.score(X[300:], y[300:]) > exact - 0.1


@pytest.mark.parametrize(
    "params,fit_kwargs,match",
    [
        ({"epsilon": -0.1}, {}, "epsilon"),
        ({"C": 0}, {}, "C"),
        ({}, {"sample_weight": -np.ones(30)}, "(?i)negative"),
        ({}, {"sample_weight": np.zeros(30)}, "non-zero"),
    ],
)
def test_estimator_rejects_bad_input(params, fit_kwargs, match):
    X, y = _data(30)
    with pytest.raises(ValueError, match=match):
        L2SVR(**params).fit(X, y, **fit_kwargs)


def test_nan_targets_are_refused():
    X, y = _data(30)
    y[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        L2SVR().fit(X, y)


@pytest.mark.cvxpy
def test_compare_verifies_the_estimator():
    """``kernfw.reference.compare`` (and ``kernfw compare --model l2svr``) on the centred targets."""
    from kernfw.reference import compare

    X, y = make_friedman1(n_samples=60, noise=1.0, random_state=3)
    report = compare(L2SVR(epsilon=0.5), X, y + 10.0)
    assert report.verified, report.reason


# -- vertex-coordinate passes on explicit features (math.md §2.13) ----------------------------------
def _features(layout, n=50, seed=2):
    """Friedman features: dense float64, dense float32 or CSR (a third of the entries zero)."""
    X, y = _data(n, seed=seed)
    if layout == "float32":
        return X.astype(np.float32), y
    if layout == "sparse":
        import scipy.sparse as sp

        X = X * (np.random.default_rng(seed).random(X.shape) > 0.3)
        return sp.csr_matrix(X), y
    return X, y


def _linear_gram(X):
    import scipy.sparse as sp

    X = X.toarray() if sp.issparse(X) else X.astype(np.float64)
    return X @ X.T


@pytest.mark.cvxpy
@pytest.mark.parametrize("layout", ["dense", "float32", "sparse"])
@pytest.mark.parametrize(
    "C,epsilon,weighted", [(1.0, 0.1, False), (10.0, 0.5, True), (0.1, 0.0, True)]
)
def test_dcd_matches_cvxpy(layout, C, epsilon, weighted):
    """The passes from the slack vertex reach the cvxpy optimum within the certified gap; the
    certificate's ``v`` is ``Qα`` of the dense ``Q``."""
    from kernfw.fw import StoppingRule
    from kernfw.reference import l2svr_reference

    X, y = _features(layout)
    s = _weights(50) if weighted else None
    K = _linear_gram(X)
    ref = l2svr_reference(K, y, C, epsilon, s)
    P = ref["objective"]
    res = solve_l2svr(
        Features(X), y, C, epsilon, s, solver="dcd", alpha0=_slack(50), max_iter=20000,
        tol=StoppingRule(1e-9 * P, "absolute"),
    )  # fmt: skip
    assert res.converged and res.n_iter > 1
    slack = res.rounding + 1e-7 * abs(P)
    assert res.dual <= P + slack and res.primal >= P - slack
    assert res.gap <= 1e-9 * P + res.rounding
    sol = res.solution
    Q = _signed_gram(K, C, np.ones(50) if s is None else s)
    np.testing.assert_allclose(sol["v"], Q @ sol["alpha"], atol=1e-9 * np.abs(sol["v"]).max())
    f = K[:, sol["support"]] @ sol["coef"][sol["support"]] + sol["b"]
    bound = _prediction_bound(res.gap + res.rounding, np.diag(K))
    assert np.all(np.abs(f - ref["f_train"]) <= bound + 1e-6 * np.abs(ref["f_train"]).max())
    # D is (1/(2C max s))-strongly concave: ‖γ − γ*‖² ≤ 4C max(s) (D* − D) ≤ 4C max(s) gap
    radius = np.sqrt(4.0 * C * (1.0 if s is None else s.max()) * (res.gap + res.rounding))
    distance = np.linalg.norm(sol["gamma"] - np.r_[ref["alpha"], ref["alpha_star"]])
    assert distance <= radius + 1e-4 * C


@pytest.mark.cvxpy
def test_dcd_certificate_is_the_regression_gap_of_cvxpy():
    """At a loose tolerance the certified gap bounds the distance to the cvxpy optimum, and the
    exact start of a small problem is certified at once."""
    from kernfw.reference import l2svr_reference

    X, y = _features("dense", seed=4)
    K = _linear_gram(X)
    P = l2svr_reference(K, y, 1.0, 0.1)["objective"]
    loose = solve_l2svr(Features(X), y, 1.0, 0.1, solver="dcd", tol=1e-2, alpha0=_slack(50))
    assert loose.converged and loose.gap <= 1e-2 * abs(loose.dual) + loose.rounding
    assert loose.dual <= P + 1e-7 * P <= loose.primal + 2e-7 * P
    exact = solve_l2svr(Features(X), y, 1.0, 0.1, solver="dcd", tol=1e-2)
    assert exact.gap <= 1e-9 * P + exact.rounding and exact.dual == pytest.approx(P, rel=1e-7)


def test_dcd_and_mfw_agree_within_their_gaps():
    X, y = _data(300, seed=6)
    fits = {
        solver: solve_l2svr(Features(X), y, 2.0, 0.2, solver=solver, tol=1e-8, max_iter=10**6)
        for solver in ("dcd", "mfw")
    }
    dcd, mfw = fits["dcd"], fits["mfw"]
    assert dcd.converged and mfw.converged
    assert abs(dcd.dual - mfw.dual) <= dcd.gap + mfw.gap + dcd.rounding + mfw.rounding
    assert dcd.n_iter < 200 < mfw.n_iter  # passes against columns
    f = {k: X @ (X.T @ r.solution["coef"]) + r.solution["b"] for k, r in fits.items()}
    bound = _prediction_bound(dcd.gap + mfw.gap, np.einsum("ij,ij->i", X, X))
    assert np.all(np.abs(f["dcd"] - f["mfw"]) <= 2 * bound)


def test_dcd_steps_keep_alpha_on_the_simplex_with_the_slack():
    from kernfw.solvers.simplex_qp import L2SVRCoordinateIterate

    X, y = _data(200, seed=7)
    Q = L2SVRKernel(Features(X), 1.0)
    p = np.r_[y, -y] - 0.1
    it = L2SVRCoordinateIterate(X, Q, p, 50.0, _slack(200), np.random.default_rng(0))
    it.configure_runs(1e-12, 1, 100)
    values = []
    for t in range(5):
        it.step(t)
        cert = it.certificate()
        values.append(cert.dual)
        alpha = it.solution()["alpha"]
        assert np.all(alpha >= 0.0) and alpha.sum() == pytest.approx(1.0, abs=1e-12)
        assert cert.gap >= 0.0
    assert np.all(np.diff(values) >= -1e-9 * abs(values[-1]))  # every step is an ascent step
    gamma = 50.0 * it.solution()["alpha"][:-1]
    assert np.count_nonzero(gamma[:200] * gamma[200:]) == 0  # never both sides of the tube


def test_dcd_needs_explicit_features_and_auto_picks_it():
    X, y = _data(30)
    with pytest.raises(ValueError, match="explicit features"):
        solve_l2svr(Gram(X @ X.T), y, 1.0, 0.1, solver="dcd")
    for op, solver in ((Features(X), "dcd"), (Gram(X @ X.T), "mfw")):
        auto = solve_l2svr(op, y, 1.0, 0.1, solver="auto", alpha0=_slack(30), tol=1e-6)
        chosen = solve_l2svr(op, y, 1.0, 0.1, solver=solver, alpha0=_slack(30), tol=1e-6)
        assert auto.n_iter == chosen.n_iter and auto.dual == chosen.dual
    import scipy.sparse as sp

    Xn, yn = _data(300)
    assert L2SVR(kernel="linear").fit(Xn, yn).solver_ == "dcd"
    assert L2SVR(kernel="linear").fit(sp.csr_matrix(Xn), yn).solver_ == "dcd"
    assert L2SVR(approx="nystroem", n_components=20, random_state=0).fit(Xn, yn).solver_ == "dcd"
    assert L2SVR(kernel=Features(Xn)).fit(Xn, yn).solver_ == "dcd"
    assert L2SVR().fit(Xn, yn).solver_ == "mfw"  # RBF: kernel columns
    assert L2SVR(kernel="linear", solver="mfw").fit(Xn, yn).solver_ == "mfw"
    wide = np.hstack([Xn[:40]] * 10)  # more features than points: a Gram
    assert L2SVR(kernel="linear").fit(wide, yn[:40]).solver_ == "mfw"


def test_estimator_dcd_matches_mfw_and_weights_repeat_rows():
    X, y = make_friedman1(n_samples=700, noise=1.0, random_state=8)
    Xt = X[500:]
    X, y = X[:500], y[:500]
    dcd = L2SVR(kernel="linear", solver="dcd", tol=1e-8, max_iter=5000).fit(X, y)
    mfw = L2SVR(kernel="linear", solver="mfw", tol=1e-8, max_iter=10**6).fit(X, y)
    assert dcd.converged_ and mfw.converged_
    np.testing.assert_allclose(dcd.predict(Xt), mfw.predict(Xt), atol=1e-3)
    s = np.random.default_rng(0).integers(0, 3, 500)
    kw = {"kernel": "linear", "solver": "dcd", "tol": 1e-10, "max_iter": 20000}
    weighted = L2SVR(**kw).fit(X, y, sample_weight=s)
    repeated = L2SVR(**kw).fit(np.repeat(X, s, axis=0), np.repeat(y, s))
    np.testing.assert_allclose(weighted.predict(Xt), repeated.predict(Xt), atol=1e-4)
