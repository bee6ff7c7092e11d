"""The exact block steps of the top-k, Usunier and weighted losses (math.md §1.14).

Block-coordinate FW on the multi-class dual (math.md §1.13) solves, at a visit of
block ``i``, the block sub-problem

    min_{α' ∈ A_i}  ⟨g, α' − α⟩ + (q/2) ‖α' − α‖²,   A_i = {(1ᵀβ) e_{y_i} − β : β ∈ B},

exactly.  In the coordinates ``b = (β_j)_{j ≠ y_i}`` it is the biased projection
``min_{b ∈ B'} (q/2)‖b‖² + (q/2)(1ᵀb)² − ⟨a, b⟩`` with ``a_j = h_j − h_{y_i}``,
``h = g − q α`` (:func:`shifted_margins`):

- Usunier loss: ``B'`` is the capped simplex ``{0 ≤ b ≤ 1/k, 1ᵀb ≤ 1}``;
  :func:`capped_simplex_step` finds its threshold by one scan of the sorted ``a``;
- top-k hinge: ``B'`` is ``{b ≥ 0, 1ᵀb ≤ 1, b_j ≤ min(1/k, 1ᵀb/(k − 1))}``; its solution is
  the Usunier one when that one is feasible, else the biased projection onto the top-(k−1)
  simplex ``{b ≥ 0, 1ᵀb ≤ (k−1)/k, b_j ≤ 1ᵀb/(k − 1)}`` of [Lapin2015]
  (:func:`topk_simplex_step`);
- weighted losses: Wolfe's minimum-norm point on the vertices of ``A_i``
  (:func:`corral_step`).

:func:`block_qp_step` dispatches on the loss code of
:func:`kernfw.solvers.multiclass._lmo.loss_code`.  Plain Python on preallocated arrays:
the numpy block steps call these functions as they are and
:mod:`kernfw.solvers.multiclass._numba` compiles the very same functions, so both paths take
the same steps.
"""

import numpy as np

from ...fw.steps import quadratic_step
from ._lmo import (
    OPTIMAL_RTOL,
    TOPK,
    USUNIER,
    loss_vertex,
)

__all__ = [
    "pairwise_steps",
    "KERNELS",
    "block_qp_step",
    "block_qp_buffers",
    "shifted_margins",
    "capped_threshold",
    "capped_simplex_step",
    "topk_simplex_step",
    "corral_step",
    "affine_minimizer",
    "drop_atoms",
]


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


def block_qp_buffers(m):
    """Work arrays of :func:`block_qp_step` for ``m`` classes.

    Returns ``(points, gram, system, vectors, order)``: the atoms ``v_l`` of
    :func:`corral_step` (rows of an ``(m + 2) × m`` array), their Gram matrix
    ``⟨v_l − α, v_k − α⟩``, the augmented matrix of the affine minimization, the vectors
    (rows ``LAMBDA``, ``MU``, ``LINEAR``, ``GRADIENT``, ``POINT``) and the order of the
    sorted margins (``m`` ints).
    """
    cap = m + 2
    return (
        np.zeros((cap, m)),
        np.zeros((cap, cap)),
        np.zeros((cap + 1, cap + 2)),
        np.zeros((5, cap + 1)),
        np.zeros(m, dtype=np.int64),
    )


