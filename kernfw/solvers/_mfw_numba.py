"""Compiled (numba) steps of the simplex-QP FW / MFW solver (math.md §2.3).

The backend of :class:`kernfw.solvers.meb.CompiledSimplexQPIterate` when
:func:`kernfw._compiled.compiled_module` returns this module.  An iteration is:

- :func:`plan` — given the cached FW vertex ``i* = argmax_i g_i`` and its gap,
  the away vertex ``j* = argmin_{α_j>0} g_j``, the MFW choice, the exact line
  search (with the away bound ``γ_max``), a negative-curvature check, and the
  index whose column the step needs;
- the column: from the kernel operator (``Q.columns``, with its LRU cache; the
  operator protocol stays the only way to kernel values), or, when the operator
  has a column view (``Q.column_view()``: an RBF kernel on the fly, or a Gram,
  possibly inside the L2-SVM's modified kernel), from a compiled LRU cache or
  evaluated in place (fused distances, ``exp`` and L2-SVM transform; in float32
  for a float32 view) — the values are the operator's up to rounding;
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

State arrays shared with the caller
-----------------------------------
``vec`` (float64[4, n])
    Rows ``β``, ``u``, the scores ``s·u − q/2`` and a scratch row.
``ind`` (intp[2, n])
    Rows ``items`` and ``where`` of the active set.
``con`` (float64[5, n])
    Rows ``diag(Q)``, ``q``, ``q/2`` (zeros when ``q = 0``), and for a column view
    ``‖x_k‖²`` and the labels ``y`` (L2-SVM).
``f`` (float64[16])
    ``[s, qᵀα, αᵀQα, FW gap of the cached vertex, planned γ, planned γ_max,
    curvature met, negative-curvature tolerance, RBF γ, 1/C, L2-SVM (0/1), unused,
    estimate a, estimate b, estimate on |f| (0/1), unused]`` (the estimate: see
    :func:`stop_estimate_met`).
``st`` (int64[16])
    ``[active size, cached FW vertex i*, vertex valid (0/1), planned kind
    (0 none, 1 FW, 2 away, 3 negative curvature), planned index, #FW steps,
    #away steps, #drop steps, q ≠ 0, away steps on, fill scores, column source
    (0 the operator, SOURCE_RBF, SOURCE_GRAM, SOURCE_RBF32), cache clock, cache
    rows in use, cache hits, cache misses]``.
Few array arguments keep numba's dispatch cheap (a few µs per call).
"""

import math

import numpy as np
from numba import njit

from ._block_kernels import exactly_symmetric

