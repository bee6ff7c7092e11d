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
