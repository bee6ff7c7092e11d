"""Scalar kernels written once for the numpy path and the compiled backends.

Plain Python on scalars and preallocated arrays: the numpy block-coordinate FW
(:mod:`kernfw.solvers.multiclass`) calls them as they are, and
:mod:`kernfw.solvers._bcfw_numba` compiles the very same functions with
``numba.njit``, so both paths take the same steps in the same order;
:func:`exactly_symmetric` is compiled by both compiled backends.

The built-in losses reach these kernels as a code (:func:`loss_code`: a kind and the
weights ``ρ``); :func:`loss_vertex` is their closed-form LMO (math.md §1.3) and
:func:`corral_block_step` the exact block step of every loss (math.md §1.14).
"""

import numpy as np

from ..fw.steps import quadratic_step
from ..losses import (
    MaxHinge,
    StructuredHinge,
    TopKHinge,
    Usunier,
    WeightedTopKHinge,
    WeightedUsunier,
)

__all__ = [
    "pairwise_steps",
    "exactly_symmetric",
    "loss_code",
    "top_entries",
    "loss_vertex",
    "corral_block_step",
    "corral_buffers",
    "MAX_HINGE",
    "TOPK",
    "USUNIER",
    "WEIGHTED_TOPK",
    "WEIGHTED_USUNIER",
]

#: loss kinds understood by :func:`loss_vertex`
MAX_HINGE, TOPK, USUNIER, WEIGHTED_TOPK, WEIGHTED_USUNIER = range(5)

_KINDS = {
    MaxHinge: MAX_HINGE,
    StructuredHinge: MAX_HINGE,
    TopKHinge: TOPK,
    Usunier: USUNIER,
    WeightedTopKHinge: WEIGHTED_TOPK,
    WeightedUsunier: WEIGHTED_USUNIER,
}

#: a block whose FW gap is at most this times ``1 + Φ_i`` is optimal (``SHRINK_RTOL`` of
#: :mod:`kernfw.solvers.multiclass`)
OPTIMAL_RTOL = 1e-12


def loss_code(loss, n_classes):
    """``(kind, k, ρ, r)`` describing a built-in loss to :func:`loss_vertex`, or None.

    ``r`` is the number of sorted positions the LMO needs (``ρ_j = 0`` for
    ``j > r``): 1 for the hinge, ``k`` for the unweighted losses, the last
    positive weight's position for the weighted ones.  Subclasses of the
    built-in losses (which may override the LMO) get None.
    """
    kind = _KINDS.get(type(loss))
    if kind is None:
        return None
    rho = np.ascontiguousarray(loss.rho(n_classes), dtype=np.float64)
    k = getattr(loss, "k", 1)
    r = int(np.flatnonzero(rho > 0)[-1]) + 1
    return kind, int(k), rho, r


def exactly_symmetric(K):
    """Whether ``K[i, j] == K[j, i]`` for all ``i, j`` (bit for bit): then the rows of a
    C-ordered ``K`` are its columns, read contiguously.  Stops at the first mismatch."""
    n = K.shape[0]
    for i in range(n):
        for j in range(i):
            if K[i, j] != K[j, i]:
                return False
    return True


