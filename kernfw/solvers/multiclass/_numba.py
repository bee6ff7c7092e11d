"""The compiled core of block-coordinate FW on the multi-class dual (math.md §1.13, §3.9).

:class:`kernfw.solvers.multiclass.BlockFW` runs its passes here, a chunk of blocks per
call.  For every block ``i`` of the order a pass forms the block gradient
``g_i = c_i + s̃_i`` (``s̃_i = s_i + σ α_i``), takes the block step (closed-form LMO of
math.md §1.3 (:mod:`~kernfw.solvers.multiclass._lmo`) then the exact block line search
or the ``2n/(k + 2n)`` step; up to ``inner_steps`` pairwise steps; or the exact solution
of the block sub-problem (:mod:`~kernfw.solvers.multiclass._block_qp`)) and updates the
scores.  The step rules are :mod:`kernfw.fw.steps`'s functions, compiled as they are.
The problem reaches the compiled code as one named record, :class:`BlockSpec`.  The
score storage depends on the operator:

- explicit features, CSR (:func:`_sparse_pass`; dense features with few nonzeros are
  converted, :func:`pass_features`) or dense (:func:`_dense_pass`): the primal weights
  ``W = Xᵀ Aᵀ/(λn)`` (d × m) are stored, ``s_i = Wᵀ x_i`` and ``W += x_i δᵀ/(λn)`` (only
  the columns of the classes that moved): ``O(nnz(x_i)·m)`` per block.
  ``dense_scores`` / ``sparse_scores`` give the full ``S = X W`` for the certificate;
- kernel columns (:func:`_column_pass`): the scores ``S = K Aᵀ/(λn)`` are stored (as
  ``Sᵀ``, m × n, during a pass) and ``S += K_{:,i} δᵀ/(λn)``: one kernel column, ``O(n)``
  per class that moved; the columns are the rows of a dense Gram matrix
  (``scaled_gram(by_columns=True)`` of the operator: a weighted or shifted kernel is
  formed from the stored one as its columns are read) or those of the chunk's blocks,
  asked of the operator.

:func:`_certify` computes the LMO of every block, the block gaps and the sums of the
duality gap in one loop.  Every LMO uses the *stable* order of math.md §0 (ties go to
the smallest class index), like the ``lmo_row`` methods of :mod:`kernfw.losses`.

The passes and the certificate are compiled once per *block-step family*: the block
step (``FW``, ``PAIRWISE``, ``EXACT``) and whether the loss is the hinge are constants of
their compiled code (:func:`_family`, :func:`family_passes`), so that numba drops the
other families' steps and LMOs before typing and a fit compiles only what it runs.  All
functions are compiled with ``cache=True``: the JIT cost is paid once per machine and
Python version (see ``docs/benchmarks/cold_start.md``).
"""

from collections import namedtuple

import numpy as np
import scipy.sparse as sp
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload, register_jitable

from ...fw._steps_numba import block_standard_step, quadratic_step
from ...operators._columns_numba import COLUMN_FIELDS, cached_column
from ._block_qp import KERNELS, block_qp_buffers, block_qp_step, pairwise_steps
from ._lmo import (
    MAX_HINGE,
    OPTIMAL_RTOL,
    TOPK,
    USUNIER,
    WEIGHTED_TOPK,
    WEIGHTED_USUNIER,
    hinge_vertex,
    loss_code,
    loss_vertex,
    top_entries,
)

__all__ = [
    "BlockSpec",
    "loss_code",
    "pass_features",
    "Passes",
    "family_passes",
    "dense_scores",
    "sparse_scores",
    "MAX_HINGE",
    "TOPK",
    "USUNIER",
    "WEIGHTED_TOPK",
    "WEIGHTED_USUNIER",
    "FW",
    "PAIRWISE",
    "EXACT",
    "COLUMN_STATE",
]


def _visit_options():
    """numba options of the helpers that every block visit calls: no reference counting.

    Those helpers allocate nothing and their caller holds every array they
    see, so the increments and decrements of the reference counts of their
    array arguments at each call (atomic operations that numba cannot prune
    across a call) only cost time (see ``docs/benchmarks/multiclass.md`` (d),
    "The cost of a block visit").  ``_nrt=False`` is numba's
    switch for code without the runtime; left out when a numba version
    does not know it.
    """
    try:
        from numba.core.cpu import CPUTargetOptions
    except ImportError:  # pragma: no cover - another numba layout
        return {}
    return {"_nrt": False} if hasattr(CPUTargetOptions, "_nrt") else {}


#: ``njit`` of the per-visit helpers (:func:`_visit_options`)
_visit_jit = njit(cache=True, **_visit_options())

#: block steps (``BlockFW.block_step_rule``)
FW, PAIRWISE, EXACT = range(3)
MODES = {"fw": FW, "pairwise": PAIRWISE, "exact": EXACT}

