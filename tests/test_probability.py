"""Calibrated probabilities: the calibration maps (math.md §9) and ``probability=True``."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits, make_blobs
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

from kernfw import L2SVC, MultiClassSVM
from kernfw.calibration import (
    calibrated_log_proba,
    fit_calibration,
    fit_multinomial,
    fit_pairwise_coupling,
    fit_platt,
    lift_to_top,
    log_loss_of,
    pairwise_coupling,
    platt_targets,
)
from kernfw.estimators._probability import PROBABILITY_FOLDS, calibration_folds
from kernfw.kernels import make_operator
from kernfw.solvers.multiclass import solve_multiclass


# -- the maps -----------------------------------------------------------------------------------
def _binary_scores(n=2000, a=2.0, b=-0.5, seed=0):
    rng = np.random.default_rng(seed)
    f = rng.normal(size=n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(a * f + b)))).astype(int)
    return f, y


def _platt_by_logistic_regression(f, y, intercept):
    """Platt's fit as a weighted logistic regression: every point once with target 1
    (weight t_i) and once with target 0 (weight 1 − t_i)."""
    t = platt_targets(y)
    X = np.r_[f, f][:, None]
    labels = np.r_[np.ones_like(f), np.zeros_like(f)]
    lr = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000, fit_intercept=intercept)
    lr.fit(X, labels, sample_weight=np.r_[t, 1.0 - t])
    return float(lr.coef_[0, 0]), float(lr.intercept_[0]) if intercept else 0.0


@pytest.mark.parametrize("intercept", [True, False])
def test_platt_fit_is_the_logistic_regression_on_platt_targets(intercept):
    f, y = _binary_scores()
    cal = fit_platt(3.0 * f, y, intercept=intercept)  # a scale the fit must undo
    a, b = _platt_by_logistic_regression(3.0 * f, y, intercept)
    assert cal.scale == pytest.approx(a, rel=1e-6)
    assert cal.bias == pytest.approx(b, abs=1e-6)
    if intercept:
        assert cal.scale == pytest.approx(2.0 / 3.0, rel=0.15)
        assert cal.bias == pytest.approx(-0.5, abs=0.15)


def test_platt_targets_are_smoothed():
    y = np.array([1, 1, 1, 0])
    np.testing.assert_allclose(platt_targets(y), [0.8, 0.8, 0.8, 1 / 3])


def _multiclass_scores(n=20_000, m=5, T=0.5, bias=None, seed=0):
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(n, m))
    Z = S / T + (0.0 if bias is None else bias)
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    y = (P.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    return S, y


def test_temperature_fit_recovers_a_known_temperature():
    S, y = _multiclass_scores(T=0.5)
    cal = fit_multinomial(7.0 * S, y, kind="temperature")
    assert 1.0 / (7.0 * cal.scale) == pytest.approx(0.5, rel=0.05)
    np.testing.assert_array_equal(cal.bias, 0.0)


def test_scale_bias_fit_recovers_the_scale_and_the_biases():
    bias = np.array([0.6, -0.4, 0.0, 0.3, -0.5])
    S, y = _multiclass_scores(T=0.5, bias=bias)
    cal = fit_multinomial(S, y, kind="scale_bias")
    assert cal.scale == pytest.approx(2.0, rel=0.05)
    np.testing.assert_allclose(cal.bias, bias - bias.mean(), atol=0.06)
    assert log_loss_of(cal, S, y) <= log_loss_of(fit_multinomial(S, y, "temperature"), S, y)


def test_the_fits_reach_a_stationary_point():
    S, y = _multiclass_scores(n=3000, m=4, T=2.0, seed=1)
    cal = fit_multinomial(S, y, kind="scale_bias")
    for eps in (1e-4, -1e-4):
        moved = cal._replace(scale=cal.scale + eps)
        assert log_loss_of(moved, S, y) >= log_loss_of(cal, S, y)


def test_calibrated_log_proba_is_normalized_and_ordered():
    S, y = _multiclass_scores(n=500, m=4)
    cal = fit_calibration(S, y)
    logp = calibrated_log_proba(cal, S)
    np.testing.assert_allclose(np.exp(logp).sum(axis=1), 1.0)
    np.testing.assert_array_equal(np.argmax(logp, axis=1), np.argmax(S, axis=1))
    f, yb = _binary_scores(n=500)
    logp = calibrated_log_proba(fit_calibration(f, yb), f)
    assert logp.shape == (500, 2)
    np.testing.assert_array_equal(np.argmax(logp, axis=1), (f > 0).astype(int))


def test_pairwise_coupling_recovers_consistent_class_probabilities():
    """Pairwise probabilities of a known ``p`` (``r_ij = p_i / (p_i + p_j)``) are coupled
    back into ``p`` exactly: the coupling's objective is 0 there (math.md §9.5)."""
    p = np.random.default_rng(0).dirichlet(np.ones(5), size=20)
    R = p[:, :, None] / (p[:, :, None] + p[:, None, :])
    np.testing.assert_allclose(pairwise_coupling(R), p, atol=1e-12)
    noisy = np.clip(R + np.random.default_rng(1).normal(0, 0.05, R.shape), 0.01, 0.99)
    noisy = np.triu(noisy, 1) + np.tril(1.0 - np.swapaxes(np.triu(noisy, 1), 1, 2), -1)
    P = pairwise_coupling(noisy)
    assert np.all(P >= 0) and np.allclose(P.sum(axis=1), 1.0)
    assert np.abs(P - p).max() < 0.1


