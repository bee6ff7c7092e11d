"""Metadata routing of ``sample_weight`` through ``Pipeline`` and ``GridSearchCV``.

With ``sklearn.set_config(enable_metadata_routing=True)`` a meta-estimator passes
``sample_weight`` only to the estimators that request it
(``est.set_fit_request(sample_weight=True)``).  scikit-learn derives that method from
the signature of ``fit``, so every kernfw estimator whose ``fit`` takes
``sample_weight`` is tested here, found by inspecting the signatures: an estimator that
gains the parameter is covered without editing this file.
"""

import inspect

import numpy as np
import pytest
import sklearn
from sklearn.base import BaseEstimator, clone, is_classifier, is_regressor
from sklearn.datasets import make_blobs, make_regression
from sklearn.exceptions import UnsetMetadataPassedError
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import kernfw

#: constructions of the estimators that take arguments, and small budgets (a fixed
#: random_state where the block order is drawn)
ESTIMATORS = {
    "StructuredSVM": lambda: kernfw.StructuredSVM(random_state=0),
    "OnlineMKLStructured": lambda: kernfw.OnlineMKLStructured(
        kernfw.structured.MultiClass(3), max_iter=5, random_state=0
    ),
    "OnlineMKLClassifier": lambda: kernfw.OnlineMKLClassifier(max_iter=5, random_state=0),
}


def _estimator_classes():
    for name in kernfw.__all__:
        obj = getattr(kernfw, name)
        if isinstance(obj, type) and issubclass(obj, BaseEstimator):
            yield name, obj


def _weighted_estimators():
    """``(name, estimator)`` of every public estimator whose ``fit`` takes ``sample_weight``."""
    found = [
        pytest.param(ESTIMATORS.get(name, cls)(), id=name)
        for name, cls in _estimator_classes()
        if "sample_weight" in inspect.signature(cls.fit).parameters
    ]
    return found or [pytest.param(None, marks=pytest.mark.skip(reason="no fit takes weights"))]


def _data(est):
    """Small data of the estimator's kind, and integer weights with zeros."""
    rng = np.random.default_rng(0)
    if is_regressor(est):
        X, y = make_regression(n_samples=60, n_features=4, noise=1.0, random_state=0)
    else:
        X, y = make_blobs(n_samples=60, centers=3, cluster_std=3.0, random_state=0)
        takes_y = {"y", "Y"} & set(inspect.signature(est.fit).parameters)  # Y: structured
        y = y if is_classifier(est) or takes_y else None
    return X, y, rng.integers(0, 4, size=X.shape[0]).astype(float)


def _output(est, X):
    """What the fitted model says about ``X`` (scores where it has them)."""
    for method in ("decision_function", "score_samples", "predict"):
        if hasattr(est, method):
            return np.asarray(getattr(est, method)(X), dtype=float)
    raise AssertionError(f"{type(est).__name__} has no prediction method")


def _mean_score_samples(est, X, y=None):
    """A score for an outlier detector (no ``score`` method): its mean ``score_samples``."""
    return float(np.mean(est.score_samples(X)))


@pytest.fixture
def routing():
    with sklearn.config_context(enable_metadata_routing=True):
        yield


@pytest.mark.parametrize("estimator", _weighted_estimators())
def test_pipeline_routes_sample_weight_to_the_requesting_step(routing, estimator):
    X, y, w = _data(estimator)
    scaler = StandardScaler().set_fit_request(sample_weight=False)
    est = clone(estimator).set_fit_request(sample_weight=True)
    pipe = make_pipeline(scaler, est).fit(X, y, sample_weight=w)
    Xs = StandardScaler().fit_transform(X)
    direct = clone(estimator).fit(Xs, y, sample_weight=w)
    unweighted = clone(estimator).fit(Xs, y)
    routed = _output(pipe[-1], Xs)
    np.testing.assert_allclose(routed, _output(direct, Xs), rtol=1e-10, atol=1e-12)
    assert not np.allclose(routed, _output(unweighted, Xs))  # the weights arrived


@pytest.mark.parametrize("estimator", _weighted_estimators())
def test_an_unrequested_sample_weight_is_an_error(routing, estimator):
    X, y, w = _data(estimator)
    with pytest.raises(UnsetMetadataPassedError, match="sample_weight"):
        make_pipeline(clone(estimator)).fit(X, y, sample_weight=w)


@pytest.mark.parametrize("estimator", _weighted_estimators())
def test_grid_search_routes_sample_weight_to_fit(routing, estimator):
    X, y, w = _data(estimator)
    est = clone(estimator).set_fit_request(sample_weight=True)
    if hasattr(est, "score") and "sample_weight" in inspect.signature(est.score).parameters:
        est.set_score_request(sample_weight=False)
    name, value = next(iter(est.get_params(deep=False).items()))
    scoring = None if hasattr(est, "score") else _mean_score_samples
    search = GridSearchCV(est, {name: [value]}, scoring=scoring, cv=2)
    search.fit(X, y, sample_weight=w)
    direct = clone(estimator).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(
        _output(search.best_estimator_, X), _output(direct, X), rtol=1e-10, atol=1e-12
    )
