"""Per-example weights and the intercept of ``MultiClassSVM`` (math.md §1.15).

Weighted fits against the cvxpy reference for every loss, solver and backend; integer
weights against repeated rows, zero weights against removed rows; the intercept
against ``LinearSVC(multi_class="crammer_singer")``; the operator ``D (K + c11ᵀ) D``.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import LinearSVC

from kernfw import MultiClassSVM
from kernfw.kernels import make_operator
from kernfw.operators import Features, Gram, ShiftedScaled

pytest.importorskip("cvxpy")
from kernfw.reference.common import factor_gram  # noqa: E402
from kernfw.reference.multiclass import multiclass_primal  # noqa: E402

LOSSES = [
    dict(loss="max_hinge"),
    dict(loss="structured_hinge", cost=np.array([[0, 1, 2], [1, 0, 1], [2, 1, 0.0]])),
    dict(loss="topk_hinge", k=2),
    dict(loss="usunier", k=2),
    dict(loss="weighted_topk", rho=[0.7, 0.3, 0.0]),
    dict(loss="weighted_usunier", rho=[0.7, 0.3, 0.0]),
]
#: solvers and the tolerance each reaches quickly on these small problems
SOLVERS = [("bcfw", 1e-9), ("lsfw", 1e-3), ("stdfw", 3e-3), ("pg", 3e-3)]


def data(n=12, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.arange(n) % 3
    w = rng.integers(0, 4, size=n).astype(float)
    w[:3] = [0.0, 2.0, 3.0]  # a zero weight and a positive weight in every class
    return X, y, w


def fit(X, y, w, **params):
    est = MultiClassSVM(**{"random_state": 0, "max_iter": 200_000, **params})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y, sample_weight=w)


def assert_certified(est, ref, slack=1e-6):
    """``D ≤ P* ≤ P`` up to the reference's tolerance, and the intercepts within the
    distance the gap allows: ``½‖θ − θ*‖² ≤ (P − P*)/λ`` (strong convexity)."""
    P, D, P_star = est.primal_objective_, est.dual_objective_, ref["value"]
    assert D - slack * abs(P_star) <= P_star <= P + slack * abs(P_star)
    radius = np.sqrt(2 * max(P - P_star, 0.0) / est.lam_ + 2 * slack * abs(P_star) / est.lam_)
    assert np.max(np.abs(est.intercept_ - ref["intercept"])) <= radius + 1e-6


@pytest.mark.parametrize("solver, tol", SOLVERS)
@pytest.mark.parametrize("loss", LOSSES, ids=lambda p: p["loss"])
def test_weighted_fit_matches_reference(loss, solver, tol):
    X, y, w = data()
    est = fit(X, y, w, kernel="linear", solver=solver, tol=tol, C=0.5, **loss)
    # the model's costs: the reference takes the loss object the fit used
    ref = multiclass_primal(
        X, y, est._fit_loss, lam=est.lam_, sample_weight=w, intercept_scaling=1.0
    )
    assert est.lam_ == pytest.approx(1 / (0.5 * w.sum()))
    assert_certified(est, ref)


@pytest.mark.parametrize("solver, tol", SOLVERS[:2])
def test_weighted_smoothed_fit_matches_reference(solver, tol):
    X, y, w = data(seed=1)
    est = fit(X, y, w, kernel="linear", solver=solver, tol=tol, smoothing=0.3, loss="topk_hinge",
              k=2, intercept_scaling=2.0)  # fmt: skip
    ref = multiclass_primal(X, y, est._fit_loss, lam=est.lam_, smoothing=0.3, sample_weight=w,
                            intercept_scaling=2.0)  # fmt: skip
    assert_certified(est, ref)


def _features(kind, X, est):
    """The features of the kernel each backend fits on (for the reference)."""
    if kind in ("dense", "csr"):
        return X
    if kind == "nystroem":
        return est.kernel_approx_.transform(X)
    return factor_gram(rbf_kernel(X, gamma=0.4))


@pytest.mark.parametrize("kind", ["dense", "csr", "gram", "function", "precomputed", "nystroem"])
def test_weighted_fit_every_backend(kind):
    X, y, w = data(n=15, seed=2)
    params = {
        "tol": 1e-9,
        "C": 2.0,
        "class_weight": {0: 1.0, 1: 2.0, 2: 0.5},
        "fit_intercept": True,
    }
    Xfit = X
    if kind in ("dense", "csr"):
        params["kernel"] = "linear"
        Xfit = sp.csr_matrix(X) if kind == "csr" else X
    elif kind == "nystroem":
        params.update(kernel="rbf", gamma=0.4, approx="nystroem", n_components=8)
    elif kind == "gram":
        params.update(kernel="rbf", gamma=0.4)
    elif kind == "function":  # the kernel evaluated on the fly
        params["kernel"] = make_operator(X, "rbf", gamma=0.4, backend="function")
    else:
        params["kernel"] = "precomputed"
        Xfit = rbf_kernel(X, gamma=0.4)
    est = fit(Xfit, y, w, **params)
    effective = w * np.array([1.0, 2.0, 0.5])[y]
    ref = multiclass_primal(_features(kind, X, est), y, lam=est.lam_, sample_weight=effective,
                            intercept_scaling=1.0)  # fmt: skip
    assert_certified(est, ref)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("kernel", ["rbf", "precomputed"])
def test_shifted_scaled_gram_read_by_the_passes(kernel, weighted):
    """BCFW's passes on a stored Gram form ``d_i d_j (K_ij + c)`` from the stored ``K`` as
    they read its columns (the intercept's shift, the weights' scales, or both): the
    certified optimum is the reference's, and the user's Gram is left as it was."""
    X, y, w = data(n=15, seed=5)
    w = w if weighted else None
    K = rbf_kernel(X, gamma=0.4)
    Xfit = K.copy() if kernel == "precomputed" else X
    est = fit(Xfit, y, w, kernel=kernel, gamma=0.4, tol=1e-9, C=2.0, fit_intercept=True)
    assert est.converged_
    ref = multiclass_primal(factor_gram(K), y, lam=est.lam_, sample_weight=w,
                            intercept_scaling=1.0)  # fmt: skip
    assert_certified(est, ref)
    if kernel == "precomputed":
        np.testing.assert_array_equal(Xfit, K)


@pytest.mark.parametrize("intercept", [False, True])
def test_columns_computed_where_blocks_move_on_imbalanced_classes(intercept):
    """With a majority class the RBF fit computes the kernel's columns where its blocks
    move (no Gram stored first, :meth:`MultiClassSVM._computes_columns`), with the balanced
    weights (and an intercept) formed as the columns are read: the certified optimum is the
    reference's.  Balanced classes keep the stored Gram."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 4))
    y = np.r_[np.zeros(30, int), np.ones(5, int), np.full(5, 2)]
    X[y == 1] += 1.5
    est = fit(X, y, None, gamma=0.4, tol=1e-9, class_weight="balanced", fit_intercept=intercept)
    assert est.converged_ and est._computes_columns(X)
    effective = est.class_weight_[y]
    ref = multiclass_primal(factor_gram(rbf_kernel(X, gamma=0.4)), y, lam=est.lam_,
                            sample_weight=effective, intercept_scaling=1.0 if intercept else None)  # fmt: skip
    assert_certified(est, ref)
    balanced = fit(X, np.arange(40) % 3, None, gamma=0.4, tol=1e-3)
    assert not balanced._computes_columns(X)


