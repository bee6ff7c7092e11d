"""The L2-SVM (math.md §2.1, §2.7): ``solve_l2svm``, ``L2SVMKernel`` and the ``L2SVC`` estimator."""

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.datasets import load_iris, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernfw.estimators.l2svc import L2SVC
from kernfw.fw import StoppingRule
from kernfw.kernels import make_operator
from kernfw.operators import Gram, KernelFunction
from kernfw.solvers.simplex_qp import L2SVMKernel, solve_l2svm, solve_simplex_qp

KERNELS = [("linear", {}), ("rbf", {"gamma": 0.5})]


def _binary(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.6 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _modified_gram(K, y, C):
    return np.outer(y, y) * (K + 1) + np.eye(len(y)) / C


# -- the modified kernel --------------------------------------------------------------------
def test_modified_kernel_operator_matches_the_formula():
    X, y = _binary(30)
    K = pairwise_kernels(X, metric="rbf", gamma=0.3)
    op = L2SVMKernel(Gram(K), y, C=2.0)
    Kt = _modified_gram(K, y, 2.0)
    np.testing.assert_allclose(op.dense(), Kt, atol=1e-14)
    np.testing.assert_allclose(op.diag(), np.diag(Kt), atol=1e-14)
    V = np.random.default_rng(1).normal(size=(30, 3))
    np.testing.assert_allclose(op.matmat(V), Kt @ V, atol=1e-12)
    np.testing.assert_allclose(op.matmat(V[:, 0]), Kt @ V[:, 0], atol=1e-12)
    np.testing.assert_allclose(op.columns([4, 2]), Kt[:, [4, 2]], atol=1e-14)
    sub = op.subset([1, 5, 7])
    np.testing.assert_allclose(sub.dense(), Kt[np.ix_([1, 5, 7], [1, 5, 7])], atol=1e-14)
    # cross: y_j (k(x, x_j) + 1), the decision function's kernel
    kf = make_operator(X, "rbf", gamma=0.3, backend="function")
    cross = L2SVMKernel(kf, y, 2.0).cross(X[:4], [0, 3])
    np.testing.assert_allclose(cross, (K[:4][:, [0, 3]] + 1) * y[[0, 3]], atol=1e-14)


# -- the binary solver against cvxpy -------------------------------------------------------
@pytest.mark.cvxpy
@pytest.mark.parametrize("kernel,params", KERNELS)
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_l2svm_matches_cvxpy(kernel, params, C):
    from kernfw.reference import l2svm_reference

    X, y = _binary(50, seed=2)
    Xt = np.random.default_rng(3).normal(size=(20, 3))
    K = pairwise_kernels(X, metric=kernel, **params)
    ref = l2svm_reference(K, y, C)
    res = solve_l2svm(Gram(K), y, C, tol=StoppingRule(1e-12, "absolute"))
    P = ref["objective"]
    assert res.converged
    assert abs(res.dual - P) <= 1e-6 * abs(P)  # dual optimum to 1e-6 relative
    assert abs(res.primal - P) <= max(res.gap, 1e-7) + 1e-6 * abs(P)
    assert res.dual <= P + 1e-8
    sol = res.solution
    assert sol["rho"] == pytest.approx(ref["rho"], rel=1e-6)
    assert sol["b"] == pytest.approx(ref["b"], abs=1e-6 * max(1.0, abs(ref["b"])))
    # Clarabel's multipliers have an FW gap of ~1e-11 (ours: 1e-14), so α, ξ and h
    # agree to ~1e-5 relative (the dual is 1/C-strongly concave: ‖Δα‖² ≤ C·gap)
    alpha = sol["alpha"]
    np.testing.assert_allclose(alpha / C, ref["xi"], atol=1e-5 * np.abs(ref["xi"]).max())
    # decision functions: training points (primal h) and new points (dual coefficients)
    S = sol["support"]
    h_train = (K[:, S] + 1) @ sol["coef"]
    np.testing.assert_allclose(h_train, ref["h"], atol=1e-5 * np.abs(ref["h"]).max())
    Kt = pairwise_kernels(Xt, X, metric=kernel, **params)
    h_ref = (Kt + 1) @ ref["coef"]
    np.testing.assert_allclose((Kt[:, S] + 1) @ sol["coef"], h_ref, atol=1e-5 * np.abs(h_ref).max())
    assert np.array_equal(np.sign(h_train), np.sign(ref["h"]))


@pytest.mark.cvxpy
def test_polynomial_kernel_nonconstant_diagonal_matches_cvxpy():
    """§2.7: K̃_ii not constant, the L2-SVM dual (q = 0) is still solved exactly."""
    from kernfw.reference import l2svm_reference

    X, y = _binary(40, seed=4)
    K = pairwise_kernels(X, metric="poly", degree=2, gamma=1.0, coef0=1.0)
    assert np.ptp(np.diag(K)) > 1
    ref = l2svm_reference(K, y, 1.0)
    res = solve_l2svm(Gram(K), y, 1.0, tol=1e-12)
    assert res.dual == pytest.approx(ref["objective"], rel=1e-6)
    assert res.solution["b"] == pytest.approx(ref["b"], abs=1e-6)


def test_recovery_and_kkt():
    X, y = _binary(60, seed=5)
    C = 3.0
    K = pairwise_kernels(X, metric="rbf", gamma=0.4)
    res = solve_l2svm(Gram(K), y, C, tol=1e-12)
    sol = res.solution
    alpha, v, S = sol["alpha"], sol["v"], sol["support"]
    Kt = _modified_gram(K, y, C)
    np.testing.assert_allclose(v, Kt @ alpha, atol=1e-13)
    assert sol["rho"] == pytest.approx(alpha @ Kt @ alpha, rel=1e-12)
    assert sol["b"] == pytest.approx(alpha @ y, rel=1e-12)
    np.testing.assert_allclose(sol["coef"], alpha[S] * y[S])
    # (K̃α)_i = y_i h(x_i) + α_i / C ≥ ρ, with equality on the support
    h = (K[:, S] + 1) @ sol["coef"]
    np.testing.assert_allclose(y * h + alpha / C, v, atol=1e-12)
    assert np.all(v >= sol["rho"] - res.gap)
    np.testing.assert_allclose(v[S], sol["rho"], atol=1e-6)
    # the certificate: dual = −ρ, primal = ‖w‖² + b² − 2ρ' + CΣξ² at ρ' = min v
    w2 = sol["coef"] @ K[np.ix_(S, S)] @ sol["coef"]
    primal = w2 + sol["b"] ** 2 - 2 * v.min() + C * np.sum((alpha / C) ** 2)
    assert res.dual == pytest.approx(-sol["rho"], rel=1e-12)
    assert res.primal == pytest.approx(primal, rel=1e-9)


def test_svm_is_the_meb_of_the_modified_kernel():
    """§2.2: with a constant K̃_ii = κ, the MEB of K̃ has r*² = κ − ρ*."""
    X, y = _binary(50, seed=6)
    C = 0.5
    K = Gram(pairwise_kernels(X, metric="rbf", gamma=0.5))
    svm = solve_l2svm(K, y, C, tol=1e-12)
    Kt = L2SVMKernel(K, y, C)
    meb = solve_simplex_qp(Kt, q=Kt.diag(), tol=1e-12)
    kappa = 1 + 1 + 1 / C
    assert meb.dual == pytest.approx(kappa - svm.solution["rho"], rel=1e-10)
    np.testing.assert_allclose(meb["alpha"], svm["alpha"], atol=1e-6)


# predict_proba is calibrated on internal folds (math.md §9): the copies of a repeated row fall
# in different folds, a weighted row in one, so the calibrations differ (the decision
# functions agree to rounding: the other estimators pass these checks)
_CALIBRATION_FOLDS = dict.fromkeys(
    (
        "check_sample_weight_equivalence_on_dense_data",
        "check_sample_weight_equivalence_on_sparse_data",
    ),
    "the calibration folds of repeated rows are not those of weighted rows",
)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_mfw_converges_linearly_where_fw_does_not():
    """math.md §2.8: MFW reaches gap 1e-8 in fewer than half of FW's iterations."""
    X, y = _binary(40, seed=7)
    K = Gram(pairwise_kernels(X, metric="rbf", gamma=0.5))
    mfw = solve_l2svm(K, y, 10.0, solver="mfw", tol=1e-8, check_every=1)
    fw = solve_l2svm(K, y, 10.0, solver="lsfw", tol=1e-8, check_every=1, max_iter=20 * mfw.n_iter)
    assert mfw.converged and mfw.gap <= 1e-8
    fw_iters = fw.n_iter if fw.converged else np.inf
    assert mfw.n_iter < 0.5 * fw_iters
    # at MFW's final iteration, FW's gap is still orders of magnitude larger
    fw_gap_then = fw.history["gap"][mfw.n_iter]
    assert fw_gap_then > 100 * mfw.gap
    assert mfw.history["away_steps"][-1] > 0 and fw.history["away_steps"][-1] == 0


def test_kernel_function_backend_forms_no_gram_and_agrees():
    X, y = _binary(200, d=4, seed=8)
    gram = make_operator(X, "rbf", gamma=0.3, backend="gram")
    func = KernelFunction(X, "rbf", gamma=0.3, cache_size=0.1)
    func.matmat = func.dense = None  # any n × n use would fail
    a = solve_l2svm(gram, y, 2.0, tol=1e-9)
    b = solve_l2svm(func, y, 2.0, tol=1e-9)
    assert a.converged and b.converged
    # both duals within their certified gaps of the same optimum
    assert abs(a.dual - b.dual) <= a.gap + b.gap
    # the MEB centres c = Σ α_i φ̃_i: ‖c − c*‖² ≤ f* − f(α) ≤ gap (strong convexity of ‖c‖²)
    Kt = L2SVMKernel(gram, y, 2.0).dense()
    d = a["alpha"] - b["alpha"]
    assert np.sqrt(max(d @ Kt @ d, 0.0)) <= np.sqrt(a.gap) + np.sqrt(b.gap)
    assert func.hits + func.misses <= b.n_iter + 2


def test_warm_start():
    X, y = _binary(80, seed=9)
    K = Gram(pairwise_kernels(X, metric="rbf", gamma=0.3))
    cold = solve_l2svm(K, y, 1.0, tol=1e-10)
    hot = solve_l2svm(K, y, 1.0, tol=1e-10, alpha0=cold["alpha"])
    assert hot.n_iter == 0 and hot.dual == pytest.approx(cold.dual, rel=1e-12)
    # a nearby kernel: the previous α is a good start
    K2 = Gram(pairwise_kernels(X, metric="rbf", gamma=0.33))
    fresh = solve_l2svm(K2, y, 1.0, tol=1e-10)
    warm = solve_l2svm(K2, y, 1.0, tol=1e-10, alpha0=cold["alpha"])
    assert warm.dual == pytest.approx(fresh.dual, rel=1e-8)
    assert warm.n_iter < fresh.n_iter


def test_radius_stop_for_a_constant_diagonal():
    X, y = _binary(100, seed=10)
    K = Gram(pairwise_kernels(X, metric="rbf", gamma=0.3))
    C = 1.0
    res = solve_l2svm(K, y, C, tol=StoppingRule(1e-4, "radius"))
    kappa = 2 + 1 / C
    r2 = kappa - res.solution["rho"]
    assert res.converged and res.gap <= ((1 + 1e-4) ** 2 - 1) * r2


def test_binary_core_bad_inputs():
    X, y = _binary(20)
    K = Gram(pairwise_kernels(X, metric="rbf"))
    with pytest.raises(ValueError, match="two classes"):
        solve_l2svm(K, np.arange(20) % 3 - 1.0, 1.0)
    with pytest.raises(ValueError, match="-1 and \\+1"):
        solve_l2svm(K, (y > 0).astype(float), 1.0)
    with pytest.raises(ValueError, match="shape"):
        solve_l2svm(K, y[:10], 1.0)
    for C in (0.0, -1.0, np.inf, "1"):
        with pytest.raises(ValueError, match="C must"):
            solve_l2svm(K, y, C)
    for tol in (0.0, -1e-3):
        with pytest.raises(ValueError, match="tol"):
            solve_l2svm(K, y, 1.0, tol=tol)
    with pytest.raises(ValueError, match="solver"):
        solve_l2svm(K, y, 1.0, solver="smo")


# -- the estimator ----------------------------------------------------------------------------
def test_binary_estimator_matches_the_solver_and_string_labels():
    X, y = _binary(80, seed=11)
    labels = np.where(y > 0, "yes", "no")
    clf = L2SVC(C=2.0, gamma=0.5, tol=1e-10).fit(X, labels)
    res = solve_l2svm(
        make_operator(X, "rbf", gamma=0.5),
        np.where(labels == "yes", 1.0, -1.0),
        2.0,
        tol=1e-10,
    )
    np.testing.assert_array_equal(clf.classes_, ["no", "yes"])
    np.testing.assert_array_equal(clf.support_, res["support"])
    np.testing.assert_allclose(clf.dual_coef_[0], res["coef"])
    assert clf.intercept_[0] == pytest.approx(res.solution["b"])
    Xt = np.random.default_rng(12).normal(size=(15, 3))
    K = pairwise_kernels(Xt, X[clf.support_], metric="rbf", gamma=0.5)
    np.testing.assert_allclose(clf.decision_function(Xt), (K + 1) @ res["coef"], atol=1e-12)
    assert clf.decision_function(Xt).shape == (15,)
    np.testing.assert_array_equal(
        clf.predict(Xt), np.where(clf.decision_function(Xt) > 0, "yes", "no")
    )
    assert isinstance(clf.n_iter_, int) and clf.converged_
    assert clf.history_["gap"][-1] == clf.duality_gap_
    assert clf.n_support_.sum() == clf.support_.size


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_multiclass(multi_class):
    X, y = load_iris(return_X_y=True)
    clf = L2SVC(C=10.0, multi_class=multi_class, tol=1e-6).fit(X, y)
    n_problems = 3
    assert clf.dual_coef_.shape == (n_problems, clf.support_.size)
    assert clf.intercept_.shape == clf.n_iter_.shape == (n_problems,)
    assert clf.decision_function(X).shape == (150, 3)
    assert clf.score(X, y) > 0.95
    assert np.all(clf.converged_)
    pairs = [(0, 1), (0, 2), (1, 2)] if multi_class == "ovo" else [(0,), (1,), (2,)]
    assert clf.problems_ == pairs


def test_one_vs_one_problems_are_the_binary_ones_and_parallel_agrees():
    X, y = load_iris(return_X_y=True)
    clf = L2SVC(C=1.0, gamma=0.3, tol=1e-8).fit(X, y)
    with parallel_config(backend="threading"):  # processes: see the slow test below
        par = L2SVC(C=1.0, gamma=0.3, tol=1e-8, n_jobs=2).fit(X, y)
    np.testing.assert_allclose(par.dual_coef_, clf.dual_coef_)
    np.testing.assert_array_equal(par.predict(X), clf.predict(X))
    # pair (1, 2): classes 1 → −1, 2 → +1, trained on those points only
    mask = y > 0
    one = L2SVC(C=1.0, gamma=0.3, tol=1e-8).fit(X[mask], y[mask])
    Xt = X[::7]
    pair_decision = clf._support_kernel(clf._new_input(Xt)) @ clf.dual_coef_[2] + clf.intercept_[2]
    np.testing.assert_allclose(pair_decision, one.decision_function(Xt), atol=1e-10)


def test_parallel_processes_give_the_sequential_model():
    X, y = load_iris(return_X_y=True)
    seq = L2SVC(C=1.0, tol=1e-8, multi_class="ovr").fit(X, y)
    par = L2SVC(C=1.0, tol=1e-8, multi_class="ovr", n_jobs=2).fit(X, y)
    np.testing.assert_allclose(par.dual_coef_, seq.dual_coef_)
    np.testing.assert_allclose(par.decision_function(X), seq.decision_function(X))


def test_precomputed_reads_only_support_columns():
    X, y = _binary(90, seed=13)
    Xt = np.random.default_rng(14).normal(size=(12, 3))
    K = pairwise_kernels(X, metric="rbf", gamma=0.5)
    pre = L2SVC(kernel="precomputed", tol=1e-9).fit(K, y)
    feat = L2SVC(gamma=0.5, tol=1e-9).fit(X, y)
    K_test = pairwise_kernels(Xt, X, metric="rbf", gamma=0.5)
    K_test[:, np.setdiff1d(np.arange(90), pre.support_)] = 1e6  # never read
    np.testing.assert_allclose(
        pre.decision_function(K_test), feat.decision_function(Xt), atol=1e-10
    )
    with pytest.raises(ValueError):
        pre.decision_function(K_test[:, :50])


def test_large_narrow_problems_use_the_on_the_fly_kernel(monkeypatch):
    import kernfw.estimators._base as base
    import kernfw.estimators.l2svc as module

    built = []

    def spy(*args, **kwargs):
        op = make_operator(*args, **kwargs)
        built.append(op)
        return op

    monkeypatch.setattr(base, "make_operator", spy)
    X, y = make_classification(n_samples=3000, n_features=5, random_state=0)
    with pytest.warns(ConvergenceWarning):
        clf = L2SVC(max_iter=200, cache_size=5).fit(X, y)  # a 34 MB float32 Gram: too big
    assert isinstance(built[-1], KernelFunction)
    Xw = np.random.default_rng(0).normal(size=(300, 60))  # wide: Gram if it fits the cache
    yw = (Xw[:, 0] > 0).astype(int)
    L2SVC(tol=0.1).fit(Xw, yw)
    assert isinstance(built[-1], Gram)
    assert module.gram_budget(Xw, 500) == 500 and module.gram_budget(X, 500) == 32
    assert module.gram_budget(Xw, 50) == module.WIDE_GRAM_MB
    # prediction keeps only the support points
    assert clf._predict_op.n == clf.support_.size


def test_linear_and_poly_kernels():
    X, y = _binary(100, seed=15)
    for kernel in ("linear", "poly"):
        clf = L2SVC(kernel=kernel, C=1.0, tol=1e-6).fit(X, y)
        assert clf.converged_ and clf.score(X, y) > 0.8


def test_estimator_bad_parameters():
    X, y = _binary(20)
    for params in (
        {"C": 0.0},
        {"C": -1.0},
        {"tol": 0.0},
        {"tol": -1.0},
        {"multi_class": "crammer"},
        {"solver": "smo"},
        {"solver": "fw"},
    ):
        with pytest.raises(ValueError):
            L2SVC(**params).fit(X, y)
    with pytest.raises(ValueError, match="2 classes"):
        L2SVC().fit(X, np.ones(20))


# two checks turn the precomputed linear Gram indefinite (K − mean(K); K rounded to
# integers): kernfw rejects an indefinite Gram with NotPSDError (its dual is not concave)
_INDEFINITE_GRAM = dict.fromkeys(
    ("check_positive_only_tag_during_fit", "check_estimators_dtypes"),
    "the check passes an indefinite precomputed Gram (NotPSDError)",
)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
# the precomputed checks use linear Grams of points near (100, 100) with random
# labels: K̃ is so elongated that MFW converges slowly, hence the budget
@parametrize_with_checks(
    [
        L2SVC(),
        L2SVC(kernel="precomputed", max_iter=3000),
        L2SVC(multi_class="ovr"),
        L2SVC(probability=True, random_state=0),
    ],
    expected_failed_checks=lambda est: (
        _INDEFINITE_GRAM
        if est.kernel == "precomputed"
        else _CALIBRATION_FOLDS
        if est.probability
        else {}
    ),
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# -- the C convention ---------------------------------------------------------------------------
def test_C_maps_to_the_squared_hinge_svm_with_half_C():
    """L2SVC(C) ≡ ½‖w‖² + ½b² + (C/2)·Σ max(0, 1 − y h)²: LinearSVC(squared hinge, C/2,
    bias regularized as a constant feature) for the linear kernel, up to the factor ρ."""
    from sklearn.svm import LinearSVC

    X, y = _binary(120, d=4, seed=31)
    for C in (0.2, 5.0):
        clf = L2SVC(kernel="linear", C=C, tol=1e-12, max_iter=200000).fit(X, y)
        lin = LinearSVC(
            loss="squared_hinge", C=C / 2, intercept_scaling=1.0, tol=1e-12, max_iter=1000000
        ).fit(X, y)
        h = clf.decision_function(X) / clf.rho_[0]
        ref = lin.decision_function(X)
        np.testing.assert_allclose(h, ref, atol=1e-5 * np.abs(ref).max())
        w = (clf.dual_coef_[0] @ X[clf.support_]) / clf.rho_[0]
        np.testing.assert_allclose(w, lin.coef_[0], atol=1e-5 * np.abs(lin.coef_).max())


# -- results storage, defaults ------------------------------------------------------------
def test_multiclass_results_go_through_store_result():
    X, y = load_iris(return_X_y=True)
    clf = L2SVC(tol=1e-3).fit(X, y)
    assert isinstance(clf.history_, dict)
    assert set(np.unique(clf.history_["problem"])) == {0, 1, 2}
    n_rows = [np.sum(clf.history_["problem"] == p) for p in range(3)]
    assert all(r >= 1 for r in n_rows) and clf.n_iter_.shape == (3,)
    assert np.all(clf.duality_gap_ <= 1e-3 * clf.rho_ * (1 + 1e-12))


@pytest.mark.parametrize("loader", ["digits", "breast_cancer"])
def test_defaults_converge_without_warning(loader):
    import warnings

    from sklearn import datasets

    X, y = getattr(datasets, f"load_{loader}")(return_X_y=True)
    X = X / 16.0 if loader == "digits" else (X - X.mean(0)) / X.std(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf = L2SVC().fit(X, y)
    assert np.all(clf.converged_)
    assert np.all(clf.duality_gap_ <= clf.tol * clf.rho_ * (1 + 1e-12))
    assert clf.score(X, y) > 0.97


def test_random_state_changes_the_start_point():
    X, y = _binary(60, seed=32)
    fits = {
        s: L2SVC(kernel="linear", solver="dcd", max_iter=0, random_state=s) for s in (None, 1, 2)
    }
    supports = {}
    for s, est in fits.items():
        with pytest.warns(ConvergenceWarning):
            supports[s] = tuple(est.fit(X, y).support_)
        a = 0 if s is None else int(np.random.default_rng(s).integers(60))
        assert a in supports[s]
    assert len(set(supports.values())) == 3


# -- CVM and DDAG ------------------------------------------------------------------------------
@pytest.mark.cvxpy
def test_cvm_reaches_the_l2svm_optimum_within_the_certified_gap():
    from kernfw.reference import l2svm_reference

    X, y = _binary(60, seed=33)
    K = pairwise_kernels(X, metric="rbf", gamma=0.5)
    P = l2svm_reference(K, y, 2.0)["objective"]
    cvm = solve_l2svm(Gram(K), y, 2.0, solver="cvm", tol=1e-9)
    mfw = solve_l2svm(Gram(K), y, 2.0, solver="mfw", tol=1e-9)
    assert cvm.converged and cvm.gap <= 1e-9
    assert cvm.dual <= P + 1e-7 * abs(P) and P <= cvm.primal + 1e-7 * abs(P)
    assert abs(cvm.dual - mfw.dual) <= cvm.gap + mfw.gap
    clf = L2SVC(solver="cvm", gamma=0.5, C=2.0, tol=1e-6).fit(X, y)
    ref = L2SVC(gamma=0.5, C=2.0, tol=1e-6).fit(X, y)
    assert abs(clf.dual_objective_ - ref.dual_objective_) <= clf.duality_gap_ + ref.duality_gap_
    assert np.mean(clf.predict(X) == ref.predict(X)) >= 0.98


def test_ddag_agrees_with_one_vs_one_on_separable_classes():
    rng = np.random.default_rng(34)
    centres = np.array([[0, 0], [6, 0], [0, 6], [6, 6], [3, 12]], dtype=float)
    X = np.vstack([c + 0.5 * rng.normal(size=(25, 2)) for c in centres])
    y = np.repeat(np.arange(5), 25)
    Xt = np.vstack([c + 0.5 * rng.normal(size=(10, 2)) for c in centres])
    ddag = L2SVC(multi_class="ddag", tol=1e-3).fit(X, y)
    ovo = L2SVC(multi_class="ovo", tol=1e-3).fit(X, y)
    assert ddag.problems_ == ovo.problems_ and len(ddag.problems_) == 10
    np.testing.assert_array_equal(ddag.predict(Xt), ovo.predict(Xt))
    np.testing.assert_array_equal(ddag.predict(Xt), np.repeat(np.arange(5), 10))
    scores = ddag.decision_function(Xt)  # removal steps: a permutation of 0…m−1
    np.testing.assert_array_equal(np.sort(scores, axis=1), np.tile(np.arange(5), (50, 1)))


def test_ddag_walks_the_dag():
    """The DAG of 3 classes: (0, 2) first; the loser's end of the range is dropped."""
    from kernfw.estimators._multiclass_decomposition import ddag_scores

    pairs = [(0, 1), (0, 2), (1, 2)]
    # row 0: (0,2) prefers 0 → range [0, 1]; (0,1) prefers 1 → 1
    # row 1: (0,2) prefers 2 → range [1, 2]; (1,2) prefers 1 → 1
    # row 2: (0,2) prefers 0, (0,1) prefers 0 → 0 (although (1,2) prefers 1: never asked)
    decision = np.array([[1.0, -1.0, 5.0], [5.0, 1.0, -1.0], [-1.0, -1.0, -9.0]])
    scores = ddag_scores(decision, pairs, 3)
    np.testing.assert_array_equal(scores.argmax(axis=1), [1, 1, 0])
    np.testing.assert_array_equal(scores[0], [1, 2, 0])


def test_ddag_on_digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.25, random_state=0)
    ddag = L2SVC(multi_class="ddag").fit(Xtr, ytr)
    ovo_pred = L2SVC(multi_class="ovo").fit(Xtr, ytr).predict(Xte)
    pred = ddag.predict(Xte)
    assert np.mean(pred == yte) >= 0.97
    assert np.mean(pred == ovo_pred) >= 0.98