#: what the compiled block steps need to know about the problem (one argument, named fields)
BlockSpec = namedtuple(
    "BlockSpec",
    [
        "C",
        "y",
        "Q",
        "scale",
        "sigma",
        "loss",
        "k",
        "rho",
        "r",
        "mode",
        "inner_steps",
        "standard",
        "n",
        "shrink",
        "avg",
    ],
)
BlockSpec.__doc__ = """The block problem for the compiled passes.

``C`` (n × m) cost vectors ``c_i``; ``y`` class indices; ``Q`` block
curvatures ``q_i = K_ii/(λn) + σ_i``; ``scale`` = ``λn``; ``sigma`` the per-example
smoothing ``σ_i`` (n,); ``loss, k, rho, r`` the
loss (:func:`loss_code`); ``mode`` the block step (``FW``, ``PAIRWISE``,
``EXACT``); ``inner_steps`` pairwise steps per visit; ``standard`` the
``2n/(k + 2n)`` rule; ``n`` the number of blocks; ``shrink`` whether exact
steps drop inactive classes (``BlockFW.shrinking``); ``avg`` the accumulator
``B = Σ_k (k(k+1)/2) Δ_k`` (n × m) of the averaged iterate (``BlockFW.averaging``;
``(0, m)`` without averaging).
"""


#: the record of a column source's columns computed by the passes (what
#: :func:`~kernfw.operators._columns_numba.cached_column` reads and counts: the source
#: ``SOURCE_*`` and its RBF ``γ``, no L2-SVM transform, the cache's clock, rows in use,
#: hits and misses)
COLUMN_STATE = np.dtype(COLUMN_FIELDS, align=True)


#: dense features with at most this fraction of nonzeros are passed to the CSR kernel
CSR_DENSITY = 0.75


def pass_features(X):
    """The features as the passes read them: CSR unless ``X`` is dense and mostly nonzero.

    The dense pass skips zero features, so both kernels sum the same terms in
    the same (increasing feature) order; the CSR one needs no test per entry.
    """
    if sp.issparse(X) or np.count_nonzero(X) > CSR_DENSITY * X.size:
        return X
    return sp.csr_matrix(X)


# -- the closed-form LMO (math.md §1.3) and the exact block steps (§1.14) ----------

for _kernel in (top_entries, hinge_vertex, loss_vertex) + KERNELS:
    register_jitable(_kernel)  # callable by the kernels compiled below, as they are
del _kernel

#: the closed-form LMO, :func:`~kernfw.solvers.multiclass._lmo.loss_vertex`
_lmo = njit(cache=True)(loss_vertex)
#: the exact block step of the other losses, :func:`~kernfw.solvers.multiclass._block_qp.block_qp_step`
_block_qp = njit(cache=True)(block_qp_step)


# -- one block: the step on α_i (math.md §3.9), as in kernfw.solvers.multiclass ----------------


@njit(cache=True)
def _block_lmo(g, yi, spec, a, idx, beta):
    """``a = g − g_{y_i} 1`` and the LMO ``β*`` at ``a`` (into ``a`` and ``beta``)."""
    for j in range(g.shape[0]):
        a[j] = g[j] - g[yi]
    _lmo(a, spec.loss, spec.k, spec.rho, spec.r, idx, beta)


@njit(cache=True)
def _fw_block(g, alpha, yi, q, spec, gamma_std, a, idx, beta, delta):
    """:func:`~kernfw.solvers.multiclass.fw_block_step`: writes ``δ``, returns ``γ``."""
    m = g.shape[0]
    _block_lmo(g, yi, spec, a, idx, beta)
    bsum = 0.0
    for j in range(m):
        bsum += beta[j]
    for j in range(m):
        delta[j] = -beta[j]  # d = u_i − α_i
    delta[yi] += bsum
    for j in range(m):
        delta[j] -= alpha[j]
    if spec.standard:
        gamma = gamma_std
    else:
        dd = 0.0
        gd = 0.0
        for j in range(m):
            gd += g[j] * delta[j]
        for j in range(m):
            dd += delta[j] * delta[j]
        gamma = quadratic_step(-gd, q * dd, 1.0)
    for j in range(m):
        delta[j] *= gamma
    return gamma


#: the pairwise block steps (:mod:`._block_qp`), compiled as they are
_pairwise_block = njit(cache=True)(pairwise_steps)


#: rows of the block work buffer (:func:`_buffers`): the gradient ``g``, ``α_i``, the
#: LMO's ``a`` and ``β``, the exact step's ``θ`` (``θ[MULTIPLIER]`` the multiplier,
#: ``θ[BLOCK_GAP]`` the block gap before the step) and the step ``δ``
G, ALPHA, A, BETA, THETA, DELTA = range(6)
MULTIPLIER, BLOCK_GAP = 0, 1


