"""cvxpy references for the multi-category SVMs of math.md §1 (recipe of §6).

- :func:`multiclass_primal` — the primal ``min_V λ/2 ‖V‖² + (1/n) Σ_i Φ(a_i)`` on
  features ``F`` (``S = F V``; use :func:`~kernfw.reference.common.factor_gram`
  for a kernel), optionally Moreau-smoothed through an auxiliary ``Z``, with
  per-example weights and liblinear's intercept (math.md §1.15);
- :func:`loss_polytope_lp` — ``Φ(a) = max_{β ∈ B} ⟨β, a⟩`` as an LP (checks the
  losses and their LMO);
- :func:`multiclass_lmo_lp` — the direction-finding LP
  ``max_{α ∈ A_i} ⟨g, α⟩`` over one example's dual domain (checks §1.6);
- :func:`multiclass_block_qp` — the block sub-problem of block-coordinate FW
  ``min_{α' ∈ A_i} ⟨g, α' − α⟩ + (q/2)‖α' − α‖²`` (checks the exact block steps, §1.14);
- :func:`smoothed_loss_value` — the Moreau envelope ``Φ_σ(s; y)`` of one example.

Every loss is written with its weights ``ρ`` and the decomposition
``Σ_j ρ_j a_[j] = Σ_{ℓ ∈ K} δ_ℓ T_ℓ(a)``, ``δ_ℓ = ρ_ℓ − ρ_{ℓ+1} > 0`` (§1.2).
"""

import numpy as np

from ..losses import MaxHinge, make_loss
from .common import require_cvxpy, solve_problem

__all__ = [
    "multiclass_primal",
    "loss_polytope_lp",
    "multiclass_lmo_lp",
    "multiclass_block_qp",
    "smoothed_loss_value",
]


def _decomposition(loss, m):
    """``[(ℓ, δ_ℓ)]`` with ``δ_ℓ = ρ_ℓ − ρ_{ℓ+1} > 0`` (``ℓ`` is 1-based)."""
    rho = np.asarray(loss.rho(m), dtype=np.float64)
    delta = rho[:-1] - rho[1:]
    return [(ell + 1, float(d)) for ell, d in enumerate(delta) if d > 0]


def _loss_expr(cp, a, loss, m):
    """``Φ`` of one margin row ``a`` (a cvxpy expression of length m)."""
    parts = _decomposition(loss, m)
    if loss.positive_part:
        pa = cp.pos(a)
        return sum(d * cp.sum_largest(pa, ell) for ell, d in parts)
    return cp.pos(sum(d * cp.sum_largest(a, ell) for ell, d in parts))


def _margins(cp, T, y, C):
    """``a_i = c_i + t_i − t_{i,y_i} 1`` for the rows ``t_i`` of the (n, m) expression ``T``."""
    n, m = C.shape
    E = np.zeros((n, m))
    E[np.arange(n), y] = 1.0
    t_y = cp.sum(cp.multiply(T, E), axis=1, keepdims=True)
    return T - t_y @ np.ones((1, m)) + C


def multiclass_primal(
    F,
    y,
    loss="max_hinge",
    lam=1e-2,
    smoothing=0.0,
    n_classes=None,
    sample_weight=None,
    intercept_scaling=None,
):
    """Solve the primal of math.md §1.1 (smoothed as §1.10, weighted as §1.15) with
    cvxpy + Clarabel.

    Parameters
    ----------
    F : ndarray of shape (n, r)
        Features (``K = F Fᵀ``).
    y : ndarray of int, shape (n,)
        Class indices.
    loss : str or MulticlassLoss
        The loss (see :mod:`kernfw.losses`).
    lam : float
        ``λ``.
    smoothing : float
        ``σ ≥ 0``; for ``σ > 0`` the objective is
        ``λ/2 ‖V‖² + (1/n) Σ_i Φ(z_i) + ‖S − Z‖²/(2σn)`` over ``(V, Z)``,
        whose optimal value is ``P_σ*``.
    n_classes : int or None
        ``m`` (default ``max(y) + 1``).
    sample_weight : ndarray of shape (n,) or None
        Weights ``w_i ≥ 0``: the loss terms are ``(1/Σ_j w_j) Σ_i w_i Φ(a_i)`` (for
        ``σ > 0`` each with its own ``‖s_i − z_i‖²/(2σ)``), the data with integer
        weights as repeated rows (None: all 1).
    intercept_scaling : float or None
        ``s``: the features ``[F, s 1]`` (liblinear's intercept, regularized with
        ``V``); the last row of ``V`` is then the intercept's weight,
        ``b = s · V[-1]``.

    Returns
    -------
    dict
        ``value`` (``P*`` or ``P_σ*``), ``V`` (r × m, or (r + 1) × m with an
        intercept), ``S`` = ``F V`` (n × m, intercept included), ``intercept``
        (``b``, zeros without one).
    """
    cp = require_cvxpy()
    F = np.asarray(F, dtype=np.float64)
    y = np.asarray(y, dtype=np.intp)
    if intercept_scaling is not None:
        F = np.hstack([F, np.full((F.shape[0], 1), float(intercept_scaling))])
    n, r = F.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    w = w / w.sum()
    m = int(y.max()) + 1 if n_classes is None else int(n_classes)
    loss = make_loss(loss).check(m)
    C = loss.costs(y, m)
    V = cp.Variable((r, m))
    S = F @ V
    T = cp.Variable((n, m)) if smoothing > 0 else S
    A = _margins(cp, T, y, C)
    if isinstance(loss, MaxHinge):
        losses = w @ cp.max(A, axis=1)
    else:
        losses = sum(w[i] * _loss_expr(cp, A[i, :], loss, m) for i in range(n))
    objective = lam / 2 * cp.sum_squares(V) + losses
    if smoothing > 0:
        gaps = cp.sum(cp.square(S - T), axis=1)
        objective = objective + w @ gaps / (2 * smoothing)
    problem = cp.Problem(cp.Minimize(objective))
    value = solve_problem(problem)
    b = np.zeros(m) if intercept_scaling is None else float(intercept_scaling) * V.value[-1]
    return {"value": value, "V": V.value, "S": F @ V.value, "intercept": b}