def pairwise_steps(g, alpha, yi, q, inner_steps, a, beta, delta):
    """Up to ``inner_steps`` pairwise steps on one block (max / structured hinge, math.md §3.9).

    The block domain is a simplex with vertices ``v_j = e_{y_i} − e_j``
    (``v_{y_i} = 0``) and barycentric weights ``β_j = −α_{ij}`` (``j ≠ y_i``),
    ``β_{y_i} = 1 − Σ_{j≠y_i} β_j``.  Vertex ``j`` has value ``a_j = g_j − g_{y_i}``:
    the FW vertex is the first ``argmax_j a_j``, the away vertex the first
    ``argmin_{β_j > 0} a_j``; a step moves weight ``γ ≤ β_away`` between them
    (``Δα = γ(e_away − e_fw)``, curvature ``2q``, exact line search) and updates
    ``g`` locally.

    Parameters
    ----------
    g : ndarray (m,)
        Block gradient ``g_i`` (a scratch copy: updated in place).
    alpha : ndarray (m,)
        The block ``α_i`` (read only).
    yi : int
        ``y_i``.
    q : float
        Block curvature ``q_i = K_ii/(λn) + σ``.
    inner_steps : int
        Largest number of pairwise steps.
    a, beta : ndarray (m,)
        Scratch space for the vertex values ``a`` and the weights ``β``.
    delta : ndarray (m,)
        Output: ``Δα_i``.

    Returns
    -------
    float
        The sum of the steps (0: the block is optimal).
    """
    m = g.shape[0]
    for j in range(m):
        beta[j] = -alpha[j]
        delta[j] = 0.0
    beta[yi] = 1.0 - alpha[yi]
    rate = 2.0 * q
    total = 0.0
    for _ in range(inner_steps):
        for j in range(m):
            a[j] = g[j] - g[yi]
        f = 0
        w = -1
        for j in range(m):
            if a[j] > a[f]:
                f = j
            if beta[j] > 0 and (w < 0 or a[j] < a[w]):
                w = j
        if w < 0:
            break
        slope = a[f] - a[w]
        if f == w or slope <= 0:
            break
        cap = beta[w]
        gamma = quadratic_step(slope, rate, cap)
        if gamma <= 0:
            break
        beta[f] += gamma
        beta[w] = 0.0 if gamma >= cap else beta[w] - gamma  # drop step: exact zero
        delta[w] += gamma
        delta[f] -= gamma
        g[w] += gamma * q
        g[f] -= gamma * q
        total += gamma
    return total


# -- the closed-form LMO of the built-in losses (math.md §1.3) ------------------------------


def top_entries(a, r, idx):
    """The ``r`` largest entries of ``a``, decreasing, ties to the smaller index, into ``idx``.

    Insertion into a sorted list of length ``r``: ``O(m·r)``, no allocation.
    """
    m = a.shape[0]
    count = 0
    for j in range(m):
        v = a[j]
        if count == r and not v > a[idx[r - 1]]:
            continue
        pos = count if count < r else r - 1
        while pos > 0 and v > a[idx[pos - 1]]:
            pos -= 1
        last = count if count < r else r - 1
        for q in range(last, pos, -1):
            idx[q] = idx[q - 1]
        idx[pos] = j
        if count < r:
            count += 1


def loss_vertex(a, kind, k, rho, r, idx, beta):
    """``β* ∈ argmax_{β ∈ B} ⟨β, a⟩`` into ``beta`` (the ``lmo_row`` of each loss)."""
    for j in range(beta.shape[0]):
        beta[j] = 0.0
    top_entries(a, r, idx)
    if kind == MAX_HINGE:
        j = idx[0]
        if a[j] > 0:
            beta[j] = 1.0
    elif kind == TOPK:
        total = 0.0
        for q in range(k):
            total += a[idx[q]]
        if total > 0:
            for q in range(k):
                beta[idx[q]] = 1.0 / k
    elif kind == USUNIER:
        for q in range(k):
            if a[idx[q]] > 0:
                beta[idx[q]] = 1.0 / k
    elif kind == WEIGHTED_TOPK:
        total = 0.0
        for q in range(r):
            total += a[idx[q]] * rho[q]
        if total > 0:
            for q in range(r):
                beta[idx[q]] = rho[q]
    else:  # WEIGHTED_USUNIER
        for q in range(r):
            if a[idx[q]] > 0:
                beta[idx[q]] = rho[q]


# -- the exact block step of every loss: Wolfe's minimum-norm point (math.md §1.14) -----------

#: rows of the vector buffer of :func:`corral_block_step` (:func:`corral_buffers`): the
#: weights ``λ`` of the atoms, the affine minimizer ``μ``, the linear terms
#: ``⟨g, v_l − α⟩``, the gradient ``g + q(x − α)`` and the point ``x``
LAMBDA, MU, LINEAR, GRADIENT, POINT = range(5)


def corral_buffers(m):
    """Work arrays of :func:`corral_block_step` for ``m`` classes.

    Returns ``(points, gram, system, vectors)``: the atoms ``v_l`` (rows of an
    ``(m + 2) × m`` array), their Gram matrix ``⟨v_l − α, v_k − α⟩``, the augmented
    matrix of the affine minimization and the vectors (rows ``LAMBDA``, ``MU``,
    ``LINEAR``, ``GRADIENT``, ``POINT``).
    """
    cap = m + 2
    return (
        np.zeros((cap, m)),
        np.zeros((cap, cap)),
        np.zeros((cap + 1, cap + 2)),
        np.zeros((5, cap + 1 if cap + 1 > m else m)),
    )


