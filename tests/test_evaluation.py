"""kernfw.evaluate: the protocol of [Tajima2021] (splits, inner CV, top-k errors, paired t-tests)."""

import csv

import numpy as np
import pytest
from scipy import stats
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_iris, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import top_k_accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC
from sklearn.utils import check_random_state

import kernfw
from kernfw.evaluation import EvaluationResults, topk_errors


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(
        n_samples=240,
        n_features=10,
        n_informative=6,
        n_classes=4,
        n_clusters_per_class=1,
        random_state=0,
    )
    return X, y


def test_errors_are_the_topk_errors_of_each_split(data):
    X, y = data
    res = kernfw.evaluate(
        {"lr": LogisticRegression(max_iter=1000)},
        X,
        y,
        n_trials=3,
        ks=[1, 2, 3],
        random_state=7,
        param={"lr": None},
    )
    assert res.errors.shape == (1, 3, 3)
    # recompute every trial independently: same seeds, same splits, same model
    seeds = check_random_state(7).randint(np.iinfo(np.int32).max, size=3)
    for t, seed in enumerate(seeds):
        X_tr, X_te, y_tr, y_te = train_test_split(
            X, y, test_size=0.5, stratify=y, random_state=int(seed)
        )
        model = LogisticRegression(max_iter=1000).fit(X_tr, y_tr)
        scores = model.predict_proba(X_te)
        want = [1 - top_k_accuracy_score(y_te, scores, k=k) for k in (1, 2, 3)]
        np.testing.assert_allclose(res.errors[0, t], want, rtol=0, atol=1e-12)
    # top-k errors do not increase with k
    assert np.all(np.diff(res.errors, axis=2) <= 0)


def test_k_at_least_m_is_dropped_and_none_left_is_an_error(data):
    X, y = data
    res = kernfw.evaluate([LogisticRegression(max_iter=1000)], X, y, n_trials=1)
    assert res.ks.tolist() == [1, 2, 3]  # m = 4: k = 4..10 are trivially 0
    with pytest.raises(ValueError, match="k < m"):
        kernfw.evaluate([LogisticRegression()], X, y, n_trials=1, ks=[4, 5])


def test_inner_cv_selects_the_better_value(data):
    X, y = data
    # C = 1e-6 shrinks the model to (almost) constant scores: it must lose the inner CV
    res = kernfw.evaluate(
        {"svc": LinearSVC()}, X, y, n_trials=3, param="C", values=[1e-6, 1.0], cv=3
    )
    assert res.param == ["C"]
    np.testing.assert_array_equal(res.selected[0], [1.0, 1.0, 1.0])
    assert res.mean()[0, 0] < 0.5  # chance is 0.75


def test_default_grid_is_C_for_kernfw_and_sklearn_models(data):
    X, y = data
    res = kernfw.evaluate({"svc": LinearSVC()}, X, y, n_trials=1, cv=2)
    assert res.param == ["C"]
    assert res.selected[0, 0] in kernfw.evaluation.DEFAULT_C_GRID
    res = kernfw.evaluate(
        {"lr": LogisticRegression(max_iter=500)}, X, y, n_trials=1, param={"lr": None}
    )
    assert res.param == [None] and np.isnan(res.selected[0, 0])


def test_ttest_is_scipys_paired_test():
    rng = np.random.RandomState(0)
    errors = np.stack(
        [rng.uniform(0.1, 0.2, (6, 2)), rng.uniform(0.15, 0.3, (6, 2)), np.zeros((6, 2))]
    )
    errors[2] = errors[0]  # a method identical to the first
    res = EvaluationResults(
        ["a", "b", "c"], [1, 2], errors, [None] * 3, np.full((3, 6), np.nan), np.zeros((3, 6))
    )
    t, p = res.ttest(k=2)
    want = stats.ttest_rel(errors[0, :, 1], errors[1, :, 1])
    assert t[0, 1] == pytest.approx(want.statistic, rel=1e-12)
    assert p[0, 1] == pytest.approx(want.pvalue, rel=1e-12)
    assert t[1, 0] == pytest.approx(-want.statistic, rel=1e-12)
    assert p[0, 2] == 1.0 and np.isnan(t[0, 2])  # identical errors: no difference
    best, ties = res.best(k=1)
    assert best in ("a", "c") and ("c" in ties or "a" in ties)
    # constant nonzero differences are a certain difference, not "no difference"
    errors[1] = errors[0] + 0.05
    t, p = EvaluationResults(
        ["a", "b", "c"], [1, 2], errors, [None] * 3, np.full((3, 6), np.nan), np.zeros((3, 6))
    ).ttest(1)
    assert p[0, 1] == 0.0 and t[0, 1] == -np.inf


def test_table_csv_and_plot(data, tmp_path):
    X, y = data
    res = kernfw.evaluate(
        [LogisticRegression(max_iter=1000), LinearSVC()],
        X,
        y,
        n_trials=2,
        param={"LogisticRegression": None, "LinearSVC": "C"},
        values={"LinearSVC": [1.0]},
    )
    text = res.table()
    assert text.splitlines()[0].split()[1:] == ["top-1", "top-2", "top-3"]
    assert "±" in text and "LinearSVC" in text
    assert "LogisticRegression" in res.ttest_table(1)
    path = tmp_path / "eval.csv"
    res.to_csv(path)
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 * 2 * 3
    assert {r["method"] for r in rows} == {"LogisticRegression", "LinearSVC"}
    pytest.importorskip("matplotlib")
    from kernfw.plotting import plot_topk_errors

    fig = plot_topk_errors(res)
    assert len(fig.axes[0].lines) >= 2


def test_kernfw_estimator_with_lam_grid():
    X, y = load_iris(return_X_y=True)
    est = kernfw.MultiClassSVM(kernel="linear", solver="bcfw", lam=1e-2, tol=1e-2)
    res = kernfw.evaluate(
        {"cs": est}, X, y, n_trials=2, param="lam", values=[10.0, 1e-2], cv=2, ks=[1, 2]
    )
    assert res.selected[0].tolist() == [1e-2, 1e-2]  # λ = 10 underfits iris
    assert res.mean()[0, 0] < 0.1


class _NoScores(ClassifierMixin, BaseEstimator):
    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict(self, X):
        return np.full(len(X), self.classes_[0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_trials": 0}, "n_trials"),
        ({"test_size": 1.0}, "test_size"),
        ({"param": "nope", "values": [1.0]}, "no parameter"),
        ({"param": "C", "values": []}, "nonempty grid"),
    ],
)
def test_bad_arguments(data, kwargs, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        kernfw.evaluate([LinearSVC()], X, y, **kwargs)


def test_bad_inputs(data):
    X, y = data
    with pytest.raises(ValueError, match="single class"):
        kernfw.evaluate([LinearSVC()], X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="empty"):
        kernfw.evaluate({}, X, y)
    with pytest.raises(TypeError, match="class scores"):
        kernfw.evaluate([_NoScores()], X, y, n_trials=1)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        kernfw.evaluate([LinearSVC()], bad, y)


def test_topk_errors_helper_binary():
    X, y = make_classification(n_samples=100, random_state=1)
    model = LogisticRegression().fit(X, y)
    err = topk_errors(model, X, y, [1])
    assert err[0] == pytest.approx(1 - model.score(X, y))
