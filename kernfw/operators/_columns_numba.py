"""Compiled (numba) kernel columns ``Q_{:,j}`` from an operator's column source.

When the operator ``Q`` has a column source (:meth:`~kernfw.operators.KernelOperator.column_source`:
an RBF kernel evaluated on the fly, or a stored Gram, possibly inside the L2-SVM's
modified kernel), a compiled solver step (:func:`kernfw.solvers.simplex_qp._numba.step_cached`)
evaluates the column it needs itself, with :func:`evaluate_column`: fused distances,
``exp`` and L2-SVM transform, in float32 for float32 features; :func:`cached_column` keeps
the columns in a compiled least-recently-used cache.  The values are the
operator's up to rounding (the compiled RBF column sums its inner products in its
own order and uses its own ``exp``, within about 1 ulp), except that the L2-SVM's
diagonal term ``1/(C w_j)`` (a per-point term in general) is left to the step, which adds
it in float64.
"""

import numpy as np
from numba import njit, types
from numba.extending import overload

from ._exp_numba import exp_in_place
from .base import SOURCE_GRAM, SOURCE_RBF, SOURCE_RBF32

__all__ = [
    "evaluate_column",
    "cached_column",
    "cache_row",
    "cache_rows",
    "COUNTS",
    "SOURCE_RBF",
    "SOURCE_GRAM",
    "SOURCE_RBF32",
]


#: points per block of the RBF column (the block of inner products stays in L1)
_RBF_BLOCK = 1024


@njit(cache=True, fastmath={"contract"})
def _rbf_column(XT, sq, gamma, j, out, scratch):
    """``out_k = exp(−γ max(‖x_k‖² + ‖x_j‖² − 2 x_kᵀx_j, 0))`` for every k (math.md's RBF).

    ``XT`` holds the features transposed (d × n), so the inner products of a block
    of points accumulate over the d features in vectorized passes over the block.
    ``e^x`` by :func:`~kernfw.operators._exp_numba.exp_in_place` (about 1 ulp against
    ``numpy.exp``); ``scratch`` (float64, n) receives the powers ``2^m``.  The only fast-math flag is FMA contraction
    (rounding-level differences from a separate multiply and add)."""
    d, n = XT.shape
    xj = XT[:, j].copy()
    sqj = sq[j]
    bits = scratch.view(np.int64)
    for start in range(0, n, _RBF_BLOCK):
        stop = min(start + _RBF_BLOCK, n)
        o = out[start:stop]
        size = stop - start
        row = XT[0, start:stop]
        c = xj[0]
        for k in range(size):
            o[k] = row[k] * c
        for t in range(1, d):
            row = XT[t, start:stop]
            c = xj[t]
            for k in range(size):
                o[k] += row[k] * c
        s2 = sq[start:stop]
        for k in range(size):
            # the operator's order: −2 x_kᵀx_j + ‖x_j‖² + ‖x_k‖², clipped at 0, times −γ
            o[k] = max(o[k] * -2.0 + sqj + s2[k], 0.0) * -gamma
        exp_in_place(o, bits[start:stop])


#: points per block of the float32 RBF column (16 kB of values: still in L1, and fewer
#: passes over the block's feature rows than 1024 points; see docs/benchmarks/l2svm.md)
_RBF32_BLOCK = 4096


@njit(cache=True, fastmath={"contract"})
def _rbf_column_f32(XT, gamma, j, out, scratch):
    """The RBF column in float32 (features ``XT`` float32, d × n; ``out`` float32):
    ``out_k = exp(−γ Σ_t (x_tk − x_tj)²)``.

    The squared distance is summed from differences (no cancellation of
    ``‖x_k‖² + ‖x_j‖² − 2x_kᵀx_j``), so the only errors are float32 roundings:
    about 1e-7 relative on ``d²`` and on the value (``e^x`` by
    :func:`~kernfw.operators._exp_numba.exp_in_place`, float32 precision);
    ``scratch`` (any array of at least ``4n`` bytes) receives the powers ``2^m``.
    Half the memory traffic of the float64 column: the compiled step uses it when the
    operator keeps its kernel values in float32."""
    d, n = XT.shape
    xj = XT[:, j].copy()
    g = np.float32(-gamma)
    bits = scratch.view(np.int32)
    for start in range(0, n, _RBF32_BLOCK):
        stop = min(start + _RBF32_BLOCK, n)
        o = out[start:stop]
        size = stop - start
        row = XT[0, start:stop]
        c = xj[0]
        for k in range(size):
            t = row[k] - c
            o[k] = t * t
        for f in range(1, d):
            row = XT[f, start:stop]
            c = xj[f]
            for k in range(size):
                t = row[k] - c
                o[k] += t * t
        for k in range(size):
            o[k] *= g
        exp_in_place(o, bits[start:stop])


@njit(cache=True)
def _gram_column(K, j, out):
    """``out = K[:, j]`` (contiguous for an F-ordered ``K``, e.g. the view ``Kᵀ`` of an
    exactly symmetric C-ordered Gram)."""
    for k in range(K.shape[0]):
        out[k] = K[k, j]


@njit(cache=True)
def _l2svm_column(y, j, out):
    """``out ← y_j y ⊙ (out + 1)``: the modified kernel of math.md §2.1 without its
    diagonal term ``e_j / (C w_j)``, which the step adds to ``u_j`` in float64 (``out`` may
    be a float32 cache row, where ``K_jj + 1 + 1/C`` would round ``1/C`` away)."""
    yj = y[j]
    for k in range(out.shape[0]):
        out[k] = (out[k] + 1.0) * (yj * y[k])