def test_pairwise_fit_is_platt_on_each_pair():
    """All pairs are fitted in one batched Newton run; each is Platt's fit (with its offset)
    on the points of its two classes."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, size=400)
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    H = np.column_stack([(y == j) * 1.0 - (y == i) + rng.normal(0, 0.8, y.size) for i, j in pairs])
    cal = fit_pairwise_coupling(H, y, pairs)
    for q, (i, j) in enumerate(pairs):
        rows = (y == i) | (y == j)
        one = fit_platt(H[rows, q], (y[rows] == j).astype(int))
        assert cal.scale[q] == pytest.approx(one.scale, rel=1e-6)
        assert cal.bias[q] == pytest.approx(one.bias, rel=1e-6, abs=1e-9)
    logp = calibrated_log_proba(cal, H)
    np.testing.assert_allclose(np.exp(logp).sum(axis=1), 1.0)
    assert log_loss(y, np.exp(logp)) < np.log(4) - 0.3


def test_lift_to_top_puts_the_winner_first_and_keeps_rows_normalized():
    log_p = np.log(np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5], [0.4, 0.4, 0.2]]))
    lifted = lift_to_top(log_p, np.array([0, 1, 1]))
    np.testing.assert_array_equal(np.argmax(lifted, axis=1), [0, 1, 1])
    np.testing.assert_allclose(np.exp(lifted).sum(axis=1), 1.0)
    np.testing.assert_array_equal(lifted[0], log_p[0])  # already first: unchanged
    np.testing.assert_allclose(np.exp(lifted[1]), np.array([0.2, 0.5, 0.5]) / 1.2, rtol=1e-8)


def test_unknown_calibration_map_is_refused():
    S, y = _multiclass_scores(n=100, m=3)
    with pytest.raises(ValueError, match="kind must be one of"):
        fit_calibration(S, y, kind="isotonic")


# -- the folds ----------------------------------------------------------------------------------
def test_calibration_folds_are_stratified_and_seeded():
    y = np.repeat(np.arange(3), [20, 30, 50])
    folds = calibration_folds(y, 0)
    assert len(folds) == PROBABILITY_FOLDS
    held_out = np.concatenate([val for _, val in folds])
    np.testing.assert_array_equal(np.sort(held_out), np.arange(y.size))
    for train, val in folds:
        assert np.intersect1d(train, val).size == 0
        np.testing.assert_array_equal(np.bincount(y[val]), [4, 6, 10])
    again = calibration_folds(y, 0)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again))
    tiny = calibration_folds(np.array([0, 1, 1]), 0)  # fewer points than folds
    assert len(tiny) == 3


# -- the fold fits' warm start ------------------------------------------------------------------
def test_solve_multiclass_with_known_start_scores_is_the_same_run():
    X, y = make_blobs(80, centers=3, random_state=0)
    op = make_operator(X, "rbf", gamma=0.5)
    lam = 1.0 / 80
    first = solve_multiclass(op, y, lam=lam, solver="bcfw", tol=1e-2, random_state=0)
    A = first["A"]
    S = op.matmat(A.T) / (lam * 80)
    runs = [
        solve_multiclass(op, y, lam=lam, solver="bcfw", tol=1e-4, random_state=0, A_init=A, **kw)
        for kw in ({}, {"S_init": S})
    ]
    np.testing.assert_allclose(runs[0]["A"], runs[1]["A"], atol=1e-10)
    assert runs[0].gap == pytest.approx(runs[1].gap, rel=1e-6, abs=1e-12)
    with pytest.raises(ValueError, match="S_init must have shape"):
        solve_multiclass(op, y, lam=lam, A_init=A, S_init=S[:5])


# -- the estimators -----------------------------------------------------------------------------
CLASSIFIERS = [
    MultiClassSVM(random_state=0),
    L2SVC(random_state=0),
    L2SVC(random_state=0, multi_class="ovr"),
    L2SVC(random_state=0, multi_class="ddag"),
]


@pytest.mark.parametrize("est", CLASSIFIERS, ids=repr)
def test_probability_false_has_no_predict_proba(est):
    X, y = make_blobs(60, centers=3, random_state=0)
    est = est.set_params(probability=False).fit(X, y)
    assert not hasattr(est, "predict_proba") and not hasattr(est, "predict_log_proba")
    with pytest.raises(AttributeError, match="has no attribute 'predict_proba'") as info:
        est.predict_proba(X)
    assert "probability=False" in str(info.value.__cause__)  # as SVC
    est.set_params(probability=True)  # enabled after a fit without calibration
    with pytest.raises(NotFittedError, match="probability=False"):
        est.predict_proba(X)


@pytest.mark.parametrize("est", CLASSIFIERS, ids=repr)
@pytest.mark.parametrize("centers", [2, 3])
def test_predict_proba_rows_sum_to_one_and_follow_the_scores(est, centers):
    X, y = make_blobs(150, centers=centers, cluster_std=3.0, random_state=0)
    est = est.set_params(probability=True).fit(X, y)
    P = est.predict_proba(X)
    assert P.shape == (150, centers)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_allclose(est.predict_log_proba(X), np.log(P))
    np.testing.assert_array_equal(est.classes_[np.argmax(P, axis=1)], est.predict(X))
    assert np.all(est.calibration_.scale > 0)
    assert (est.calibration_.kind == "pairwise") == (isinstance(est, L2SVC) and centers == 3
                                                     and est.multi_class != "ovr")  # fmt: skip


def test_random_state_fixes_the_folds():
    X, y = make_blobs(120, centers=3, cluster_std=3.0, random_state=1)
    P = [
        MultiClassSVM(probability=True, random_state=s).fit(X, y).predict_proba(X)
        for s in (0, 0, 1)
    ]
    np.testing.assert_array_equal(P[0], P[1])
    assert not np.array_equal(P[0], P[2])


def test_the_folds_hold_out_what_they_score():
    """The map is fitted on held-out scores: the training scores of the full model are more
    confident than held-out ones, so a map fitted on them would be sharper."""
    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(
        X[:700] / 16, y[:700], test_size=0.3, random_state=0, stratify=y[:700]
    )
    clf = MultiClassSVM(probability=True, random_state=0).fit(X_tr, y_tr)
    on_training = fit_calibration(clf._proba_scores(X_tr), np.searchsorted(clf.classes_, y_tr))
    assert on_training.scale > clf.calibration_.scale
    assert log_loss(y_te, clf.predict_proba(X_te)) < 0.2


@pytest.mark.parametrize("est", [MultiClassSVM(), L2SVC()], ids=repr)
def test_precomputed_kernels_calibrate_on_blocks_of_the_gram(est):
    """scikit-learn's check_decision_proba_consistency passes features to a precomputed
    kernel, so this case is tested here."""
    from sklearn.metrics.pairwise import rbf_kernel

    X, y = make_blobs(120, centers=3, cluster_std=3.0, random_state=0)
    X_tr, X_te, y_tr = X[:90], X[90:], y[:90]
    on_features = clone(est).set_params(probability=True, random_state=0).fit(X_tr, y_tr)
    gamma = 1.0 / (X_tr.shape[1] * X_tr.var())
    pre = clone(est).set_params(kernel="precomputed", probability=True, random_state=0)
    pre.fit(rbf_kernel(X_tr, gamma=gamma), y_tr)
    np.testing.assert_allclose(
        pre.predict_proba(rbf_kernel(X_te, X_tr, gamma=gamma)),
        on_features.predict_proba(X_te),
        atol=1e-3,
    )


def test_tiny_training_sets_still_calibrate():
    X = np.array([[0.0], [0.1], [1.0], [1.1], [2.0], [2.1]])
    y = np.array([0, 0, 1, 1, 2, 2])
    for est in (MultiClassSVM(probability=True), L2SVC(probability=True)):
        P = est.fit(X, y).predict_proba(X)
        np.testing.assert_allclose(P.sum(axis=1), 1.0)


@pytest.mark.parametrize(
    "est,sparse",
    [
        (MultiClassSVM(approx="nystroem", n_components=50), False),
        (MultiClassSVM(kernel="linear"), True),
        (MultiClassSVM(loss="topk_hinge", k=2), False),
        (L2SVC(kernel="linear"), True),
        (L2SVC(approx="rff", n_components=50), False),
    ],
    ids=repr,
)
def test_every_backend_calibrates(est, sparse):
    """Explicit features (low-rank or sparse linear) score the held-out fold by the primal
    weights; the rest by a block of the kernel."""
    import scipy.sparse as sp

    X, y = make_blobs(200, centers=4, cluster_std=3.0, random_state=0)
    X -= X.mean(axis=0)  # centred: the linear MultiClassSVM has no intercept
    X = sp.csr_matrix(X) if sparse else X
    est = clone(est).set_params(probability=True, random_state=0).fit(X, y)
    P = est.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_array_equal(est.classes_[np.argmax(P, axis=1)], est.predict(X))
    prior = np.tile(np.bincount(y) / y.size, (y.size, 1))
    assert log_loss(y, P) < log_loss(y, prior) - 0.2  # informative probabilities


def test_l2svc_fold_fits_on_a_stored_gram_are_the_solvers():
    """One-vs-one fold problems on a stored Gram are solved by one compiled call each
    (``solve_l2svm_gram`` on their principal submatrices): the held-out scores are those of
    the estimator's solver on the same problems (the unique optimum, to the tolerance)."""
    X, y = make_blobs(90, centers=3, cluster_std=2.5, random_state=4)
    est = L2SVC(probability=True, tol=1e-10, gamma=0.3).fit(X, y)
    y_enc = np.searchsorted(est.classes_, y)
    train, val = calibration_folds(y_enc, 0)[0]
    gram = make_operator(X, "rbf", gamma=0.3, backend="gram")
    columns = make_operator(X, "rbf", gamma=0.3, backend="function")
    assert gram.stored_gram() is not None and columns.stored_gram() is None
    scores = est._heldout_scores(gram, y_enc, train, val)
    expected = est._heldout_scores(columns, y_enc, train, val)
    assert np.ptp(expected) > 0.1
    np.testing.assert_allclose(scores, expected, atol=1e-6)
