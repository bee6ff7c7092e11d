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

:func:`solve_problems` runs pairwise FW steps (math.md §2.3) on many L2-SVMs that share
one stored, exactly symmetric Gram (the inner solves of multiple kernel learning,
:class:`kernfw.solvers.mkl.inner_svm.L2SVM`), all in one call; :func:`solve_paths` runs
them along a path of ``C`` on problems whose points are runs of the Gram's indices (the
binary problems of a grid search's fold, math.md §7.1), also in one call.

State shared with the caller
----------------------------
``vec`` (float64[4, n])
    Rows ``BETA`` (β), ``U`` (u), ``SCORES`` (``s·u − q/2``) and ``SCRATCH``.
``ind`` (intp[2, n])
    Rows ``ITEMS`` and ``WHERE`` of the active set.
``con`` (float64[6, n])
    Rows ``DIAG`` (``diag(Q)``), ``Q`` (``q``), ``HALF_Q`` (``q/2``; zeros when
    ``q = 0``), and for a column source ``SQ_NORMS`` (``‖x_k‖²``), ``LABELS``
    (``y``, L2-SVM) and ``INV_C`` (the L2-SVM's diagonal term, ``1/(C w_k)`` with the
    per-example weights of math.md §2.14, ``1/C`` unweighted; that of the regression's
    points, math.md §2.15).
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
from ...fw.result import UNIT_ROUNDOFF
from ...operators._columns_numba import (
    COLUMN_FIELDS,
    SOURCE_GRAM,
    SOURCE_RBF,
    SOURCE_RBF32,
    cached_column,
    evaluate_column,
)
from .certificate import NEGATIVE_CURVATURE

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
    "solve_problems",
    "solve_paths",
    "STATUS_CONVERGED",
    "STATUS_MAX_ITER",
    "STATUS_NOT_PSD",
    "STATUS_STALLED",
]

#: rows of ``vec``
BETA, U, SCORES, SCRATCH = range(4)
#: rows of ``ind``: the active set's members (``ITEMS[:size]``) and positions (−1: absent)
ITEMS, WHERE = range(2)
#: rows of ``con``
DIAG, Q, HALF_Q, SQ_NORMS, LABELS, INV_C = range(6)

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
        # the column source, the L2-SVM transform (c_i = con[INV_C, i]) and the column cache
        *COLUMN_FIELDS,
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


@njit(cache=True, inline="always")
def _first_below(x, offset, best, index):
    """The running ``(min, first index)`` over a block ``x`` of points ``offset + t``: a
    vectorized count of the entries below ``best`` first, then a scan of the block only
    when there are some (a min reduction does not vectorize in numba)."""
    below = 0
    for t in range(x.shape[0]):
        below += np.int64(x[t] < best)
    if below > 0:
        for t in range(x.shape[0]):
            if x[t] < best:
                best, index = x[t], offset + t
    return best, index


