"""Per-example weights of online MKL (math.md §4.9).  The epochs visit the examples in a
random order, so a weighted fit and a fit on repeated rows are two different runs; what the
weights make exact is tested instead: a weight of 0 is the example removed (the same run),
unit weights are the unweighted run, weights scaled by one factor change nothing at a given
λ, the reported objective is the weighted one, and the weighted run approaches the weighted
cvxpy optimum."""

import warnings

import numpy as np
import pytest
from sklearn.utils.class_weight import compute_sample_weight

from kernfw import OnlineMKLClassifier
from kernfw.estimators.online_mkl import OnlineMKLStructured
from kernfw.kernels import make_operator
from kernfw.solvers.mkl.online import solve_online_mkl
from kernfw.structured import Chain, MultiClass

LAM = 0.05
SPECS = [
    ("linear", {"columns": [0, 1]}),
    ("linear", {"columns": [2, 3]}),
    ("rbf", {"gamma": 0.5, "columns": [4, 5]}),
]


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    X = np.hstack([centers[y] + 0.9 * rng.normal(size=(n, 2)), rng.normal(size=(n, 4))])
    return X, y


def _weights(n, seed=1, low=0):
    return np.random.default_rng(seed).integers(low, 4, size=n).astype(float)


def _chains(n=20, q=3, d=4, seed=0):
    rng = np.random.default_rng(seed)
    Y = [rng.integers(0, q, size=rng.integers(2, 5)) for _ in range(n)]
    X = [np.eye(q, d)[y] * 1.5 + rng.normal(size=(y.size, d)) for y in Y]
    return X, Y


@pytest.mark.parametrize("solver", ["dual_averaging", "proximal"])
@pytest.mark.parametrize("loss", ["hinge", "crf"])
def test_solver_zero_weights_are_the_examples_removed(solver, loss):
    """The epochs visit the examples of positive weight in the order a run on them alone
    visits its examples: the same random_state gives the same iterates, bit for bit."""
    X, y = _data()
    w = _weights(y.size)
    kept = w > 0
    K = make_operator(X, SPECS, normalization="trace", sample_weight=w)
    K_kept = make_operator(X[kept], SPECS, normalization="trace", sample_weight=w[kept])
    options = dict(loss=loss, solver=solver, lam=LAM, max_iter=3, random_state=0)
    weighted = solve_online_mkl(MultiClass(3), X, y, list(K.operators), sample_weight=w, **options)
    removed = solve_online_mkl(
        MultiClass(3), X[kept], y[kept], list(K_kept.operators), sample_weight=w[kept], **options
    )
    np.testing.assert_array_equal(weighted.history["primal"], removed.history["primal"])
    np.testing.assert_array_equal(weighted["norms"], removed["norms"])
    np.testing.assert_array_equal(weighted["support"], np.flatnonzero(kept)[removed["support"]])
    np.testing.assert_array_equal(weighted["coef"], removed["coef"])


def test_solver_unit_and_uniformly_scaled_weights_are_the_unweighted_run():
    X, y = _data()
    K = list(make_operator(X, SPECS, normalization="trace").operators)
    options = dict(lam=LAM, max_iter=3, random_state=0)
    plain = solve_online_mkl(MultiClass(3), X, y, K, **options)
    for w in (np.ones(y.size), np.full(y.size, 2.5)):
        res = solve_online_mkl(MultiClass(3), X, y, K, sample_weight=w, **options)
        np.testing.assert_array_equal(res.history["primal"], plain.history["primal"])
        np.testing.assert_array_equal(res["coef"], plain["coef"])


@pytest.mark.cvxpy
def test_weighted_run_approaches_the_weighted_cvxpy_optimum():
    from kernfw.reference import online_mkl_reference

    X, y = _data()
    w = _weights(y.size, low=1) * np.where(y == 0, 6.0, 1.0)
    K = make_operator(X, SPECS, normalization="trace", sample_weight=w)
    res = solve_online_mkl(
        MultiClass(3), X, y, list(K.operators), lam=LAM, eta0=0.5, max_iter=40,
        random_state=0, averaging="uniform", sample_weight=w,
    )  # fmt: skip
    F = res.history["primal"]
    grams = [op.dense() for op in K.operators]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = online_mkl_reference(grams, y, LAM, sample_weight=w)["value"]
        plain = online_mkl_reference(grams, y, LAM)["value"]
    assert np.all(F >= ref - 1e-7)  # F*_w is a lower bound of the weighted F
    assert F[-1] - ref < 0.02  # as the unweighted run in test_online_mkl.py
    assert abs(plain - ref) > 0.05  # the weights change the problem by more


