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
:class:`kernfw.solvers.mkl.inner_svm.L2SVM`), all in one call.

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
# two rows of ``K`` and touches two entries of ``α``.  The FW gap
# ``g = 2(αᵀv − v_{i*})`` decides the stop: ``g + ρ ≤ tol·αᵀQα`` (the rule of
# ``solve_l2svm``, relative to the dual value; ``ρ`` the rounding bound of math.md §2.5);
# when the maintained ``v`` meets it, ``v`` and ``αᵀv`` are recomputed from ``α`` and the
# rule is tested again, so the returned gap is that of the returned ``α``.

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
        v[i] = y[i] * (v[i] + bias) + alpha[i] * inv_c[i]
        ava += alpha[i] * v[i]
    return ava


@njit(cache=True)
def _fw_vertex(v):
    """The FW vertex ``i* = argmin_i v_i`` (the first of ties)."""
    i_fw, v_fw = 0, v[0]
    for k in range(v.shape[0]):
        if v[k] < v_fw:
            i_fw, v_fw = k, v[k]
    return i_fw


@njit(cache=True)
def _away_vertex(row_i, y, q_diag, alpha, v, i):
    """The away vertex ``j*`` of the pairwise step towards ``i``: among ``α_j > 0`` with
    ``v_j > v_i``, the one whose exact line search decreases ``αᵀQα`` most,
    ``γ_j(2δ_j − γ_j c_j)`` with ``δ_j = v_j − v_i``, ``c_j = Q_ii + Q_jj − 2Q_ij`` and
    ``γ_j = min(δ_j/c_j, α_j)`` (``α_j`` when ``c_j ≤ 0``): the second-order choice of
    math.md §2.3.  ``i`` itself when no entry qualifies (the FW gap is then ≤ 0).
    ``row_i`` is row ``i`` of ``K``; ``q_diag`` holds ``Q_jj``."""
    v_i, y_i, q_ii = v[i], y[i], q_diag[i]
    best, j_aw = 0.0, i
    for k in range(v.shape[0]):
        a = alpha[k]
        if a > 0.0:
            delta = v[k] - v_i
            if delta > 0.0:
                curv = q_ii + q_diag[k] - 2.0 * y_i * y[k] * (row_i[k] + 1.0)
                step = a if curv <= 0.0 else min(delta / curv, a)
                gain = step * (2.0 * delta - step * curv)
                if gain > best:
                    best, j_aw = gain, k
    return j_aw


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
    q_ii = K[i, i] + 1.0 + inv_c[i]
    q_jj = K[j, j] + 1.0 + inv_c[j]
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
    v[i] += gamma * inv_c[i]
    v[j] -= gamma * inv_c[j]
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
    q_diag = np.empty(n)
    for k in range(n):
        q_diag[k] = K[k, k] + 1.0 + inv_c[k]
    while True:
        i_fw = _fw_vertex(v)
        gap, met = _gap_met(v, ava, i_fw, n + it, tol)
        if met:
            ava = _fresh(K, y, inv_c, alpha, v)  # the certificate of the returned α
            i_fw = _fw_vertex(v)
            gap, met = _gap_met(v, ava, i_fw, n + it, tol)
            if met:
                status = STATUS_CONVERGED
                break
        if it >= max_iter:
            break
        j_aw = _away_vertex(K[i_fw], y, q_diag, alpha, v, i_fw)
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
    v = np.empty(K.shape[0])
    for p in range(r):
        gaps[p], quads[p], n_iter[p], status[p], index[p] = _solve_one(
            K, Y[p], inv_c, A[p], v, tol, max_iter
        )
    return gaps, quads, n_iter, status, index