@njit(cache=True)
def _argmin(x):
    """``np.argmin(x)`` (the first index of the minimum; finite ``x``), vectorized: a
    block is scanned only when a vectorized count finds an entry below the minimum so
    far (a plain min reduction does not vectorize in numba).  Blocks are slices: an
    index ``start + k`` keeps LLVM from vectorizing the loop."""
    n = x.shape[0]
    best, index = math.inf, 0
    for start in range(0, n, _VERTEX_BLOCK):
        best, index = _first_below(x[start : min(start + _VERTEX_BLOCK, n)], start, best, index)
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
    term ``1/(C w_j)``, ``con[INV_C, j]``, as its ``shift``).  The state's
    ``clock``, ``rows_used``, ``hits`` and ``misses`` count the cache's use; ``vec[SCRATCH]``
    is scratch.  Returns the step size (0 when no step is taken, see ``step_kind``)."""
    st = state[0]
    planned = plan(vec, ind, con, state)
    if planned == KIND_NONE or planned == KIND_NEGATIVE:
        return 0.0
    j = st.index
    s = cached_column(src, con[SQ_NORMS], con[LABELS], st, j, slab, slot_of, slots, vec[SCRATCH])
    return apply(slab[s], con[INV_C, j] if st.l2svm else 0.0, vec, ind, con, state)


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


# -- pairwise FW on a stored Gram: the L2-SVMs of an MKL inner solve ----------------------
#
# The binary problems of one weight vector of multiple kernel learning share the dense,
# exactly symmetric ``K_γ`` (the ``KernelStack`` buffer) and are solved in one call,
# with no Python per iteration.  Each problem is the simplex QP of math.md §2.1,
# ``max_{α∈Δ_n} −αᵀQα`` with ``Q_ij = y_i y_j (K_ij + 1) + δ_ij/(C w_i)`` (the
# per-example weights of math.md §2.14; ``inv_c`` holds ``1/(C w_i)``), solved by pairwise
# Frank-Wolfe steps (math.md §2.3, "Pairwise steps"): mass moves from the away vertex
# ``j*`` to the FW vertex ``i* = argmin_i v_i`` of ``v = Qα`` along ``e_{i*} − e_{j*}``, by
# the exact line search clipped to ``[0, α_{j*}]``; ``j*`` is the active entry whose step
# lowers ``αᵀQα`` most (the second-order choice, :func:`_away_vertex`).  A step reads
# two rows of ``K`` and touches two entries of ``α``, in two vectorized passes over the
# problem's points by blocks of :data:`_BLOCK`: the away vertex's (row ``i*``), and the
# update of ``v`` (rows ``i*`` and ``j*``), which also finds the next FW vertex while
# each block of ``v`` is in cache (:func:`_move_v`).  The FW gap
# ``g = 2(αᵀv − v_{i*})`` decides the stop: ``g + ρ ≤ tol·αᵀQα`` (the rule of
# ``solve_l2svm``, relative to the dual value; ``ρ`` the rounding bound of math.md §2.5);
# when the maintained ``v`` meets it, ``v`` and ``αᵀv`` are recomputed from ``α`` and the
# rule is tested again, so the returned gap is that of the returned ``α``.

#: how a problem ended (``status`` of :func:`solve_problems`): the rule met, the
#: iteration budget spent, negative curvature met (``Q`` not PSD), or no step possible
#: (a zero step at a positive gap: rounding)
STATUS_CONVERGED, STATUS_MAX_ITER, STATUS_NOT_PSD, STATUS_STALLED = 0, 1, 2, 3
#: iterations between exact recomputations of ``v`` and ``αᵀv`` (from the rows of the
#: points moved since the last: :func:`_exact_again`)
_REFRESH = 1000


@njit(cache=True)
def _fresh(K, glob, seg, y, inv_c, alpha, v):
    """``v = Qα`` from ``α`` (the rows of ``K`` on the support of ``α``); returns ``αᵀv``.

    The problem's points are the runs ``seg[s, 0]:seg[s, 1]`` of ``K``'s indices, one
    after the other (point ``k`` is ``K``'s index ``glob[k]``): each row is read along
    the runs, contiguously (:func:`_add_rows`)."""
    n = y.shape[0]
    rows, weights = np.empty(n, dtype=np.int64), np.empty(n)
    count, bias = 0, 0.0
    for j in range(n):
        a = alpha[j]
        if a != 0.0:
            w = a * y[j]
            bias += w
            rows[count], weights[count] = glob[j], w
            count += 1
    for i in range(n):
        v[i] = 0.0
    _add_rows(v, K, rows[:count], weights[:count], seg)
    ava = 0.0
    for i in range(n):
        v[i] = y[i] * (v[i] + bias) + alpha[i] * inv_c[i]
        ava += alpha[i] * v[i]
    return ava


@njit(cache=True)
def _add_rows(v, K, rows, weights, seg):
    """``v += Σ_r w_r K_{rows[r],:}`` read along the runs ``seg`` of the problem's points,
    term after term in the order of ``r`` (each entry rounded after each term: the numbers
    of adding one row after another), four rows per pass over ``v`` (:func:`_add_four`:
    fewer passes, four rows streamed from memory at once)."""
    count, r = rows.shape[0], 0
    while r + 4 <= count:
        four = K[rows[r]], K[rows[r + 1]], K[rows[r + 2]], K[rows[r + 3]]
        _add_four(v, four, weights[r : r + 4], seg)
        r += 4
    while r < count:
        _add_row(v, weights[r], K[rows[r]], seg)
        r += 1


@njit(cache=True, inline="always")
def _add_four(v, four, w, seg):
    """``v += w_0 row_0 + … + w_3 row_3`` (``four`` rows), term after term."""
    (r0, r1, r2, r3), w0, w1, w2, w3 = four, w[0], w[1], w[2], w[3]
    at = 0
    for s in range(seg.shape[0]):
        lo, hi = seg[s, 0], seg[s, 1]
        out, p0, p1, p2, p3 = v[at : at + hi - lo], r0[lo:hi], r1[lo:hi], r2[lo:hi], r3[lo:hi]
        for t in range(hi - lo):
            out[t] = (((out[t] + w0 * p0[t]) + w1 * p1[t]) + w2 * p2[t]) + w3 * p3[t]
        at += hi - lo


@njit(cache=True, inline="always")
def _add_row(v, w, row, seg):
    """``v += w · row`` read along the runs ``seg`` of the problem's points."""
    at = 0
    for s in range(seg.shape[0]):
        lo, hi = seg[s, 0], seg[s, 1]
        out, part = v[at : at + hi - lo], row[lo:hi]  # slices: the loop vectorizes
        for t in range(hi - lo):
            out[t] += w * part[t]
        at += hi - lo


#: points per block of the pairwise solver's passes (a block of each array stays in L1)
_BLOCK = 256


@njit(cache=True)
def _fw_vertex(v):
    """The FW vertex ``i* = argmin_i v_i`` (the first of ties, as ``np.argmin``):
    :func:`_argmin`."""
    return _argmin(v)


@njit(cache=True, inline="always")
def _gain(a, delta, curv):
    """The decrease of ``αᵀQα`` by the clipped exact pairwise step ``γ(2δ − γc)``,
    ``γ = min(δ/c, α_j)`` (``α_j`` when ``c ≤ 0``), of an active ``α_j > 0`` with
    ``δ > 0``; 0 for the others.  Branch-free (both sides are evaluated and selected),
    so a loop over it vectorizes."""
    step = a if curv <= 0.0 else min(delta / curv, a)
    gain = step * (2.0 * delta - step * curv)
    return gain if (a > 0.0) & (delta > 0.0) else 0.0


@njit(cache=True, inline="always")
def _losses(row, y, q_diag, alpha, v, v_i, y_i, q_ii, out):
    """``out = −gain`` (:func:`_gain`) over a block of points (``row`` the block of
    ``K``'s row ``i``), vectorized."""
    for t in range(v.shape[0]):
        curv = q_ii + q_diag[t] - 2.0 * y_i * y[t] * (row[t] + 1.0)
        out[t] = -_gain(alpha[t], v[t] - v_i, curv)


@njit(cache=True)
def _away_vertex(row_i, seg, y, q_diag, alpha, v, i):
    """The away vertex ``j*`` of the pairwise step towards ``i``: among ``α_j > 0`` with
    ``v_j > v_i``, the one whose exact line search decreases ``αᵀQα`` most,
    ``γ_j(2δ_j − γ_j c_j)`` with ``δ_j = v_j − v_i``, ``c_j = Q_ii + Q_jj − 2Q_ij`` and
    ``γ_j = min(δ_j/c_j, α_j)`` (``α_j`` when ``c_j ≤ 0``): the second-order choice of
    math.md §2.3, the first of ties.  ``i`` itself when no entry qualifies (the FW gap is
    then ≤ 0).  ``row_i`` is row ``i`` of ``K``, read along the runs ``seg`` of the
    problem's points (:func:`_fresh`), by blocks: their gains, negated (:func:`_losses`),
    then the first below the lowest so far (:func:`_first_below`); ``q_diag`` holds
    ``Q_jj``."""
    v_i, y_i, q_ii = v[i], y[i], q_diag[i]
    lowest, j_aw = 0.0, i  # the lowest −gain so far (a gain must be > 0)
    losses = np.empty(_BLOCK)
    at = 0
    for s in range(seg.shape[0]):
        lo, hi = seg[s, 0], seg[s, 1]
        for start in range(lo, hi, _BLOCK):
            a, b = at + start - lo, at + min(start + _BLOCK, hi) - lo
            block = losses[: b - a]
            r_i = row_i[start : start + b - a]
            _losses(r_i, y[a:b], q_diag[a:b], alpha[a:b], v[a:b], v_i, y_i, q_ii, block)
            lowest, j_aw = _first_below(block, a, lowest, j_aw)
        at += hi - lo
    return j_aw


@njit(cache=True)
def _gap_met(v, ava, i_fw, n_terms, tol):
    """``(g, met)``: the FW gap ``2(αᵀv − v_{i*})`` and whether ``g + ρ ≤ tol·αᵀv``."""
    gap = 2.0 * (ava - v[i_fw])
    rounding = (n_terms + 4) * UNIT_ROUNDOFF * (2.0 * abs(v[i_fw]) + 2.0 * abs(ava))
    return gap, max(gap, 0.0) + rounding <= tol * abs(ava)


@njit(cache=True)
def _pairwise_step(K, glob, seg, y, inv_c, alpha, v, ava, i, j):
    """The pairwise step from the away vertex ``j`` to the FW vertex ``i``, in place, and
    the next FW vertex.

    Direction ``d = e_i − e_j``: slope ``dᵀ∇f = 2(v_j − v_i)``, curvature
    ``dᵀQd = Q_ii + Q_jj − 2Q_ij``, step ``γ = clip((v_j − v_i)/dᵀQd, 0, α_j)``
    (:func:`~kernfw.fw.steps.quadratic_step`); then ``α_i += γ``, ``α_j −= γ`` (0 exactly
    when ``γ = α_j``), ``v += γ(Q_{:,i} − Q_{:,j})`` (:func:`_move_v`, which finds
    ``argmin v`` as it writes ``v``) and ``αᵀQα += 2γ(v_i − v_j) + γ² dᵀQd``.

    Returns
    -------
    gamma : float
        The step (0: none was possible).
    ava : float
        ``αᵀQα`` after it.
    not_psd : bool
        ``dᵀQd`` is negative beyond rounding: ``Q`` is not PSD (no step is taken).
    vertex : int
        The FW vertex ``argmin_k v_k`` after the step (the first of ties; ``i`` when no
        step is taken).
    """
    gi, gj = glob[i], glob[j]
    q_ii = K[gi, gi] + 1.0 + inv_c[i]
    q_jj = K[gj, gj] + 1.0 + inv_c[j]
    q_ij = y[i] * y[j] * (K[gi, gj] + 1.0)
    curv = q_ii + q_jj - 2.0 * q_ij
    scale = max(abs(q_ii), abs(q_jj), 2.0 * abs(q_ij), 1e-300)
    if curv < -NEGATIVE_CURVATURE * scale:
        return 0.0, ava, True, i
    vi, vj = v[i], v[j]
    gamma = quadratic_step(2.0 * (vj - vi), 2.0 * curv, alpha[j])
    if not gamma > 0.0 or not math.isfinite(gamma):
        return 0.0, ava, False, i
    ava = ava + 2.0 * gamma * (vi - vj) + gamma * gamma * curv
    vertex = _move_v(K[gi], K[gj], seg, y, v, gamma, i, j, gamma * inv_c[i], gamma * inv_c[j])
    alpha[i] += gamma
    alpha[j] = 0.0 if gamma >= alpha[j] else alpha[j] - gamma
    return gamma, ava, False, vertex


@njit(cache=True, inline="always")
def _move_v(row_i, row_j, seg, y, v, gamma, i, j, diag_i, diag_j):
    """``v += γ(Q_{:,i} − Q_{:,j})``: ``γ y ⊙ (y_i(K_{i,:} + 1) − y_j(K_{j,:} + 1))`` read
    along the runs ``seg`` of the problem's points, then ``v_i += diag_i``,
    ``v_j −= diag_j`` (``γ/(C w)``); by blocks, each searched for the minimum while in
    cache (:func:`_first_below`).  Returns ``argmin_k v_k``, the first of ties."""
    yi, yj = y[i], y[j]
    best, vertex = math.inf, 0
    at = 0
    for s in range(seg.shape[0]):
        lo, hi = seg[s, 0], seg[s, 1]
        for start in range(lo, hi, _BLOCK):
            a, b = at + start - lo, at + min(start + _BLOCK, hi) - lo
            block, y_b = v[a:b], y[a:b]
            r_i, r_j = row_i[start : start + b - a], row_j[start : start + b - a]
            for t in range(block.shape[0]):
                block[t] += gamma * y_b[t] * (yi * (r_i[t] + 1.0) - yj * (r_j[t] + 1.0))
            if a <= i < b:
                block[i - a] += diag_i
            if a <= j < b:
                block[j - a] -= diag_j
            best, vertex = _first_below(block, a, best, vertex)
        at += hi - lo
    return vertex


@njit(cache=True)
def _anchor(alpha, v, work, moved):
    """Keep ``α`` and its exact ``v = Qα`` (rows ``0`` and ``1`` of ``work``) as the anchor
    of :func:`_exact_again`; no point has moved since (``moved[0]``: their count)."""
    n = alpha.shape[0]
    for k in range(n):
        work[0, k] = alpha[k]
        work[1, k] = v[k]
    for t in range(moved[0]):
        moved[2 + moved[1] + moved[2 + t]] = 0
    moved[0] = 0


@njit(cache=True)
def _exact_again(K, glob, seg, y, inv_c, alpha, v, work, moved):
    """``v = Qα`` recomputed exactly after steps, from the anchor ``(α₀, Qα₀)`` of
    :func:`_anchor`: ``Qα = Qα₀ + Q(α − α₀)``, whose rows are those of the points moved
    since (``moved``), usually far fewer than the support (:func:`_fresh` when not).
    Returns ``αᵀv`` and re-anchors."""
    n = y.shape[0]
    count = moved[0]
    if 2 * count > n:
        ava = _fresh(K, glob, seg, y, inv_c, alpha, v)
        _anchor(alpha, v, work, moved)
        return ava
    u = work[2]
    for k in range(n):
        u[k] = 0.0
    rows, weights = np.empty(count, dtype=np.int64), np.empty(count)
    changed, bias = 0, 0.0
    for t in range(count):
        j = moved[2 + t]
        d = alpha[j] - work[0, j]
        if d != 0.0:
            w = d * y[j]
            bias += w
            rows[changed], weights[changed] = glob[j], w
            changed += 1
    _add_rows(u, K, rows[:changed], weights[:changed], seg)
    ava = 0.0
    for k in range(n):
        v[k] = work[1, k] + y[k] * (u[k] + bias) + (alpha[k] - work[0, k]) * inv_c[k]
        ava += alpha[k] * v[k]
    _anchor(alpha, v, work, moved)
    return ava


@njit(cache=True, inline="always")
def _mark(moved, k):
    """Record that point ``k`` moved (once)."""
    flags = 2 + moved[1]
    if moved[flags + k] == 0:
        moved[flags + k] = 1
        moved[2 + moved[0]] = k
        moved[0] += 1


@njit(cache=True)
def _solve_one(K, glob, seg, y, inv_c, alpha, v, tol, max_iter, given, work, moved):
    """Pairwise FW on one problem (the points ``glob``, read along the runs ``seg`` of
    ``K``'s indices: :func:`_fresh`) from ``α`` (on the simplex, updated in place) with
    ``v = Qα``; returns ``(gap, αᵀQα, iterations, status, index)``.

    ``given``: ``v`` already holds ``Qα`` as :func:`_fresh` computes it (up to one
    rounding per entry), e.g. the exact ``v`` of the previous ``C`` with its diagonal
    term updated; else it is computed here.  Before a certificate, ``v`` is recomputed
    exactly from ``α`` when steps have been taken since it was (:func:`_exact_again`,
    from the rows of the points moved since), so a start that meets the rule costs
    O(n), and a converged problem returns an exact ``v``.  ``work`` (float64 (4, ≥ n))
    and ``moved`` (int64, ≥ 2n + 2, zero) are scratch memory."""
    n = y.shape[0]
    moved[1] = n
    if given:
        ava = 0.0
        for k in range(n):
            ava += alpha[k] * v[k]
    else:
        ava = _fresh(K, glob, seg, y, inv_c, alpha, v)
    _anchor(alpha, v, work, moved)
    exact = True  # v is Qα from α (not maintained through steps)
    it = 0
    status, index = STATUS_MAX_ITER, -1
    gap = math.inf
    q_diag = work[3]
    for k in range(n):
        q_diag[k] = K[glob[k], glob[k]] + 1.0 + inv_c[k]
    i_fw = _fw_vertex(v)  # then found by each step as it updates v
    while True:
        gap, met = _gap_met(v, ava, i_fw, n + it, tol)
        if met and not exact:
            ava = _exact_again(K, glob, seg, y, inv_c, alpha, v, work, moved)
            exact = True
            i_fw = _fw_vertex(v)
            gap, met = _gap_met(v, ava, i_fw, n + it, tol)
        if met:
            status = STATUS_CONVERGED
            break
        if it >= max_iter:
            break
        j_aw = _away_vertex(K[glob[i_fw]], seg, y, q_diag, alpha, v, i_fw)
        if j_aw == i_fw:  # no pair to move mass between: rounding
            status = STATUS_STALLED
            break
        gamma, ava, not_psd, i_next = _pairwise_step(
            K, glob, seg, y, inv_c, alpha, v, ava, i_fw, j_aw
        )
        if not_psd:
            status, index = STATUS_NOT_PSD, i_fw
            break
        if gamma == 0.0:
            status = STATUS_STALLED
            break
        _mark(moved, i_fw)
        _mark(moved, j_aw)
        i_fw = i_next
        it += 1
        exact = False
        if it % _REFRESH == 0:
            ava = _exact_again(K, glob, seg, y, inv_c, alpha, v, work, moved)
            exact = True
            i_fw = _fw_vertex(v)
    _anchor(alpha, v, work, moved)  # leaves moved's flags zero
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
    inv_c : float64 array (n,)
        ``1/(C w_i)``: the diagonal term of each example (``1/C`` unweighted).
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
    n = K.shape[0]
    v = np.empty(n)
    glob = np.arange(n)
    seg = np.array([[0, n]], dtype=np.int64)
    work, moved = np.empty((4, n)), np.zeros(2 * n + 2, dtype=np.int64)
    for p in range(r):
        gaps[p], quads[p], n_iter[p], status[p], index[p] = _solve_one(
            K, glob, seg, Y[p], inv_c, A[p], v, tol, max_iter, False, work, moved
        )
    return gaps, quads, n_iter, status, index


@njit(cache=True)
def _path_start(K, glob, seg, y, inv_c, alpha, v, start, v_start, use_start):
    """The start of a path's first fit, in ``α`` with its ``v = Qα`` (returns ``αᵀQα``):
    the uniform ``α = 1/m`` (§2.6), or ``start`` (on the simplex) when ``use_start`` and
    its ``αᵀQα`` is lower (e.g. the solution at the same ``C`` on a neighbouring kernel of
    the RBF family, math.md §7.2); ``v_start`` is scratch memory."""
    m = alpha.shape[0]
    for k in range(m):
        alpha[k] = 1.0 / m
    ava = _fresh(K, glob, seg, y, inv_c, alpha, v)
    if use_start:
        ava_start = _fresh(K, glob, seg, y, inv_c, start, v_start)
        if ava_start < ava:
            alpha[:] = start
            v[:] = v_start
            ava = ava_start
    return ava


@njit(cache=True, nogil=True)
def solve_paths(K, glob, Y, seg, ends, seg_ends, Cs, tol, budget, starts, has_start):
    """Solve every binary problem ``p`` along the increasing ``Cs``, each fit started from
    the problem's solution at the previous ``C`` (math.md §7.1), the first from the
    uniform ``α = 1/m`` (§2.6) or a given start (:func:`_path_start`); all in one call,
    without the GIL.

    Parameters
    ----------
    K : float64 array (N, N)
        The kernel, symmetric bit for bit.
    glob : int64 array (M,)
        The problems' points one after the other, as indices of ``K``: problem ``p``'s
        are ``glob[ends[p]:ends[p + 1]]``.
    Y : float64 array (M,)
        Their labels ``±1``.
    seg : int64 array (S, 2)
        The runs ``[lo, hi)`` of consecutive indices that make up each problem's points
        (problem ``p``'s are ``seg[seg_ends[p]:seg_ends[p + 1]]``, in order): the rows of
        ``K`` are read along them.
    ends, seg_ends : int64 arrays (P + 1,)
        The problems' bounds in ``glob`` and in ``seg``.
    Cs : float64 array (c,)
        The penalties, increasing.
    tol : float
        Relative tolerance of the stopping rule.
    budget : int64 array (P,)
        Iterations allowed per fit of each problem.
    starts : float64 array (M,)
        Problem ``p``'s candidate start ``starts[ends[p]:ends[p + 1]]`` (on the simplex),
        taken instead of the uniform point when ``has_start[p]`` and its ``αᵀQα`` at the
        first ``C`` is lower (:func:`_path_start`).
    has_start : bool array (P,)

    Returns
    -------
    A : float64 array (c, M)
        The solutions: ``A[k, ends[p]:ends[p + 1]]`` is problem ``p``'s ``α`` at ``Cs[k]``.
    gaps, quads : float64 arrays (c, P)
        Each fit's FW gap and ``αᵀQα``.
    n_iter, status, index : int64 arrays (c, P)
        As :func:`solve_problems`, per fit.
    """
    n_c, r = Cs.shape[0], ends.shape[0] - 1
    A = np.zeros((n_c, glob.shape[0]))
    gaps, quads = np.empty((n_c, r)), np.empty((n_c, r))
    n_iter = np.zeros((n_c, r), dtype=np.int64)
    status = np.zeros((n_c, r), dtype=np.int64)
    index = np.full((n_c, r), -1, dtype=np.int64)
    width = 1
    for p in range(r):
        width = max(width, ends[p + 1] - ends[p])
    v, inv_c, v_start = np.empty(width), np.empty(width), np.empty(width)
    work, moved = np.empty((4, width)), np.zeros(2 * width + 2, dtype=np.int64)
    for p in range(r):
        lo, hi = ends[p], ends[p + 1]
        m = hi - lo
        alpha = np.empty(m)
        points, y, runs = glob[lo:hi], Y[lo:hi], seg[seg_ends[p] : seg_ends[p + 1]]
        inv_c[:m] = 1.0 / Cs[0]
        _path_start(K, points, runs, y, inv_c[:m], alpha, v[:m], starts[lo:hi], v_start[:m],
                    has_start[p])  # fmt: skip
        given = True  # v = Qα known (the start's, then the exact v of a converged fit)
        for c in range(n_c):
            if given and c > 0:  # only the diagonal term 1/C of Q changed (math.md §7.1)
                step = 1.0 / Cs[c] - 1.0 / Cs[c - 1]
                for k in range(m):
                    v[k] += alpha[k] * step
            inv_c[:m] = 1.0 / Cs[c]
            gaps[c, p], quads[c, p], n_iter[c, p], status[c, p], index[c, p] = _solve_one(
                K, points, runs, y, inv_c[:m], alpha, v[:m], tol, budget[p], given, work, moved
            )
            given = status[c, p] == STATUS_CONVERGED
            A[c, lo:hi] = alpha
    return A, gaps, quads, n_iter, status, index