@pytest.mark.parametrize("solver", ["bcfw", "lsfw"])
@pytest.mark.parametrize("loss", LOSSES[::2], ids=lambda p: p["loss"])
@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_integer_weights_are_repeated_rows(kernel, loss, solver):
    X, y, w = data(n=10, seed=3)
    tol, budget = (1e-12, 3000) if solver == "bcfw" else (1e-4, 2000)
    params = dict(kernel=kernel, solver=solver, tol=tol, max_iter=budget, **loss)
    weighted = fit(X, y, w, **params)
    keep = w.astype(int)
    if loss.get("cost") is not None and loss["cost"].shape[0] == len(y):  # (per-example)
        params["cost"] = loss["cost"].repeat(keep, axis=0)
    repeated = fit(X.repeat(keep, axis=0), y.repeat(keep), None, **params)
    bound = np.sqrt(2 * (weighted.duality_gap_ + repeated.duality_gap_) / weighted.lam_)
    assert weighted.lam_ == pytest.approx(repeated.lam_)
    assert weighted.primal_objective_ == pytest.approx(repeated.primal_objective_, abs=bound**2)
    scores = weighted.decision_function(X) - repeated.decision_function(X)
    norm = np.sqrt(np.max(np.sum(X**2, axis=1)) + (1.0 if kernel == "linear" else 2.0))
    assert np.max(np.abs(scores)) <= 2 * bound * norm + 1e-9