def _polytope(cp, beta, loss, m):
    """Constraints ``β ∈ B`` (math.md §1.3), via the permutahedron of ``ρ`` (Rado)."""
    rho = np.asarray(loss.rho(m), dtype=np.float64)
    cum = np.cumsum(rho)
    if loss.positive_part:  # 0 ≤ β ≤ p, p ∈ conv(perm ρ)
        p = cp.Variable(m)
        cons = [beta >= 0, beta <= p, cp.sum(p) == cum[-1]]
        cons += [cp.sum_largest(p, j) <= cum[j - 1] for j in range(1, m)]
        return cons
    theta = cp.Variable()  # β = θ p, θ ∈ [0, 1]
    cons = [beta >= 0, theta >= 0, theta <= 1, cp.sum(beta) == theta * cum[-1]]
    cons += [cp.sum_largest(beta, j) <= theta * cum[j - 1] for j in range(1, m)]
    return cons


def loss_polytope_lp(a, loss):
    """``max_{β ∈ B} ⟨β, a⟩`` by LP: equals ``Φ`` at the margin vector ``a`` (shape (m,))."""
    cp = require_cvxpy()
    a = np.asarray(a, dtype=np.float64)
    m = a.size
    loss = make_loss(loss).check(m)
    beta = cp.Variable(m)
    problem = cp.Problem(cp.Maximize(a @ beta), _polytope(cp, beta, loss, m))
    return solve_problem(problem)


def multiclass_lmo_lp(g, y, loss):
    """``max ⟨g, (1ᵀβ) e_y − β⟩`` over ``β ∈ B``: the LP over the dual domain ``A_i`` (§1.6).

    Parameters
    ----------
    g : ndarray of shape (m,)
        A gradient row (e.g. ``−(c_i + s̃_i)``).
    y : int
        The example's class index.
    loss : str or MulticlassLoss

    Returns
    -------
    float
        The LP optimum; compare with ``⟨g, u_i⟩`` of the closed-form vertex.
    """
    cp = require_cvxpy()
    g = np.asarray(g, dtype=np.float64)
    m = g.size
    loss = make_loss(loss).check(m)
    beta = cp.Variable(m)
    alpha = cp.sum(beta) * np.eye(m)[y] - beta
    problem = cp.Problem(cp.Maximize(g @ alpha), _polytope(cp, beta, loss, m))
    return solve_problem(problem)


def multiclass_block_qp(g, alpha, y, q, loss):
    """The block sub-problem ``min_{α' ∈ A_i} ⟨g, α' − α⟩ + (q/2)‖α' − α‖²`` (math.md §1.14).

    ``A_i = {(1ᵀβ) e_y − β : β ∈ B}`` is one example's dual domain (§1.4): the
    minimizer is the maximizer of the dual restricted to the block.

    Parameters
    ----------
    g : ndarray of shape (m,)
        The block gradient ``g_i = c_i + s̃_i``.
    alpha : ndarray of shape (m,)
        The block ``α_i`` (a point of ``A_i``).
    y : int
        The example's class index.
    q : float
        The block curvature ``q_i ≥ 0``.
    loss : str or MulticlassLoss

    Returns
    -------
    dict
        ``value`` (the optimum) and ``alpha`` (the minimizer ``α'``).
    """
    cp = require_cvxpy()
    g = np.asarray(g, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    m = g.size
    loss = make_loss(loss).check(m)
    beta = cp.Variable(m)
    new = cp.sum(beta) * np.eye(m)[y] - beta
    objective = g @ (new - alpha) + q / 2 * cp.sum_squares(new - alpha)
    value = solve_problem(cp.Problem(cp.Minimize(objective), _polytope(cp, beta, loss, m)))
    return {"value": value, "alpha": new.value}


def smoothed_loss_value(s, y, loss, smoothing, cost=None):
    """Moreau envelope ``Φ_σ(s; y) = min_z Φ(z; y) + ‖s − z‖²/(2σ)`` of one example.

    Parameters
    ----------
    s : ndarray of shape (m,)
        Scores ``s_i``.
    y : int
        Class index.
    loss : str or MulticlassLoss
    smoothing : float
        ``σ > 0``.
    cost : ndarray of shape (m,) or None
        Cost vector ``c_i`` (default ``1 − e_y``).
    """
    cp = require_cvxpy()
    s = np.asarray(s, dtype=np.float64)
    m = s.size
    loss = make_loss(loss).check(m)
    c = np.ones(m) if cost is None else np.asarray(cost, dtype=np.float64).copy()
    if cost is None:
        c[y] = 0.0
    z = cp.Variable(m)
    a = c + z - z[y]
    objective = _loss_expr(cp, a, loss, m) + cp.sum_squares(s - z) / (2 * smoothing)
    return solve_problem(cp.Problem(cp.Minimize(objective)))
