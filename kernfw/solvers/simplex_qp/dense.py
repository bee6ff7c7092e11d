"""Small dense concave QPs over the (capped) simplex, solved exactly by an active-set method.

The restricted problem of the cutting-plane solver (math.md §3.10) is

    max_{β ∈ Δ_k} f(β) = qᵀβ − βᵀQβ,

with ``k`` the number of cuts (tens to hundreds) and ``Q = AAᵀ/(2λ)`` a PSD
Gram matrix of rank at most the joint-feature dimension.  On badly scaled data
``Q`` is ill-conditioned (features with a large common offset make every cut
nearly parallel) and Frank-Wolfe steps zig-zag for thousands of iterations
without progress.  A primal active-set method does not care: on the face
``{β ∈ Δ_k : β_j = 0 for j ∉ S}`` of the current support ``S`` it takes the
Newton step of the equality-constrained problem in a null-space basis of
``1ᵀ`` (a direction of zero curvature is followed as an ascent ray), stops at
the first bound that blocks (and drops that index), and otherwise adds the
index of the largest reduced gradient (the primal active-set method of
[NocedalWright2006], Chapter 16).  Each step costs ``O(k² + |S|³)``;
the support of an optimum has at most ``rank(Q) + 1`` elements.

Upper bounds ``β ≤ u`` (the capped simplex ``Δ_u`` of the soft ball, math.md §2.9 and
§2.14) add a second kind of blocking bound: the face is then that of the free indices
(``0 < β_j < u_j``), and an index at its cap re-enters when its gradient is below the
free ones' (the same primal active-set method on a box and one equality).

Accuracy.  With ``g = ∇f(β) = q − 2Qβ``, the Frank-Wolfe gap
``G(β) = max_{s∈Δ_u} sᵀg − βᵀg ≥ f* − f(β)`` certifies the result; the method stops
when ``G ≤ tol``, or returns the best point found when rounding stops its
progress (any point of the simplex is a valid dual point for the caller).
"""

import numpy as np

__all__ = ["solve_dense_simplex_qp", "simplex_fw_gap", "capped_vertex"]

#: eigenvalues of the reduced Hessian below this fraction of its largest count as zero
CURVATURE_RTOL = 1e-12
#: machine epsilon of float64
EPS = float(np.finfo(np.float64).eps)
#: the rounding level of a gradient component, in ulps of the gradient's largest term
NOISE_ULPS = 64.0


def capped_vertex(g, cap=None):
    """The vertex ``s = argmax_{s∈Δ_u} sᵀg`` of the capped simplex
    ``Δ_u = {0 ≤ s ≤ u, 1ᵀs = 1}`` (the unit simplex for ``cap`` None).

    The largest ``g_j`` take their caps ``u_j`` in decreasing order until the mass 1 is
    spent, the last one the remainder; ties go to the smaller index.

    Parameters
    ----------
    g : ndarray of shape (k,)
        The linear objective.
    cap : ndarray of shape (k,) or None
        The caps ``u_j > 0`` with ``1ᵀu ≥ 1`` (None: no caps, the vertex ``e_{argmax g}``).

    Returns
    -------
    ndarray of shape (k,)
    """
    g = np.asarray(g, dtype=np.float64)
    s = np.zeros_like(g)
    if cap is None:
        s[int(np.argmax(g))] = 1.0
        return s
    order = np.argsort(-g, kind="stable")
    filled = np.cumsum(cap[order])
    last = min(int(np.searchsorted(filled, 1.0)), g.size - 1)  # first with Σ ≥ 1
    s[order[:last]] = cap[order[:last]]
    s[order[last]] = 1.0 - (filled[last - 1] if last > 0 else 0.0)
    return s


def simplex_fw_gap(Q, q, beta, cap=None):
    """The Frank-Wolfe gap ``G = max_{s∈Δ_u} sᵀg − βᵀg`` of ``f(β) = qᵀβ − βᵀQβ`` at ``β``.

    Parameters
    ----------
    Q : ndarray of shape (k, k)
        PSD matrix ``Q``.
    q : ndarray of shape (k,)
        Linear term ``q``.
    beta : ndarray of shape (k,)
        A point ``β`` of the simplex (of ``Δ_u``).
    cap : ndarray of shape (k,) or None
        The caps ``u`` (None: the unit simplex, ``max_s sᵀg = max_j g_j``).

    Returns
    -------
    float
        ``G(β) ≥ f* − f(β)``.
    """
    g = q - 2.0 * (Q @ beta)
    top = g.max() if cap is None else capped_vertex(g, cap) @ g
    return float(top - beta @ g)