def test_zero_weights_are_removed_rows():
    X, y, w = data(seed=4)
    kept = w > 0
    weighted = fit(X, y, np.where(kept, 1.0, 0.0), tol=1e-12)
    removed = fit(X[kept], y[kept], None, tol=1e-12)
    assert np.all(weighted.dual_coef_[:, ~kept] == 0)
    np.testing.assert_allclose(weighted.decision_function(X), removed.decision_function(X),
                               atol=1e-7)  # fmt: skip


def test_class_weight_balanced_is_sample_weight():
    X, y, _ = data(n=14, seed=5)
    y = np.r_[np.zeros(8, int), np.ones(4, int), np.full(2, 2)]
    # (a fixed gamma: "scale" weighs the variance by sample_weight, not by class_weight)
    balanced = fit(X, y, None, class_weight="balanced", tol=1e-12, gamma=0.5)
    expected = len(y) / (3 * np.bincount(y))
    np.testing.assert_allclose(balanced.class_weight_, expected)
    weighted = fit(X, y, expected[y], tol=1e-12, gamma=0.5)
    np.testing.assert_allclose(balanced.decision_function(X), weighted.decision_function(X),
                               atol=1e-7)  # fmt: skip


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf])
def test_bad_weights_raise(bad):
    X, y, w = data()
    w[4] = bad
    with pytest.raises(ValueError, match="sample_weight|NaN|infinity|Negative"):
        MultiClassSVM().fit(X, y, sample_weight=w)


def test_one_weighted_class_raises():
    X, y, _ = data()
    with pytest.raises(ValueError, match="2 classes with a positive weight"):
        MultiClassSVM().fit(X, y, sample_weight=(y == 1).astype(float))
    with pytest.raises(ValueError, match="weight"):
        MultiClassSVM().fit(X, y, sample_weight=np.zeros(len(y)))


def test_intercept_scaling_and_fit_intercept():
    X, y, _ = data(n=30, seed=6)
    X = X + 5.0  # far from the origin: an intercept matters
    plain = fit(X, y, None, kernel="linear", fit_intercept=False, tol=1e-9)
    np.testing.assert_array_equal(plain.intercept_, np.zeros(3))
    for s in (1.0, 10.0):
        est = fit(X, y, None, kernel="linear", intercept_scaling=s, tol=1e-9)
        ref = multiclass_primal(X, y, lam=est.lam_, intercept_scaling=s)
        assert_certified(est, ref)
        scores = X @ est.coef_.T + est.intercept_
        np.testing.assert_allclose(est.decision_function(X), scores, atol=1e-10)


