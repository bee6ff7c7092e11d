import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_classification
from sklearn.linear_model import Ridge

from kernfw.reference import compare
from kernfw.reference.comparison import REFERENCES, reference_objective

pytestmark = pytest.mark.cvxpy

KEYS = {
    "objective",
    "reference_objective",
    "relative_difference",
    "gap",
    "within_gap",
    "time",
    "reference_time",
    "time_ratio",
    "n_iter",
    "converged",
    "estimator",
}


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(
        n_samples=36,
        n_features=5,
        n_informative=4,
        n_redundant=0,
        n_classes=3,
        n_clusters_per_class=1,
        random_state=0,
    )
    return X, y


def _check(report, tol_gap):
    assert set(report) == KEYS
    assert report["converged"] and report["gap"] <= tol_gap
    assert report["within_gap"]
    # the certified gap bounds the distance to the cvxpy optimum (math.md §6)
    assert abs(report["objective"] - report["reference_objective"]) <= max(
        report["gap"], 1e-7
    ) + 1e-6 * abs(report["reference_objective"])
    expected = abs(report["objective"] - report["reference_objective"]) / abs(
        report["reference_objective"]
    )
    assert report["relative_difference"] == pytest.approx(expected)
    assert report["time_ratio"] == pytest.approx(report["time"] / report["reference_time"])


@pytest.mark.parametrize("kernel, loss", [("rbf", "max_hinge"), ("linear", "topk_hinge")])
def test_multiclass(data, kernel, loss):
    from kernfw import MultiClassSVM

    X, y = data
    est = MultiClassSVM(loss=loss, k=2, lam=0.05, kernel=kernel, tol=1e-5, max_iter=200000)
    report = compare(est, X, y)
    _check(report, 1e-5)
    assert not hasattr(est, "dual_coef_")  # the estimator given is not fitted (a clone is)
    assert report["estimator"].duality_gap_ == report["gap"]


def test_multiclass_smoothed(data):
    from kernfw import MultiClassSVM

    X, y = data
    report = compare(MultiClassSVM(smoothing=0.2, lam=0.05, tol=1e-4, max_iter=200000), X, y)
    _check(report, 1e-4)
    # the reference is the smoothed optimum P_σ*: below the unsmoothed one
    plain = compare(MultiClassSVM(lam=0.05, tol=1e-4, max_iter=200000), X, y)
    assert report["reference_objective"] < plain["reference_objective"] - 1e-3


def test_l2svc_one_vs_one_sums_the_binary_problems(data):
    from kernfw import L2SVC

    X, y = data
    report = compare(L2SVC(C=2.0, tol=1e-8), X, y)
    assert len(report["estimator"].problems_) == 3
    _check(report, 1e-5)
    assert report["reference_objective"] < 0  # P* = −Σ ρ*


def test_l2svc_binary(data):
    from kernfw import L2SVC

    X, y = data
    mask = y < 2
    _check(compare(L2SVC(C=1.0, kernel="poly", degree=2, tol=1e-8), X[mask], y[mask]), 1e-5)


def test_meb():
    from kernfw import MinimumEnclosingBall

    X, _ = make_blobs(n_samples=40, centers=2, n_features=3, random_state=0)
    report = compare(MinimumEnclosingBall(tol=1e-7), X)
    _check(report, 1e-4)
    assert report["estimator"].radius_ ** 2 == pytest.approx(report["objective"])


def test_structured_multiclass(data):
    from kernfw import StructuredSVM
    from kernfw.structured import MultiClass

    X, y = data
    est = StructuredSVM(
        MultiClass(3), lam=0.1, solver="pairwise", tol=1e-6, max_iter=5000, random_state=0
    )
    _check(compare(est, X, y), 1e-6)


@pytest.fixture(scope="module")
def kernels():
    return [("rbf", {"gamma": 0.5, "columns": [j]}) for j in range(4)] + ["linear"]


