"""The compiled core of the simplex-QP FW / MFW iterate (math.md §2.3).

The steps of :class:`kernfw.solvers.simplex_qp.iterate.SimplexQPIterate`.  An iteration is:

- :func:`plan` — given the cached FW vertex ``i* = argmax_i g_i`` and its gap,
  the away vertex ``j* = argmin_{α_j>0} g_j``, then :func:`_choose`: the MFW choice, the
  exact line search (with the away bound ``γ_max``: the step rules of
  :mod:`kernfw.fw.steps`, compiled as they are), a negative-curvature check, and the index
  whose column the step needs;
- the column: evaluated in place from the operator's column source when it has one
  (:func:`kernfw.operators._columns_numba.evaluate_column`, with a compiled LRU
  cache), else fetched by the caller through ``Q.columns`` (the operator's own cache);
- :func:`apply` — the scalars of the step (:func:`_move`: ``qᵀα``, ``αᵀQα``, ``s``), the
  update ``α = s·β``, ``v = Qα = s·u`` from that one column, the active set (drop steps
  included) and the next FW vertex and its gap (:func:`_cache_vertex`, a blockwise
  vectorized minimum), so the certificate stays O(1).

With a column source, :func:`run_cached` takes a whole run of iterations in one
call (:func:`step_cached` each), ending early where the stopping rule's O(1)
estimate holds (:func:`stop_estimate_met`); without one, the caller alternates
:func:`plan`, ``Q.columns`` and :func:`apply`.  The sharded iterate
(:mod:`kernfw.solvers.simplex_qp.distributed`) takes its steps' decisions and scalars
from the same :func:`choose` and :func:`move` on its driver.

State shared with the caller
----------------------------
``vec`` (float64[4, n])
    Rows ``BETA`` (β), ``U`` (u), ``SCORES`` (``s·u − q/2``) and ``SCRATCH``.
``ind`` (intp[2, n])
    Rows ``ITEMS`` and ``WHERE`` of the active set.
``con`` (float64[5, n])
    Rows ``DIAG`` (``diag(Q)``), ``Q`` (``q``), ``HALF_Q`` (``q/2``; zeros when
    ``q = 0``), and for a column source ``SQ_NORMS`` (``‖x_k‖²``) and ``LABELS``
    (``y``, L2-SVM).
``state`` (one record of dtype :data:`STATE`)
    The scalars: ``state[0].scale`` is ``s``, ``state[0].gap`` the FW gap of the
    cached vertex, and so on (the fields are listed in :data:`STATE`).

The row names and the record's fields are defined here only; the Python side
(:mod:`kernfw.solvers.simplex_qp.iterate`) reads them from this module.  Few
arguments keep numba's dispatch cheap.
"""

import math

import numpy as np
from numba import njit

from ...fw._steps_numba import away_step_max, quadratic_step
from ...operators._columns_numba import (
    SOURCE_GRAM,
    SOURCE_RBF,
    SOURCE_RBF32,
    cached_column,
    evaluate_column,
)

__all__ = [
    "plan",
    "choose",
    "move",
    "apply",
    "cache_vertex",
    "estimate_met",
    "step_cached",
    "run_cached",
    "stop_estimate_met",
    "evaluate_column",
    "STATE",
    "KIND_NONE",
    "KIND_FW",
    "KIND_AWAY",
    "KIND_NEGATIVE",
    "SOURCE_RBF",
    "SOURCE_GRAM",
    "SOURCE_RBF32",
]

#: rows of ``vec``
BETA, U, SCORES, SCRATCH = range(4)
#: rows of ``ind``: the active set's members (``ITEMS[:size]``) and positions (−1: absent)
ITEMS, WHERE = range(2)
#: rows of ``con``
DIAG, Q, HALF_Q, SQ_NORMS, LABELS = range(5)

#: planned step kinds (``state[0].step_kind``)
KIND_NONE, KIND_FW, KIND_AWAY, KIND_NEGATIVE = 0, 1, 2, 3