__all__ = [
    "plan",
    "apply",
    "step_cached",
    "run_cached",
    "stop_estimate_met",
    "evaluate_column",
    "is_symmetric",
    "KIND_NONE",
    "KIND_FW",
    "KIND_AWAY",
    "KIND_NEGATIVE",
    "SOURCE_RBF",
    "SOURCE_GRAM",
    "SOURCE_RBF32",
]

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
def plan(vec, ind, con, f, st):
    """Choose the step of the next iteration (the FW vertex ``st[1]`` and its gap ``f[3]``
    must be cached: see the module docstring); returns its kind."""
    beta, u, items = vec[0], vec[1], ind[0]
    diag, q, hq = con[0], con[1], con[2]
    has_q, away, neg_tol = st[8] != 0, st[9] != 0, f[7]
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
def apply(col, vec, ind, con, f, st):
    """Take the planned step with its column ``col = Q_{:,idx}``, then refresh the scores
    (unless ``st[10] = 0``: a constant ``q``, then ``argmin u`` is the vertex) and cache
    the next FW vertex and its gap (:func:`_update_and_vertex`)."""
    beta, u, scores, items, where = vec[0], vec[1], vec[2], ind[0], ind[1]
    diag, q = con[0], con[1]
    has_q = st[8] != 0
    kind, idx, gamma = st[3], st[4], f[4]
    scale, qa, ava = f[0], f[1], f[2]
    vi = scale * u[idx]
    if kind == KIND_FW:
        f[2] = (1 - gamma) ** 2 * ava + 2 * gamma * (1 - gamma) * vi + gamma**2 * diag[idx]
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
            _update_and_vertex(u, col, 0.0, 1.0, scores, con, f, st)
            return 1.0
        scale *= 1.0 - gamma
        step = gamma / scale
        beta[idx] += step
        _add(items, where, st, idx)
    else:
        gamma_max = f[5]
        f[2] = (1 + gamma) ** 2 * ava - 2 * gamma * (1 + gamma) * vi + gamma**2 * diag[idx]
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
    _update_and_vertex(u, col, 1.0, step, scores, con, f, st)
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
def _update_and_vertex(u, col, keep, step, scores, con, f, st):
    """``u ← keep·u + step·col`` (keep ∈ {0, 1}), the scores ``s·u − q/2`` (when ``q`` is
    not constant: ``st[10]``) and the next FW vertex ``i* = argmin`` of the scores (of
    ``u`` when ``q`` is constant): the first index of the minimum, as ``np.argmin``
    (:func:`_argmin`).  Caches ``i*`` in ``st[1]`` (valid: ``st[2] = 1``) and its gap
    ``g_{i*} − αᵀg`` in ``f[3]``, by the numpy path's formula."""
    scale, fill_scores = f[0], st[10] != 0
    hq = con[2]
    n = u.shape[0]
    if keep == 0.0:
        u[:] = col
    else:
        for k in range(n):
            u[k] += step * col[k]
    if fill_scores:
        for k in range(n):
            scores[k] = u[k] * scale - hq[k]
    i = _argmin(scores if fill_scores else u)
    qi = con[1, i] if st[8] != 0 else 0.0
    st[1], st[2] = i, 1
    f[3] = (qi - 2.0 * (scale * u[i])) - (f[1] - 2.0 * f[2])


