"""Shared pieces of the cvxpy references: Gram factorization and the solver call."""

import numpy as np

__all__ = ["factor_gram", "solve_problem", "require_cvxpy"]

#: Clarabel settings of math.md §6 (tight tolerances; "inaccurate" is accepted)
CLARABEL_TOL = 1e-10


def require_cvxpy():
    """Import cvxpy, or explain how to install it."""
    try:
        import cvxpy as cp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the cvxpy reference solvers need the 'reference' extra: "
            "pip install 'kernfw[reference]'"
        ) from exc
    return cp


def factor_gram(K, rel_eig=1e-10):
    """Factor a PSD Gram matrix ``K = F Fᵀ`` (``F = V₊ Λ₊^{1/2}``, rank r ≤ n).

    Eigenvalues below ``rel_eig · λ_max`` are dropped (math.md §6), so the
    linear problem on features ``F`` is the kernel problem on ``K``.
    """
    K = np.asarray(K, dtype=np.float64)
    K = (K + K.T) / 2
    evals, evecs = np.linalg.eigh(K)
    keep = evals > rel_eig * max(evals.max(), 0.0)
    return evecs[:, keep] * np.sqrt(evals[keep])


def solve_problem(problem, tol=CLARABEL_TOL):
    """Solve a cvxpy problem with Clarabel at tight tolerances; return its value.

    Raises ``RuntimeError`` when the solver fails outright (status neither
    optimal nor optimal_inaccurate).
    """
    cp = require_cvxpy()
    try:
        problem.solve(solver=cp.CLARABEL, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
    except cp.error.SolverError:
        problem.solve(solver=cp.CLARABEL)
    if problem.status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"cvxpy reference failed: status {problem.status}")
    return float(problem.value)