def affine_minimizer(gram, linear, q, s, system, mu):
    """The weights ``μ`` (``Σ_l μ_l = 1``) minimizing ``⟨g, d⟩ + (q/2)‖d‖²`` over
    ``d = Σ_l μ_l (v_l − α)``, ``l < s``: the KKT system
    ``q G μ + ρ 1 = −⟨g, v − α⟩``, ``1ᵀμ = 1`` by Gaussian elimination with partial
    pivoting.  Returns False when the system is singular (affinely dependent atoms).
    """
    size = s + 1
    scale = 1.0
    for l in range(s):
        for c in range(s):
            system[l, c] = q * gram[l, c]
            if abs(system[l, c]) > scale:
                scale = abs(system[l, c])
        system[l, s] = 1.0
        system[l, size] = -linear[l]
    for c in range(s):
        system[s, c] = 1.0
    system[s, s] = 0.0
    system[s, size] = 1.0
    for c in range(size):  # forward elimination
        piv = c
        for l in range(c + 1, size):
            if abs(system[l, c]) > abs(system[piv, c]):
                piv = l
        if not abs(system[piv, c]) > 1e-13 * scale:
            return False
        if piv != c:
            for e in range(c, size + 1):
                system[c, e], system[piv, e] = system[piv, e], system[c, e]
        for l in range(c + 1, size):
            f = system[l, c] / system[c, c]
            if f != 0.0:
                for e in range(c, size + 1):
                    system[l, e] -= f * system[c, e]
    for c in range(size - 1, -1, -1):  # back substitution
        v = system[c, size]
        for e in range(c + 1, size):
            v -= system[c, e] * system[e, size]
        system[c, size] = v / system[c, c]
    for c in range(s):
        mu[c] = system[c, size]
    return True


def drop_atoms(points, gram, linear, lam, s):
    """Remove the atoms whose weight ``λ_l`` is not positive; returns the new count."""
    for l in range(s):  # the columns of the kept atoms, then their rows
        kept = 0
        for c in range(s):
            if lam[c] > 0.0:
                gram[l, kept] = gram[l, c]
                kept += 1
    kept = 0
    for l in range(s):
        if lam[l] > 0.0:
            if kept != l:
                for j in range(points.shape[1]):
                    points[kept, j] = points[l, j]
                for c in range(s):
                    gram[kept, c] = gram[l, c]
                linear[kept] = linear[l]
                lam[kept] = lam[l]
            kept += 1
    return kept