@pytest.mark.parametrize("solver", ["dual_averaging", "proximal"])
def test_estimator_objective_is_the_weighted_reference_objective(solver):
    from kernfw.reference import online_mkl_objective

    X, y = _data()
    w = _weights(y.size)
    est = OnlineMKLClassifier(
        SPECS, solver=solver, max_iter=3, objective_sample=None, random_state=0
    ).fit(X, y, sample_weight=w)
    assert est.lam_ == pytest.approx(1.0 / w.sum())  # λ = 1/(C Σ w)
    kept = w > 0
    F = online_mkl_objective(
        est.scores(X[kept]), est.group_norms_, y[kept], est.lam_, sample_weight=w[kept]
    )
    assert est.objective_ == pytest.approx(F, rel=1e-9)
    unweighted = online_mkl_objective(est.scores(X), est.group_norms_, y, est.lam_)
    assert abs(unweighted - F) > 1e-3


@pytest.mark.parametrize(
    "est",
    [
        OnlineMKLClassifier(SPECS, max_iter=3, random_state=0),
        OnlineMKLClassifier(max_iter=2, random_state=0),  # default kernels: weighted γ_scale
        OnlineMKLClassifier(groups=[[0, 1], [2, 3]], max_iter=3, random_state=0),
        OnlineMKLClassifier(["rbf"], approx="nystroem", n_components=10, max_iter=2,
                            random_state=0),
    ],
    ids=["kernels", "default", "feature-groups", "approx"],
)  # fmt: skip
def test_estimator_zero_weights_are_the_rows_removed(est):
    X, y = _data()
    w = _weights(y.size)
    kept = w > 0
    weighted = est.fit(X, y, sample_weight=w)
    d, support = weighted.decision_function(X), weighted.support_.copy()
    removed = est.fit(X[kept], y[kept], sample_weight=w[kept])
    if est.approx is None:  # Nyström draws its landmarks from the rows given
        np.testing.assert_array_equal(d, removed.decision_function(X))
        np.testing.assert_array_equal(support, np.flatnonzero(kept)[removed.support_])
    assert np.all(w[support] > 0)


def test_estimator_precomputed_zero_weights_predict_from_test_grams_of_all_rows():
    X, y = _data()
    w = _weights(y.size)
    grams = [op.dense() for op in make_operator(X, SPECS).operators]
    by_features = OnlineMKLClassifier(SPECS, max_iter=2, random_state=0)
    by_grams = OnlineMKLClassifier("precomputed", max_iter=2, random_state=0)
    by_features.fit(X, y, sample_weight=w)
    by_grams.fit(grams, y, sample_weight=w)
    assert by_grams.n_train_ == y.size
    np.testing.assert_array_equal(by_grams.support_, by_features.support_)
    np.testing.assert_allclose(
        by_grams.decision_function(grams), by_features.decision_function(X), rtol=1e-9
    )


def test_estimator_balanced_class_weight_is_the_matching_sample_weights():
    X, y = _data()
    y = np.where(np.arange(y.size) < 10, 0, y % 2 + 1)  # 10 : 25 : 25
    a = OnlineMKLClassifier(SPECS, class_weight="balanced", max_iter=3, random_state=0).fit(X, y)
    b = OnlineMKLClassifier(SPECS, max_iter=3, random_state=0).fit(
        X, y, sample_weight=compute_sample_weight("balanced", y)
    )
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-12)
    c = OnlineMKLClassifier(SPECS, max_iter=3, random_state=0).fit(X, y)
    assert not np.allclose(a.decision_function(X), c.decision_function(X))


@pytest.mark.parametrize("loss", ["hinge", "crf"])
def test_structured_zero_weights_are_the_examples_removed(loss):
    X, Y = _chains()
    w = _weights(len(Y))
    kept = np.flatnonzero(w > 0)
    est = OnlineMKLStructured(Chain(3), loss=loss, max_iter=2, objective_sample=None,
                              random_state=0)  # fmt: skip
    weighted = est.fit(X, Y, sample_weight=w)
    pred, F = weighted.predict(X), weighted.objective_
    removed = est.fit([X[i] for i in kept], [Y[i] for i in kept], sample_weight=w[kept])
    assert F == pytest.approx(removed.objective_, rel=1e-12)
    for a, b in zip(pred, removed.predict(X)):
        np.testing.assert_array_equal(a, b)


def test_bad_weights_are_clear_errors():
    X, y = _data()
    with pytest.raises(ValueError, match="(?i)negative"):
        OnlineMKLClassifier(SPECS).fit(X, y, sample_weight=-np.ones(y.size))
    with pytest.raises(ValueError, match="non-zero"):
        OnlineMKLStructured(MultiClass(3)).fit(X, y, sample_weight=np.zeros(y.size))
    K = list(make_operator(X, SPECS, normalization="trace").operators)
    with pytest.raises(ValueError, match="sample_weight"):
        solve_online_mkl(MultiClass(3), X, y, K, sample_weight=np.ones(3))
