"""Scalar kernels written once for the numpy path and the compiled backends.

Plain Python on scalars and preallocated arrays: the numpy block-coordinate FW
(:mod:`kernfw.solvers.multiclass`) calls them as they are, and
:mod:`kernfw.solvers._bcfw_numba` compiles the very same functions with
``numba.njit``, so both paths take the same steps in the same order;
:func:`exactly_symmetric` is compiled by both compiled backends.
"""

from ..fw.steps import quadratic_step

__all__ = ["pairwise_steps", "exactly_symmetric"]


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
