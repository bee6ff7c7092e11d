"""cvxpy references for math.md §2: the minimum enclosing ball and the L2-SVM.

Both factor the Gram matrix ``K = F Fᵀ`` (:func:`~kernfw.reference.common.factor_gram`)
and solve the primal on the explicit features ``F`` with Clarabel (math.md §6);
the dual variables ``α`` are read from the constraints' multipliers.
"""

import numpy as np

from .common import factor_gram, require_cvxpy, solve_problem

__all__ = ["meb_reference", "soft_ball_reference", "l2svm_reference"]


def _offset(F, diag):
    """``diag_i − ‖F_i‖²``: what the squared distances gain when the points' squared norms are
    ``diag`` instead of ``diag(F Fᵀ)`` (math.md §8.4); 0 for ``diag=None``."""
    if diag is None:
        return 0.0
    diag = np.asarray(diag, dtype=np.float64).ravel()
    if diag.shape != (F.shape[0],):
        raise ValueError(f"diag must have shape ({F.shape[0]},), got {diag.shape}")
    return diag - np.einsum("ij,ij->i", F, F)


def meb_reference(K, diag=None):
    """Minimum enclosing ball of the points with Gram matrix ``K`` (math.md §2.2).

    Solves ``min_{c, r²} r²`` s.t. ``‖F_i − c‖² ≤ r²`` for all ``i``.

    Parameters
    ----------
    K : array-like of shape (n, n)
        PSD Gram matrix of the points ``z_i``.
    diag : array-like of shape (n,) or None
        The points' squared norms when they are not ``diag(K)``: the distances are then
        ``diag_i − 2⟨F_i, c⟩ + ‖c‖²`` (an approximated kernel with its exact
        self-similarities, math.md §8.4).  None: ``diag(K)``.

    Returns
    -------
    dict
        ``radius2`` (r*²), ``radius``, ``alpha`` (the multipliers of the
        constraints, on the simplex: ``c = Σ α_i z_i``).
    """
    cp = require_cvxpy()
    F = factor_gram(K)
    n, r = F.shape
    c = cp.Variable(r)
    r2 = cp.Variable()
    distance = cp.sum(cp.square(F - np.ones((n, 1)) @ cp.reshape(c, (1, r), order="C")), axis=1)
    inside = distance + _offset(F, diag) <= r2
    value = solve_problem(cp.Problem(cp.Minimize(r2), [inside]))
    alpha = np.asarray(inside.dual_value, dtype=np.float64).ravel()
    alpha = np.maximum(alpha, 0.0)
    alpha /= alpha.sum()
    return {"radius2": value, "radius": float(np.sqrt(max(value, 0.0))), "alpha": alpha}


def soft_ball_reference(K, nu, diag=None):
    """The ν-soft ball of the points with Gram matrix ``K`` (math.md §2.9).

    Solves ``min R² + 1/(νn) Σ ξ_i`` s.t. ``‖F_i − c‖² ≤ R² + ξ_i``, ``ξ ≥ 0``.

    Parameters
    ----------
    K : array-like of shape (n, n)
        PSD Gram matrix of the points ``z_i``.
    nu : float in (0, 1]
        ν, the largest fraction of points outside.
    diag : array-like of shape (n,) or None
        The points' squared norms, as in :func:`meb_reference`.

    Returns
    -------
    dict
        ``objective`` (P*), ``alpha`` (the multipliers of the distance constraints, on the
        capped simplex ``0 ≤ α_i ≤ 1/(νn)``, ``1ᵀα = 1``).
    """
    cp = require_cvxpy()
    F = factor_gram(K)
    n, r = F.shape
    c, r2, xi = cp.Variable(r), cp.Variable(), cp.Variable(n, nonneg=True)
    distance = cp.sum(cp.square(F - np.ones((n, 1)) @ cp.reshape(c, (1, r), order="C")), axis=1)
    inside = distance + _offset(F, diag) <= r2 + xi
    objective = r2 + cp.sum(xi) / (nu * n)
    value = solve_problem(cp.Problem(cp.Minimize(objective), [inside]))
    alpha = np.maximum(np.asarray(inside.dual_value, dtype=np.float64).ravel(), 0.0)
    return {"objective": value, "alpha": alpha / alpha.sum()}


def l2svm_reference(K, y, C):
    """The L2-SVM of CVM (math.md §2.1) on the Gram matrix ``K``.

    Solves ``min ‖w‖² + b² − 2ρ + C Σ ξ_i²`` s.t. ``y_i (w·F_i + b) ≥ ρ − ξ_i``.

    Parameters
    ----------
    K : array-like of shape (n, n)
        PSD Gram matrix.
    y : array-like of shape (n,)
        Labels in {−1, +1}.
    C : float > 0
        Penalty of the squared slacks.

    Returns
    -------
    dict
        ``objective`` (P* = −ρ*), ``rho``, ``b``, ``xi`` (n,), ``alpha`` (n,:
        half the constraint multipliers, on the simplex), ``h`` (the decision
        function ``w·F_i + b`` on the training points) and ``coef``
        (``α ⊙ y``: ``h(x) = Σ coef_i (k(x_i, x) + 1)``).
    """
    cp = require_cvxpy()
    y = np.asarray(y, dtype=np.float64)
    F = factor_gram(K)
    n, r = F.shape
    w, b, rho, xi = cp.Variable(r), cp.Variable(), cp.Variable(), cp.Variable(n)
    margin = cp.multiply(y, F @ w + b) >= rho - xi
    objective = cp.sum_squares(w) + cp.square(b) - 2 * rho + C * cp.sum_squares(xi)
    value = solve_problem(cp.Problem(cp.Minimize(objective), [margin]))
    alpha = np.asarray(margin.dual_value, dtype=np.float64) / 2.0
    return {
        "objective": value,
        "rho": float(rho.value),
        "b": float(b.value),
        "xi": np.asarray(xi.value),
        "alpha": alpha,
        "coef": alpha * y,
        "h": F @ np.asarray(w.value) + float(b.value),
    }
