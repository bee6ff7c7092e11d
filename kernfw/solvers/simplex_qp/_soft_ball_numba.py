"""The compiled (numba) pairwise Frank-Wolfe steps of the ν-soft ball (math.md §2.9).

The dual is ``max f(α) = qᵀα − αᵀKα`` over the capped simplex
``Δ_u = {0 ≤ α ≤ u, 1ᵀα = 1}``, with the gradient ``g = q − 2v``, ``v = Kα``; the caps
are one number ``u = 1/(νn)``, or per example ``u_i = w_i/(νΣw)`` with weights
(``weighted``, math.md §2.14).  A step of
:class:`kernfw.solvers.simplex_qp.soft_ball.SoftBallIterate` is:

- :func:`select_pair` — ``i = argmax_{α_i<u} g_i`` and the away coordinate
  ``j = argmin_{α_j>0} g_j``, in one pass;
- the columns ``K_{:,i}`` and ``K_{:,j}`` (from the column source through the compiled LRU
  cache of :func:`column`, or fetched by the caller through ``Q.columns``);
- :func:`pair_step` — the exact line search along ``e_i − e_j`` (slope ``g_i − g_j``,
  curvature ``2a_ij``, capped at ``min(u − α_i, α_j)``) and ``v ← v + γ(K_{:,i} − K_{:,j})``.

:func:`run_cached` takes a run of such steps in one call when the columns come from the
column source; every ``check_every`` steps it computes the exact FW gap
(:func:`estimate_met`, O(n) by a partition) and ends the run where the stopping rule's
estimate ``gap ≤ a·|f| + b`` holds: the caller then certifies.

State shared with the caller
----------------------------
``vec`` (float64[3, n])
    Rows ``ALPHA`` (α), ``V`` (``v = Kα``) and ``SCRATCH``.
``con`` (float64[4, n])
    Rows ``Q`` (q), ``DIAG`` (``diag(K)``), ``SQ_NORMS`` (``‖x_k‖²`` of an RBF view) and
    ``CAP`` (the caps ``u_i``; read when ``weighted``).
``state`` (one record of dtype :data:`STATE`)
    The scalars (the cap ``u``, the budget ``t = νn``, the last pair and step, the
    estimate's coefficients, the column source and the cache's counters).
"""

import math

import numpy as np
from numba import njit

from ...fw._steps_numba import quadratic_step
from ...operators._columns_numba import (
    COLUMN_FIELDS,
    SOURCE_GRAM,
    SOURCE_RBF,
    SOURCE_RBF32,
    cached_column,
)

__all__ = [
    "STATE",
    "select_pair",
    "pair_step",
    "column",
    "run_cached",
    "estimate_met",
    "SOURCE_RBF",
    "SOURCE_GRAM",
    "SOURCE_RBF32",
]

#: rows of ``vec`` and of ``con``
ALPHA, V, SCRATCH = range(3)
Q, DIAG, SQ_NORMS, CAP = range(4)

#: a coordinate has room below the cap when ``α_i < u (1 − ROOM)``
ROOM = 1e-12

#: the scalar state of the compiled soft-ball iterate, one record
STATE = np.dtype(
    [
        ("cap", np.float64),  # u = 1/(νn) (unweighted)
        ("t", np.float64),  # νn, the LMO's budget (unweighted)
        ("weighted", np.bool_),  # per-example caps con[CAP] (math.md §2.14)
        ("i", np.int64),  # the last pair (−1: no pair with g_i > g_j)
        ("j", np.int64),
        ("gamma", np.float64),  # its step
        ("check_every", np.int64),  # steps between compiled estimates of the gap
        ("fill", np.bool_),  # the next run_cached computes v = Kα (the start)
        ("gap", np.float64),  # the last compiled FW gap and objective f(α)
        ("dual", np.float64),
        ("estimate_a", np.float64),  # the stopping rule's estimate gap ≤ a·|f| + b
        ("estimate_b", np.float64),
        ("estimate_absolute", np.bool_),
        # the column source and the compiled column cache, as _columns_numba reads them
        *COLUMN_FIELDS,
    ],
    align=True,
)


@njit(cache=True)
def select_pair(vec, con, state):
    """The pair of the next step, kept in ``i`` and ``j``: ``i = argmax_{α_i<u_i} g_i`` and
    ``j = argmin_{α_j>0} g_j`` with ``g = q − 2v`` (the first index of each extremum).
    Returns False (and ``i = j = −1``) when no pair has ``g_i > g_j``: ``α`` is optimal."""
    st = state[0]
    alpha, v, q, caps = vec[ALPHA], vec[V], con[Q], con[CAP]
    limit, weighted = st.cap * (1.0 - ROOM), st.weighted
    high, low, i, j = -math.inf, math.inf, -1, -1
    for k in range(alpha.shape[0]):
        g = q[k] - 2.0 * v[k]
        a = alpha[k]
        if weighted:
            limit = caps[k] * (1.0 - ROOM)
        if a < limit and g > high:
            high, i = g, k
        if a > 0.0 and g < low:
            low, j = g, k
    st.gamma = 0.0
    if i < 0 or j < 0 or not high > low:
        st.i, st.j = -1, -1
        return False
    st.i, st.j = i, j
    return True