def block_qp_step(g, alpha, yi, q, loss, k, rho, r, idx, a, beta, out, buffers):
    """The exact block step of a built-in loss other than the hinge, written into ``out``.

    Parameters
    ----------
    g, alpha : ndarray (m,)
        The block gradient ``g_i = c_i + s̃_i`` and the block ``α_i``.
    yi : int
        ``y_i``.
    q : float
        Block curvature ``q_i = K_ii/(λn) + σ``.
    loss, k, rho, r
        The loss (:func:`kernfw.solvers.multiclass._lmo.loss_code`).
    idx, a, beta : ndarray
        Scratch space of :func:`~kernfw.solvers.multiclass._lmo.loss_vertex` (``r`` ints;
        ``m`` floats each).
    out : ndarray (m,)
        Output: ``Δα_i = α' − α_i``.
    buffers : tuple
        :func:`block_qp_buffers` of ``m``.

    Returns
    -------
    step : float
        ``½‖Δα_i‖₁`` (0: the block is optimal and is left alone).
    gap : float
        The block gap ``Φ(s̃_i; y_i) + ⟨g_i, α_i⟩`` before the step.
    """
    m = g.shape[0]
    for j in range(m):
        a[j] = g[j] - g[yi]
    loss_vertex(a, loss, k, rho, r, idx, beta)
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
    if not q > 0 or (loss != USUNIER and loss != TOPK):
        corral_step(g, alpha, yi, q, loss, k, rho, r, idx, a, beta, tol, out, buffers)
    else:
        order = buffers[4]
        count = shifted_margins(g, alpha, yi, q, a, order)
        capped_simplex_step(a, order, count, q, 1.0 / k, out)
        if loss == TOPK and k > 2 and not _in_topk_simplex(out, yi, k):
            topk_simplex_step(a, order, count, q, k, out)
        total = 0.0
        for j in range(m):  # α' on A_i: α'_{y_i} = Σ_{j≠y_i} b_j; δ = α' − α
            if j != yi:
                total += out[j]
        for j in range(m):
            out[j] = (total if j == yi else -out[j]) - alpha[j]
    moved = 0.0
    for j in range(m):
        moved += abs(out[j])
    return 0.5 * moved, gap


# -- the capped and the top-k simplex (Usunier loss, top-k hinge) ------------------------------


def shifted_margins(g, alpha, yi, q, a, order):
    """``a_j = h_j − h_{y_i}`` with ``h = g − q α`` (``j ≠ y_i``) into ``a``, and their order.

    ``order[:count]`` lists the classes ``j ≠ y_i`` by decreasing ``a_j`` (ties to the
    smaller index); returns ``count = m − 1``.
    """
    m = g.shape[0]
    hy = g[yi] - q * alpha[yi]
    count = 0
    for j in range(m):
        if j == yi:
            a[j] = 0.0
            continue
        v = g[j] - q * alpha[j] - hy
        a[j] = v
        pos = count
        while pos > 0 and a[order[pos - 1]] < v:
            order[pos] = order[pos - 1]
            pos -= 1
        order[pos] = j
        count += 1
    return count


def capped_threshold(a, order, count, w, slope, target):
    """The ``θ`` with ``E(θ) − slope·θ = target``, ``E(θ) = Σ_j clip(a_j − θ, 0, w)``.

    The left side decreases in ``θ`` and is linear between the breakpoints ``a_j`` and
    ``a_j − w``; they are scanned from the largest down (``order``: ``a`` decreasing),
    keeping the number ``upper`` of entries at the cap ``w``, the number ``inner`` with
    ``a_j > θ`` and the sum of the entries in between.  Needs ``target > E − slope·θ``
    at ``θ = +∞`` and a root below.

    Returns
    -------
    theta : float
    upper, inner : int
        The entries ``order[:upper]`` are at the cap, ``order[upper:inner]`` in between.
    """
    upper = 0
    inner = 0
    between = 0.0
    hi = np.inf
    while True:
        lo = -np.inf
        if inner < count:
            lo = a[order[inner]]
        if upper < inner and a[order[upper]] - w > lo:
            lo = a[order[upper]] - w
        width = (inner - upper) + slope
        if width > 0:
            theta = (upper * w + between - target) / width
            if theta >= lo:
                return min(theta, hi), upper, inner
        if lo == -np.inf:  # flat to the end: the root is the last breakpoint (rounding)
            return hi, upper, inner
        if upper < inner and a[order[upper]] - w >= lo:  # an entry reaches the cap
            between -= a[order[upper]]
            upper += 1
        else:  # an entry leaves 0
            between += a[order[inner]]
            inner += 1
        hi = lo