#: the scalar state of a compiled iterate, one record
STATE = np.dtype(
    [
        # the iterate: α = s·β, v = s·u, with the scalars maintained in O(1)
        ("scale", np.float64),  # s
        ("qa", np.float64),  # qᵀα
        ("ava", np.float64),  # αᵀQα = αᵀv
        ("size", np.int64),  # |{i : α_i > 0}|, the active set's size
        # the FW vertex cached for the certificate and the next step
        ("vertex", np.int64),  # i* = argmin of the scores
        ("vertex_valid", np.bool_),  # False: recompute i* (after a refresh)
        ("gap", np.float64),  # g_{i*} − αᵀg
        # the planned step
        ("step_kind", np.int64),  # KIND_*
        ("index", np.int64),  # the point it moves along (or met negative curvature at)
        ("gamma", np.float64),  # γ
        ("gamma_max", np.float64),  # the away bound γ_max
        ("curvature", np.float64),  # dᵀQd of a KIND_NEGATIVE plan
        ("n_fw", np.int64),  # FW steps taken
        ("n_away", np.int64),  # away steps taken
        ("n_drop", np.int64),  # drop steps taken (away steps to γ_max)
        # the problem
        ("has_q", np.bool_),  # q ≠ 0
        ("away", np.bool_),  # MFW (away steps on)
        ("fill_scores", np.bool_),  # q not constant: keep the scores s·u − q/2
        ("negative_tol", np.float64),  # dᵀQd < −this × scale is not round-off
        # the stopping rule's O(1) estimate max(gap, 0) ≤ a·f + b (|f| when absolute)
        ("estimate_a", np.float64),
        ("estimate_b", np.float64),
        ("estimate_absolute", np.bool_),
        # the column source (0: the operator; SOURCE_*) and the L2-SVM transform
        ("source", np.int64),
        ("rbf_gamma", np.float64),  # γ of the RBF kernel
        ("l2svm", np.bool_),  # apply K̃ = y_i y_j (K_ij + 1) + δ_ij / C
        ("inv_c", np.float64),  # 1/C
        # the compiled column cache
        ("clock", np.int64),  # column requests so far
        ("rows_used", np.int64),  # rows of the slab holding a column
        ("hits", np.int64),
        ("misses", np.int64),
    ],
    align=True,
)


@njit(cache=True, inline="always")
def _score(u, scale, hq, has_q, k):
    """The vertex score whose argmin is ``argmax g``: ``u_k`` (q = 0) or ``s u_k − q_k/2``."""
    if has_q:
        return u[k] * scale - hq[k]
    return u[k]


@njit(cache=True, inline="always")
def _negative(curv, d_ii, v_i, ava, neg_tol):
    """``dᵀQd`` below what round-off explains: ``Q`` is not PSD."""
    return curv < -neg_tol * max(abs(d_ii), 2.0 * abs(v_i), abs(ava), 1e-300)


@njit(cache=True)
def plan(vec, ind, con, state):
    """Choose the step of the next iteration (the FW vertex ``vertex`` and its ``gap`` must
    be cached: see the module docstring): the away vertex ``j* = argmin_{α_j>0} g_j`` (the
    largest score on the active set) when ``away``, then :func:`_choose`; returns the step kind."""
    st = state[0]
    u, items, diag, q, hq = vec[U], ind[ITEMS], con[DIAG], con[Q], con[HALF_Q]
    i, j, scale = st.vertex, -1, st.scale
    if st.away and st.size > 1:
        j = items[0]
        best = _score(u, scale, hq, st.has_q, j)
        for p in range(1, st.size):
            k = items[p]
            s = _score(u, scale, hq, st.has_q, k)
            if s > best:
                best = s
                j = k
    qj = q[j] if st.has_q and j >= 0 else 0.0
    return _choose(st, scale * u[i], diag[i], j, scale * u[j], qj, diag[j], scale * vec[BETA, j])


@njit(cache=True)
def choose(state, vi, di, j, vj, qj, dj, alpha_j):
    """:func:`_choose` for the state array ``state`` (the sharded iterate's driver)."""
    return _choose(state[0], vi, di, j, vj, qj, dj, alpha_j)


@njit(cache=True, inline="always")
def _choose(st, vi, di, j, vj, qj, dj, alpha_j):
    """The step from the cached FW vertex ``i* = vertex`` (``v_i``, ``Q_ii``; its gap is the
    FW slope) or, when its slope ``αᵀg − g_j`` is larger, the away step from ``j`` (−1: no
    away candidate; ``v_j``, ``q_j``, ``Q_jj``, ``α_j``), both by the exact line search
    (math.md §2.3).  Sets ``step_kind``, ``index``, ``gamma`` (``gamma_max``, ``curvature``)."""
    ava = st.ava
    if j >= 0:
        away_slope = (st.qa - 2.0 * ava) - (qj - 2.0 * vj)
        if away_slope > st.gap:
            gamma_max = away_step_max(alpha_j)
            curv = dj - 2.0 * vj + ava
            if _negative(curv, dj, vj, ava, st.negative_tol):
                st.step_kind, st.index, st.curvature = KIND_NEGATIVE, j, curv
                return KIND_NEGATIVE
            gamma = quadratic_step(away_slope, 2.0 * curv, gamma_max)
            if gamma <= 0.0 or not math.isfinite(gamma):
                st.step_kind, st.gamma = KIND_NONE, 0.0
                return KIND_NONE
            st.step_kind, st.index, st.gamma, st.gamma_max = KIND_AWAY, j, gamma, gamma_max
            return KIND_AWAY
    i = st.vertex
    curv = di - 2.0 * vi + ava
    if _negative(curv, di, vi, ava, st.negative_tol):
        st.step_kind, st.index, st.curvature = KIND_NEGATIVE, i, curv
        return KIND_NEGATIVE
    gamma = quadratic_step(st.gap, 2.0 * curv, 1.0)
    if gamma <= 0.0:
        st.step_kind, st.gamma = KIND_NONE, 0.0
        return KIND_NONE
    st.step_kind, st.index, st.gamma = KIND_FW, i, gamma
    return KIND_FW


