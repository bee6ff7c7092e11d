"""Compiled (numba) pairwise Frank-Wolfe for the binary L2-SVMs of an MKL inner solve.

The backend of :class:`kernfw.solvers.mkl.inner_svm.L2SVM` when the weighted kernel
``K_γ`` is a dense, exactly symmetric array (the :class:`~kernfw.operators.KernelStack`
buffer): the binary problems of one weight vector are solved in one call, with no
Python per iteration.  Each problem is the simplex QP of math.md §2.1,

.. math::  \\max_{α∈Δ_n} f(α) = −αᵀQα,\\qquad Q_{ij} = y_i y_j (K_{ij} + 1) + δ_{ij}/C,

solved by pairwise Frank-Wolfe steps (math.md §2.3, "Pairwise steps"): mass moves from
the away vertex ``j* = argmax_{α_j>0} v_j`` to the FW vertex ``i* = argmin_i v_i`` of
``v = Qα`` (the gradient is ``−2v``) along ``e_{i*} − e_{j*}``, by the exact line search
``γ = (v_{j*} − v_{i*}) / dᵀQd`` clipped to ``[0, α_{j*}]`` (``α_{j*} = 0`` exactly on a
drop step).  A step reads two rows of ``K`` (columns of ``Q``, with the labels and the
ridge applied on the fly) and touches two entries of ``α``; on the inner problems of
CSKL it takes 0.5–0.7 times the iterations of away-step FW
(``docs/benchmarks/mkl.md``).

The FW gap ``g = 2(αᵀv − v_{i*}) ≥ f* − f(α)`` decides the stop: ``g + ρ ≤ tol·αᵀQα``
(the rule of :func:`kernfw.solvers.simplex_qp.solve_l2svm`, relative to the dual value;
``ρ`` the rounding bound of math.md §2.5).  When the maintained
``v`` meets it, ``v`` and ``αᵀv`` are recomputed from ``α`` and the rule is tested
again on them, so the returned gap is that of the returned ``α``.
"""

import math

import numpy as np
from numba import njit

from ...fw._steps_numba import quadratic_step
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
    """``(i*, j*)``: the FW vertex ``argmin_i v_i`` and the away vertex
    ``argmax_{α_j>0} v_j`` (the first of ties).  The scan keeps both extremes in
    registers (``v_fw``, ``v_aw``) instead of reading ``v`` at the indices found so far."""
    i_fw, j_aw = 0, -1
    v_fw, v_aw = v[0], 0.0
    for k in range(v.shape[0]):
        x = v[k]
        if x < v_fw:
            i_fw, v_fw = k, x
        if alpha[k] > 0.0 and (j_aw < 0 or x > v_aw):
            j_aw, v_aw = k, x
    return i_fw, j_aw


@njit(cache=True)
def _gap_met(v, ava, i_fw, n_terms, tol):
    """``(g, met)``: the FW gap ``2(αᵀv − v_{i*})`` and whether ``g + ρ ≤ tol·αᵀv``."""
    gap = 2.0 * (ava - v[i_fw])
    rounding = (n_terms + 4) * UNIT_ROUNDOFF * (2.0 * abs(v[i_fw]) + 2.0 * abs(ava))
    return gap, max(gap, 0.0) + rounding <= tol * abs(ava)


@njit(cache=True)
def _pairwise_step(K, y, inv_c, alpha, v, ava, i, j):
    """The pairwise step from the away vertex ``j`` to the FW vertex ``i``, in place.

    Direction ``d = e_i − e_j``: slope ``dᵀ∇f = 2(v_j − v_i)``, curvature
    ``dᵀQd = Q_ii + Q_jj − 2Q_ij``, step ``γ = clip((v_j − v_i)/dᵀQd, 0, α_j)``
    (:func:`~kernfw.fw.steps.quadratic_step`); then ``α_i += γ``, ``α_j −= γ`` (0 exactly
    when ``γ = α_j``), ``v += γ(Q_{:,i} − Q_{:,j})`` and
    ``αᵀQα += 2γ(v_i − v_j) + γ² dᵀQd``.

    Returns
    -------
    gamma : float
        The step (0: none was possible).
    ava : float
        ``αᵀQα`` after it.
    not_psd : bool
        ``dᵀQd`` is negative beyond rounding: ``Q`` is not PSD (no step is taken).
    """
    q_ii = K[i, i] + 1.0 + inv_c
    q_jj = K[j, j] + 1.0 + inv_c
    q_ij = y[i] * y[j] * (K[i, j] + 1.0)
    curv = q_ii + q_jj - 2.0 * q_ij
    scale = max(abs(q_ii), abs(q_jj), 2.0 * abs(q_ij), 1e-300)
    if curv < -NEGATIVE_CURVATURE * scale:
        return 0.0, ava, True
    vi, vj = v[i], v[j]
    gamma = quadratic_step(2.0 * (vj - vi), 2.0 * curv, alpha[j])
    if not gamma > 0.0 or not math.isfinite(gamma):
        return 0.0, ava, False
    ava = ava + 2.0 * gamma * (vi - vj) + gamma * gamma * curv
    row_i, row_j, yi, yj = K[i], K[j], y[i], y[j]
    for k in range(y.shape[0]):
        v[k] += gamma * y[k] * (yi * (row_i[k] + 1.0) - yj * (row_j[k] + 1.0))
    v[i] += gamma * inv_c
    v[j] -= gamma * inv_c
    alpha[i] += gamma
    alpha[j] = 0.0 if gamma >= alpha[j] else alpha[j] - gamma
    return gamma, ava, False


@njit(cache=True)
def _solve_one(K, y, inv_c, alpha, v, tol, max_iter):
    """Pairwise FW on one problem from ``α`` (on the simplex, updated in place) with
    ``v = Qα``; returns ``(gap, αᵀQα, iterations, status, index)``."""
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
        if j_aw == i_fw:  # no pair to move mass between: rounding
            status = STATUS_STALLED
            break
        gamma, ava, not_psd = _pairwise_step(K, y, inv_c, alpha, v, ava, i_fw, j_aw)
        if not_psd:
            status, index = STATUS_NOT_PSD, i_fw
            break
        if gamma == 0.0:
            status = STATUS_STALLED
            break
        it += 1
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