def capped_simplex_step(a, order, count, q, cap, b):
    """The Usunier block step: ``b`` minimizing ``(q/2)‖b‖² + (q/2)(1ᵀb)² − ⟨a, b⟩`` over the
    capped simplex ``{0 ≤ b ≤ cap, 1ᵀb ≤ 1}`` (math.md §1.14), into ``b`` (``b_{y_i}`` 0).

    KKT: ``q b_j = clip(a_j − θ, 0, q·cap)``, ``θ = q·1ᵀb + ν``, ``ν ≥ 0`` the multiplier
    of ``1ᵀb ≤ 1``: ``θ`` is the root of ``θ − E(θ) = 0`` if that root is ``≤ q``
    (``1ᵀb ≤ 1``), else the root of ``E(θ) = q`` (:func:`capped_threshold`).
    """
    w = q * cap
    theta, upper, inner = capped_threshold(a, order, count, w, 1.0, 0.0)
    if theta > q:
        theta, upper, inner = capped_threshold(a, order, count, w, 0.0, q)
    _fill(a, order, count, q, w, theta, upper, inner, b)
    total = 0.0
    for c in range(count):
        total += b[order[c]]
    if total > 1.0:  # 1ᵀb ≤ 1 to rounding (the quotients carry the rounding of θ / q)
        for c in range(count):
            b[order[c]] /= total


def _fill(a, order, count, q, w, theta, upper, inner, b):
    """``b_j = clip(a_j − θ, 0, w)/q``: the cap for ``order[:upper]``, 0 beyond ``inner``."""
    for j in range(b.shape[0]):
        b[j] = 0.0
    for c in range(count):
        j = order[c]
        if c < upper:
            b[j] = w / q
        elif c < inner:
            b[j] = min(max(a[j] - theta, 0.0), w) / q


def _in_topk_simplex(b, yi, k):
    """Whether ``b_j ≤ 1ᵀb/(k − 1)`` for every ``j`` (to rounding)."""
    total = 0.0
    top = 0.0
    for j in range(b.shape[0]):
        if j != yi:
            total += b[j]
            if b[j] > top:
                top = b[j]
    return top * (k - 1) <= total * (1.0 + 1e-12)


def _topk_slope(a, order, count, w, kappa):
    """``F(w) = (κ + 1) w − τ − Σ_j (a_j − τ)⁺/κ`` with ``τ`` the root of ``E_w(τ) = κ w``:
    the derivative of the top-k simplex problem in ``1ᵀb`` (math.md §1.14); returns
    ``(F, τ, upper, inner)``."""
    tau, upper, inner = capped_threshold(a, order, count, w, 0.0, kappa * w)
    over = 0.0
    for c in range(inner):
        over += a[order[c]] - tau
    return (kappa + 1.0) * w - tau - over / kappa, tau, upper, inner


def topk_simplex_step(a, order, count, q, k, b):
    """The top-k hinge block step when the Usunier one leaves the top-k polytope: ``b``
    minimizing ``(q/2)‖b‖² + (q/2)(1ᵀb)² − ⟨a, b⟩`` over the top-(k−1) simplex
    ``{b ≥ 0, 1ᵀb ≤ (k−1)/k, b_j ≤ 1ᵀb/(k − 1)}`` of [Lapin2015] (math.md §1.14), into ``b``.

    With the cap ``w = q·1ᵀb/(k − 1)``: ``q b_j = clip(a_j − τ, 0, w)`` where
    ``Σ_j clip(a_j − τ, 0, w) = (k − 1) w``, and ``w`` is the root of the nondecreasing,
    piecewise linear ``F`` of :func:`_topk_slope` on ``[0, q/k]`` (or ``q/k`` when
    ``F(q/k) ≤ 0``; 0 when ``F(0⁺) = −T_{k−1}(a)/(k − 1) ≥ 0``).  The root is bracketed
    by bisection until both ends have the same active sets; ``F`` is linear there, and
    one secant step gives the root.
    """
    kappa = k - 1.0
    top = 0.0
    for c in range(k - 1):
        top += a[order[c]]
    for j in range(b.shape[0]):
        b[j] = 0.0
    if top <= 0.0:  # F(0⁺) ≥ 0: b = 0
        return
    hi = q / k
    f_hi, tau, upper, inner = _topk_slope(a, order, count, hi, kappa)
    if f_hi <= 0.0:  # 1ᵀb = (k − 1)/k
        _fill(a, order, count, q, hi, tau, upper, inner, b)
        return
    lo, f_lo, lo_sets = 0.0, -top / kappa, -1
    hi_sets = upper * (count + 1) + inner
    w = hi
    for _ in range(200):
        secant = lo_sets == hi_sets
        w = lo - f_lo * (hi - lo) / (f_hi - f_lo) if secant else 0.5 * (lo + hi)
        if not lo < w < hi:  # the root is an end of the bracket, to rounding
            w = hi if lo == 0.0 or f_hi <= -f_lo else lo
            f, tau, upper, inner = _topk_slope(a, order, count, w, kappa)
            break
        f, tau, upper, inner = _topk_slope(a, order, count, w, kappa)
        sets = upper * (count + 1) + inner
        if f == 0.0 or (secant and sets == hi_sets) or not hi - lo > 1e-15 * hi:
            break
        if f < 0.0:
            lo, f_lo, lo_sets = w, f, sets
        else:
            hi, f_hi, hi_sets = w, f, sets
    _fill(a, order, count, q, w, tau, upper, inner, b)


