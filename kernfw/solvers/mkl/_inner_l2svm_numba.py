"""Compiled (numba) away-step Frank-Wolfe for the binary L2-SVMs of an MKL inner solve.

The backend of :class:`kernfw.solvers.mkl.inner_svm.L2SVM` when the weighted kernel
``K_γ`` is a dense, exactly symmetric array (the :class:`~kernfw.operators.KernelStack`
buffer): the binary problems of one weight vector are solved in one call, with no
Python per iteration.  Each problem is the simplex QP of math.md §2.1,

.. math::  \\max_{α∈Δ_n} f(α) = −αᵀQα,\\qquad Q_{ij} = y_i y_j (K_{ij} + 1) + δ_{ij}/C,

solved by the modified (away-step) Frank-Wolfe method of math.md §2.3 with the exact
line search (the step rules of :mod:`kernfw.fw.steps`, compiled as they are): the FW
vertex ``i* = argmin_i v_i`` and the away vertex ``j* = argmax_{α_j>0} v_j`` of
``v = Qα`` (the gradient is ``−2v``), the direction of the larger slope, the step
``γ = slope / (2 dᵀQd)`` clipped to ``[0, γ_max]`` (1 for a FW step, ``α_j/(1 − α_j)``
for an away step, which drops ``j``).  Column ``i`` of ``Q``
is row ``i`` of ``K`` (symmetric) with the labels and the ridge applied on the fly.

The FW gap ``g = 2(αᵀv − v_{i*}) ≥ f* − f(α)`` decides the stop: ``g + ρ ≤ tol·αᵀQα``
(the relative rule of :func:`kernfw.solvers.simplex_qp.solve_l2svm` with
``stop="relative"``; ``ρ`` the rounding bound of math.md §2.5).  When the maintained
``v`` meets it, ``v`` and ``αᵀv`` are recomputed from ``α`` and the rule is tested
again on them, so the returned gap is that of the returned ``α``.
"""

import math

import numpy as np
from numba import njit

from ...fw._steps_numba import away_step_max, quadratic_step
from ...fw.result import UNIT_ROUNDOFF
from ..simplex_qp.certificate import NEGATIVE_CURVATURE

__all__ = [
    "solve_problems",
    "STATUS_CONVERGED",
    "STATUS_MAX_ITER",
    "STATUS_NOT_PSD",
    "STATUS_STALLED",
]

#: how a problem ended (``status`` of :func:`solve_problems`): the rule met, the
#: iteration budget spent, negative curvature met (``Q`` not PSD), or no step possible
#: (a zero step at a positive gap: rounding)
STATUS_CONVERGED, STATUS_MAX_ITER, STATUS_NOT_PSD, STATUS_STALLED = 0, 1, 2, 3
#: iterations between exact recomputations of ``αᵀv``
_REFRESH = 1000


@njit(cache=True)
def _fresh(K, y, inv_c, alpha, v):
    """``v = Qα`` from ``α`` (the rows of ``K`` on the support of ``α``); returns ``αᵀv``."""
    n = y.shape[0]
    bias = 0.0
    for i in range(n):
        v[i] = 0.0
    for j in range(n):
        a = alpha[j]
        if a != 0.0:
            w = a * y[j]
            bias += w
            row = K[j]
            for i in range(n):
                v[i] += w * row[i]
    ava = 0.0
    for i in range(n):
        v[i] = y[i] * (v[i] + bias) + alpha[i] * inv_c
        ava += alpha[i] * v[i]
    return ava


@njit(cache=True)
def _vertices(alpha, v):
    """``(i*, j*)``: ``argmin_i v_i`` and ``argmax_{α_j>0} v_j`` (−1 if ``α`` is a vertex)."""
    n = v.shape[0]
    i_fw, j_aw, count = 0, -1, 0
    for k in range(n):
        if v[k] < v[i_fw]:
            i_fw = k
        if alpha[k] > 0.0:
            count += 1
            if j_aw < 0 or v[k] > v[j_aw]:
                j_aw = k
    if count < 2:
        j_aw = -1
    return i_fw, j_aw


@njit(cache=True)
def _gap_met(v, ava, i_fw, n_terms, tol):
    """``(g, met)``: the FW gap ``2(αᵀv − v_{i*})`` and whether ``g + ρ ≤ tol·αᵀv``."""
    gap = 2.0 * (ava - v[i_fw])
    rounding = (n_terms + 4) * UNIT_ROUNDOFF * (2.0 * abs(v[i_fw]) + 2.0 * abs(ava))
    return gap, max(gap, 0.0) + rounding <= tol * abs(ava)


