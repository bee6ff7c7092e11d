"""StructuredSVM with a multi-class model is a classifier to scikit-learn's tools."""

import numpy as np
import pytest
from sklearn.base import is_classifier
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

import kernfw
from kernfw import StructuredSVM
from kernfw.datasets import make_chains
from kernfw.estimators.structured import multiclass_model
from kernfw.structured import Chain, MultiClass


def test_multiclass_models_are_classifiers_and_chains_are_not():
    assert is_classifier(StructuredSVM())
    assert is_classifier(StructuredSVM(MultiClass(3)))
    assert not is_classifier(StructuredSVM(Chain(3)))
    assert not hasattr(StructuredSVM(Chain(3)), "decision_function")


@pytest.mark.parametrize("model", [None, MultiClass(3)])
def test_cross_val_score_on_sorted_labels_uses_stratified_folds(model):
    # unshuffled KFold on sorted iris labels trains on two classes and tests on the third
    X, y = load_iris(return_X_y=True)
    assert cross_val_score(StructuredSVM(model), X, y, cv=KFold(3)).max() == 0.0
    scores = cross_val_score(StructuredSVM(model), X, y)
    assert scores.min() >= 0.85 and scores.mean() >= 0.93


def test_classes_from_labels_of_any_kind():
    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])
    names = labels[y]
    by_code = StructuredSVM(random_state=0).fit(X, y)
    by_name = StructuredSVM(random_state=0).fit(X, names)
    assert by_name.classes_.tolist() == ["setosa", "versicolor", "virginica"]
    assert isinstance(by_name.model_, MultiClass) and by_name.model_.n_classes == 3
    np.testing.assert_array_equal(by_name.predict(X), labels[by_code.predict(X)])
    np.testing.assert_allclose(by_name.coef_, by_code.coef_)
    assert by_name.decision_function(X).shape == (150, 3)
    assert by_name.score(X, names) == by_code.score(X, y) >= 0.95


def test_binary_decision_function_follows_scikit_learn():
    X, y = load_iris(return_X_y=True)
    X, y = X[y > 0], np.where(y[y > 0] == 1, -1, 1)
    clf = StructuredSVM().fit(X, y)
    d = clf.decision_function(X)
    assert d.shape == (X.shape[0],)
    np.testing.assert_array_equal(clf.classes_[(d > 0).astype(int)], clf.predict(X))


def test_a_given_cost_is_restricted_to_the_classes_seen():
    cost = np.array([[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]], float)
    model = multiclass_model(MultiClass(4, cost=cost), np.array([0, 2, 3]))
    np.testing.assert_array_equal(model.cost, cost[np.ix_([0, 2, 3], [0, 2, 3])])
    assert np.array_equal(multiclass_model(MultiClass(4), np.array(["a", "b"])).cost, 1 - np.eye(2))
    with pytest.raises(ValueError, match="expected 4 classes, got 2"):
        multiclass_model(MultiClass(4, cost=cost), np.array(["a", "b"]))
    with pytest.raises(ValueError, match="at least 2 classes"):
        StructuredSVM().fit(np.ones((3, 2)), [1, 1, 1])


def test_task_loss_uses_the_cost_of_the_labels():
    X, y = load_iris(return_X_y=True)
    cost = np.array([[0, 1, 5], [1, 0, 1], [5, 1, 0]], float)
    clf = StructuredSVM(MultiClass(3, cost=cost), random_state=0).fit(X, y + 0)
    pred = clf.predict(X)
    assert clf.task_loss(X, y) == pytest.approx(cost[y, pred].mean())


def test_grid_search_and_sweep_with_folds():
    X, y = load_iris(return_X_y=True)
    search = GridSearchCV(StructuredSVM(), {"C": [0.1, 1.0]}, cv=3).fit(X, y)
    assert search.best_score_ >= 0.93
    table = kernfw.sweep(StructuredSVM(), X, y, param="C", values=[0.1, 1.0], cv=3)
    assert min(row["val_score"] for row in table.rows) >= 0.85


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cross_val_score_and_grid_search_on_chains():
    # lists of sequences: scikit-learn indexes them per fold; the score is per-position accuracy
    X, Y = make_chains(30, n_states=3, random_state=0)
    est = StructuredSVM(Chain(3), lam=0.1, max_iter=20, random_state=0)
    assert cross_val_score(est, X, Y, cv=3).min() >= 0.8
    search = GridSearchCV(est, {"lam": [0.1, 0.01]}, cv=3).fit(X, Y)
    assert search.best_score_ >= 0.8 and search.best_estimator_.score(X, Y) >= 0.8


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_sweep_with_folds_on_chains():
    # outputs of different lengths stay a list; the folds index X and Y alike
    X, Y = make_chains(30, n_states=3, random_state=0)
    est = StructuredSVM(Chain(3), lam=0.1, max_iter=20, random_state=0)
    table = kernfw.sweep(est, X, Y, param="lam", values=[0.1, 0.01], cv=3)
    assert not any(row["error"] for row in table.rows)
    scores = [row["val_score"] for row in table.rows]
    assert min(scores) >= 0.7, scores