# complex: one exact block step of the compiled BCFW pass (math.md §1.14)
@_visit_jit
def _exact_block(g, alpha, yi, q, b, D, delta, out):  # noqa: C901
    """:func:`~kernfw.solvers.multiclass.exact_block_step` (the Crammer–Singer
    sub-problem): writes ``δ``, the multiplier ``θ`` (into ``out[MULTIPLIER]``) and the
    block gap before the step (into ``out[BLOCK_GAP]``), returns ``½‖δ‖₁``."""
    m = g.shape[0]
    phi = 0.0
    ga = 0.0
    top = 0
    for j in range(m):
        v = g[j] - g[yi]
        if v > phi:
            phi = v
        if v > g[top] - g[yi]:
            top = j
    for j in range(m):
        ga += g[j] * alpha[j]
    out[BLOCK_GAP] = phi + ga  # (= _hinge_block_gap)
    if phi + ga <= OPTIMAL_RTOL * (1.0 + phi):
        for j in range(m):
            delta[j] = 0.0
        return 0.0
    if not q > 0:  # K_ii = σ = 0: a linear problem, the LMO vertex
        for j in range(m):
            delta[j] = -alpha[j]
        if phi > 0:
            delta[yi] += 1.0
            delta[top] -= 1.0
        moved = 0.0
        for j in range(m):
            moved += abs(delta[j])
        return 0.5 * moved
    for j in range(m):
        b[j] = g[j] - q * alpha[j]
    for j in range(m):  # D sorted decreasingly
        v = b[j] + q if j == yi else b[j]
        pos = j
        while pos > 0 and D[pos - 1] < v:
            D[pos] = D[pos - 1]
            pos -= 1
        D[pos] = v
    theta = D[0] - q
    r = 1
    while r < m and theta < r * D[r]:
        theta += D[r]
        r += 1
    theta /= r
    out[MULTIPLIER] = theta
    total = 0.0
    for j in range(m):
        D[j] = 0.0 if j == yi else min((theta - b[j]) / q, 0.0)  # α'
    top = min(max((theta - b[yi]) / q, 0.0), 1.0)  # α'_{y_i}, as exact_block_step
    for j in range(m):
        total += D[j]
    if -total > 0.0:
        ratio = top / -total
        total = 0.0
        for j in range(m):
            D[j] *= ratio
        for j in range(m):
            total += D[j]
    D[yi] = -total
    moved = 0.0
    for j in range(m):
        delta[j] = D[j] - alpha[j]
    for j in range(m):
        moved += abs(delta[j])
    return 0.5 * moved


@njit(cache=True)
def _block_gap(g, al, yi, spec, a, idx, beta):
    """The block gap ``Φ(s̃_i; y_i) + ⟨g_i, α_i⟩`` before the step (``block_gap`` of
    :mod:`kernfw.solvers.multiclass`: the same sums in the same order)."""
    m = g.shape[0]
    _block_lmo(g, yi, spec, a, idx, beta)
    phi = 0.0
    for j in range(m):
        phi += beta[j] * a[j]
    ga = 0.0
    for j in range(m):
        ga += g[j] * al[j]
    return phi + ga


@njit(cache=True)
def _hinge_block_gap(g, al, yi):
    """:func:`_block_gap` of the max / structured hinge (the same value, no sort)."""
    phi = 0.0
    ga = 0.0
    for j in range(g.shape[0]):
        v = g[j] - g[yi]
        if v > phi:
            phi = v
        ga += g[j] * al[j]
    return phi + ga


# complex: one block visit of the compiled BCFW pass (math.md §1.13)
@njit(inline="always")
def _block(mode, hinge, i, s, cl, nc, At, spec, gamma_std, buf, idx, work):  # noqa: C901
    """The block step of block ``i`` on its active classes ``cl[:nc]``.

    ``mode`` (``FW``, ``PAIRWISE``, ``EXACT``) and ``hinge`` (the loss is the max or
    structured hinge) are constants of the pass that inlines this function
    (:func:`_family`): numba drops the branches of the other step families before
    typing, so a pass compiles only its own block step.

    ``s[c]`` is the score of class ``cl[c]``; the gradient ``g = c_i + s_i + σ α_i``
    and ``α_i`` are gathered on those classes (the whole block when none is
    shrunk), the step is taken and ``δ`` is written into ``buf[DELTA]`` (same
    positions) and the block gap before the step (:func:`_block_gap`) into
    ``buf[THETA, BLOCK_GAP]``.  Exact steps are the hinge's :func:`_exact_block`
    or, for the other losses, :func:`_block_qp` (work arrays ``work``); with
    hinge exact steps and ``spec.shrink`` the inactive classes are dropped from
    ``cl`` (the new count is returned second).
    """
    g, al, a = buf[G, :nc], buf[ALPHA, :nc], buf[A, :nc]
    beta, delta = buf[BETA, :nc], buf[DELTA, :nc]
    yi = spec.y[i]
    yc = np.int64(0)  # (the literal 0 would have the callees compiled for it too)
    for c in range(nc):
        j = cl[c]
        al[c] = At[i, j]
        g[c] = spec.C[i, j] + s[c]
        if j == yi:
            yc = c
    sig = spec.sigma[i]
    if sig != 0.0:
        for c in range(nc):
            g[c] += sig * al[c]
    if mode != EXACT:  # (the exact steps write it: the same sums)
        if hinge:  # Φ = max(max_j a_j, 0): the hinge LMO's value
            buf[THETA, BLOCK_GAP] = _hinge_block_gap(g, al, yc)
        else:
            buf[THETA, BLOCK_GAP] = _block_gap(g, al, yc, spec, a, idx, beta)
    q = spec.Q[i]
    if mode == EXACT and not hinge:
        step, gap = _block_qp(
            g, al, yc, q, spec.loss, spec.k, spec.rho, spec.r, idx, a, beta, delta, work
        )
        buf[THETA, BLOCK_GAP] = gap
        return step, nc
    if mode == PAIRWISE:
        return _pairwise_block(g, al, yc, q, spec.inner_steps, a, beta, delta), nc
    if mode == FW:
        return _fw_block(g, al, yc, q, spec, gamma_std, a, idx, beta, delta), nc
    theta = buf[THETA, :2]
    step = _exact_block(g, al, yc, q, a, beta, delta, theta)
    if step == 0.0 or not spec.shrink:
        return step, nc
    kept = 0
    for c in range(nc):  # keep y_i and the classes that may be active
        if c == yc or not (al[c] == 0.0 and al[c] + delta[c] == 0.0 and g[c] < theta[0]):
            cl[kept] = cl[c]
            delta[kept] = delta[c]
            kept += 1
    return step, kept


