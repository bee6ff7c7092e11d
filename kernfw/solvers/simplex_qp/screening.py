"""Safe sample screening of the L2-SVM along ``C`` (math.md §2.17).

A feasible dual point ``α`` of the L2-SVM (math.md §2.1, §2.14) with a certified gap ``G``
puts the optimum's ``u* = (w*, b*)`` in a ball of radius ``√G`` around its own ``u``;
a point whose margin stays above the optimal ``ρ*`` everywhere in that ball is proven not
to be a support vector (``α*_i = 0``) and can be left out of the fit.  Along a path of
``C`` the previous solution is such a point of the next problem (the simplex does not
depend on ``C``), so it screens the next fit before it starts:

- :func:`shift_c` — the products ``K̃α`` of the start at the new ``C``;
- :func:`best_margin` — the best primal value along ``u`` (the scale, margin and slacks
  that minimize the primal), which gives a sharper gap than the FW gap;
- :func:`screening_gap` — that certified gap of ``α``;
- :func:`margin_slack` — how far above ``ρ`` a margin must lie to be safe;
- :func:`screen_l2svm` — the mask of the points proven zero;
- :func:`solve_l2svm_screened` — a fit of the next ``C`` on the kept points, certified on
  the full problem.
"""

from typing import NamedTuple

import numpy as np

from ...fw.result import rounding_bound
from . import _screening_numba as compiled
from .l2svm import L2SVMKernel, solve_l2svm

__all__ = [
    "PathStart",
    "SCREEN_MIN_SHARE",
    "shift_c",
    "best_margin",
    "screening_gap",
    "margin_slack",
    "screen_l2svm",
    "solve_l2svm_screened",
]

#: a screened fit runs only when at least this share of the points is removed: it costs
#: one more product ``K̃α`` on the full problem (its certificate) than the plain warm start
SCREEN_MIN_SHARE = 0.25


class PathStart(NamedTuple):
    """A solution of the L2-SVM at ``C`` as the start of the next ``C`` of a path.

    Attributes
    ----------
    alpha, v : ndarray of shape (n,)
        ``α`` on the simplex and ``v = K̃α`` at ``C`` (``solution["alpha"]``, ``["v"]``).
    C : float
        The ``C`` they were computed at.
    n_iter : int
        The iterations that made ``v`` (its rounding grows with them).
    """

    alpha: np.ndarray
    v: np.ndarray
    C: float
    n_iter: int = 0

    @classmethod
    def of(cls, result, C):
        """The start of the next fit from ``result`` (an FWResult of :func:`solve_l2svm`) at ``C``."""
        return cls(result.solution["alpha"], result.solution["v"], float(C), int(result.n_iter))


def shift_c(alpha, v, inv_c_from, inv_c_to):
    """``K̃'α = K̃α + (1/c'_i − 1/c_i) α_i``: the products of ``α`` at a new ``C`` (math.md §2.17).

    Only the diagonal term ``1/c_i = 1/(C w_i)`` of ``K̃`` depends on ``C``.

    Parameters
    ----------
    alpha, v : ndarray of shape (n,)
        ``α`` and ``v = K̃α`` at the old ``C``.
    inv_c_from, inv_c_to : ndarray of shape (n,)
        ``1/c_i`` at the old and the new ``C``.

    Returns
    -------
    ndarray of shape (n,)
        ``v' = K̃'α``.
    """
    return v + (inv_c_to - inv_c_from) * alpha


def best_margin(sq_norm, margins, cost):
    """``ρ_P = max_{r>0} r² / A(r)``, ``A(r) = ‖u‖² + Σ_i c_i (r − m_i)₊²`` (math.md §2.17).

    ``−ρ_P`` is the smallest primal value ``t²‖u‖² − 2ρ + Σ c_i ξ_i²`` over the models
    ``t·u`` (``t > 0``), the margin ``ρ`` and the slacks ``ξ_i = (ρ − t m_i)₊``.  Between
    consecutive sorted margins ``A`` is a quadratic ``‖u‖² + W_k r² − 2S_k r + Q_k`` and
    ``r²/A`` is stationary at ``r = (‖u‖² + Q_k)/S_k``; each segment's stationary point,
    clipped to it, is a candidate, and the value is recomputed exactly at the best one
    (any ``r > 0`` gives a valid primal value).  Compiled:
    :func:`~kernfw.solvers.simplex_qp._screening_numba.best_margin`.

    Parameters
    ----------
    sq_norm : float
        ``‖u‖² = ‖w‖² + b²`` of the model ``u`` of ``α``.
    margins : ndarray of shape (n,)
        ``m_i = y_i h(x_i)``.
    cost : ndarray of shape (n,)
        ``c_i = C w_i``.

    Returns
    -------
    float
        ``ρ_P ≥ 0``, a lower bound of ``ρ*``.
    """
    margins = np.ascontiguousarray(margins, dtype=np.float64)
    cost = np.ascontiguousarray(cost, dtype=np.float64)
    return float(compiled.best_margin(float(sq_norm), margins, cost))


def screening_gap(alpha, v, inv_c, n_iter=0):
    """``(ρ, G, e)``: the dual value, a certified gap and the rounding of ``v`` (math.md §2.17).

    ``ρ = αᵀv`` and ``G = ρ − ρ_P`` (:func:`best_margin`) bound ``ρ − ρ* ≥ 0``; ``e`` bounds
    the rounding of each ``v_i`` kept up to date over ``n_iter`` iterations, and ``G``
    includes it.

    Parameters
    ----------
    alpha, v : ndarray of shape (n,)
        ``α`` on the simplex and ``v = K̃α``.
    inv_c : ndarray of shape (n,)
        The diagonal terms ``1/c_i = 1/(C w_i)`` of ``K̃``.
    n_iter : int
        The iterations that made ``v``.

    Returns
    -------
    (float, float, float)
    """
    _, rho, gap, error = _screen(alpha, v, inv_c, np.ones(alpha.size), n_iter)
    return rho, gap, error


