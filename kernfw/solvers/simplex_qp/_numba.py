"""Compiled (numba) steps of the simplex-QP FW / MFW iterate (math.md §2.3).

The backend of :class:`kernfw.solvers.simplex_qp.compiled.CompiledSimplexQPIterate` when
:func:`kernfw._compiled.compiled_module` returns this module.  An iteration is:

- :func:`plan` — given the cached FW vertex ``i* = argmax_i g_i`` and its gap,
  the away vertex ``j* = argmin_{α_j>0} g_j``, the MFW choice, the exact line
  search (with the away bound ``γ_max``: the step rules of :mod:`kernfw.fw.steps`,
  compiled as they are), a negative-curvature check, and the index whose column
  the step needs;
- the column: from the kernel operator (``Q.columns``, with its LRU cache; the
  operator protocol stays the only way to kernel values), or, when the operator
  has a column view, from a compiled LRU cache or evaluated in place
  (:func:`kernfw.solvers.simplex_qp._columns_numba.evaluate_column`);
- :func:`apply` — the update ``α = s·β``, ``v = Qα = s·u`` from that one
  column, the O(1) updates of ``qᵀα`` and ``αᵀQα``, the active set (drop
  steps included), the vertex scores ``s·u − q/2`` and the next FW vertex and
  its gap (a blockwise vectorized minimum), so the certificate stays O(1).

With a column view, :func:`run_cached` takes a whole run of iterations in one
call (:func:`step_cached` each), ending early where the stopping rule's O(1)
estimate holds (:func:`stop_estimate_met`); without one, the caller alternates
:func:`plan`, ``Q.columns`` and :func:`apply`.

Every formula is the numpy path's, in the same order, so the iterates agree to
rounding (BLAS ``daxpy`` may fuse a multiply-add; the compiled RBF column sums its
inner products in its own order and uses its own ``exp``, within about 1 ulp).

State shared with the caller
----------------------------
``vec`` (float64[4, n])
    Rows ``BETA`` (β), ``U`` (u), ``SCORES`` (``s·u − q/2``) and ``SCRATCH``.
``ind`` (intp[2, n])
    Rows ``ITEMS`` and ``WHERE`` of the active set.
``con`` (float64[5, n])
    Rows ``DIAG`` (``diag(Q)``), ``Q`` (``q``), ``HALF_Q`` (``q/2``; zeros when
    ``q = 0``), and for a column view ``SQ_NORMS`` (``‖x_k‖²``) and ``LABELS``
    (``y``, L2-SVM).
``state`` (one record of dtype :data:`STATE`)
    The scalars: ``state[0].scale`` is ``s``, ``state[0].gap`` the FW gap of the
    cached vertex, and so on (the fields are listed in :data:`STATE`).

The row names and the record's fields are defined here only; the Python side
(:mod:`kernfw.solvers.simplex_qp.compiled`) reads them from this module.  Few
arguments keep numba's dispatch cheap.
"""

import math

import numpy as np
from numba import njit

from ...fw._steps_numba import away_step_max, quadratic_step
from ._columns_numba import (
    SOURCE_GRAM,
    SOURCE_RBF,
    SOURCE_RBF32,
    cached_column,
    evaluate_column,
    is_symmetric,
)