@njit(cache=True)
def pair_step(col_i, col_j, vec, con, state):
    """The exact line search along ``e_i − e_j`` (the state's pair, with ``col_i = K_{:,i}``,
    ``col_j = K_{:,j}``): slope ``g_i − g_j``, curvature ``2(K_ii + K_jj − 2K_ij)``, capped
    at ``min(u_i − α_i, α_j)`` (``α_i = u_i`` or ``α_j = 0`` exactly at the cap), then
    ``v ← v + γ(K_{:,i} − K_{:,j})``.  Returns ``γ``."""
    st = state[0]
    alpha, v, q, diag = vec[ALPHA], vec[V], con[Q], con[DIAG]
    i, j = st.i, st.j
    slope = (q[i] - 2.0 * v[i]) - (q[j] - 2.0 * v[j])
    curvature = 2.0 * (diag[i] + diag[j] - 2.0 * col_j[i])  # K_ij = K[i, j]
    cap_i = con[CAP, i] if st.weighted else st.cap
    room, mass = cap_i - alpha[i], alpha[j]
    step_max = min(room, mass)
    gamma = quadratic_step(slope, curvature, step_max)
    if gamma >= step_max:
        gamma = step_max
        alpha[i] = cap_i if room <= mass else alpha[i] + gamma
        alpha[j] = 0.0 if mass <= room else alpha[j] - gamma
    else:
        alpha[i] += gamma
        alpha[j] -= gamma
    for k in range(v.shape[0]):
        v[k] += gamma * (col_i[k] - col_j[k])
    st.gamma = gamma
    return gamma


@njit(cache=True)
def column(j, src, con, state, slab, slot_of, slots, scratch):
    """The row of the LRU column cache ``slab`` that holds ``K_{:,j}``
    (:func:`~kernfw.operators._columns_numba.cached_column`)."""
    return cached_column(
        src, con[SQ_NORMS], con[SQ_NORMS], state[0], j, slab, slot_of, slots, scratch
    )


@njit(cache=True)
def _fill_v(vec, con, state, src, slab, slot_of, slots):
    """``v = Kα`` from the columns of the view (through the cache of :func:`column`)."""
    alpha, v = vec[ALPHA], vec[V]
    v[:] = 0.0
    for j in range(alpha.shape[0]):
        if alpha[j] != 0.0:
            col = slab[column(j, src, con, state, slab, slot_of, slots, vec[SCRATCH])]
            a = alpha[j]
            for k in range(v.shape[0]):
                v[k] += a * col[k]


@njit(cache=True)
def _top_sum(x, t):
    """``max_{0≤s≤1, 1ᵀs=t} sᵀx``: the ``⌊t⌋`` largest ``x_k`` plus ``t − ⌊t⌋`` times the next
    (:func:`kernfw.fw.capped_simplex.sum_top_t`), by a partition in O(n)."""
    n = x.shape[0]
    whole = math.floor(t + 1e-12)
    frac = t - whole
    if frac < 1e-12 or whole >= n:
        frac = 0.0
    whole = min(whole, n)
    if whole == 0:
        return frac * x.max()
    part = np.partition(x, n - whole)
    total = part[n - whole :].sum()
    if frac > 0.0:
        total += frac * part[: n - whole].max()
    return total


@njit(cache=True)
def _capped_top(x, caps):
    """``max_{0≤s≤u, 1ᵀs=1} sᵀx``: the largest ``x_k`` take their caps ``u_k`` until the mass
    1 is spent (by a sort, O(n log n))."""
    order = np.argsort(-x)
    total, mass = 0.0, 1.0
    for p in range(order.shape[0]):
        k = order[p]
        take = min(caps[k], mass)
        total += take * x[k]
        mass -= take
        if mass <= 0.0:
            break
    return total


@njit(cache=True)
def estimate_met(vec, con, state):
    """The exact FW gap ``G = max_{s∈Δ_u} sᵀg − αᵀg`` (``u·max_{0≤s≤1, 1ᵀs=νn} sᵀg``
    unweighted, by a partition; :func:`_capped_top` with per-example caps) and
    ``f(α) = qᵀα − αᵀv``
    (kept in ``gap`` and ``dual``), and whether the stopping rule's estimate
    ``G ≤ a·f + b`` (``a·|f| + b`` when ``estimate_absolute``) holds."""
    st = state[0]
    alpha, v, q, g = vec[ALPHA], vec[V], con[Q], vec[SCRATCH]
    qa, av = 0.0, 0.0
    for k in range(alpha.shape[0]):
        g[k] = q[k] - 2.0 * v[k]
        qa += q[k] * alpha[k]
        av += v[k] * alpha[k]
    st.dual = qa - av
    top = _capped_top(g, con[CAP]) if st.weighted else st.cap * _top_sum(g, st.t)
    st.gap = top - (qa - 2.0 * av)
    f = abs(st.dual) if st.estimate_absolute else st.dual
    return max(st.gap, 0.0) <= st.estimate_a * f + st.estimate_b


@njit(cache=True)
def run_cached(steps, vec, con, state, src, slab, slot_of, slots):
    """Up to ``steps`` pairwise steps with the columns from the view (:func:`column`); ends
    where :func:`select_pair` finds no pair or :func:`estimate_met` holds (tested every
    ``check_every`` steps).  Returns the steps taken (a step without a pair counts).

    With ``fill`` set it computes ``v = Kα`` instead, from the columns of the support of
    ``α`` (the start), clears ``fill`` and returns 0: one compiled entry point, one load of
    its cached machine code in a fresh process."""
    st = state[0]
    if st.fill:
        _fill_v(vec, con, state, src, slab, slot_of, slots)
        st.fill = False
        return 0
    scratch = vec[SCRATCH]
    for t in range(steps):
        if not select_pair(vec, con, state):
            return t + 1
        # a cache of at least two rows: K_{:,i}, just used, is not evicted for K_{:,j}
        s_i = column(st.i, src, con, state, slab, slot_of, slots, scratch)
        s_j = column(st.j, src, con, state, slab, slot_of, slots, scratch)
        pair_step(slab[s_i], slab[s_j], vec, con, state)
        if (t + 1) % st.check_every == 0 and estimate_met(vec, con, state):
            return t + 1
    return steps
