"""What a ``tol`` below the rounding bound does, as the user guide states it: a run stops
where its certified gap reaches the rounding bound; ``tol=0`` runs the whole budget."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from kernfw import L2SVC, MinimumEnclosingBall, MultiClassSVM

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user_guide.md"


@pytest.fixture(scope="module")
def digits300():
    X, y = load_digits(return_X_y=True)
    return X[:300] / 16, y[:300]


@pytest.mark.parametrize(
    "make", [lambda: MinimumEnclosingBall(nu=0, tol=1e-15), lambda: L2SVC(tol=1e-15)]
)
def test_a_tol_below_the_rounding_bound_stops_at_the_floor(digits300, make):
    X, y = digits300
    est = make()
    with pytest.warns(ConvergenceWarning, match="within its rounding bound"):
        est.fit(X) if isinstance(est, MinimumEnclosingBall) else est.fit(X, y < 5)  # binary
    budget = max(100_000, 20 * X.shape[0])
    assert not np.all(est.converged_) and np.max(est.n_iter_) < budget / 10
    gap, rounding = np.max(est.duality_gap_), est.history_["rounding"][-1]
    assert abs(gap) <= rounding and rounding > 1e-15 * abs(np.max(est.primal_objective_))


def test_tol_zero_runs_the_whole_budget_as_documented(digits300):
    X, y = digits300
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = MultiClassSVM(tol=0, max_iter=40).fit(X, y)
    assert est.n_iter_ == 40 and not est.converged_
    guide = " ".join(GUIDE.read_text().split())
    assert "`tol=0` (which `MultiClassSVM` and `StructuredSVM` accept" in guide
    assert "it never stops at the floor" in guide
    assert "A gap that stalls *above* its bound stops too" in guide


def test_a_gap_stalled_above_its_rounding_bound_stops_at_the_floor(digits300):
    X, y = digits300
    with pytest.warns(ConvergenceWarning, match="rounding bound"):
        est = MultiClassSVM(tol=1e-15, max_iter=100_000).fit(X, y)
    assert not est.converged_ and est.n_iter_ < 10_000
    gap, rounding = est.duality_gap_, est.history_["rounding"][-1]
    assert 0 <= gap <= 1e3 * rounding
