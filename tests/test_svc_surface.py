"""The attributes and parameters of ``SVC`` that kernfw's kernel estimators share with it.

``n_support_``, ``support_``, ``support_vectors_``, ``dual_coef_`` and ``intercept_`` have
the shapes their docstrings give, and reproduce the decision function the way ``SVC``'s
do; ``decision_function_shape`` has ``SVC``'s meaning where the estimator has one-vs-one
problems.
"""

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC

from kernfw import L2SVC, CSKLClassifier, LpMKLClassifier, MinimumEnclosingBall, MultiClassSVM


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), y


def test_multiclass_svm_surface(iris):
    X, y = iris
    clf = MultiClassSVM(gamma=0.5, random_state=0).fit(X, y)
    n_sv = clf.support_.size
    assert clf.dual_coef_.shape == (3, X.shape[0])
    assert clf.support_vectors_.shape == (n_sv, X.shape[1])
    np.testing.assert_array_equal(clf.support_vectors_, X[clf.support_])
    assert clf.n_support_.dtype == np.int32 and clf.n_support_.sum() == n_sv
    np.testing.assert_array_equal(clf.n_support_, np.bincount(y[clf.support_], minlength=3))
    # SVC's formula on the support vectors (with the 1/(λn) of the multi-category dual)
    K = rbf_kernel(X, clf.support_vectors_, gamma=0.5)
    scores = K @ clf.dual_coef_[:, clf.support_].T / (clf.lam_ * X.shape[0]) + clf.intercept_
    np.testing.assert_allclose(scores, clf.decision_function(X), atol=1e-10)
    assert clf.intercept_.shape == (3,)
    linear = MultiClassSVM(kernel="linear", random_state=0).fit(X, y)
    np.testing.assert_array_equal(linear.support_vectors_, X[linear.support_])


@pytest.mark.parametrize(
    "make",
    [
        lambda shape: L2SVC(gamma=0.5, decision_function_shape=shape),
        lambda shape: LpMKLClassifier(
            kernel=[("rbf", {"gamma": 0.5})],
            svm="c",
            multi_class="ovo",
            decision_function_shape=shape,
        ),
        lambda shape: CSKLClassifier(
            kernel=["linear", ("rbf", {"gamma": 0.5})],
            svm="c",
            multi_class="ddag",
            decision_function_shape=shape,
        ),
    ],
    ids=["L2SVC", "LpMKL", "CSKL-ddag"],
)
def test_decision_function_shape_ovo_gives_the_pairwise_decisions_of_svc(iris, make):
    X, y = iris
    ovr, ovo = make("ovr").fit(X, y), make("ovo").fit(X, y)
    assert ovr.decision_function(X).shape == (150, 3)
    d = ovo.decision_function(X)
    assert d.shape == (150, 3)  # m(m−1)/2 = 3 pairs: (0, 1), (0, 2), (1, 2)
    np.testing.assert_array_equal(ovo.predict(X), ovr.predict(X))
    svc = SVC(gamma=0.5, decision_function_shape="ovo").fit(X, y).decision_function(X)
    # the same pairs in the same order and sign: the two SVMs agree on nearly every sign
    assert np.mean(np.sign(d) == np.sign(svc)) > 0.95
    # a pair's decision is positive for its first class, as SVC's
    pair_01 = y < 2
    assert np.mean((d[pair_01, 0] > 0) == (y[pair_01] == 0)) > 0.95


def test_decision_function_shape_ovo_needs_pairs(iris):
    X, y = iris
    clf = L2SVC(multi_class="ovr", decision_function_shape="ovo").fit(X, y)
    with pytest.raises(ValueError, match="multi_class='ovo' or 'ddag'"):
        clf.decision_function(X)
    binary = L2SVC(decision_function_shape="ovo").fit(X[y < 2], y[y < 2])
    assert binary.decision_function(X).shape == (150,)


def test_l2svc_and_ball_surface(iris):
    X, y = iris
    clf = L2SVC(gamma=0.5).fit(X, y)
    n_sv = clf.support_.size
    assert clf.dual_coef_.shape == (3, n_sv) and clf.intercept_.shape == (3,)
    assert clf.support_vectors_.shape == (n_sv, 4) and clf.n_support_.sum() == n_sv
    ball = MinimumEnclosingBall(gamma=0.5).fit(X)
    assert ball.dual_coef_.shape == (1, ball.support_.size)
    np.testing.assert_array_equal(ball.n_support_, [ball.support_.size])
    np.testing.assert_array_equal(ball.support_vectors_, X[ball.support_])