def corral_block_step(g, alpha, yi, q, kind, k, rho, r, idx, a, beta, out, buffers):
    """The exact block step of every loss (math.md §1.14), written into ``out``.

    Minimizes ``⟨g, α' − α⟩ + (q/2)‖α' − α‖²`` over the block domain
    ``A_i = {(1ᵀβ) e_{y_i} − β : β ∈ B}`` by Wolfe's minimum-norm-point algorithm
    [Wolfe1976] on the atoms ``{α} ∪ {vertices}``: a major cycle adds the LMO vertex
    ``u`` at the gradient ``g + q(x − α)`` (:func:`loss_vertex`); minor cycles move
    ``x`` to the minimizer over the affine hull of the atoms (:func:`affine_minimizer`)
    or, when that leaves their convex hull, as far towards it as the hull allows and
    drop the atoms whose weight reaches 0.  The first major cycle is the FW block step
    with exact line search; the method ends, in finitely many cycles, at the block
    optimum, where the FW gap ``⟨g + q(x − α), x − u⟩`` vanishes (to rounding:
    ``≤ OPTIMAL_RTOL·(1 + Φ_i)``).  With ``q = 0`` the problem is linear and its
    solution the LMO vertex.

    Parameters
    ----------
    g, alpha : ndarray (m,)
        The block gradient ``g_i = c_i + s̃_i`` and the block ``α_i``.
    yi : int
        ``y_i``.
    q : float
        Block curvature ``q_i = K_ii/(λn) + σ``.
    kind, k, rho, r
        The loss (:func:`loss_code`).
    idx, a, beta : ndarray
        Scratch space of :func:`loss_vertex` (``r`` ints; ``m`` floats each).
    out : ndarray (m,)
        Output: ``Δα_i = α' − α_i``.
    buffers : tuple
        :func:`corral_buffers` of ``m``.

    Returns
    -------
    step : float
        ``½‖Δα_i‖₁`` (0: the block is optimal).
    gap : float
        The block gap ``Φ(s̃_i; y_i) + ⟨g_i, α_i⟩`` before the step.
    """
    points, gram, system, vectors = buffers
    lam, mu, linear = vectors[LAMBDA], vectors[MU], vectors[LINEAR]
    grad, x = vectors[GRADIENT], vectors[POINT]
    m = g.shape[0]
    cap = points.shape[0]
    for j in range(m):
        a[j] = g[j] - g[yi]
    loss_vertex(a, kind, k, rho, r, idx, beta)
    phi = 0.0
    for j in range(m):
        phi += beta[j] * a[j]
    ga = 0.0
    for j in range(m):
        ga += g[j] * alpha[j]
    gap = phi + ga
    for j in range(m):
        out[j] = 0.0
    tol = OPTIMAL_RTOL * (1.0 + phi)
    if gap <= tol:
        return 0.0, gap
    for j in range(m):
        points[0, j] = alpha[j]
        x[j] = alpha[j]
        grad[j] = g[j]
    gram[0, 0] = 0.0
    linear[0] = 0.0
    lam[0] = 1.0
    s = 1
    for cycle in range(4 * cap):
        if cycle > 0:  # the vertex at the gradient at x (at x = α: known)
            for j in range(m):
                a[j] = grad[j] - grad[yi]
            loss_vertex(a, kind, k, rho, r, idx, beta)
        bsum = 0.0
        for j in range(m):
            bsum += beta[j]
        fw_gap = 0.0
        for j in range(m):  # the vertex u = (1ᵀβ) e_y − β and ⟨grad, x − u⟩
            u = bsum - beta[j] if j == yi else -beta[j]
            points[s, j] = u
            fw_gap += grad[j] * (x[j] - u)
        if fw_gap <= tol:
            break
        if not q > 0:  # a linear problem: its solution is the vertex
            for j in range(m):
                x[j] = points[s, j]
            break
        linear[s] = 0.0
        for j in range(m):
            linear[s] += g[j] * (points[s, j] - alpha[j])
        for l in range(s + 1):
            v = 0.0
            for j in range(m):
                v += (points[s, j] - alpha[j]) * (points[l, j] - alpha[j])
            gram[s, l] = v
            gram[l, s] = v
        lam[s] = 0.0
        s += 1
        added = s - 1
        stalled = False
        while True:  # minor cycles
            if not affine_minimizer(gram, linear, q, s, system, mu):
                stalled = True  # affinely dependent atoms: x is optimal to rounding
                break
            theta = 1.0
            drop = -1
            for l in range(s):
                if mu[l] <= 0.0 and lam[l] - mu[l] > 0.0:
                    t = lam[l] / (lam[l] - mu[l])
                    if t < theta:
                        theta, drop = t, l
            for l in range(s):
                lam[l] = (1.0 - theta) * lam[l] + theta * mu[l]
            if drop < 0:
                break
            stalled = drop == added and theta <= 0.0  # the new vertex brings no descent
            lam[drop] = 0.0
            s = drop_atoms(points, gram, linear, lam, s)
            added = -1
            if stalled:
                break
        total = 0.0
        for l in range(s):
            total += lam[l]
        for j in range(m):
            x[j] = 0.0
        for l in range(s):
            lam[l] /= total
            for j in range(m):
                x[j] += lam[l] * points[l, j]
        for j in range(m):
            grad[j] = g[j] + q * (x[j] - alpha[j])
        if stalled or s == cap:
            break
    total = 0.0
    for j in range(m):  # α' on A_i: Σ_j α'_j = 0 exactly
        if j != yi:
            total += x[j]
    x[yi] = -total
    moved = 0.0
    for j in range(m):
        out[j] = x[j] - alpha[j]
        moved += abs(out[j])
    return 0.5 * moved, gap
