"""cvxpy reference for math.md §2.15: the L2-loss ε-insensitive support vector regression.

Factors the Gram matrix ``K = F Fᵀ`` (:func:`~kernfw.reference.common.factor_gram`) and
solves the primal on the explicit features ``F`` with Clarabel (math.md §6); the dual
variables ``α, α*`` are read from the two tube constraints' multipliers.
"""

import numpy as np

from .common import factor_gram, require_cvxpy, solve_problem

__all__ = ["l2svr_reference"]


def l2svr_reference(K, y, C, epsilon, sample_weight=None):
    """The L2-loss ε-insensitive SVR with a regularized bias (math.md §2.15).

    Solves ``min ½‖w‖² + ½b² + C Σ_i s_i (ξ_i² + ξ_i*²)`` subject to
    ``y_i − (wᵀφ(x_i) + b) ≤ ε + ξ_i`` and ``(wᵀφ(x_i) + b) − y_i ≤ ε + ξ_i*``.

    Parameters
    ----------
    K : array-like of shape (n, n)
        PSD Gram matrix ``K_ij = k(x_i, x_j)``.
    y : array-like of shape (n,)
        Targets.
    C : float > 0
        Penalty of the squared slacks.
    epsilon : float >= 0
        Half-width ``ε`` of the insensitive tube.
    sample_weight : array-like of shape (n,) or None
        Positive weights ``s_i`` of the slack penalties (None: ones).

    Returns
    -------
    dict
        ``objective`` (P*), ``alpha`` and ``alpha_star`` (the multipliers of the two
        tube constraints: ``w = Σ (α_i − α_i*) φ(x_i)``, ``b = Σ (α_i − α_i*)``), ``b``
        and ``f_train`` (the fitted values ``wᵀφ(x_i) + b``).
    """
    cp = require_cvxpy()
    F = factor_gram(K)
    y = np.asarray(y, dtype=np.float64).ravel()
    n = F.shape[0]
    s = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    w, b = cp.Variable(F.shape[1]), cp.Variable()
    xi, xi_star = cp.Variable(n), cp.Variable(n)
    f = F @ w + b
    above = y - f <= epsilon + xi
    below = f - y <= epsilon + xi_star
    objective = 0.5 * cp.sum_squares(w) + 0.5 * cp.square(b)
    objective += C * (s @ (cp.square(xi) + cp.square(xi_star)))
    value = solve_problem(cp.Problem(cp.Minimize(objective), [above, below]))
    alpha = np.maximum(np.asarray(above.dual_value, dtype=np.float64).ravel(), 0.0)
    alpha_star = np.maximum(np.asarray(below.dual_value, dtype=np.float64).ravel(), 0.0)
    return {
        "objective": value,
        "alpha": alpha,
        "alpha_star": alpha_star,
        "b": float(b.value),
        "f_train": F @ w.value + float(b.value),
    }