__all__ = [
    "plan",
    "apply",
    "step_cached",
    "run_cached",
    "stop_estimate_met",
    "evaluate_column",
    "is_symmetric",
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

#: planned step kinds (``state[0].kind``)
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
        ("kind", np.int64),  # KIND_*
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
    be cached: see the module docstring); returns its kind (also in ``kind``)."""
    st = state[0]
    beta, u, items = vec[BETA], vec[U], ind[ITEMS]
    diag, q, hq = con[DIAG], con[Q], con[HALF_Q]
    has_q, neg_tol = st.has_q, st.negative_tol
    scale, ava = st.scale, st.ava
    i = st.vertex
    fw_slope = st.gap
    if st.away and st.size > 1:
        j = items[0]
        best = _score(u, scale, hq, has_q, j)
        for p in range(1, st.size):
            k = items[p]
            s = _score(u, scale, hq, has_q, k)
            if s > best:
                best = s
                j = k
        qj = q[j] if has_q else 0.0
        vj = scale * u[j]
        away_slope = (st.qa - 2.0 * ava) - (qj - 2.0 * vj)
        if away_slope > fw_slope:
            gamma_max = away_step_max(scale * beta[j])
            curv = diag[j] - 2.0 * vj + ava
            if _negative(curv, diag[j], vj, ava, neg_tol):
                st.kind, st.index, st.curvature = KIND_NEGATIVE, j, curv
                return KIND_NEGATIVE
            gamma = quadratic_step(away_slope, 2.0 * curv, gamma_max)
            if gamma <= 0.0 or not math.isfinite(gamma):
                st.kind, st.gamma = KIND_NONE, 0.0
                return KIND_NONE
            st.kind, st.index, st.gamma, st.gamma_max = KIND_AWAY, j, gamma, gamma_max
            return KIND_AWAY
    vi = scale * u[i]
    curv = diag[i] - 2.0 * vi + ava
    if _negative(curv, diag[i], vi, ava, neg_tol):
        st.kind, st.index, st.curvature = KIND_NEGATIVE, i, curv
        return KIND_NEGATIVE
    gamma = quadratic_step(fw_slope, 2.0 * curv, 1.0)
    if gamma <= 0.0:
        st.kind, st.gamma = KIND_NONE, 0.0
        return KIND_NONE
    st.kind, st.index, st.gamma = KIND_FW, i, gamma
    return KIND_FW


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
    a diagonal term the column leaves out, else 0), then refresh the scores
    (unless ``fill_scores`` is off: a constant ``q``, then ``argmin u`` is the vertex) and
    cache the next FW vertex and its gap (:func:`_update_and_vertex`)."""
    st = state[0]
    beta, u, scores, items, where = vec[BETA], vec[U], vec[SCORES], ind[ITEMS], ind[WHERE]
    diag, q = con[DIAG], con[Q]
    kind, idx, gamma = st.kind, st.index, st.gamma
    scale, qa, ava = st.scale, st.qa, st.ava
    vi = scale * u[idx]
    if kind == KIND_FW:
        st.ava = (1 - gamma) ** 2 * ava + 2 * gamma * (1 - gamma) * vi + gamma**2 * diag[idx]
        if st.has_q:
            st.qa = (1 - gamma) * qa + gamma * q[idx]
        st.n_fw += 1
        if gamma >= 1.0:
            for p in range(st.size):
                k = items[p]
                beta[k] = 0.0
                where[k] = -1
            st.size = 0
            beta[idx] = 1.0
            _add(items, where, st, idx)
            st.scale = 1.0
            _update_and_vertex(u, col, shift, 0.0, 1.0, scores, con, st)
            return 1.0
        scale *= 1.0 - gamma
        step = gamma / scale
        beta[idx] += step
        _add(items, where, st, idx)
    else:
        st.ava = (1 + gamma) ** 2 * ava - 2 * gamma * (1 + gamma) * vi + gamma**2 * diag[idx]
        if st.has_q:
            st.qa = (1 + gamma) * qa - gamma * q[idx]
        scale *= 1.0 + gamma
        step = -(gamma / scale)
        beta[idx] += step
        st.n_away += 1
        if gamma >= st.gamma_max:
            beta[idx] = 0.0
            _remove(items, where, st, idx)
            st.n_drop += 1
    st.scale = scale
    _update_and_vertex(u, col, shift, 1.0, step, scores, con, st)
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
def _update_and_vertex(u, col, shift, keep, step, scores, con, st):
    """``u ← keep·u + step·(col + shift·e_j)`` (keep ∈ {0, 1}, ``j`` the step's ``index``:
    ``shift`` is a diagonal term the column leaves out), the scores ``s·u − q/2`` (when ``q`` is
    not constant: ``fill_scores``) and the next FW vertex ``i* = argmin`` of the scores (of
    ``u`` when ``q`` is constant): the first index of the minimum, as ``np.argmin``
    (:func:`_argmin`).  Caches ``i*`` in ``vertex`` (``vertex_valid``) and its gap
    ``g_{i*} − αᵀg`` in ``gap``, by the numpy path's formula."""
    scale, fill_scores = st.scale, st.fill_scores
    hq = con[HALF_Q]
    n = u.shape[0]
    if keep == 0.0:
        for k in range(n):  # (a slice assignment would compile its shape check)
            u[k] = col[k]
    else:
        for k in range(n):
            u[k] += step * col[k]
    if shift != 0.0:
        u[st.index] += step * shift
    if fill_scores:
        for k in range(n):
            scores[k] = u[k] * scale - hq[k]
    i = _argmin(scores if fill_scores else u)
    qi = con[Q, i] if st.has_q else 0.0
    st.vertex, st.vertex_valid = i, True
    st.gap = (qi - 2.0 * (scale * u[i])) - (st.qa - 2.0 * st.ava)