def margin_slack(gap, rho, norms):
    """``t_i = max_{0≤δ≤Ĝ} (s_i √δ − δ)`` with ``Ĝ = min(G, ρ)`` (math.md §2.17).

    A margin ``m_i > ρ + t_i`` proves ``α*_i = 0``: ``δ = ρ − ρ*`` is unknown, at most
    ``Ĝ``, and the optimum's margin is at least ``m_i − s_i√δ`` while ``ρ* = ρ − δ``.
    Compiled: :func:`~kernfw.solvers.simplex_qp._screening_numba.margin_slack`.

    Parameters
    ----------
    gap, rho : float
        A certified gap ``G`` and the dual value ``ρ`` of the same point.
    norms : ndarray of shape (n,)
        ``s_i = √(K_ii + 1)``.

    Returns
    -------
    ndarray of shape (n,)
    """
    norms = np.ascontiguousarray(norms, dtype=np.float64)
    return compiled.margin_slack(float(gap), float(rho), norms)


def _screen(alpha, v, inv_c, norms, n_iter):
    """``(mask, ρ, G, e)`` of the compiled rule."""
    args = [np.ascontiguousarray(a, dtype=np.float64) for a in (alpha, v, inv_c, norms)]
    rounding = rounding_bound(n_iter + args[0].size, 1.0)  # e per unit of max|v| + max 1/c
    mask, rho, gap, error = compiled.screen(*args, rounding)
    return mask, float(rho), float(gap), float(error)


def screen_l2svm(alpha, v, inv_c, norms, n_iter=0):
    """The points proven not to be support vectors of the L2-SVM (math.md §2.17).

    Parameters
    ----------
    alpha, v : ndarray of shape (n,)
        A feasible ``α`` of the problem and ``v = K̃α`` (of the same ``C``).
    inv_c : ndarray of shape (n,)
        ``1/(C w_i)``, the diagonal terms of that ``K̃``.
    norms : ndarray of shape (n,)
        ``s_i = √(K_ii + 1)``.
    n_iter : int
        The iterations that made ``v`` (for its rounding).

    Returns
    -------
    ndarray of bool, shape (n,)
        True where ``α*_i = 0`` is proven: ``m_i − ρ > t_i`` (:func:`margin_slack`) with the
        gap of :func:`screening_gap` (both less the rounding of ``v``).  Compiled:
        :func:`~kernfw.solvers.simplex_qp._screening_numba.screen`.
    """
    return _screen(alpha, v, inv_c, norms, n_iter)[0]


def _kept_start(alpha, keep):
    """``α`` on the kept points, renormalized onto their simplex (None: no mass left)."""
    kept = alpha[keep]
    total = kept.sum()
    return kept / total if total > 0 else None


def solve_l2svm_screened(op, y, C, start=None, sample_weight=None, **options):
    """:func:`solve_l2svm` at ``C`` from the solution at a previous ``C``, screened (§2.17).

    The start ``α`` is feasible at ``C``; its products are moved to ``C`` (:func:`shift_c`)
    and the points it proves zero (:func:`screen_l2svm`) are removed.  When at least
    :data:`SCREEN_MIN_SHARE` of them go, the kept points are fitted from ``α`` restricted
    to them, and the result, padded with zeros, starts a run of the full problem, which
    certifies it (and continues if its gap misses ``tol``): the returned certificate is
    always the full problem's.  Otherwise the full problem is fitted from ``α``.

    Parameters
    ----------
    op, y, C, sample_weight
        As :func:`solve_l2svm`.
    start : PathStart or None
        The solution at the previous ``C``; None fits from the usual start.
    **options
        ``solver``, ``tol``, ``max_iter``, ``random_state``, … of :func:`solve_l2svm`
        (``max_iter`` bounds each of the two runs).

    Returns
    -------
    FWResult
        As :func:`solve_l2svm` (``n_iter`` counts both runs), with ``solution["screened"]``
        the indices of the removed points (empty when none were).
    """
    K_tilde = L2SVMKernel(op, y, C, sample_weight)
    removed = np.zeros(0, dtype=np.intp)
    alpha0, kept_iter = None, 0
    if start is not None:
        alpha0 = np.asarray(start.alpha, dtype=np.float64)
        if alpha0.shape != (op.n,) or np.shape(start.v) != (op.n,):
            raise ValueError(
                f"the start must be a solution of this problem: alpha and v of shape "
                f"({op.n},), got {alpha0.shape} and {np.shape(start.v)}"
            )
        v = shift_c(alpha0, start.v, K_tilde.inv_c * (C / start.C), K_tilde.inv_c)
        norms = np.sqrt(np.asarray(op.diag(), dtype=np.float64) + 1.0)
        mask = screen_l2svm(alpha0, v, K_tilde.inv_c, norms, start.n_iter)
        if mask.sum() >= SCREEN_MIN_SHARE * mask.size and not mask.all():
            removed, keep = np.flatnonzero(mask), np.flatnonzero(~mask)
            w = None if sample_weight is None else np.asarray(sample_weight)[keep]
            kept = solve_l2svm(op.subset(keep), K_tilde.y[keep], C, sample_weight=w,
                               alpha0=_kept_start(alpha0, keep), **options)  # fmt: skip
            alpha0 = np.zeros(op.n)
            alpha0[keep] = kept.solution["alpha"]
            kept_iter = kept.n_iter
    result = solve_l2svm(op, y, C, sample_weight=sample_weight, alpha0=alpha0, **options)
    result.n_iter += kept_iter
    result.solution["screened"] = removed
    return result