def _null_space_of_ones(s):
    """An orthonormal basis ``Z`` (s × (s−1)) of ``{z : 1ᵀz = 0}``.

    The Householder reflector ``H = I − 2vvᵀ/(vᵀv)``, ``v = e₀ + 1/√s``, maps ``e₀``
    to ``−1/√s``; its other columns are orthonormal and orthogonal to ``1``.
    """
    v = np.ones(s) / np.sqrt(s)
    v[0] += 1.0
    H = np.eye(s) - 2.0 * np.outer(v, v) / (v @ v)
    return H[:, 1:]


def _face_direction(Q_S, g_S, noise):
    """The step ``d`` (``1ᵀd = 0``) toward the maximizer of ``f`` on the face's affine hull.

    Returns ``(d, is_ray)``: the Newton step ``d = Z H⁺ Zᵀg_S`` of
    ``max_d g_Sᵀd − dᵀQ_S d`` over ``1ᵀd = 0`` (``H = 2ZᵀQ_S Z``), or, when ``Zᵀg_S`` has a
    component above the rounding level ``noise`` along a zero-curvature direction of
    ``H``, that component: an ascent ray, along which ``f`` grows linearly up to a bound.
    """
    Z = _null_space_of_ones(g_S.size)
    H = 2.0 * (Z.T @ Q_S @ Z)
    h, V = np.linalg.eigh((H + H.T) / 2)
    r = V.T @ (Z.T @ g_S)  # the reduced gradient in the eigenbasis of H
    flat = h <= CURVATURE_RTOL * max(h.max(), 0.0)
    ray = np.where(flat & (np.abs(r) > noise), r, 0.0)
    if np.any(ray):
        return Z @ (V @ ray), True
    return Z @ (V @ np.where(flat, 0.0, r / np.where(flat, 1.0, h))), False


def _ratio_test(beta_S, d_S, cap_S):
    """``(t, j, upper)``: the largest ``t`` with ``0 ≤ β_S + t d_S ≤ u_S``, the position
    that blocks and whether it blocks at its cap."""
    steps = np.full(d_S.size, np.inf)
    down, up = d_S < 0, d_S > 0
    steps[down] = -beta_S[down] / d_S[down]
    steps[up] = (cap_S[up] - beta_S[up]) / d_S[up]
    j = int(np.argmin(steps))
    return float(steps[j]), j, bool(up[j])


def _entering(g, beta, free, cap):
    """The indices a solved face lets in, by the largest violation of the optimality
    conditions (free ``g_j`` equal to ``λ``; ``g_j ≤ λ`` at 0, ``g_j ≥ λ`` at the cap):
    an index at 0 with ``g_j > λ``, or one at its cap with ``g_j < λ``; with no free index
    the pair of the largest ``g`` at 0 and the smallest at a cap.  Empty when optimal."""
    at_cap = ~free & (beta >= cap)
    at_zero = ~free & ~at_cap
    low = np.flatnonzero(at_zero)
    high = np.flatnonzero(at_cap)
    best_low = low[np.argmax(g[low])] if low.size else -1
    best_high = high[np.argmin(g[high])] if high.size else -1
    if not free.any():
        if best_low >= 0 and best_high >= 0 and g[best_low] > g[best_high]:
            return [best_low, best_high]
        return []
    lam = float(g[free] @ beta[free]) / max(float(beta[free].sum()), 1e-300)
    lam = float(g[free].mean()) if not beta[free].sum() > 0 else lam
    up = g[best_low] - lam if best_low >= 0 else 0.0
    down = lam - g[best_high] if best_high >= 0 else 0.0
    if max(up, down) <= 0.0:
        return []
    return [best_low] if up >= down else [best_high]


def _feasible_start(Q, q, beta0, cap):
    """The start on ``Δ_u``: ``beta0`` clipped and scaled onto the simplex (caps: its
    projection by a shift, :func:`_onto_capped`), or the capped vertex of ``q − diag(Q)``."""
    if beta0 is None:
        return capped_vertex(q - np.diag(Q), cap)
    beta = np.clip(np.asarray(beta0, dtype=np.float64), 0.0, None)
    if cap is None:
        return beta / beta.sum()
    return _onto_capped(beta, cap)