@njit(cache=True)
def move(state, vi, di, qi):
    """:func:`_move` for the state array ``state`` (the sharded iterate's driver)."""
    return _move(state[0], vi, di, qi)


@njit(cache=True, inline="always")
def _move(st, vi, di, qi):
    """The scalars of the planned step along point ``index`` (``v_i``, ``Q_ii``, ``q_i``):
    ``αᵀQα``, ``qᵀα``, ``s`` and the step counts.  Returns the change of ``β_i``
    (``α = s·β``); a full FW step (``γ = 1``, then ``α = e_i``, ``s = 1``) returns 0."""
    gamma, ava = st.gamma, st.ava
    t = gamma if st.step_kind == KIND_FW else -gamma  # α ← (1 − t)α + t e_i
    st.ava = (1 - t) ** 2 * ava + 2 * t * (1 - t) * vi + t**2 * di
    if st.has_q:
        st.qa = (1 - t) * st.qa + t * qi
    if st.step_kind == KIND_FW:
        st.n_fw += 1
        if gamma >= 1.0:
            st.scale = 1.0
            return 0.0
    else:
        st.n_away += 1
        if gamma >= st.gamma_max:
            st.n_drop += 1
    st.scale *= 1.0 - t
    return t / st.scale


@njit(cache=True, inline="always")
def _add(items, where, st, i):
    if where[i] < 0:
        items[st.size] = i
        where[i] = st.size
        st.size += 1


@njit(cache=True, inline="always")
def _remove(items, where, st, i):
    pos = where[i]
    if pos >= 0:
        last = items[st.size - 1]
        items[pos] = last
        where[last] = pos
        where[i] = -1
        st.size -= 1


@njit(cache=True)
def apply(col, shift, vec, ind, con, state):
    """Take the planned step with its column ``Q_{:,index} = col + shift·e_index`` (``shift``:
    a diagonal term the column leaves out, else 0): the scalars (:func:`_move`), ``β``, the
    active set (drop steps included) and ``u`` (:func:`_update_and_vertex`, which also caches
    the next FW vertex and its gap)."""
    st = state[0]
    beta, u, items, where = vec[BETA], vec[U], ind[ITEMS], ind[WHERE]
    idx, gamma = st.index, st.gamma
    qi = con[Q, idx] if st.has_q else 0.0
    step = _move(st, st.scale * u[idx], con[DIAG, idx], qi)
    if st.step_kind == KIND_FW and gamma >= 1.0:  # α = e_idx
        for p in range(st.size):
            k = items[p]
            beta[k] = 0.0
            where[k] = -1
        st.size = 0
        beta[idx] = 1.0
        _add(items, where, st, idx)
        _update_and_vertex(u, col, shift, 0.0, 1.0, vec, con, st)
        return 1.0
    beta[idx] += step
    if st.step_kind == KIND_FW:
        _add(items, where, st, idx)
    elif gamma >= st.gamma_max:  # a drop step: α_idx = 0 exactly
        beta[idx] = 0.0
        _remove(items, where, st, idx)
    _update_and_vertex(u, col, shift, 1.0, step, vec, con, st)
    return gamma


#: points per block of the vertex search
_VERTEX_BLOCK = 512


@njit(cache=True)
def _argmin(x):
    """``np.argmin(x)`` (the first index of the minimum; finite ``x``), vectorized: a
    block is scanned only when a vectorized count finds an entry below the minimum so
    far (a plain min reduction does not vectorize in numba).  Blocks are slices: an
    index ``start + k`` keeps LLVM from vectorizing the loop."""
    n = x.shape[0]
    best, index = math.inf, 0
    for start in range(0, n, _VERTEX_BLOCK):
        block = x[start : min(start + _VERTEX_BLOCK, n)]
        below = 0
        for k in range(block.shape[0]):
            below += np.int64(block[k] < best)
        if below > 0:
            for k in range(block.shape[0]):
                if block[k] < best:
                    best, index = block[k], start + k
    return index