@njit(inline="always")
def _apply_delta(i, cl, nc, At, spec, delta, upd, k):
    """``α_i += δ`` on the classes ``cl[:nc]`` and ``upd = δ/(λn)``; with averaging also
    ``B_i += (k(k+1)/2) δ`` (block step ``k``, :class:`BlockSpec`).  Returns whether ``δ``
    has a nonzero entry."""
    moved = False
    for c in range(nc):
        At[i, cl[c]] += delta[c]
        upd[c] = delta[c] / spec.scale
        moved = moved or delta[c] != 0.0
    if spec.avg.shape[0]:
        weight = 0.5 * k * (k + 1.0)
        for c in range(nc):
            spec.avg[i, cl[c]] += weight * delta[c]
    return moved


@njit(inline="always")
def _moved(cl, nc, upd, nz, un):
    """The classes ``nz[:cnt]`` whose update ``un[:cnt]`` (from ``upd``) is nonzero; returns
    ``cnt``."""
    cnt = 0
    for c in range(nc):
        if upd[c] != 0.0:
            nz[cnt] = cl[c]
            un[cnt] = upd[c]
            cnt += 1
    return cnt


@njit(inline="always")
def _gamma_std(spec, k):
    """The fixed step ``2n/(k + 2n)`` at block step ``k`` (unused by line searches)."""
    return block_standard_step(k, spec.n) if spec.standard else 0.0


@njit(cache=True)
def _dense_row_scores(X, i, W, s):
    """``s = Wᵀ x_i`` summed over the nonzero features in increasing order."""
    s[:] = 0.0
    for f in range(X.shape[1]):
        xf = X[i, f]
        if xf != 0.0:
            for j in range(W.shape[1]):
                s[j] += xf * W[f, j]


@njit(inline="always")
def _sums4(lo, hi, indices, data, W, j0, j1, j2, j3):
    """``Σ_p x_p W[f_p, j]`` for the four classes ``j0 … j3`` over the CSR entries
    ``lo ≤ p < hi``, each sum in a register (the groups of :func:`_sparse_row_scores`)."""
    s0 = s1 = s2 = s3 = 0.0
    for p in range(lo, hi):
        x, f = data[p], np.uint64(indices[p])  # unsigned: no negative-index check
        s0 += x * W[f, j0]
        s1 += x * W[f, j1]
        s2 += x * W[f, j2]
        s3 += x * W[f, j3]
    return s0, s1, s2, s3


@njit(inline="always")
def _sums3(lo, hi, indices, data, W, j0, j1, j2):
    """:func:`_sums4` for three classes."""
    s0 = s1 = s2 = 0.0
    for p in range(lo, hi):
        x, f = data[p], np.uint64(indices[p])
        s0 += x * W[f, j0]
        s1 += x * W[f, j1]
        s2 += x * W[f, j2]
    return s0, s1, s2


@njit(inline="always")
def _sums2(lo, hi, indices, data, W, j0, j1):
    """:func:`_sums4` for two classes."""
    s0 = s1 = 0.0
    for p in range(lo, hi):
        x, f = data[p], np.uint64(indices[p])
        s0 += x * W[f, j0]
        s1 += x * W[f, j1]
    return s0, s1


@njit(inline="always")
def _sums1(lo, hi, indices, data, W, j0):
    """:func:`_sums4` for one class."""
    s0 = 0.0
    for p in range(lo, hi):
        s0 += data[p] * W[np.uint64(indices[p]), j0]
    return s0


@_visit_jit
def _sparse_row_scores(lo, hi, indices, data, W, cl, nc, s):
    """``s[c] = Σ_p x_p W[f_p, cl[c]]`` (``c < nc``) over the CSR entries ``lo ≤ p < hi``.

    Each sum runs over ``p`` in increasing order, one add at a time (the order of
    :func:`_dense_row_scores`, bit for bit).  The classes go in groups of four (the
    last group of one to three), each group in one sweep over the row with its
    sums in registers: no store and reload of ``s[c]`` per entry.
    """
    u = np.uint64
    c = 0
    while c + 4 <= nc:
        s[c], s[c + 1], s[c + 2], s[c + 3] = _sums4(
            lo, hi, indices, data, W, u(cl[c]), u(cl[c + 1]), u(cl[c + 2]), u(cl[c + 3])
        )
        c += 4
    left = nc - c
    if left == 3:
        s[c], s[c + 1], s[c + 2] = _sums3(
            lo, hi, indices, data, W, u(cl[c]), u(cl[c + 1]), u(cl[c + 2])
        )
    elif left == 2:
        s[c], s[c + 1] = _sums2(lo, hi, indices, data, W, u(cl[c]), u(cl[c + 1]))
    elif left == 1:
        s[c] = _sums1(lo, hi, indices, data, W, u(cl[c]))