def _onto_capped(beta, cap):
    """``clip(β + θ, 0, u)`` with ``θ`` chosen (by bisection) so that the entries sum to 1."""
    lo, hi = -float(beta.max()) - 1.0, float(cap.max()) + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.clip(beta + mid, 0.0, cap).sum() < 1.0:
            lo = mid
        else:
            hi = mid
    out = np.clip(beta + hi, 0.0, cap)
    return out


def _renormalize(beta, free, cap):
    """Clip to ``[0, u]`` and spread the rounding of ``1ᵀβ − 1`` over the free indices."""
    np.clip(beta, 0.0, cap, out=beta)
    idx = np.flatnonzero(free & (beta > 0))
    if idx.size:
        beta[idx] += (1.0 - beta.sum()) / idx.size
        np.clip(beta, 0.0, cap, out=beta)
    else:
        beta /= beta.sum()
    return beta


# long: the primal active-set loop (face step, ratio test at either bound, entering index)
def solve_dense_simplex_qp(Q, q, beta0=None, tol=1e-12, max_iter=None, cap=None):  # noqa: C901
    """Maximize ``f(β) = qᵀβ − βᵀQβ`` over the (capped) simplex by a primal active-set method.

    Parameters
    ----------
    Q : ndarray of shape (k, k)
        PSD matrix ``Q`` (any rank, any scale).
    q : ndarray of shape (k,)
        Linear term ``q``.
    beta0 : ndarray of shape (k,) or None
        Warm start on the simplex (None: the vertex of the largest ``q_j − Q_jj``).
    tol : float
        Stop when the Frank-Wolfe gap ``G(β) ≤ tol`` (see the module docstring).
    max_iter : int or None
        Active-set iterations allowed (None: ``10 k + 100``).
    cap : ndarray of shape (k,) or None
        Upper bounds ``u_j > 0`` with ``1ᵀu ≥ 1``: the capped simplex
        ``Δ_u = {0 ≤ β ≤ u, 1ᵀβ = 1}`` (None: the unit simplex).

    Returns
    -------
    beta : ndarray of shape (k,)
        The last point whose ``f`` did not fall below the best by more than rounding.
    gap : float
        Its Frank-Wolfe gap ``G(β)``.
    n_iter : int
        Active-set iterations taken.
    """
    Q = np.asarray(Q, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    k = q.size
    bound = np.full(k, np.inf) if cap is None else np.asarray(cap, dtype=np.float64)
    beta = _feasible_start(Q, q, beta0, cap if cap is None else bound)
    max_iter = 10 * k + 100 if max_iter is None else int(max_iter)
    # the rounding level of g = q − 2Qβ and of f: a few ulps of their largest terms (Σβ = 1)
    noise = NOISE_ULPS * EPS * (np.abs(q).max() + 2.0 * np.abs(Q).max())
    free = (beta > 0) & (beta < bound)
    best, best_value = beta.copy(), float(q @ beta - beta @ (Q @ beta))
    face_solved = False
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        g = q - 2.0 * (Q @ beta)
        if simplex_fw_gap(Q, q, beta, cap if cap is None else bound) <= tol:
            break
        S = np.flatnonzero(free)
        if not face_solved and S.size > 1:
            d_S, is_ray = _face_direction(Q[np.ix_(S, S)], g[S], noise * np.sqrt(S.size))
            face_solved = not is_ray and g[S] @ d_S <= 0.0
        if face_solved or S.size <= 1:
            # β maximizes f on its face: the most violating bound index enters
            entering = _entering(g, beta, free, bound)
            if not entering:
                break  # optimal up to rounding
            free[entering] = True
            face_solved = False
            continue
        step, j, upper = _ratio_test(beta[S], d_S, bound[S])
        if not is_ray and step >= 1.0:
            beta[S] += d_S  # the full Newton step: β now maximizes f on its face
            face_solved = True
        elif np.isfinite(step):
            beta[S] += step * d_S  # blocked: S[j] leaves the face at a bound
            beta[S[j]] = bound[S[j]] if upper else 0.0
            free[S[j]] = False
        else:
            break  # an unbounded ascent ray: impossible on the simplex but for rounding
        beta = _renormalize(beta, free, bound)
        free &= (beta > 0) & (beta < bound)
        value = float(q @ beta - beta @ (Q @ beta))
        if value < best_value - noise:
            break  # rounding went downhill: the best point is as good as it gets
        best, best_value = beta.copy(), max(value, best_value)  # ascent, up to rounding
    return best, simplex_fw_gap(Q, q, best, cap if cap is None else bound), n_iter