@njit(cache=True)
def step_cached(vertex, vec, ind, con, state, src, slab, slot_of, slots):
    """One whole iteration with the column evaluated here: the FW vertex ``vertex`` (the
    caller's ``argmin`` of the scores, or −1 when the state's ``vertex`` is cached) and its
    gap ``g_i − αᵀg`` (the numpy path's formula), :func:`plan`, then the column from the
    least-recently-used cache ``slab`` (m × n; ``slot_of[j]`` its row or −1, ``slots[0]``
    the column in each row, ``slots[1]`` its last use) or computed by
    :func:`~kernfw.solvers.simplex_qp._columns_numba.evaluate_column` into the least
    recently used row, then :func:`apply` reading that row in place (the L2-SVM's diagonal
    term ``1/C`` as its ``shift``).  The state's
    ``clock``, ``rows_used``, ``hits`` and ``misses`` count the cache's use; ``vec[SCRATCH]``
    is scratch.  Returns the step size (0 when no step is taken, see ``kind``)."""
    st = state[0]
    if vertex >= 0:
        qi = con[Q, vertex] if st.has_q else 0.0
        st.vertex, st.vertex_valid = vertex, True
        st.gap = (qi - 2.0 * (st.scale * vec[U, vertex])) - (st.qa - 2.0 * st.ava)
    kind = plan(vec, ind, con, state)
    if kind == KIND_NONE or kind == KIND_NEGATIVE:
        return 0.0
    j = st.index
    s = cached_column(src, con[SQ_NORMS], con[LABELS], st, j, slab, slot_of, slots, vec[SCRATCH])
    return apply(slab[s], st.inv_c if st.l2svm else 0.0, vec, ind, con, state)


@njit(cache=True)
def run_cached(steps, vec, ind, con, state, src, slab, slot_of, slots):
    """Up to ``steps`` iterations of :func:`step_cached` (the FW vertex must be cached,
    ``vertex_valid``; every step caches the next one); stops early after a step without
    progress (``kind``: none, or negative curvature) and after a step whose cached gap
    meets the stopping rule's O(1) estimate (:func:`stop_estimate_met`): the caller
    then certifies.  Returns the number of iterations taken."""
    st = state[0]
    for t in range(steps):
        step_cached(-1, vec, ind, con, state, src, slab, slot_of, slots)
        if st.kind == KIND_NONE or st.kind == KIND_NEGATIVE or stop_estimate_met(st):
            return t + 1
    return steps


@njit(cache=True)
def stop_estimate_met(st):
    """``max(gap, 0) ≤ a·f + b`` at the cached vertex, ``f = qᵀα − αᵀQα`` (its absolute
    value when ``estimate_absolute``), for the state record ``st``:
    :meth:`kernfw.fw.stopping.StoppingRule.estimate`."""
    value = st.qa - st.ava
    if st.estimate_absolute:
        value = abs(value)
    return max(st.gap, 0.0) <= st.estimate_a * value + st.estimate_b