@intrinsic
def _prefetch(typingctx, arr, index):
    """Hint the cache to load ``arr[index]`` (1-d ``arr``; LLVM's ``llvm.prefetch``)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]])
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], fnty)  # name as LLVM's
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])  # read, keep
        return context.get_dummy_value()

    return types.void(arr, index), codegen


#: a pass prefetches the rows of the block it visits this many visits ahead
PREFETCH_AHEAD = 2


@njit(cache=True)
def dense_scores(X, W):
    """All scores ``S = X W`` (n × m), single-threaded (no BLAS threads to wait for)."""
    S = np.empty((X.shape[0], W.shape[1]))
    for i in range(X.shape[0]):
        _dense_row_scores(X, i, W, S[i])
    return S


@njit(cache=True)
def sparse_scores(indptr, indices, data, W):
    """:func:`dense_scores` for CSR features: the sums of :func:`_sparse_row_scores`,
    its groups written out with the classes ``0 … m − 1`` (a call per row with a class
    array and a row view took ≈ 1.5× as long, docs/benchmarks/multiclass.md)."""
    n, m = indptr.shape[0] - 1, W.shape[1]
    S = np.empty((n, m))
    u = np.uint64
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        c = 0
        while c + 4 <= m:
            S[i, c], S[i, c + 1], S[i, c + 2], S[i, c + 3] = _sums4(
                lo, hi, indices, data, W, u(c), u(c + 1), u(c + 2), u(c + 3)
            )
            c += 4
        left = m - c
        if left == 3:
            S[i, c], S[i, c + 1], S[i, c + 2] = _sums3(
                lo, hi, indices, data, W, u(c), u(c + 1), u(c + 2)
            )
        elif left == 2:
            S[i, c], S[i, c + 1] = _sums2(lo, hi, indices, data, W, u(c), u(c + 1))
        elif left == 1:
            S[i, c] = _sums1(lo, hi, indices, data, W, u(c))
    return S


@njit(inline="always")
def _buffers(mode, hinge, m):
    """Work arrays: the (6, m) block buffer (rows ``G``, ``ALPHA``, ``A``, ``BETA``,
    ``THETA``, ``DELTA``), the scores ``s``, ``δ/(λn)`` and, for the exact block step of
    the losses other than the hinge, its work arrays
    (:func:`~kernfw.solvers.multiclass._block_qp.block_qp_buffers`; None for the other steps)."""
    if mode == EXACT and not hinge:
        work = block_qp_buffers(m)
    else:
        work = None
    return np.zeros((6, m)), np.zeros(m), np.zeros(m), work


# -- the certificate ----------------------------------------------------------------------------


@njit(inline="always")
def _add_block(sums, as_, ca, aa, ph, ga, mag):
    """The certificate's six sums ``(⟨Aᵀ, S⟩, ⟨C, Aᵀ⟩, Σ σ_i ‖α_i‖², Σ Φ_i, Σ gaps_i, Σ M_i)``
    after block ``i``: its terms ``⟨α_i, s_i⟩``, ``⟨c_i, α_i⟩``, ``σ_i ‖α_i‖²``, ``Φ_i``,
    ``⟨ã_i, α_i⟩`` (the gap is ``Φ_i`` plus it) and ``M_i − |Φ_i|``."""
    AS, CA, AA, phi_sum, gap_sum, size = sums
    return AS + as_, CA + ca, AA + aa, phi_sum + ph, gap_sum + (ph + ga), size + (abs(ph) + mag)


@njit(inline="always")
def _certify(hinge, S, At, spec):
    """The LMO of every block at ``s̃_i = s_i + σ α_i`` and the sums of the certificate.

    Returns
    -------
    phi : (n,) ``Φ(s̃_i; y_i)``
    gaps : (n,) block gaps ``Φ(s̃_i; y_i) + ⟨ã_i, α_i⟩``, ``ã_i = g_i − g_{i,y_i} 1``,
        ``g_i = c_i + s̃_i`` (:meth:`~kernfw.solvers.multiclass.MulticlassDual.block_gaps`)
    sums : ``(⟨Aᵀ, S⟩, ⟨C, Aᵀ⟩, Σ_i σ_i ‖α_i‖², Σ_i Φ_i, Σ_i gaps_i, Σ_i M_i)`` for
        :meth:`~kernfw.solvers.multiclass.MulticlassDual.certificate_from_sums`
        (``M_i`` the block's magnitude), each summed block by block.
    """
    if hinge:
        return _hinge_certify(S, At, spec)
    n, m = S.shape
    C, y = spec.C, spec.y
    buf = np.zeros((6, m))  # the rows G, A, BETA of the block buffer
    g, a, beta = buf[G], buf[A], buf[BETA]
    idx = np.empty(max(spec.r, 1), dtype=np.int64)
    phi, gaps = np.empty(n), np.empty(n)
    sums = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)  # the six sums of the certificate
    for i in range(n):
        yi = y[i]
        sigma = spec.sigma[i]
        for j in range(m):
            g[j] = C[i, j] + S[i, j] + sigma * At[i, j]
        for j in range(m):
            a[j] = g[j] - g[yi]
        _lmo(a, spec.loss, spec.k, spec.rho, spec.r, idx, beta)
        ph = ga = as_ = ca = aa = bsum = mag = 0.0
        gy = abs(g[yi])
        for j in range(m):
            bsum += beta[j]
        for j in range(m):
            ph += beta[j] * a[j]
            ga += a[j] * At[i, j]
            as_ += At[i, j] * S[i, j]
            ca += C[i, j] * At[i, j]
            aa += sigma * (At[i, j] * At[i, j])
            u = bsum if j == yi else beta[j]  # |u_ij|
            scale = abs(C[i, j]) + abs(S[i, j]) + sigma * abs(At[i, j]) + gy
            mag += (abs(At[i, j]) + u) * scale
        phi[i], gaps[i] = ph, ph + ga
        sums = _add_block(sums, as_, ca, aa, ph, ga, mag)
    return phi, gaps, sums


@njit(inline="always")
def _hinge_certify(S, At, spec):
    """:func:`_certify` for the max / structured hinge, one sweep per block in registers.

    The hinge's LMO is ``e_top`` for the first ``top ∈ argmax_j a_ij`` when
    ``a_i,top > 0``, else 0 (:func:`hinge_vertex`): so ``Φ_i = max(a_i,top, 0)``,
    ``|u_ij|`` is 1 at ``top`` and at ``y_i`` when ``Φ_i > 0`` (0 elsewhere), and
    every sum of :func:`_certify` is taken in the same sweep over the classes,
    without the block buffer.  Same sums in the same order, but ``M_i``'s two
    ``|u_ij|`` terms, added last.
    """
    n, m = S.shape
    C, y = spec.C, spec.y
    phi, gaps = np.empty(n), np.empty(n)
    sums = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)  # the six sums of the certificate
    for i in range(n):
        yi = y[i]
        sigma = spec.sigma[i]
        gy = C[i, yi] + S[i, yi] + sigma * At[i, yi]  # g_{i,y_i}
        a_top, scale_top = -np.inf, 0.0  # the first largest margin and its scale
        ga = as_ = ca = aa = mag = 0.0
        for j in range(m):
            c, s, al = C[i, j], S[i, j], At[i, j]
            a = (c + s + sigma * al) - gy  # a_ij = g_ij − g_{i,y_i}
            scale = abs(c) + abs(s) + sigma * abs(al) + abs(gy)
            if a > a_top:
                a_top, scale_top = a, scale
            ga += a * al
            as_ += al * s
            ca += c * al
            aa += sigma * (al * al)
            mag += abs(al) * scale
        ph = 0.0
        if a_top > 0:  # u_i = e_top − e_{y_i}: |u| is 1 at top and at y_i
            ph = a_top
            scale_y = abs(C[i, yi]) + abs(S[i, yi]) + sigma * abs(At[i, yi]) + abs(gy)
            mag += scale_top + scale_y
        phi[i], gaps[i] = ph, ph + ga
        sums = _add_block(sums, as_, ca, aa, ph, ga, mag)
    return phi, gaps, sums


# -- passes -------------------------------------------------------------------------------------


@njit(inline="always")
def _dense_pass(mode, hinge, order, X, W, At, spec, classes, n_classes, k0, steps, gaps):
    """One pass with dense features ``X`` (n × d), keeping ``W = Xᵀ Aᵀ/(λn)`` (d × m).

    Parameters
    ----------
    order : int array
        Blocks to visit (:func:`kernfw.fw.block_order`).
    X : (n, d) array
        The features.
    W, At : float64 arrays, updated in place
        ``W`` (d × m) and ``Aᵀ`` (n × m).
    spec : BlockSpec
        The block problem (:func:`block_spec`).
    classes, n_classes : int arrays (n, m) and (n,), updated in place
        The active classes ``classes[i, :n_classes[i]]`` of each block.
    k0 : int
        Block steps taken before this call (the ``k`` of ``2n/(k + 2n)``).
    steps : float64 array like ``order``, written
        The step taken at each visit (0: the block was optimal).
    gaps : float64 array like ``order``, written
        The block gap ``Φ(s̃_i; y_i) + ⟨g_i, α_i⟩`` at each visit, before the step.
    """
    d, m = X.shape[1], W.shape[1]
    buf, s, upd, work = _buffers(mode, hinge, m)
    idx = np.empty(max(spec.r, 1), dtype=np.int64)
    for t in range(order.shape[0]):
        i = order[t]
        cl = classes[i]
        nc = n_classes[i]
        for c in range(nc):
            s[c] = 0.0
        for f in range(d):  # s = Wᵀ x_i, nonzero features in order
            xf = X[i, f]
            if xf != 0.0:
                if nc == m:  # every class active: cl is the identity
                    for c in range(m):
                        s[c] += xf * W[f, c]
                else:
                    for c in range(nc):
                        s[c] += xf * W[f, cl[c]]
        step, nc = _block(
            mode, hinge, i, s, cl, nc, At, spec, _gamma_std(spec, k0 + t), buf, idx, work
        )
        n_classes[i] = nc
        if step != 0.0 and _apply_delta(i, cl, nc, At, spec, buf[DELTA], upd, k0 + t):
            for c in range(nc):  # only the columns of the classes that moved
                if upd[c] != 0.0:
                    j = cl[c]
                    for f in range(d):
                        W[f, j] += X[i, f] * upd[c]
        steps[t] = step
        gaps[t] = buf[THETA, BLOCK_GAP]


@njit(inline="always")
def _sparse_pass(
    mode, hinge, order, indptr, indices, data, W, At, spec, classes, n_classes, k0, steps, gaps
):
    """:func:`_dense_pass` with CSR features ``(indptr, indices, data)``: ``O(nnz(x_i)·m)``.

    The scores ``s_i = Wᵀ x_i`` of the active classes (:func:`_sparse_row_scores`),
    the block step, then ``W += x_i δᵀ/(λn)`` on the classes that moved; meanwhile
    the CSR row and the rows of ``Aᵀ``, ``C`` and ``classes`` of the block
    ``PREFETCH_AHEAD`` visits ahead are prefetched (a pass visits the blocks in
    random order: each visit would start with cache misses).  Helpers with array
    arguments cost reference counting at each call, so the update and the
    prefetch are written out here.
    """
    m = W.shape[1]
    buf, s, upd, work = _buffers(mode, hinge, m)
    nz, un = np.empty(m, dtype=np.int64), np.empty(m)
    idx = np.empty(max(spec.r, 1), dtype=np.int64)
    T = order.shape[0]
    for t in range(-PREFETCH_AHEAD, T):
        if t + PREFETCH_AHEAD < T:  # the rows of a visit to come: 64-byte lines
            j = order[t + PREFETCH_AHEAD]  # (16 int32 indices, 8 float64 values)
            for p in range(indptr[j], indptr[j + 1], 16):
                _prefetch(indices, p)
            for p in range(indptr[j], indptr[j + 1], 8):
                _prefetch(data, p)
            _prefetch(At[j], 0)
            _prefetch(spec.C[j], 0)
            _prefetch(classes[j], 0)
        if t < 0:
            continue
        i = order[t]
        lo, hi = indptr[i], indptr[i + 1]
        cl = classes[i]
        _sparse_row_scores(lo, hi, indices, data, W, cl, n_classes[i], s)
        gamma_std = _gamma_std(spec, k0 + t) if spec.standard else 0.0
        step, nc = _block(mode, hinge, i, s, cl, n_classes[i], At, spec, gamma_std, buf, idx, work)
        n_classes[i] = nc
        if step != 0.0 and _apply_delta(i, cl, nc, At, spec, buf[DELTA], upd, k0 + t):
            cnt = _moved(cl, nc, upd, nz, un)  # the classes that moved, two per sweep over
            for q in range(0, cnt - 1, 2):  # the row (each W[f, j] once)
                j0, u0 = np.uint64(nz[q]), un[q]  # unsigned: no negative-index check
                j1, u1 = np.uint64(nz[q + 1]), un[q + 1]
                for p in range(lo, hi):
                    f, xf = np.uint64(indices[p]), data[p]
                    W[f, j0] += xf * u0
                    W[f, j1] += xf * u1
            if cnt % 2:
                j0, u0 = np.uint64(nz[cnt - 1]), un[cnt - 1]
                for p in range(lo, hi):
                    W[np.uint64(indices[p]), j0] += data[p] * u0
        steps[t] = step
        gaps[t] = buf[THETA, BLOCK_GAP]


def _column(cols, t, i):
    """The column ``K₀_{:,i}`` of the block ``i = order[t]`` of a pass: ``cols`` is
    ``(rows, Kcols)``, the rows ``Kcols[rows[t]]`` of a stored Gram by columns or of the
    chunk's columns, or ``(src, sq_norms, labels, state, slab, slot_of, slots, scratch)``, a
    column source whose column is computed into a row of the cache ``slab`` the first time
    it is asked for (:func:`~kernfw.operators._columns_numba.cached_column`; ``state`` a
    :data:`COLUMN_STATE` record).  Chosen when numba types the call."""
    if len(cols) == 2:
        return cols[1][cols[0][t]]
    src, sq, labels, state, slab, slot_of, slots, scratch = cols
    return slab[cached_column(src, sq, labels, state[0], i, slab, slot_of, slots, scratch)]


@overload(_column, inline="always")
def _column_typed(cols, t, i):
    if len(cols) == 2:
        return lambda cols, t, i: cols[1][cols[0][t]]

    def computed(cols, t, i):
        src, sq, labels, state, slab, slot_of, slots, scratch = cols
        return slab[cached_column(src, sq, labels, state[0], i, slab, slot_of, slots, scratch)]

    return computed


@njit(inline="always")
def _add_column(col, St, nz, un, cnt):
    """``Sᵀ[nz[q]] += col · un[q]`` for ``q < cnt``: two rows per sweep over the column
    (each entry read once)."""
    n = col.shape[0]
    for q in range(0, cnt - 1, 2):
        row0, u0, row1, u1 = St[nz[q]], un[q], St[nz[q + 1]], un[q + 1]
        for l in range(n):
            k = col[l]
            row0[l] += k * u0
            row1[l] += k * u1
    if cnt % 2:
        row0, u0 = St[nz[cnt - 1]], un[cnt - 1]
        for l in range(n):
            row0[l] += col[l] * u0


@njit(inline="always")
def _add_scaled_column(col, shift, d, di, St, nz, un, cnt):
    """:func:`_add_column` of the column ``K̃_{:,i} = d_i d ⊙ (col + c)`` (``c`` the shift,
    ``d`` the point scales; math.md §1.15), formed in float64 as the column is read: the
    stored ``K₀`` is never transformed."""
    n = col.shape[0]
    for q in range(cnt):
        un[q] *= di
    for q in range(0, cnt - 1, 2):
        row0, u0, row1, u1 = St[nz[q]], un[q], St[nz[q + 1]], un[q + 1]
        for l in range(n):
            k = (col[l] + shift) * d[l]
            row0[l] += k * u0
            row1[l] += k * u1
    if cnt % 2:
        row0, u0 = St[nz[cnt - 1]], un[cnt - 1]
        for l in range(n):
            row0[l] += ((col[l] + shift) * d[l]) * u0


@njit(inline="always")
def _column_pass(mode, hinge, order, cols, form, St, At, spec, classes, n_classes, k0, steps, gaps):
    """:func:`_dense_pass` on kernel columns, keeping ``Sᵀ = A K/(λn)`` (m × n).

    ``cols`` gives the kernel column ``K_{:,i}`` of the block ``i = order[t]``
    (:func:`_column`: a row of a Gram matrix by columns or of the chunk's columns, or a
    column computed when a block first moves); a
    block step reads one column and adds a multiple of it to the rows of ``Sᵀ``
    of the classes that moved: ``O(n)`` contiguous work per class, the same
    sums as ``S[:, j] += K_{:,i} u_j``.  ``form = (c, d)``: the columns read are those of
    ``K₀`` and ``K_{:,i} = d_i d ⊙ (K₀_{:,i} + c)``
    (:meth:`~kernfw.operators.KernelOperator.scaled_gram`; ``d`` empty: ``K₀`` itself).
    """
    shift, d = form
    m = St.shape[0]
    buf, s, upd, work = _buffers(mode, hinge, m)
    idx = np.empty(max(spec.r, 1), dtype=np.int64)
    nz, un = np.empty(m, dtype=np.int64), np.empty(m)
    for t in range(order.shape[0]):
        i = order[t]
        cl = classes[i]
        nc = n_classes[i]
        for c in range(nc):
            s[c] = St[cl[c], i]
        step, nc = _block(
            mode, hinge, i, s, cl, nc, At, spec, _gamma_std(spec, k0 + t), buf, idx, work
        )
        n_classes[i] = nc
        if step != 0.0 and _apply_delta(i, cl, nc, At, spec, buf[DELTA], upd, k0 + t):
            cnt = _moved(cl, nc, upd, nz, un)  # the rows of Sᵀ that change
            col = _column(cols, t, i)
            if d.shape[0]:
                _add_scaled_column(col, shift, d, d[i], St, nz, un, cnt)
            else:
                _add_column(col, St, nz, un, cnt)
        steps[t] = step
        gaps[t] = buf[THETA, BLOCK_GAP]


# -- the passes of each block-step family, compiled apart -----------------------------------------

#: the compiled passes and certificate of one block-step family (:func:`family_passes`)
Passes = namedtuple("Passes", ["dense", "sparse", "columns", "certify"])


def _family(mode, hinge):
    """The :class:`Passes` of the block step ``mode`` on the hinge (``hinge``) or another
    loss: ``mode`` and ``hinge`` are constants of their compiled code, so a fit compiles
    (or loads from numba's cache) only the block step and LMO it takes."""

    @njit(cache=True)
    def dense(order, X, W, At, spec, classes, n_classes, k0, steps, gaps):
        _dense_pass(mode, hinge, order, X, W, At, spec, classes, n_classes, k0, steps, gaps)

    @njit(cache=True)
    def sparse(order, indptr, indices, data, W, At, spec, classes, n_classes, k0, steps, gaps):
        _sparse_pass(
            mode, hinge, order, indptr, indices, data, W, At, spec, classes, n_classes, k0,
            steps, gaps,
        )  # fmt: skip

    @njit(cache=True)
    def columns(order, cols, form, St, At, spec, classes, n_classes, k0, steps, gaps):
        _column_pass(
            mode, hinge, order, cols, form, St, At, spec, classes, n_classes, k0, steps, gaps
        )

    @njit(cache=True)
    def certify(S, At, spec):
        return _certify(hinge, S, At, spec)

    return Passes(dense, sparse, columns, certify)


#: the :class:`Passes` of every block-step family, by ``(mode, hinge)``
_FAMILIES = {
    (mode, hinge): _family(mode, hinge) for mode in (FW, PAIRWISE, EXACT) for hinge in (True, False)
}


def family_passes(spec):
    """The compiled :class:`Passes` of the block step and loss of ``spec``."""
    return _FAMILIES[spec.mode, spec.loss == MAX_HINGE]
