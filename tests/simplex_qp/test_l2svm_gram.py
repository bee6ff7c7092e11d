"""solve_l2svm_gram: the L2-SVM on a stored Gram by compiled pairwise FW (one call)."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from kernfw.operators import Gram
from kernfw.operators.gram import index_runs
from kernfw.solvers.simplex_qp import solve_l2svm, solve_l2svm_gram, solve_l2svm_gram_paths


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


def _two_class_problems(K, y):
    """Two problems on runs of K's rows: rows 5–29 and 50–69 (two runs), and every row."""
    first = np.r_[5:30, 50:70]
    return [first, np.arange(y.size)], [y[first], y]


@pytest.mark.cvxpy
def test_paths_match_cvxpy_within_their_gaps():
    """solve_l2svm_gram_paths: every fit of every problem along C brackets the optimum of
    cvxpy on the problem's principal submatrix (read in place along its runs)."""
    from kernfw.reference import l2svm_reference

    K, y = _problem(80, seed=2)
    points, labels = _two_class_problems(K, y)
    Cs = [0.1, 1.0, 10.0]
    paths = solve_l2svm_gram_paths(K, points, labels, Cs, tol=1e-10)
    for p, (rows, y_p) in enumerate(zip(points, labels)):
        for k, C in enumerate(Cs):
            ref = l2svm_reference(K[np.ix_(rows, rows)], y_p, C)
            rho, gap = paths.rho[k, p], paths.gap[k, p]
            assert paths.converged[k, p] and 0 <= gap
            assert -rho - gap - 1e-9 <= ref["objective"] <= -rho + 1e-9
            alpha = paths.alpha[p][k]
            assert alpha.min() >= 0 and alpha.sum() == pytest.approx(1.0)


def test_paths_equal_the_warm_started_single_fits():
    """Each problem's path is the sequence of solve_l2svm_gram fits on its submatrix, each
    started from the previous one: the same optimum within the gaps and about the same
    iterations (the path's start at the next C updates the exact ``v`` of the last fit
    instead of recomputing it: the same numbers up to rounding)."""
    K, y = _problem(90, seed=3)
    points, labels = _two_class_problems(K, y)
    Cs = np.logspace(-1, 2, 5)
    for tol in (1e-6, 0.3):
        paths = solve_l2svm_gram_paths(K, points, labels, Cs, tol=tol)
        for p, (rows, y_p) in enumerate(zip(points, labels)):
            K_p, alpha, steps = np.ascontiguousarray(K[np.ix_(rows, rows)]), None, 0
            for k, C in enumerate(Cs):
                fit = solve_l2svm_gram(K_p, y_p, C, alpha, tol=tol)
                alpha, steps = fit.alpha, steps + fit.n_iter
                assert paths.converged[k, p] and fit.converged
                assert abs(paths.rho[k, p] - fit.rho) <= paths.gap[k, p] + fit.gap + 1e-15
                assert paths.gap[k, p] <= tol * paths.rho[k, p]
            assert abs(paths.n_iter[:, p].sum() - steps) <= 0.05 * steps + 2


def test_paths_on_float32_values_solve_the_problem_of_those_values():
    """A float32 Gram is read as it is (its values are exact in float64): the paths on it
    are those on its float64 copy, within the certified gaps, and each fit meets tol."""
    K, y = _problem(90, seed=4)
    K32 = K.astype(np.float32)
    points, labels = _two_class_problems(K, y)
    Cs = np.logspace(-1, 2, 4)
    p32 = solve_l2svm_gram_paths(K32, points, labels, Cs, tol=1e-6)
    p64 = solve_l2svm_gram_paths(K32.astype(np.float64), points, labels, Cs, tol=1e-6)
    assert p32.converged.all() and p64.converged.all()
    assert np.all(np.abs(p32.rho - p64.rho) <= p32.gap + p64.gap + 1e-15)
    assert np.all(p32.gap <= 1e-6 * p32.rho)
    with pytest.raises(ValueError, match="float32 or float64"):
        solve_l2svm_gram_paths(K.astype(np.float16), points, labels, Cs)


def test_index_runs_and_paths_bad_input():
    runs, ends = index_runs(np.array([3, 4, 5, 9, 10, 2, 3, 4, 7]), [0, 5, 9])
    np.testing.assert_array_equal(runs, [[3, 6], [9, 11], [2, 5], [7, 8]])
    np.testing.assert_array_equal(ends, [0, 2, 4])
    K, y = _problem(30)
    with pytest.raises(ValueError, match="increasing"):
        solve_l2svm_gram_paths(K, [np.arange(30)], [y], [1.0, 0.5])
    with pytest.raises(ValueError, match="C must be"):
        solve_l2svm_gram_paths(K, [np.arange(30)], [y], [0.0])
    with pytest.raises(ValueError, match="index K"):
        solve_l2svm_gram_paths(K, [np.arange(1, 31)], [y], [1.0])
    with pytest.raises(ValueError, match="-1 and \\+1"):
        solve_l2svm_gram_paths(K, [np.arange(30)], [np.where(y > 0, 1.0, 0.0)], [1.0])
    fit = solve_l2svm_gram_paths(K, [np.arange(30)], [y], [100.0], tol=1e-12, max_iter=2)
    assert not fit.converged[0, 0] and fit.n_iter[0, 0] == 2