# -- columns evaluated in the compiled step (operator column views) ------------------------
#: column sources of :func:`step_cached` (``st[11]``)
SOURCE_RBF, SOURCE_GRAM, SOURCE_RBF32 = 1, 2, 3

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 = _LN2_HI + _LN2_LO (fdlibm's split)
_LN2_LO = 1.90821492927058770002e-10
_EXP_MIN = -708.0  # below: e^x < 3.4e-308, returned as 0


#: points per block of the RBF column (the block of inner products stays in L1)
_RBF_BLOCK = 1024


@njit(cache=True, fastmath={"contract"})
def _rbf_column(XT, sq, gamma, j, out, scratch):
    """``out_k = exp(−γ max(‖x_k‖² + ‖x_j‖² − 2 x_kᵀx_j, 0))`` for every k (math.md's RBF).

    ``XT`` holds the features transposed (d × n), so the inner products of a block
    of points accumulate over the d features in vectorized passes over the block.
    ``e^x`` is computed as ``2^m p(r)`` (``x = m ln2 + r``, ``|r| ≤ ln2/2``, ``p``
    the degree-13 Taylor polynomial: relative error about 1 ulp against
    ``numpy.exp``), branch-free so that it vectorizes; ``scratch`` (float64, n)
    receives the powers ``2^m``.  The only fast-math flag is FMA contraction
    (rounding-level differences from the numpy path's separate multiply and add)."""
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
        b2 = bits[start:stop]
        p2 = scratch[start:stop]
        for k in range(size):
            # the operator's order: −2 x_kᵀx_j + ‖x_j‖² + ‖x_k‖², clipped at 0, times −γ
            x = max(o[k] * -2.0 + sqj + s2[k], 0.0) * -gamma
            xc = max(x, _EXP_MIN)
            m = math.floor(xc * _LOG2E + 0.5)
            r = (xc - m * _LN2_HI) - m * _LN2_LO
            p = 1.0 / 6227020800.0
            p = p * r + 1.0 / 479001600.0
            p = p * r + 1.0 / 39916800.0
            p = p * r + 1.0 / 3628800.0
            p = p * r + 1.0 / 362880.0
            p = p * r + 1.0 / 40320.0
            p = p * r + 1.0 / 5040.0
            p = p * r + 1.0 / 720.0
            p = p * r + 1.0 / 120.0
            p = p * r + 1.0 / 24.0
            p = p * r + 1.0 / 6.0
            p = p * r + 0.5
            p = p * r + 1.0
            p = p * r + 1.0
            o[k] = p if x >= _EXP_MIN else 0.0
            b2[k] = (np.int64(m) + 1023) << 52
        for k in range(size):
            o[k] *= p2[k]


#: points per block of the float32 RBF column (16 kB of values: still in L1, and fewer
#: passes over the block's feature rows than 1024 points; measured 13 % faster)
_RBF32_BLOCK = 4096
_F32_LOG2E = np.float32(_LOG2E)
_F32_LN2_HI = np.float32(0.693145751953125)  # ln 2 = hi + lo, hi with 12 zero low bits
_F32_LN2_LO = np.float32(1.428606765330187e-06)
_F32_EXP_MIN = np.float32(-87.0)  # below: e^x < 1.7e-38, returned as 0


@njit(cache=True, fastmath={"contract"})
def _rbf_column_f32(XT, gamma, j, out, scratch):
    """The RBF column in float32 (features ``XT`` float32, d × n; ``out`` float32):
    ``out_k = exp(−γ Σ_t (x_tk − x_tj)²)``.

    The squared distance is summed from differences (no cancellation of
    ``‖x_k‖² + ‖x_j‖² − 2x_kᵀx_j``), so the only errors are float32 roundings:
    about 1e-7 relative on ``d²`` and on the value.  ``e^x = 2^m p(r)`` with the
    degree-6 Taylor polynomial on ``|r| ≤ ln2/2`` (float32 precision), branch-free;
    ``scratch`` (any array of at least ``4n`` bytes) receives the powers ``2^m``.
    Half the memory traffic of the float64 column: the compiled step uses it when the
    operator keeps its kernel values in float32."""
    d, n = XT.shape
    xj = XT[:, j].copy()
    g = np.float32(-gamma)
    bits = scratch.view(np.int32)
    powers = bits.view(np.float32)
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
        b2 = bits[start:stop]
        p2 = powers[start:stop]
        for k in range(size):
            x = o[k] * g
            xc = max(x, _F32_EXP_MIN)
            m = np.floor(xc * _F32_LOG2E + np.float32(0.5))
            r = (xc - m * _F32_LN2_HI) - m * _F32_LN2_LO
            p = np.float32(1.0 / 720.0)
            p = p * r + np.float32(1.0 / 120.0)
            p = p * r + np.float32(1.0 / 24.0)
            p = p * r + np.float32(1.0 / 6.0)
            p = p * r + np.float32(0.5)
            p = p * r + np.float32(1.0)
            p = p * r + np.float32(1.0)
            o[k] = p if x >= _F32_EXP_MIN else np.float32(0.0)
            b2[k] = (np.int32(m) + np.int32(127)) << np.int32(23)
        for k in range(size):
            o[k] *= p2[k]


#: ``exactly_symmetric(K)`` compiled: a C-ordered Gram that passes is read by rows
is_symmetric = njit(cache=True)(exactly_symmetric)


@njit(cache=True)
def _gram_column(K, j, out):
    """``out = K[:, j]`` (contiguous for an F-ordered ``K``, e.g. the view ``Kᵀ`` of an
    exactly symmetric C-ordered Gram)."""
    for k in range(K.shape[0]):
        out[k] = K[k, j]


@njit(cache=True)
def _l2svm_column(y, inv_c, j, out):
    """``out ← y_j y ⊙ (out + 1) + e_j / C`` (the modified kernel of math.md §2.1), in the
    numpy path's order."""
    yj = y[j]
    for k in range(out.shape[0]):
        out[k] = (out[k] + 1.0) * (yj * y[k])
    out[j] += inv_c


@njit(cache=True)
def evaluate_column(src, con, f, st, j, out, scratch):
    """Column ``Q_{:,j}`` of the column view into ``out``: the RBF kernel from the
    features ``src`` (transposed, d × n; ``st[11] = SOURCE_RBF``, or ``SOURCE_RBF32``
    for float32 features and ``out``) or the Gram ``src`` (``SOURCE_GRAM``), then the
    L2-SVM transform when ``f[10] ≠ 0``.  ``con[3]`` holds
    ``‖x_k‖²``, ``con[4]`` the labels; ``f[8]`` γ, ``f[9]`` 1/C."""
    if st[11] == SOURCE_RBF:
        _rbf_column(src, con[3], f[8], j, out, scratch)
    elif st[11] == SOURCE_RBF32:
        _rbf_column_f32(src, f[8], j, out, scratch)
    else:
        _gram_column(src, j, out)
    if f[10] != 0.0:
        _l2svm_column(con[4], f[9], j, out)


@njit(cache=True)
def step_cached(vertex, vec, ind, con, f, st, src, slab, slot_of, slots):
    """One whole iteration with the column evaluated here: the FW vertex ``vertex`` (the
    caller's ``argmin`` of the scores, or −1 when ``st[1]`` is cached) and its gap
    ``g_i − αᵀg`` (the numpy path's formula), :func:`plan`, then the column
    from the least-recently-used cache ``slab`` (m × n; ``slot_of[j]`` its row or −1,
    ``slots[0]`` the column in each row, ``slots[1]`` its last use) or computed by
    :func:`evaluate_column` into the least recently used row, then :func:`apply` reading
    that row in place.  ``st[12:16]`` = [clock, rows in use, hits, misses]; ``vec[3]`` is
    scratch.  Returns the step size (0 when no step is taken, see ``st[3]``)."""
    if vertex >= 0:
        qi = con[1, vertex] if st[8] != 0 else 0.0
        st[1], st[2] = vertex, 1
        f[3] = (qi - 2.0 * (f[0] * vec[1, vertex])) - (f[1] - 2.0 * f[2])
    kind = plan(vec, ind, con, f, st)
    if kind == KIND_NONE or kind == KIND_NEGATIVE:
        return 0.0
    j = st[4]
    st[12] += 1
    s = slot_of[j]
    if s >= 0:
        st[14] += 1
    else:
        st[15] += 1
        m = slab.shape[0]
        if st[13] < m:
            s = st[13]
            st[13] += 1
        else:
            s = 0
            oldest = slots[1, 0]
            for r in range(1, m):
                if slots[1, r] < oldest:
                    oldest = slots[1, r]
                    s = r
            slot_of[slots[0, s]] = -1
        evaluate_column(src, con, f, st, j, slab[s], vec[3])
        slots[0, s] = j
        slot_of[j] = s
    slots[1, s] = st[12]
    return apply(slab[s], vec, ind, con, f, st)


@njit(cache=True)
def run_cached(steps, vec, ind, con, f, st, src, slab, slot_of, slots):
    """Up to ``steps`` iterations of :func:`step_cached` (the FW vertex must be cached,
    ``st[2] = 1``; every step caches the next one); stops early after a step without
    progress (``st[3]``: none, or negative curvature) and after a step whose cached gap
    meets the stopping rule's O(1) estimate (:func:`stop_estimate_met`): the caller
    then certifies.  Returns the number of iterations taken."""
    for t in range(steps):
        step_cached(-1, vec, ind, con, f, st, src, slab, slot_of, slots)
        if st[3] == KIND_NONE or st[3] == KIND_NEGATIVE or stop_estimate_met(f):
            return t + 1
    return steps


@njit(cache=True)
def stop_estimate_met(f):
    """``max(gap, 0) ≤ f[12]·f + f[13]`` at the cached vertex, ``f = qᵀα − αᵀQα`` (its
    absolute value when ``f[14] ≠ 0``): :func:`kernfw.solvers.cvm.simplex_stop_estimate`."""
    value = f[1] - f[2]
    if f[14] != 0.0:
        value = abs(value)
    return max(f[3], 0.0) <= f[12] * value + f[13]
