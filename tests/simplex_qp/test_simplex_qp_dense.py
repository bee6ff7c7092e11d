"""The active-set solver of small dense QPs over the simplex (the cutting plane's inner QP)."""

import numpy as np
import pytest

from kernfw.solvers.simplex_qp.dense import simplex_fw_gap, solve_dense_simplex_qp


def _value(Q, q, beta):
    return float(q @ beta - beta @ Q @ beta)


def _problem(rng, k, rank, offset=0.0, duplicates=False):
    """``Q = AAᵀ/(2λ)`` of ``k`` cuts of dimension ``rank``, with a common ``offset``."""
    A = rng.normal(size=(k, rank)) + offset * rng.normal(size=rank)
    if duplicates and k > 2:
        A[1], A[2] = A[0], A[0]
    lam = 10.0 ** rng.uniform(-2, 0)
    return A @ A.T / (2 * lam), rng.normal(size=k), A, lam


def _cvxpy_optimum(A, lam, q):
    import cvxpy as cp

    beta = cp.Variable(q.size)
    problem = cp.Problem(
        cp.Maximize(q @ beta - cp.sum_squares(A.T @ beta) / (2 * lam)),
        [beta >= 0, cp.sum(beta) == 1],
    )
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return problem.value


@pytest.mark.cvxpy
@pytest.mark.parametrize("seed", range(12))
def test_reaches_the_cvxpy_optimum(seed):
    rng = np.random.default_rng(seed)
    k, rank = int(rng.integers(2, 30)), int(rng.integers(1, 8))
    Q, q, A, lam = _problem(rng, k, rank, offset=[0.0, 3.0][seed % 2], duplicates=seed % 3 == 0)
    start = None if seed % 4 < 2 else rng.dirichlet(np.ones(k))
    beta, gap, _ = solve_dense_simplex_qp(Q, q, start, tol=1e-12)
    assert beta.min() >= 0 and beta.sum() == pytest.approx(1.0, abs=1e-14)
    assert gap == pytest.approx(simplex_fw_gap(Q, q, beta))
    optimum = _cvxpy_optimum(A, lam, q)
    scale = np.abs(q).max() + np.abs(Q).max()
    # the FW gap bounds the suboptimality, and the solution is optimal to rounding
    assert optimum - _value(Q, q, beta) <= gap + 1e-8 * scale
    assert gap <= 1e-9 * scale
    # Carathéodory: an optimum lives on at most rank + 1 cuts
    assert np.count_nonzero(beta) <= rank + 1


def test_a_vertex_and_a_single_cut():
    beta, gap, _ = solve_dense_simplex_qp(np.ones((1, 1)), np.array([3.0]))
    assert beta.tolist() == [1.0] and gap == 0.0
    # Q = 0: the best vertex of a linear function
    beta, gap, _ = solve_dense_simplex_qp(np.zeros((3, 3)), np.array([0.0, 2.0, 1.0]))
    assert beta.tolist() == [0.0, 1.0, 0.0] and gap == 0.0


@pytest.mark.cvxpy
@pytest.mark.parametrize("offset", [1e2, 1e4])
def test_nearly_parallel_points(offset):
    # the minimum enclosing ball of points z_j = a_j/√(2λ) (q = diag Q) far from the origin:
    # Q's entries are offset² times the differences the QP resolves.  The ball does not
    # depend on the translation, so the centred problem (solved by cvxpy) is the answer.
    rng = np.random.default_rng(0)
    A = rng.normal(size=(20, 3))
    far = A + offset * np.array([1.0, 2.0, -1.0])
    Q = far @ far.T / 2
    r2 = _cvxpy_optimum(A - A.mean(axis=0), 1.0, np.sum((A - A.mean(axis=0)) ** 2, axis=1) / 2)
    scale = np.abs(Q).max() * np.finfo(float).eps
    for start in (None, np.full(20, 1 / 20), np.eye(20)[7]):
        beta, gap, n_iter = solve_dense_simplex_qp(Q, np.diag(Q), start, tol=0.0)
        assert n_iter <= 100 and 0 < np.count_nonzero(beta) <= 4
        assert gap <= 1e3 * scale
        assert _value(Q, np.diag(Q), beta) == pytest.approx(r2, abs=1e-8 + 1e3 * scale)