@njit(cache=True)
def _solve_one(K, y, inv_c, alpha, v, tol, max_iter):
    """MFW on one problem from ``α`` (on the simplex, updated in place) with ``v = Qα``;
    returns ``(gap, αᵀQα, iterations, status, index)``."""
    n = y.shape[0]
    ava = _fresh(K, y, inv_c, alpha, v)
    it = 0
    status, index = STATUS_MAX_ITER, -1
    gap = math.inf
    while True:
        i_fw, j_aw = _vertices(alpha, v)
        gap, met = _gap_met(v, ava, i_fw, n + it, tol)
        if met:
            ava = _fresh(K, y, inv_c, alpha, v)  # the certificate of the returned α
            i_fw, j_aw = _vertices(alpha, v)
            gap, met = _gap_met(v, ava, i_fw, n + it, tol)
            if met:
                status = STATUS_CONVERGED
                break
        if it >= max_iter:
            break
        fw_slope = gap
        away_slope = 2.0 * (v[j_aw] - ava) if j_aw >= 0 else -math.inf
        away = away_slope > fw_slope
        k = j_aw if away else i_fw
        d_kk = K[k, k] + 1.0 + inv_c
        curv = (ava - 2.0 * v[k] + d_kk) if away else (d_kk - 2.0 * v[k] + ava)
        if curv < -NEGATIVE_CURVATURE * max(abs(d_kk), 2.0 * abs(v[k]), abs(ava), 1e-300):
            status, index = STATUS_NOT_PSD, k
            break
        gamma_max = away_step_max(alpha[k]) if away else 1.0
        gamma = quadratic_step(away_slope if away else fw_slope, 2.0 * curv, gamma_max)
        if not gamma > 0.0 or not math.isfinite(gamma):
            status = STATUS_STALLED
            break
        it += 1
        vk = v[k]
        row, yk = K[k], y[k]
        if away:  # α ← (1 + γ)α − γ e_k, v ← (1 + γ)v − γ Q_{:,k}
            ava = (1 + gamma) ** 2 * ava - 2 * gamma * (1 + gamma) * vk + gamma**2 * d_kk
            keep, step = 1.0 + gamma, -gamma
        else:  # α ← (1 − γ)α + γ e_k, v ← (1 − γ)v + γ Q_{:,k}
            ava = (1 - gamma) ** 2 * ava + 2 * gamma * (1 - gamma) * vk + gamma**2 * d_kk
            keep, step = 1.0 - gamma, gamma
        for i in range(n):
            alpha[i] *= keep
            v[i] = keep * v[i] + step * y[i] * yk * (row[i] + 1.0)
        alpha[k] += step
        v[k] += step * inv_c
        if away and gamma >= gamma_max:
            alpha[k] = 0.0  # a drop step
        if it % _REFRESH == 0:
            ava = _fresh(K, y, inv_c, alpha, v)
    return gap, ava, it, status, index


@njit(cache=True, nogil=True)
def solve_problems(K, Y, inv_c, A, tol, max_iter):
    """Solve every binary problem ``r`` (labels ``Y[r]``) from ``α = A[r]`` in place
    (without the GIL: threads may solve disjoint slices of the problems at once).

    Parameters
    ----------
    K : float64 array (n, n)
        The kernel ``K_γ``, symmetric bit for bit.
    Y : float64 array (r, n)
        Labels ``±1`` of each problem.
    inv_c : float
        ``1/C``.
    A : float64 array (r, n)
        Start points on the simplex, overwritten by the solutions ``α``.
    tol : float
        Relative tolerance of the stopping rule.
    max_iter : int
        Iterations allowed per problem.

    Returns
    -------
    gaps, quads : float64 arrays (r,)
        Each problem's FW gap and ``αᵀQα``.
    n_iter, status, index : int64 arrays (r,)
        Its iterations, how it ended (``STATUS_*``) and the index where negative
        curvature was met (−1 otherwise).
    """
    r = Y.shape[0]
    gaps, quads = np.empty(r), np.empty(r)
    n_iter = np.empty(r, dtype=np.int64)
    status = np.empty(r, dtype=np.int64)
    index = np.empty(r, dtype=np.int64)
    v = np.empty(K.shape[0])
    for p in range(r):
        gaps[p], quads[p], n_iter[p], status[p], index[p] = _solve_one(
            K, Y[p], inv_c, A[p], v, tol, max_iter
        )
    return gaps, quads, n_iter, status, index