# -- class weights and the intercept (math.md §3.7, §3.11) --------------------------------------
def _imbalanced(n=40, seed=0):
    """Three overlapping classes of 24, 10 and 6 points, off the origin."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1, 2], [n * 6 // 10, n // 4, n - n * 6 // 10 - n // 4])
    X = rng.normal(size=(n, 3)) + np.array([[2.0, 0, 0], [0, 2.0, 0], [0, 0, 2.0]])[y] + 3.0
    return X, np.array(["a", "b", "c"])[y]


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_class_and_sample_weights_reach_the_weighted_cvxpy_optimum(fit_intercept):
    """``class_weight`` times ``sample_weight`` scale the loss terms (math.md §3.11): the
    fitted objective is the cvxpy optimum of the weighted problem on the inputs with the
    intercept's constant column, within the certified gap; the estimator's own primal
    agrees with the reference's value of its ``w``."""
    from kernfw.reference.structural import structural_objective, structural_primal

    X, labels = _imbalanced()
    s = np.random.default_rng(1).integers(0, 4, size=len(labels)).astype(float)
    cw = {"a": 0.5, "b": 2.0, "c": 3.0}
    svm = StructuredSVM(
        class_weight=cw, fit_intercept=fit_intercept, intercept_scaling=2.0, C=0.5, tol=1e-8
    ).fit(X, labels, sample_weight=s)
    assert svm.class_weight_.tolist() == [0.5, 2.0, 3.0] and svm.converged_
    w_i = s * svm.class_weight_[np.searchsorted(svm.classes_, labels)]
    Z = np.column_stack([X, np.full(len(X), 2.0)]) if fit_intercept else X
    Y = np.searchsorted(svm.classes_, labels)
    model = MultiClass(3).initialize(Z, Y)
    v = w_i * len(Y) / w_i.sum()  # the loss weights of the solvers, mean 1 (§3.11)
    ref = structural_primal(model, Z, Y, svm.lam_, sample_weight=v)
    assert svm.lam_ == pytest.approx(1 / (0.5 * w_i.sum()))
    assert abs(svm.primal_objective_ - ref["primal"]) <= max(svm.duality_gap_, 0) + 1e-7
    W = svm.coef_.reshape(3, -1)
    joint = np.column_stack([W, svm.intercept_ / 2.0]).ravel() if fit_intercept else W.ravel()
    mine = structural_objective(model, Z, Y, svm.lam_, joint, sample_weight=v)
    assert svm.primal_objective(X, labels, sample_weight=s) == pytest.approx(mine, rel=1e-10)
    if not fit_intercept:
        assert np.all(svm.intercept_ == 0)
    scores = X @ W.T + svm.intercept_
    np.testing.assert_allclose(svm.decision_function(X), scores, atol=1e-12)


def test_balanced_class_weight_is_the_balanced_sample_weight():
    """``class_weight="balanced"`` is scikit-learn's formula with the sample weights: the
    same fit as ``sample_weight`` = sample weight × balanced class weight."""
    from sklearn.utils.class_weight import compute_sample_weight

    X, labels = _imbalanced(n=120, seed=2)  # above the small-problem size: one run each
    s = np.random.default_rng(3).uniform(0.5, 2.0, size=len(labels))
    balanced = StructuredSVM(class_weight="balanced", random_state=0).fit(X, labels, s)
    counts = np.array([np.sum(s[labels == c]) for c in balanced.classes_])
    np.testing.assert_allclose(balanced.class_weight_, s.sum() / (3 * counts), rtol=1e-12)
    w = s * balanced.class_weight_[np.searchsorted(balanced.classes_, labels)]
    plain = StructuredSVM(random_state=0).fit(X, labels, sample_weight=w)
    np.testing.assert_allclose(balanced.coef_, plain.coef_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(balanced.intercept_, plain.intercept_, rtol=0, atol=1e-12)
    unweighted = StructuredSVM(class_weight="balanced", random_state=0).fit(X, labels)
    expected = compute_sample_weight("balanced", labels)
    same = StructuredSVM(random_state=0).fit(X, labels, sample_weight=expected)
    np.testing.assert_allclose(unweighted.coef_, same.coef_, rtol=0, atol=1e-12)


def test_default_classifier_has_the_intercept_of_multiclass_svm_linear():
    """``StructuredSVM()`` and ``MultiClassSVM(kernel="linear")`` at their defaults have the
    same objective (the intercept as liblinear's, ``fit_intercept`` "auto"): equal optima
    within the certified gaps; a given ``MultiClass`` model keeps its joint features."""
    from kernfw import MultiClassSVM

    X, y = load_iris(return_X_y=True)
    ours = StructuredSVM(tol=1e-6, random_state=0).fit(X, y)
    theirs = MultiClassSVM(kernel="linear", tol=1e-5, max_iter=20000).fit(X, y)
    assert ours.lam_ == theirs.lam_
    slack = max(ours.duality_gap_, 0) + max(theirs.duality_gap_, 0)
    assert abs(ours.primal_objective_ - theirs.primal_objective_) <= slack + 1e-9
    assert np.any(ours.intercept_ != 0)
    plain = StructuredSVM(MultiClass(3), random_state=0).fit(X, y)
    assert np.all(plain.intercept_ == 0) and plain.coef_.shape == (12,)


def test_class_weight_and_intercept_need_a_classifier():
    X, Y = make_chains(6, n_states=3, random_state=0)
    with pytest.raises(ValueError, match="class_weight needs a classifier"):
        StructuredSVM(Chain(3), class_weight="balanced").fit(X, Y)
    with pytest.raises(ValueError, match="fit_intercept=True needs a classifier"):
        StructuredSVM(Chain(3), fit_intercept=True).fit(X, Y)
    svm = StructuredSVM(Chain(3), lam=0.1, max_iter=5, random_state=0).fit(X, Y)
    assert not hasattr(svm, "intercept_") and not hasattr(svm, "class_weight_")