@njit(cache=True)
def _update_and_vertex(u, col, shift, keep, step, vec, con, st):
    """``u ← keep·u + step·(col + shift·e_j)`` (keep ∈ {0, 1}, ``j`` the step's ``index``:
    ``shift`` is a diagonal term the column leaves out), then :func:`cache_vertex`."""
    n = u.shape[0]
    if keep == 0.0:
        for k in range(n):  # (a slice assignment would compile its shape check)
            u[k] = col[k]
    else:
        for k in range(n):
            u[k] += step * col[k]
    if shift != 0.0:
        u[st.index] += step * shift
    _cache_vertex(vec, con, st)


@njit(cache=True)
def cache_vertex(vec, con, state):
    """:func:`_cache_vertex` for the state array ``state``."""
    _cache_vertex(vec, con, state[0])


@njit(cache=True, inline="always")
def _cache_vertex(vec, con, st):
    """The FW vertex ``i* = argmin`` of the scores ``s·u − q/2`` (of ``u`` when ``q`` is
    constant: ``fill_scores`` off), the first index of the minimum as ``np.argmin``
    (:func:`_argmin`), cached in ``vertex`` (``vertex_valid``) with its gap
    ``g_{i*} − αᵀg`` in ``gap``."""
    u, scores, hq = vec[U], vec[SCORES], con[HALF_Q]
    scale = st.scale
    if st.fill_scores:
        for k in range(u.shape[0]):
            scores[k] = u[k] * scale - hq[k]
    i = _argmin(scores if st.fill_scores else u)
    qi = con[Q, i] if st.has_q else 0.0
    st.vertex, st.vertex_valid = i, True
    st.gap = (qi - 2.0 * (scale * u[i])) - (st.qa - 2.0 * st.ava)


@njit(cache=True)
def step_cached(vec, ind, con, state, src, slab, slot_of, slots):
    """One whole iteration with the column evaluated here (the FW vertex cached): :func:`plan`,
    then the column from the
    least-recently-used cache ``slab`` (m × n; ``slot_of[j]`` its row or −1, ``slots[0]``
    the column in each row, ``slots[1]`` its last use) or computed by
    :func:`~kernfw.operators._columns_numba.evaluate_column` into the least
    recently used row, then :func:`apply` reading that row in place (the L2-SVM's diagonal
    term ``1/C`` as its ``shift``).  The state's
    ``clock``, ``rows_used``, ``hits`` and ``misses`` count the cache's use; ``vec[SCRATCH]``
    is scratch.  Returns the step size (0 when no step is taken, see ``step_kind``)."""
    st = state[0]
    planned = plan(vec, ind, con, state)
    if planned == KIND_NONE or planned == KIND_NEGATIVE:
        return 0.0
    j = st.index
    s = cached_column(src, con[SQ_NORMS], con[LABELS], st, j, slab, slot_of, slots, vec[SCRATCH])
    return apply(slab[s], st.inv_c if st.l2svm else 0.0, vec, ind, con, state)


@njit(cache=True)
def run_cached(steps, vec, ind, con, state, src, slab, slot_of, slots):
    """Up to ``steps`` iterations of :func:`step_cached` (the FW vertex must be cached,
    ``vertex_valid``; every step caches the next one); stops early after a step without
    progress (``step_kind``: none, or negative curvature) and after a step whose cached gap
    meets the stopping rule's O(1) estimate (:func:`stop_estimate_met`): the caller
    then certifies.  Returns the number of iterations taken."""
    st = state[0]
    for t in range(steps):
        step_cached(vec, ind, con, state, src, slab, slot_of, slots)
        if st.step_kind == KIND_NONE or st.step_kind == KIND_NEGATIVE or stop_estimate_met(st):
            return t + 1
    return steps


@njit(cache=True)
def estimate_met(state):
    """:func:`stop_estimate_met` for the state array ``state``."""
    return stop_estimate_met(state[0])


@njit(cache=True)
def stop_estimate_met(st):
    """``max(gap, 0) ≤ a·f + b`` at the cached vertex, ``f = qᵀα − αᵀQα`` (its absolute
    value when ``estimate_absolute``), for the state record ``st``:
    :meth:`kernfw.fw.stopping.StoppingRule.estimate`."""
    value = st.qa - st.ava
    if st.estimate_absolute:
        value = abs(value)
    return max(st.gap, 0.0) <= st.estimate_a * value + st.estimate_b