def _rbf_column_of(XT, sq, gamma, j, out, scratch):
    """The RBF column at the precision of the features ``XT``: :func:`_rbf_column_f32`
    (``SOURCE_RBF32``) for float32 features, else :func:`_rbf_column` (``SOURCE_RBF``).
    Chosen when numba types the call, so a column source compiles only its own column."""
    if XT.dtype == np.float32:
        _rbf_column_f32(XT, gamma, j, out, scratch)
    else:
        _rbf_column(XT, sq, gamma, j, out, scratch)


@overload(_rbf_column_of)
def _rbf_column_typed(XT, sq, gamma, j, out, scratch):
    if XT.dtype == types.float32:
        return lambda XT, sq, gamma, j, out, scratch: _rbf_column_f32(XT, gamma, j, out, scratch)
    return lambda XT, sq, gamma, j, out, scratch: _rbf_column(XT, sq, gamma, j, out, scratch)


@njit(cache=True)
def evaluate_column(src, sq_norms, labels, st, j, out, scratch):
    """Column ``Q_{:,j}`` of the column source into ``out``: the RBF kernel from the features
    ``src`` (transposed, d × n; ``st.source = SOURCE_RBF`` with the squared norms
    ``sq_norms``, or ``SOURCE_RBF32`` for float32 features and ``out``) or the Gram ``src``
    (``SOURCE_GRAM``), then the L2-SVM transform with ``labels`` when ``st.l2svm`` (all but
    its diagonal term: :func:`_l2svm_column`).  An ``out`` longer than the source's ``n``
    points holds the column of point ``j mod n`` repeated with period ``n`` (the points
    and their copies of the regression's simplex QP, math.md §2.15), before the transform.
    ``st`` is the state record of :mod:`kernfw.solvers.simplex_qp._numba` (``rbf_gamma`` γ)."""
    n = src.shape[1]  # the source's points; ``out`` may hold copies of them
    base = j % n
    if st.source == SOURCE_GRAM:
        _gram_column(src, base, out)
    else:
        _rbf_column_of(src, sq_norms, st.rbf_gamma, base, out, scratch)
    for k in range(n, out.shape[0]):
        out[k] = out[k - n]
    if st.l2svm:
        _l2svm_column(labels, j, out)


#: the counters of a column cache: requests so far, rows of the slab holding a column, hits
#: and misses (what :func:`cache_row` reads and counts)
COUNT_FIELDS = [
    ("clock", np.int64),
    ("rows_used", np.int64),
    ("hits", np.int64),
    ("misses", np.int64),
]

#: the fields a solver's state record holds for :func:`cached_column`: the column source
#: (0: the operator; ``SOURCE_*``), the RBF kernel's ``γ``, whether to apply the L2-SVM
#: transform ``K̃ = y_i y_j (K_ij + 1) + δ_ij c_i``, then the cache's counters
COLUMN_FIELDS = [
    ("source", np.int64),
    ("rbf_gamma", np.float64),
    ("l2svm", np.bool_),
    *COUNT_FIELDS,
]

#: the counters of a column cache used outside a solver's state record
#: (:class:`kernfw.operators.column_cache.ColumnCache`)
COUNTS = np.dtype(COUNT_FIELDS)


@njit(cache=True)
def cache_row(st, j, slot_of, slots, count, claim):
    """The row of a least-recently-used column cache that holds column ``j``, and whether it
    held it already.  ``slot_of[j]`` is that row or −1, ``slots[0]`` the column in each row
    and ``slots[1]`` its last use; ``st`` (a record with ``clock``, ``rows_used``, ``hits``
    and ``misses``) counts the requests, the rows in use and, when ``count``, the hits and
    misses.  A held column is touched; a missing one gets the least recently used row when
    ``claim`` (the caller fills it), else the answer is −1."""
    st.clock += 1
    s = slot_of[j]
    if s >= 0:
        if count:
            st.hits += 1
        slots[1, s] = st.clock
        return s, True
    if count:
        st.misses += 1
    if not claim:
        return -1, False
    m = slots.shape[1]
    if st.rows_used < m:
        s = st.rows_used
        st.rows_used += 1
    else:
        s = 0
        oldest = slots[1, 0]
        for r in range(1, m):
            if slots[1, r] < oldest:
                oldest = slots[1, r]
                s = r
        slot_of[slots[0, s]] = -1
    slots[0, s] = j
    slot_of[j] = s
    slots[1, s] = st.clock
    return s, False


@njit(cache=True)
def cache_rows(counts, idx, slot_of, slots, count, claim):
    """:func:`cache_row` of every column of ``idx`` in turn, for the counters ``counts[0]``
    (:data:`COUNTS`): the rows (−1: missing)."""
    rows = np.empty(idx.shape[0], dtype=np.int64)
    for p in range(idx.shape[0]):
        rows[p] = cache_row(counts[0], idx[p], slot_of, slots, count, claim)[0]
    return rows


@njit(cache=True)
def cached_column(src, sq_norms, labels, st, j, slab, slot_of, slots, scratch):
    """The row of the least-recently-used column cache ``slab`` (m × n, rows as
    :func:`cache_row` assigns them) that holds column ``j``: on a miss
    :func:`evaluate_column` writes it into the least recently used row (``scratch``: its
    scratch).  ``st`` counts the requests in ``clock``, the rows in use in ``rows_used``
    and the ``hits`` and ``misses``."""
    s, held = cache_row(st, j, slot_of, slots, True, True)
    if not held:
        evaluate_column(src, sq_norms, labels, st, j, slab[s], scratch)
    return s