# -- Wolfe's minimum-norm point: the weighted losses (math.md §1.14) -----------------------------

#: rows of the vector buffer of :func:`corral_step` (:func:`block_qp_buffers`): the
#: weights ``λ`` of the atoms, the affine minimizer ``μ``, the linear terms
#: ``⟨g, v_l − α⟩``, the gradient ``g + q(x − α)`` and the point ``x``
LAMBDA, MU, LINEAR, GRADIENT, POINT = range(5)


# complex: the affine step of the exact block QP (math.md §1.14), compiled
def affine_minimizer(gram, linear, q, s, system, mu):  # noqa: C901
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


# complex: the exact block QP (math.md §1.14): one active-set loop, compiled
# noqa: C901
# long: the exact block QP (math.md §1.14): one active-set loop, compiled
def corral_step(g, alpha, yi, q, loss, k, rho, r, idx, a, beta, tol, out, buffers):  # noqa: C901
    """The exact block step of the weighted losses (math.md §1.14), into ``out``.

    Minimizes ``⟨g, α' − α⟩ + (q/2)‖α' − α‖²`` over the block domain
    ``A_i = {(1ᵀβ) e_{y_i} − β : β ∈ B}`` by Wolfe's minimum-norm-point algorithm
    [Wolfe1976] on the atoms ``{α} ∪ {vertices}``: a major cycle adds the LMO vertex
    ``u`` at the gradient ``g + q(x − α)`` (:func:`~kernfw.solvers.multiclass._lmo.loss_vertex`); minor cycles move
    ``x`` to the minimizer over the affine hull of the atoms (:func:`affine_minimizer`)
    or, when that leaves their convex hull, as far towards it as the hull allows and
    drop the atoms whose weight reaches 0.  The first major cycle is the FW block step
    with exact line search; the method ends, in finitely many cycles, at the block
    optimum, where the FW gap ``⟨g + q(x − α), x − u⟩`` vanishes (to rounding:
    ``≤ tol``).  With ``q = 0`` the problem is linear and its solution the LMO vertex.

    Parameters are those of :func:`block_qp_step`; ``beta`` holds the LMO answer at
    ``g`` on entry and ``tol`` is the FW gap counted as zero.
    """
    points, gram, system, vectors = buffers[0], buffers[1], buffers[2], buffers[3]
    lam, mu, linear = vectors[LAMBDA], vectors[MU], vectors[LINEAR]
    grad, x = vectors[GRADIENT], vectors[POINT]
    m = g.shape[0]
    cap = points.shape[0]
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
            loss_vertex(a, loss, k, rho, r, idx, beta)
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
    for j in range(m):
        out[j] = x[j] - alpha[j]


#: the functions of this module in the order they call each other: a compiled backend
#: registers them all (``numba.extending.register_jitable``) before compiling
#: :func:`block_qp_step`
KERNELS = (
    block_qp_buffers,
    shifted_margins,
    capped_threshold,
    _fill,
    capped_simplex_step,
    _in_topk_simplex,
    _topk_slope,
    topk_simplex_step,
    affine_minimizer,
    drop_atoms,
    corral_step,
)
