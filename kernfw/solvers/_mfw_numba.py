"""Compiled (numba) steps of the simplex-QP FW / MFW solver (math.md §2.3).

The backend of :class:`kernfw.solvers.meb.CompiledSimplexQPIterate` when
:func:`kernfw._compiled.compiled_module` returns this module.  One iteration
is two compiled calls around one column request:

- :func:`plan` — given the cached FW vertex ``i* = argmax_i g_i`` and its gap,
  the away vertex ``j* = argmin_{α_j>0} g_j``, the MFW choice, the exact line
  search (with the away bound ``γ_max``), a negative-curvature check, and the
  index whose column the step needs;
- the caller fetches that column from the kernel operator (``Q.columns``, with
  its LRU cache): the operator protocol stays the only way to kernel values;
- :func:`apply` — the update ``α = s·β``, ``v = Qα = s·u`` from that one
  column, the O(1) updates of ``qᵀα`` and ``αᵀQα``, the active set (drop
  steps included) and the vertex scores ``s·u − q/2`` in a vectorized pass;
  the caller takes the next FW vertex as their ``np.argmin`` (numpy's SIMD
  argmin is faster than a compiled loop), so the certificate stays O(1).

Every formula is the numpy path's, in the same order, so the iterates agree to
rounding (BLAS ``daxpy`` may fuse a multiply-add).

State arrays shared with the caller
-----------------------------------
``f`` (float64[8])
    ``[s, qᵀα, αᵀQα, FW gap of the cached vertex, planned γ, planned γ_max,
    curvature met, unused]``.
``st`` (int64[8])
    ``[active size, cached FW vertex i*, vertex valid (0/1), planned kind
    (0 none, 1 FW, 2 away, 3 negative curvature), planned index, #FW steps,
    #away steps, #drop steps]``.
"""

import math

import numpy as np
from numba import njit

__all__ = ["plan", "apply", "KIND_NONE", "KIND_FW", "KIND_AWAY", "KIND_NEGATIVE"]

KIND_NONE, KIND_FW, KIND_AWAY, KIND_NEGATIVE = 0, 1, 2, 3


@njit(cache=True, inline="always")
def _score(u, scale, hq, has_q, k):
    """The vertex score whose argmin is ``argmax g``: ``u_k`` (q = 0) or ``s u_k − q_k/2``."""
    if has_q:
        return u[k] * scale - hq[k]
    return u[k]


@njit(cache=True, inline="always")
def _line_search(slope, curvature, step_max):
    """``clip(slope / curvature, 0, step_max)``; ``step_max`` (or 0) when ``curvature ≤ 0``."""
    if curvature <= 0.0:
        return step_max if slope > 0.0 else 0.0
    return min(max(slope / curvature, 0.0), step_max)


@njit(cache=True, inline="always")
def _negative(curv, d_ii, v_i, ava, neg_tol):
    """``dᵀQd`` below what round-off explains: ``Q`` is not PSD."""
    return curv < -neg_tol * max(abs(d_ii), 2.0 * abs(v_i), abs(ava), 1e-300)