@pytest.mark.parametrize("t, multi_class", [(1.0, "ovr"), (2.5, "ovo")])
def test_cskl(data, kernels, t, multi_class):
    from kernfw import CSKLClassifier

    X, y = data
    X = X[:, :4]
    est = CSKLClassifier(kernels, t=t, svm="c", multi_class=multi_class, tol=1e-7, max_iter=500)
    _check(compare(est, X, y), 1e-5)
    with pytest.raises(ValueError, match="exact=False"):
        compare(CSKLClassifier(kernels, exact=True, svm="c"), X, y)


def test_lp_mkl(data, kernels):
    from kernfw import LpMKLClassifier

    X, y = data
    _check(
        compare(LpMKLClassifier(kernels, p=2.0, svm="c", tol=1e-8, max_iter=500), X[:, :4], y), 1e-6
    )


def test_online_mkl_reports_no_certificate_and_converges_at_its_rate(data, kernels):
    from kernfw import OnlineMKLClassifier

    X, y = data
    est = OnlineMKLClassifier(kernels, lam=0.1, random_state=0)
    budget = "max_iter" if "max_iter" in est.get_params() else "n_epochs"
    report = compare(est.set_params(**{budget: 300}), X[:, :4], y)
    assert report["gap"] == np.inf and report["within_gap"]
    optimum = report["reference_objective"]
    # F* is the optimum: no epoch's iterate is below it (up to cvxpy's accuracy)
    excess = np.asarray(report["estimator"].history_["primal"]) - optimum
    assert excess.size == 301 and excess.min() >= -1e-6 * max(1.0, abs(optimum))
    assert report["objective"] == pytest.approx(optimum + excess[-1])
    # the claim (math.md §4.2, the O(1/ε²) analysis of [Martins2011]): F − F* = O(1/√T) with
    # η_t = η0/√t.  Epochs 21–40 and 201–300 (centres 30.5 and 250.5) should then differ
    # by √(250.5/30.5) ≈ 2.9 on average; 2.5 leaves room for the stochastic order.
    early, late = excess[21:41].mean(), excess[201:301].mean()
    assert early >= 2.5 * late, (early, late)


def test_unknown_estimators_are_rejected(data):
    X, y = data
    with pytest.raises(TypeError, match="no cvxpy reference for Ridge"):
        compare(Ridge(), X, y)
    with pytest.raises(TypeError, match="no cvxpy reference for Ridge"):
        reference_objective(Ridge().fit(X, y), X, y)
    assert {
        "MultiClassSVM",
        "L2SVC",
        "MinimumEnclosingBall",
        "StructuredSVM",
        "CSKLClassifier",
        "LpMKLClassifier",
        "OnlineMKLClassifier",
    } <= set(REFERENCES)


def test_reference_uses_the_estimators_kernel(data):
    from kernfw import MultiClassSVM

    X, y = data
    wide = MultiClassSVM(lam=0.05, gamma=0.01, tol=1e-4, max_iter=100000).fit(X, y)
    narrow = MultiClassSVM(lam=0.05, gamma=5.0, tol=1e-4, max_iter=100000).fit(X, y)
    p_wide, p_narrow = reference_objective(wide, X, y), reference_objective(narrow, X, y)
    assert abs(p_wide - wide.primal_objective_) <= wide.duality_gap_ + 1e-6
    assert abs(p_narrow - narrow.primal_objective_) <= narrow.duality_gap_ + 1e-6
    assert abs(p_wide - p_narrow) > 0.05


def test_compare_is_callable_in_every_import_order():
    import subprocess
    import sys

    code = (
        "import kernfw.reference.comparison, kernfw.reference as r; "
        "from kernfw.reference import compare; "
        "from sklearn.datasets import load_iris; from kernfw import MinimumEnclosingBall; "
        "X = load_iris(return_X_y=True)[0][:20]; "
        "assert r.compare(MinimumEnclosingBall(), X)['within_gap']; "
        "assert compare(MinimumEnclosingBall(), X)['within_gap']"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