def test_linear_matches_linear_svc_crammer_singer():
    """``MultiClassSVM(kernel="linear")`` at ``LinearSVC``'s defaults (C=1, intercept,
    scaling 1) has ``LinearSVC(multi_class="crammer_singer")``'s optimum: the peer's
    ``coef_`` and ``intercept_`` lie within the distance our certified gap allows, and
    its objective inside our certified interval."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    rng = np.random.default_rng(0)
    w = rng.integers(1, 4, size=len(y)).astype(float)
    peer = LinearSVC(multi_class="crammer_singer", tol=1e-10, max_iter=1_000_000)
    peer.fit(X, y, sample_weight=w)
    est = fit(X, y, w, kernel="linear", tol=1e-10)

    def objective(coef, b):  # P/λ = ½‖W‖² + ½‖b/s‖² + C Σ_i w_i Φ_i
        S = X @ coef.T + b
        margins = S + 1 - np.eye(3)[y] - S[np.arange(len(y)), y][:, None]
        return 0.5 * np.sum(coef**2) + 0.5 * np.sum(b**2) + np.sum(w * margins.max(axis=1))

    P, D = est.primal_objective_ / est.lam_, est.dual_objective_ / est.lam_
    assert objective(est.coef_, est.intercept_) == pytest.approx(P, rel=1e-10)
    peer_value = objective(peer.coef_, peer.intercept_)
    assert D - 1e-9 * P <= peer_value <= P * (1 + 1e-7)
    theta = np.c_[est.coef_, est.intercept_] - np.c_[peer.coef_, peer.intercept_]
    assert np.sqrt(np.sum(theta**2)) <= np.sqrt(2 * (P - D)) + np.sqrt(2 * (peer_value - D))
    assert np.sqrt(np.sum(theta**2)) < 1e-3


@pytest.mark.parametrize("kind", ["gram", "dense", "csr"])
def test_shifted_scaled_operator(kind):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(9, 4))
    d = rng.uniform(0, 2, size=9)
    d[2] = 0.0
    if kind == "gram":
        K = rbf_kernel(X)
        K = (K + K.T) / 2  # symmetric bit for bit
        base = Gram(K)
    else:
        base = Features(sp.csr_matrix(X) if kind == "csr" else X)
        K = X @ X.T
    op = ShiftedScaled(base, 2.5, d)
    expected = d[:, None] * (K + 2.5) * d[None, :]
    np.testing.assert_allclose(op.dense(), expected, atol=1e-12)
    np.testing.assert_allclose(op.diag(), np.diag(expected), atol=1e-12)
    V = rng.normal(size=(9, 3))
    np.testing.assert_allclose(op.matmat(V), expected @ V, atol=1e-12)
    np.testing.assert_allclose(op.matmat64(V), expected @ V, atol=1e-12)
    np.testing.assert_allclose(op.columns([1, 4]), expected[:, [1, 4]], atol=1e-12)
    np.testing.assert_allclose(op.block([0, 3], [1, 4]), expected[np.ix_([0, 3], [1, 4])])
    np.testing.assert_allclose(op.subset([1, 2, 5]).dense(), expected[np.ix_([1, 2, 5], [1, 2, 5])])
    if kind == "gram":
        K0, c, scale = op.scaled_gram(by_columns=True)  # the base's matrix, untransformed
        assert K0 is base.stored_gram(by_columns=True) and c == 2.5 and scale is d
        np.testing.assert_allclose(scale[:, None] * (K0 + c) * scale[None, :], expected)
        assert base.scaled_gram() == (base.stored_gram(), 0.0, None)
        G = op.stored_gram(by_columns=True)
        np.testing.assert_allclose(G, expected, atol=1e-12)
        assert np.array_equal(G, G.T)  # symmetric bit for bit, as the base
        assert op.features() is None
    else:
        F = op.features()
        F = F.toarray() if sp.issparse(F) else F
        np.testing.assert_allclose(F @ F.T, expected, atol=1e-12)
        assert op.stored_gram() is None


def test_fit_intercept_auto_is_liblinears_for_the_linear_kernel_only():
    """ "auto" adds ``intercept_scaling²`` to the linear kernel (LinearSVC's default) and
    nothing to the others (docs/benchmarks.md: equal accuracy at 1.1–1.6× the time)."""
    X, y, _ = data(n=30, seed=4)
    linear = MultiClassSVM(kernel="linear", tol=1e-6).fit(X, y)
    assert np.abs(linear.intercept_).max() > 1e-3
    ref = MultiClassSVM(kernel="linear", tol=1e-6, fit_intercept=True).fit(X, y)
    np.testing.assert_allclose(linear.intercept_, ref.intercept_)
    rbf = MultiClassSVM(tol=1e-6).fit(X, y)
    assert np.all(rbf.intercept_ == 0.0)
    forced = MultiClassSVM(tol=1e-6, fit_intercept=True).fit(X, y)
    assert np.abs(forced.intercept_).max() > 1e-3
