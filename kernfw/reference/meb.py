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


def _weights(sample_weight, n):
    """The weights ``w`` (all 1 for None) as float64, checked nonnegative."""
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,) or np.any(w < 0) or not np.any(w > 0):
        raise ValueError(f"sample_weight must be nonnegative of shape ({n},), not all zero")
    return w


def meb_reference(K, diag=None, sample_weight=None):
    """Minimum enclosing ball of the points with Gram matrix ``K`` (math.md §2.2).

    Solves ``min_{c, r²} r²`` s.t. ``‖F_i − c‖² ≤ r²`` for all ``i`` of positive weight
    (math.md §2.14: other weights do not change the hard ball).

    Parameters
    ----------
    K : array-like of shape (n, n)
        PSD Gram matrix of the points ``z_i``.
    diag : array-like of shape (n,) or None
        The points' squared norms when they are not ``diag(K)``: the distances are then
        ``diag_i − 2⟨F_i, c⟩ + ‖c‖²`` (an approximated kernel with its exact
        self-similarities, math.md §8.4).  None: ``diag(K)``.
    sample_weight : array-like of shape (n,) or None
        Nonnegative weights: the points of weight 0 are left out.

    Returns
    -------
    dict
        ``radius2`` (r*²), ``radius``, ``alpha`` (the multipliers of the
        constraints, on the simplex: ``c = Σ α_i z_i``).
    """
    cp = require_cvxpy()
    F = factor_gram(K)
    n, r = F.shape
    kept = np.flatnonzero(_weights(sample_weight, n) > 0)
    c = cp.Variable(r)
    r2 = cp.Variable()
    distance = cp.sum(cp.square(F - np.ones((n, 1)) @ cp.reshape(c, (1, r), order="C")), axis=1)
    inside = (distance + _offset(F, diag))[kept] <= r2
    value = solve_problem(cp.Problem(cp.Minimize(r2), [inside]))
    alpha = np.zeros(n)
    alpha[kept] = np.maximum(np.asarray(inside.dual_value, dtype=np.float64).ravel(), 0.0)
    alpha /= alpha.sum()
    return {"radius2": value, "radius": float(np.sqrt(max(value, 0.0))), "alpha": alpha}


def soft_ball_reference(K, nu, diag=None, sample_weight=None):
    """The ν-soft ball of the points with Gram matrix ``K`` (math.md §2.9, §2.14).

    Solves ``min R² + Σ w_i ξ_i / (νΣw)`` s.t. ``‖F_i − c‖² ≤ R² + ξ_i``, ``ξ ≥ 0``
    (``w = 1``: ``1/(νn) Σ ξ_i``).

    Parameters
    ----------
    K : array-like of shape (n, n)
        PSD Gram matrix of the points ``z_i``.
    nu : float in (0, 1]
        ν, the largest fraction of points outside.
    diag : array-like of shape (n,) or None
        The points' squared norms, as in :func:`meb_reference`.
    sample_weight : array-like of shape (n,) or None
        Nonnegative weights ``w_i`` of the slacks (None: all 1).

    Returns
    -------
    dict
        ``objective`` (P*), ``alpha`` (the multipliers of the distance constraints, on the
        capped simplex ``0 ≤ α_i ≤ w_i/(νΣw)``, ``1ᵀα = 1``).
    """
    cp = require_cvxpy()
    F = factor_gram(K)
    n, r = F.shape
    c, r2, xi = cp.Variable(r), cp.Variable(), cp.Variable(n, nonneg=True)
    distance = cp.sum(cp.square(F - np.ones((n, 1)) @ cp.reshape(c, (1, r), order="C")), axis=1)
    inside = distance + _offset(F, diag) <= r2 + xi
    w = _weights(sample_weight, n)
    objective = r2 + (w @ xi) / (nu * w.sum())
    value = solve_problem(cp.Problem(cp.Minimize(objective), [inside]))
    alpha = np.maximum(np.asarray(inside.dual_value, dtype=np.float64).ravel(), 0.0)
    return {"objective": value, "alpha": alpha / alpha.sum()}


def l2svm_reference(K, y, C, sample_weight=None):
    """The L2-SVM of CVM (math.md §2.1) on the Gram matrix ``K``.

    Solves ``min ‖w‖² + b² − 2ρ + C Σ s_i ξ_i²`` s.t. ``y_i (w·F_i + b) ≥ ρ − ξ_i`` over
    the examples of positive weight ``s_i`` (math.md §2.14; ``s = 1``: all of them).

    Parameters
    ----------
    K : array-like of shape (n, n)
        PSD Gram matrix.
    y : array-like of shape (n,)
        Labels in {−1, +1}.
    C : float > 0
        Penalty of the squared slacks.
    sample_weight : array-like of shape (n,) or None
        Nonnegative weights ``s_i`` of the slacks; examples of weight 0 are left out.

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
    s = _weights(sample_weight, n)
    kept = np.flatnonzero(s > 0)
    w, b, rho, xi = cp.Variable(r), cp.Variable(), cp.Variable(), cp.Variable(n)
    margin = cp.multiply(y[kept], F[kept] @ w + b) >= rho - xi[kept]
    penalty = C * cp.sum(cp.multiply(s[kept], cp.square(xi[kept])))
    objective = cp.sum_squares(w) + cp.square(b) - 2 * rho + penalty
    value = solve_problem(cp.Problem(cp.Minimize(objective), [margin]))
    alpha = np.zeros(n)
    alpha[kept] = np.asarray(margin.dual_value, dtype=np.float64) / 2.0
    return {
        "objective": value,
        "rho": float(rho.value),
        "b": float(b.value),
        "xi": np.asarray(xi.value),
        "alpha": alpha,
        "coef": alpha * y,
        "h": F @ np.asarray(w.value) + float(b.value),
    }