@njit(cache=True)
def plan(beta, u, items, f, st, diag, q, hq, has_q, away, neg_tol):
    """Choose the step of the next iteration (the FW vertex ``st[1]`` and its gap ``f[3]``
    must be cached: see the module docstring); returns its kind."""
    scale, ava = f[0], f[2]
    i = st[1]
    fw_slope = f[3]
    if away and st[0] > 1:
        j = items[0]
        best = _score(u, scale, hq, has_q, j)
        for p in range(1, st[0]):
            k = items[p]
            s = _score(u, scale, hq, has_q, k)
            if s > best:
                best = s
                j = k
        qj = q[j] if has_q else 0.0
        vj = scale * u[j]
        away_slope = (f[1] - 2.0 * ava) - (qj - 2.0 * vj)
        if away_slope > fw_slope:
            w = scale * beta[j]
            gamma_max = math.inf if w >= 1.0 else w / (1.0 - w)
            curv = diag[j] - 2.0 * vj + ava
            if _negative(curv, diag[j], vj, ava, neg_tol):
                st[3], st[4], f[6] = KIND_NEGATIVE, j, curv
                return KIND_NEGATIVE
            gamma = _line_search(away_slope, 2.0 * curv, gamma_max)
            if gamma <= 0.0 or not math.isfinite(gamma):
                st[3], f[4] = KIND_NONE, 0.0
                return KIND_NONE
            st[3], st[4], f[4], f[5] = KIND_AWAY, j, gamma, gamma_max
            return KIND_AWAY
    vi = scale * u[i]
    curv = diag[i] - 2.0 * vi + ava
    if _negative(curv, diag[i], vi, ava, neg_tol):
        st[3], st[4], f[6] = KIND_NEGATIVE, i, curv
        return KIND_NEGATIVE
    gamma = _line_search(fw_slope, 2.0 * curv, 1.0)
    if gamma <= 0.0:
        st[3], f[4] = KIND_NONE, 0.0
        return KIND_NONE
    st[3], st[4], f[4] = KIND_FW, i, gamma
    return KIND_FW


@njit(cache=True, inline="always")
def _add(items, where, st, i):
    if where[i] < 0:
        items[st[0]] = i
        where[i] = st[0]
        st[0] += 1


@njit(cache=True, inline="always")
def _remove(items, where, st, i):
    pos = where[i]
    if pos >= 0:
        last = items[st[0] - 1]
        items[pos] = last
        where[last] = pos
        where[i] = -1
        st[0] -= 1


@njit(cache=True)
def apply(col, beta, u, scores, items, where, f, st, diag, q, hq, has_q, fill_scores):
    """Take the planned step with its column ``col = Q_{:,idx}``; refresh the scores
    (``fill_scores``: not needed when ``q`` is constant, then ``argmin u`` is the vertex)."""
    kind, idx, gamma = st[3], st[4], f[4]
    scale, qa, ava = f[0], f[1], f[2]
    vi = scale * u[idx]
    if kind == KIND_FW:
        f[2] = ((1 - gamma) ** 2 * ava + 2 * gamma * (1 - gamma) * vi
                + gamma ** 2 * diag[idx])
        if has_q:
            f[1] = (1 - gamma) * qa + gamma * q[idx]
        st[5] += 1
        if gamma >= 1.0:
            for p in range(st[0]):
                k = items[p]
                beta[k] = 0.0
                where[k] = -1
            st[0] = 0
            beta[idx] = 1.0
            _add(items, where, st, idx)
            f[0] = 1.0
            _axpy_scores(u, col, 0.0, 1.0, scores, f, hq, fill_scores)
            return 1.0
        scale *= 1.0 - gamma
        step = gamma / scale
        beta[idx] += step
        _add(items, where, st, idx)
    else:
        gamma_max = f[5]
        f[2] = ((1 + gamma) ** 2 * ava - 2 * gamma * (1 + gamma) * vi
                + gamma ** 2 * diag[idx])
        if has_q:
            f[1] = (1 + gamma) * qa - gamma * q[idx]
        scale *= 1.0 + gamma
        step = -(gamma / scale)
        beta[idx] += step
        st[6] += 1
        if gamma >= gamma_max:
            beta[idx] = 0.0
            _remove(items, where, st, idx)
            st[7] += 1
    f[0] = scale
    _axpy_scores(u, col, 1.0, step, scores, f, hq, fill_scores)
    return gamma


@njit(cache=True)
def _axpy_scores(u, col, keep, step, scores, f, hq, fill_scores):
    """``u ← keep·u + step·col`` (keep ∈ {0, 1}) and, in the same vectorized pass, the
    scores ``s·u − q/2`` (when ``q ≠ 0``); the FW vertex is their ``np.argmin``, taken by
    the caller (numpy's SIMD argmin beats a compiled loop).  Marks the vertex unknown."""
    scale = f[0]
    if keep == 0.0:
        u[:] = col
    else:
        for k in range(u.shape[0]):
            u[k] += step * col[k]
    if fill_scores:
        for k in range(u.shape[0]):
            scores[k] = u[k] * scale - hq[k]
