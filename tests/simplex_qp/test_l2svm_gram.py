"""solve_l2svm_gram: the L2-SVM on a stored Gram by compiled pairwise FW (one call)."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from kernfw.operators import Gram
from kernfw.solvers.simplex_qp import solve_l2svm, solve_l2svm_gram


def _problem(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    K = rbf_kernel(X, gamma=0.3)
    K = np.ascontiguousarray(np.tril(K) + np.tril(K, -1).T)  # symmetric bit for bit
    return K, y


@pytest.mark.cvxpy
@pytest.mark.parametrize("C", [0.1, 10.0])
def test_matches_cvxpy_within_its_gap(C):
    from kernfw.reference import l2svm_reference

    K, y = _problem(40, seed=1)
    ref = l2svm_reference(K, y, C)
    fit = solve_l2svm_gram(K, y, C, tol=1e-10)
    assert fit.converged
    # −ρ is the dual value, −ρ − gap ≤ P* ≤ −ρ (the certificate brackets the optimum)
    assert -fit.rho - fit.gap - 1e-9 <= ref["objective"] <= -fit.rho + 1e-9
    assert fit.rho == pytest.approx(ref["rho"], rel=1e-6)


def test_equals_solve_l2svm_within_the_gaps_and_warm_starts():
    K, y = _problem()
    for C in (0.1, 1.0, 100.0):
        fit = solve_l2svm_gram(K, y, C, tol=1e-4)
        res = solve_l2svm(Gram(K), y, C, tol=1e-4)
        assert fit.converged and fit.gap <= 1e-4 * fit.rho
        assert abs(fit.rho - res.solution["rho"]) <= fit.gap + res.gap
        assert fit.alpha.min() >= 0 and fit.alpha.sum() == pytest.approx(1.0)
    # along C (the default tol), each fit from the previous solution takes fewer steps
    warm, cold, alpha = [], [], None
    for C in np.logspace(-1, 2, 6):
        fit = solve_l2svm_gram(K, y, C, alpha, tol=0.3)
        warm.append(fit.n_iter)
        alpha = fit.alpha
        alone = solve_l2svm_gram(K, y, C, tol=0.3)
        cold.append(alone.n_iter)
        assert abs(fit.rho - alone.rho) <= fit.gap + alone.gap
    assert warm[0] == cold[0] and sum(warm[1:]) < 0.8 * sum(cold[1:])
    # the solution itself as the start: certified at once
    assert solve_l2svm_gram(K, y, 100.0, alpha, tol=0.3).n_iter == 0


def test_budget_and_bad_input():
    K, y = _problem()
    fit = solve_l2svm_gram(K, y, 100.0, tol=1e-12, max_iter=3)
    assert not fit.converged and fit.n_iter == 3 and fit.gap > 0
    with pytest.raises(ValueError, match="C must be"):
        solve_l2svm_gram(K, y, 0.0)
    with pytest.raises(ValueError, match="-1 and \\+1"):
        solve_l2svm_gram(K, np.where(y > 0, 1.0, 0.0), 1.0)
    with pytest.raises(ValueError, match="C-contiguous float64"):
        solve_l2svm_gram(K.astype(np.float32), y, 1.0)
    with pytest.raises(ValueError, match="simplex"):
        solve_l2svm_gram(K, y, 1.0, alpha0=np.full(y.size, 0.5))
