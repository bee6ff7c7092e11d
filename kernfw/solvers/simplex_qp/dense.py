"""Small dense concave QPs over the simplex, solved exactly by an active-set method.

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

Accuracy.  With ``g = ∇f(β) = q − 2Qβ``, the Frank-Wolfe gap
``G(β) = max_j g_j − βᵀg ≥ f* − f(β)`` certifies the result; the method stops
when ``G ≤ tol``, or returns the best point found when rounding stops its
progress (any point of the simplex is a valid dual point for the caller).
"""

import numpy as np

__all__ = ["solve_dense_simplex_qp", "simplex_fw_gap"]

#: eigenvalues of the reduced Hessian below this fraction of its largest count as zero
CURVATURE_RTOL = 1e-12
#: machine epsilon of float64
EPS = float(np.finfo(np.float64).eps)
#: the rounding level of a gradient component, in ulps of the gradient's largest term
NOISE_ULPS = 64.0


def simplex_fw_gap(Q, q, beta):
    """The Frank-Wolfe gap ``G = max_j g_j − βᵀg`` of ``f(β) = qᵀβ − βᵀQβ`` at ``β``.

    Parameters
    ----------
    Q : ndarray of shape (k, k)
        PSD matrix ``Q``.
    q : ndarray of shape (k,)
        Linear term ``q``.
    beta : ndarray of shape (k,)
        A point ``β`` of the simplex.

    Returns
    -------
    float
        ``G(β) ≥ f* − f(β)``.
    """
    g = q - 2.0 * (Q @ beta)
    return float(g.max() - beta @ g)


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


def _ratio_test(beta_S, d_S):
    """``(t, j)``: the largest ``t`` with ``β_S + t d_S ≥ 0`` and the position that blocks."""
    shrinking = np.flatnonzero(d_S < 0)
    if shrinking.size == 0:
        return np.inf, -1
    steps = -beta_S[shrinking] / d_S[shrinking]
    j = int(np.argmin(steps))
    return float(steps[j]), int(shrinking[j])


def solve_dense_simplex_qp(Q, q, beta0=None, tol=1e-12, max_iter=None):
    """Maximize ``f(β) = qᵀβ − βᵀQβ`` over the unit simplex by a primal active-set method.

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
    if beta0 is None:
        beta = np.zeros(k)
        beta[int(np.argmax(q - np.diag(Q)))] = 1.0
    else:
        beta = np.clip(np.asarray(beta0, dtype=np.float64), 0.0, None)
        beta /= beta.sum()
    max_iter = 10 * k + 100 if max_iter is None else int(max_iter)
    # the rounding level of g = q − 2Qβ and of f: a few ulps of their largest terms (Σβ = 1)
    noise = NOISE_ULPS * EPS * (np.abs(q).max() + 2.0 * np.abs(Q).max())
    support = beta > 0
    best, best_value = beta.copy(), float(q @ beta - beta @ (Q @ beta))
    face_solved = False
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        Qb = Q @ beta
        g = q - 2.0 * Qb
        if g.max() - beta @ g <= tol:
            break
        S = np.flatnonzero(support)
        if not face_solved and S.size > 1:
            d_S, is_ray = _face_direction(Q[np.ix_(S, S)], g[S], noise * np.sqrt(S.size))
            face_solved = not is_ray and g[S] @ d_S <= 0.0
        if face_solved or S.size == 1:
            # β maximizes f on its face: the index of the largest gradient enters
            outside = np.flatnonzero(~support)
            if outside.size == 0 or g[outside].max() <= g[S] @ beta[S]:
                break  # optimal up to rounding
            support[outside[np.argmax(g[outside])]] = True
            face_solved = False
            continue
        step, j = _ratio_test(beta[S], d_S)
        if not is_ray and step >= 1.0:
            beta[S] += d_S  # the full Newton step: β now maximizes f on its face
            face_solved = True
        elif np.isfinite(step):
            beta[S] += step * d_S  # blocked: S[j] leaves the support
            beta[S[j]] = 0.0
            support[S[j]] = False
        else:
            break  # an unbounded ascent ray: impossible on the simplex but for rounding
        beta = np.clip(beta, 0.0, None)
        beta /= beta.sum()
        support &= beta > 0
        value = float(q @ beta - beta @ (Q @ beta))
        if value < best_value - noise:
            break  # rounding went downhill: the best point is as good as it gets
        best, best_value = beta.copy(), max(value, best_value)  # ascent, up to rounding
    return best, simplex_fw_gap(Q, q, best), n_iter
