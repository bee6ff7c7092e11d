"""Compiled group scores and chain marginals of online MKL (math.md §4.4, §4.6).

The compiled core of :class:`kernfw.solvers.mkl.kernel_groups.KernelGroups` and of the
CRF marginals (:mod:`kernfw.solvers.mkl.crf`).  A round of online MKL on a word with
positions ``P`` reads the kernel blocks ``K_k[P, S]`` (``Mk × T × n_S``, ``S`` the
support in slot order) once and needs

- the node scores of every group, ``S_k = K_k[P, S] A_k`` (one coefficient matrix per
  group: the proximal method), :func:`group_nodes`;
- or, when every group has the same coefficients up to a factor ``s_k`` (dual
  averaging: ``A_k = s_k B``), their sum ``Σ_k s_k K_k[P, S] B``
  (:func:`combined_nodes`, one pass over the blocks instead of ``Mk`` products with
  ``q`` columns) and the inner products ``⟨δ, K_k[P, S] B⟩`` of the norm identity
  (:func:`shared_inner`).

Kernels of small-integer features are tables (:func:`table_scores`, :func:`table_inner`,
:func:`table_average_scores`, which read the coefficients by state), and the products of
binary features are bit counts (:func:`bit_products`).  :func:`forward_backward` is the
recursion of :func:`kernfw.solvers.mkl.crf.chain_marginals` with shifted exponentials.
"""

import math

import numpy as np
from numba import njit

from ...operators import _products_numba as kp

__all__ = [
    "rbf_exponents",
    "program_combined",
    "rows_times",
    "row_products",
    "program_inner",
    "program_blocks",
    "group_nodes",
    "combined_nodes",
    "shared_inner",
    "forward_backward",
    "table_scores",
    "table_inner",
    "table_average_scores",
    "bit_products",
]

#: kinds of a support row ``j`` in an epoch of the epoch average (math.md §4.8), in this
#: order (a block's largest decides its sums): not visited (``Δ_j = 0``), new in the epoch
#: (``Δ_j = B_j``), or changed otherwise
ROW_UNVISITED, ROW_NEW, ROW_CHANGED = 0, 1, 2

#: reassociation of the sums over the support (they vectorize)
_FLAGS = {"reassoc", "contract"}


@njit(cache=True, fastmath=_FLAGS)
def rbf_exponents(ip, sq_rows, sq_cols, gamma0, out):
    """``out[t, j] = −γ_0 max(‖a_t‖² + ‖b_j‖² − 2 ip[t, j], 0)``, the exponents of the
    operators' RBF (:func:`~kernfw.operators._products_numba.rbf_exponent`; then ``exp``
    in numpy)."""
    T, ns = ip.shape
    for t in range(T):
        for j in range(ns):
            out[t, j] = kp.rbf_exponent(gamma0, ip[t, j], sq_rows[t], sq_cols[j])


@njit(cache=True, fastmath=_FLAGS)
def _kernel_row(r, t, ip, E, codes, gammas, coef0s, powers, ladder, row):
    """``row ← k_r(ip[t])`` for kernel ``r`` of a program.

    The kernels other than the RBF are :func:`~kernfw.operators._products_numba.kernel_of_products` (``powers[r]`` the
    polynomial's degree).  RBF: ``E^m`` (``E = exp(−γ_0 D)``, :func:`rbf_exponents`;
    ``powers[r] = m``), continuing the *ladder* (``ladder[:n]`` the last RBF row of this
    ``t``, ``ladder[n]`` its power, 0 for none) when ``m`` is a multiple of that power;
    ``m = 0`` means the real power ``γ/γ_0`` (an RBF off the ladder).
    """
    code, g, c, m = codes[r], gammas[r], coef0s[r], powers[r]
    n = ip.shape[1]
    if code != kp.RBF:
        for j in range(n):
            row[j] = kp.kernel_of_products(code, g, c, m, ip[t, j], 0.0, 0.0)
    elif m == 0:
        ratio = g / gammas[0]
        for j in range(n):
            row[j] = E[t, j] ** ratio
    else:
        have = int(ladder[n])  # the power of the ladder's row (0: none yet in this row)
        if have > 0 and m % have == 0:
            for j in range(n):
                ladder[j] = kp.int_power(ladder[j], m // have)
        else:
            for j in range(n):
                ladder[j] = kp.int_power(E[t, j], m)
        ladder[n] = m
        for j in range(n):
            row[j] = ladder[j]


@njit(cache=True, fastmath=_FLAGS)
def program_combined(ip, E, codes, gammas, coef0s, powers, weights, out):
    """``out[t, j] = Σ_r weights[r] k_r(ip[t, j])``: the combined kernel ``Σ_k s_k K_k``.

    ``E = exp(−γ_0 D)`` (:func:`rbf_exponents`); every RBF of the program is ``E^m``.
    """
    T, ns = ip.shape
    row, ladder = np.empty(ns), np.empty(ns + 1)
    out[:] = 0.0
    for t in range(T):
        ladder[ns] = 0.0
        for r in range(codes.shape[0]):
            w = weights[r]
            if w == 0.0:
                continue
            _kernel_row(r, t, ip, E, codes, gammas, coef0s, powers, ladder, row)
            for j in range(ns):
                out[t, j] += w * row[j]


@njit(cache=True, fastmath=_FLAGS)
def rows_times(K, B, out):
    """``out = K @ B[:n_S]`` (T × q) without a threaded BLAS call (too small to pay off)."""
    T, ns = K.shape
    q = B.shape[1]
    out[:] = 0.0
    for t in range(T):
        for j in range(ns):
            v = K[t, j]
            for c in range(q):
                out[t, c] += v * B[j, c]


@njit(cache=True, fastmath=_FLAGS)
def row_products(delta, B, M):
    """``M[t, j] = ⟨δ_t, B_j⟩`` for the first ``M.shape[1]`` rows of ``B``, over the
    nonzero states of ``δ_t`` only (two for the hinge); returns the rows ``t`` with
    ``δ_t ≠ 0`` (the others are left unset)."""
    T, ns = M.shape
    q = delta.shape[1]
    rows = np.zeros(T, dtype=np.bool_)
    states = np.empty(q, dtype=np.intp)
    for t in range(T):
        nz = 0
        for c in range(q):
            if delta[t, c] != 0.0:
                states[nz] = c
                nz += 1
        if nz == 0:
            continue
        rows[t] = True
        for j in range(ns):
            acc = 0.0
            for u in range(nz):
                acc += delta[t, states[u]] * B[j, states[u]]
            M[t, j] = acc
    return rows


@njit(cache=True, fastmath=_FLAGS)
def program_inner(ip, E, groups, codes, gammas, coef0s, powers, scales, M, rows, out):
    """``out[groups[r]] += scales[r] Σ_{t,j} k_r(ip[t, j]) M[t, j]`` (``⟨K_k, M⟩``) over
    the rows ``t`` with ``rows[t]``."""
    T, ns = ip.shape
    row, ladder = np.empty(ns), np.empty(ns + 1)
    out[:] = 0.0
    for t in range(T):
        if not rows[t]:
            continue
        ladder[ns] = 0.0
        for r in range(codes.shape[0]):
            _kernel_row(r, t, ip, E, codes, gammas, coef0s, powers, ladder, row)
            acc = 0.0
            for j in range(ns):
                acc += row[j] * M[t, j]
            out[groups[r]] += scales[r] * acc


@njit(cache=True, fastmath=_FLAGS)
def program_blocks(ip, E, groups, codes, gammas, coef0s, powers, scales, out):
    """``out[groups[r], t, j] = scales[r] k_r(ip[t, j])``: the blocks of every kernel."""
    T, ns = ip.shape
    row, ladder = np.empty(ns), np.empty(ns + 1)
    for t in range(T):
        ladder[ns] = 0.0
        for r in range(codes.shape[0]):
            _kernel_row(r, t, ip, E, codes, gammas, coef0s, powers, ladder, row)
            k, sc = groups[r], scales[r]
            for j in range(ns):
                out[k, t, j] = sc * row[j]


@njit(cache=True, fastmath=_FLAGS)
def group_nodes(K, A, out):
    """``out[k] = K[k] @ A[k]``: the node scores of every group.

    Parameters
    ----------
    K : ndarray (Mk, T, n_S)
        Kernel blocks ``K_k[P, S]``.
    A : ndarray (Mk, ≥ n_S, q)
        Coefficients of every group in slot order (rows past ``n_S`` are ignored).
    out : ndarray (Mk, T, q)
    """
    Mk, T, ns = K.shape
    q = out.shape[2]
    out[:] = 0.0
    for k in range(Mk):
        for t in range(T):
            for j in range(ns):
                v = K[k, t, j]
                if v != 0.0:
                    for c in range(q):
                        out[k, t, c] += v * A[k, j, c]


@njit(cache=True, fastmath=_FLAGS)
def combined_nodes(K, scales, B, out):
    """``out = Σ_k scales[k] K[k] @ B``: the node scores of shared coefficients.

    Parameters
    ----------
    K : ndarray (Mk, T, n_S)
    scales : ndarray (Mk,)
        ``s_k`` (``A_k = s_k B``).
    B : ndarray (≥ n_S, q)
    out : ndarray (T, q)
    """
    Mk, T, ns = K.shape
    q = out.shape[1]
    out[:] = 0.0
    for t in range(T):
        for j in range(ns):
            v = 0.0
            for k in range(Mk):
                v += scales[k] * K[k, t, j]
            if v != 0.0:
                for c in range(q):
                    out[t, c] += v * B[j, c]


@njit(cache=True, fastmath=_FLAGS)
def shared_inner(K, delta, B, out):
    """``out[k] = ⟨δ, K[k] @ B⟩ = Σ_{t,j} K[k, t, j] ⟨δ_t, B_j⟩``.

    Parameters
    ----------
    K : ndarray (Mk, T, n_S)
    delta : ndarray (T, q)
    B : ndarray (≥ n_S, q)
    out : ndarray (Mk,)
    """
    Mk, T, ns = K.shape
    q = delta.shape[1]
    out[:] = 0.0
    for t in range(T):
        for j in range(ns):
            m = 0.0
            for c in range(q):
                m += delta[t, c] * B[j, c]
            if m != 0.0:
                for k in range(Mk):
                    out[k] += K[k, t, j] * m


@njit(cache=True)
def _logsumexp(v):
    top = v[0]
    for x in v[1:]:
        if x > top:
            top = x
    acc = 0.0
    for x in v:
        acc += math.exp(x - top)
    return top + math.log(acc)


#: sums of shifted exponentials below this are recomputed in log space (their logarithm
#: would lose digits); exponents above the large one would overflow
_TINY, _LARGE_EXPONENT = 1e-280, 700.0


@njit(cache=True)
def _shifted_exp(v, out):
    """``out = exp(v − max v)``; returns ``max v``."""
    top = v[0]
    for x in v[1:]:
        if x > top:
            top = x
    for i in range(v.shape[0]):
        out[i] = math.exp(v[i] - top)
    return top


# complex: the CRF forward-backward recursions (math.md §4.6) as one compiled loop
@njit(cache=True)
def forward_backward(theta, G, mu, pairs):  # noqa: C901
    """Node marginals ``mu`` (T, q), transition counts ``pairs`` (q, q); returns ``log Z``.

    ``α_1 = θ_1``, ``α_t(b) = θ_t(b) + logsumexp_a(α_{t−1}(a) + G_ab)``; ``β_T = 0``,
    ``β_t(a) = logsumexp_b(G_ab + θ_{t+1}(b) + β_{t+1}(b))`` (math.md §4.6).  Each
    ``logsumexp`` is a product with the shifted exponentials ``exp(G − max G)`` (computed
    once) and ``exp(α_{t−1} − max α_{t−1})``: ``O(q)`` exponentials per position instead of
    ``O(q²)``; a sum that underflows is recomputed in log space, and so are the pair
    marginals of a position whose shifted products cannot hold them.
    """
    T, q = theta.shape
    alpha = np.empty((T, q))
    beta = np.zeros((T, q))
    tmp, ea, eb = np.empty(q), np.empty(q), np.empty(q)
    g_top = G[0, 0]
    for a in range(q):
        for b in range(q):
            g_top = max(g_top, G[a, b])
    EG = np.empty((q, q))
    for a in range(q):
        for b in range(q):
            EG[a, b] = math.exp(G[a, b] - g_top)
    alpha[0] = theta[0]
    for t in range(1, T):
        top = _shifted_exp(alpha[t - 1], ea)
        for b in range(q):
            acc = 0.0
            for a in range(q):
                acc += ea[a] * EG[a, b]
            if acc > _TINY:
                alpha[t, b] = theta[t, b] + top + g_top + math.log(acc)
            else:
                for a in range(q):
                    tmp[a] = alpha[t - 1, a] + G[a, b]
                alpha[t, b] = theta[t, b] + _logsumexp(tmp)
    for t in range(T - 2, -1, -1):
        for b in range(q):
            tmp[b] = theta[t + 1, b] + beta[t + 1, b]
        top = _shifted_exp(tmp, eb)
        for a in range(q):
            acc = 0.0
            for b in range(q):
                acc += EG[a, b] * eb[b]
            if acc > _TINY:
                beta[t, a] = top + g_top + math.log(acc)
            else:
                for b in range(q):
                    ea[b] = G[a, b] + tmp[b]
                beta[t, a] = _logsumexp(ea)
    log_z = _logsumexp(alpha[T - 1])
    for t in range(T):
        for c in range(q):
            mu[t, c] = math.exp(alpha[t, c] + beta[t, c] - log_z)
    pairs[:] = 0.0
    for t in range(T - 1):
        for b in range(q):
            tmp[b] = theta[t + 1, b] + beta[t + 1, b]
        top_b = _shifted_exp(tmp, eb)
        top_a = _shifted_exp(alpha[t], ea)
        scale = top_a + g_top + top_b - log_z
        if scale < _LARGE_EXPONENT:
            factor = math.exp(scale)
            for a in range(q):
                for b in range(q):
                    pairs[a, b] += factor * ea[a] * EG[a, b] * eb[b]
        else:  # the shifted products could not hold the marginals: in log space
            for a in range(q):
                for b in range(q):
                    pairs[a, b] += math.exp(alpha[t, a] + G[a, b] + tmp[b] - log_z)
    return log_z


# -- binary features: products as bit counts ----------------------------------------------
@njit(cache=True)
def _popcount(x):
    """Number of set bits of a 64-bit word (the SWAR sum; compiled to one instruction)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True)
def bit_products(A, B, out):
    """``out[t, j] = Σ_w popcount(A[t, w] ∧ B[j, w])``: the inner products of binary rows
    packed in 64-bit words (``out`` may have more columns than ``B`` has rows).

    Parameters
    ----------
    A : ndarray of uint64 (T, W)
    B : ndarray of uint64 (n, W)
    out : ndarray (T, ≥ n)
    """
    T, W = A.shape
    for t in range(T):
        a, o = A[t], out[t]
        for j in range(B.shape[0]):
            b = B[j]
            c = np.uint64(0)
            for w in range(W):
                c += _popcount(a[w] & b[w])
            o[j] = c


# -- kernels of small-integer features: tables (math.md §4.4) ------------------------------
#
# The passes below read the coefficient rows by state: ``BT[c, j] = B[j, c]`` (q × n, a
# C-ordered array), so that every sum over the support runs along contiguous memory and
# vectorizes (a dot product of a block's kernel values with one state's coefficients).

#: support rows per block of the table passes: the block's kernel values and its
#: coefficients (q × _BLOCK) stay in the first-level cache
_BLOCK = 128


@njit(cache=True, fastmath=_FLAGS)
def _block_kernel(ip, t, st, sq_cols, j0, nb, half, ip_table, dist_table, kappa):
    """``kappa[jj] = ip_table[v + S] + dist_table[d]`` of the pairs ``(t, j0 + jj)`` (``v``
    the inner product, ``d = ‖x_t‖² + ‖x_j‖² − 2v`` the squared distance)."""
    ipt, sqc = ip[t, j0 : j0 + nb], sq_cols[j0 : j0 + nb]  # slices: the loop vectorizes
    for jj in range(nb):
        v = int(ipt[jj])
        kappa[jj] = ip_table[v + half] + dist_table[st + sqc[jj] - 2 * v]


@njit(cache=True, fastmath=_FLAGS)
def _block_dots(kappa, BT, j0, nb, out):
    """``out[c] += Σ_jj kappa[jj] BT[c, j0 + jj]`` for every state ``c``."""
    for c in range(BT.shape[0]):
        row = BT[c, j0 : j0 + nb]
        acc = 0.0
        for jj in range(nb):
            acc += kappa[jj] * row[jj]
        out[c] += acc


@njit(cache=True, fastmath=_FLAGS)
def _block_dots_pair(kappa, kappa2, BT, j0, nb, out, out2):
    """:func:`_block_dots` of two positions in one sweep of the coefficients."""
    for c in range(BT.shape[0]):
        row = BT[c, j0 : j0 + nb]
        acc = acc2 = 0.0
        for jj in range(nb):
            acc += kappa[jj] * row[jj]
            acc2 += kappa2[jj] * row[jj]
        out[c] += acc
        out2[c] += acc2


@njit(cache=True, fastmath=_FLAGS)
def table_scores(ip, sq_rows, sq_cols, ip_table, dist_table, BT, out):
    """``out[t] = Σ_j κ(t, j) B[j]`` with ``κ = ip_table[ip + S] + dist_table[d]``.

    By blocks of support rows: per row ``t``, the block's kernel values, then their dot
    product with each state's coefficients.

    Parameters
    ----------
    ip : ndarray (T, n_S)
        Inner products ``⟨x_t, x_j⟩`` (integers, possibly stored as floats).
    sq_rows, sq_cols : ndarray of int
        ``‖x_t‖²`` and ``‖x_j‖²``.
    ip_table : ndarray (2S + 1,)
        The combined kernel's part that reads the inner product, at ``−S..S``.
    dist_table : ndarray (4S + 1,)
        Its part that reads the squared distance, at ``0..4S``.
    BT : ndarray (q, ≥ n_S)
        ``Bᵀ``: the coefficients by state.
    out : ndarray (T, q)
    """
    T, ns = ip.shape
    half = (ip_table.shape[0] - 1) // 2
    kappa, kappa2 = np.empty(_BLOCK), np.empty(_BLOCK)
    acc = np.zeros(out.shape)
    for j0 in range(0, ns, _BLOCK):
        nb = min(ns - j0, _BLOCK)
        for t in range(0, T - 1, 2):  # two positions per sweep of the coefficients
            _block_kernel(ip, t, sq_rows[t], sq_cols, j0, nb, half, ip_table, dist_table, kappa)
            _block_kernel(
                ip, t + 1, sq_rows[t + 1], sq_cols, j0, nb, half, ip_table, dist_table, kappa2
            )
            _block_dots_pair(kappa, kappa2, BT, j0, nb, acc[t], acc[t + 1])
        if T % 2:
            t = T - 1
            _block_kernel(ip, t, sq_rows[t], sq_cols, j0, nb, half, ip_table, dist_table, kappa)
            _block_dots(kappa, BT, j0, nb, acc[t])
    out[:] = acc


@njit(cache=True)
def _nonzero_states(delta, states, counts):
    """``states[t, :counts[t]]``: the states ``c`` with ``δ_t(c) ≠ 0`` (two for a hinge
    row, all ``q`` for a CRF row, none for a letter the hinge got right)."""
    T, q = delta.shape
    for t in range(T):
        nz = 0
        for c in range(q):
            if delta[t, c] != 0.0:
                states[t, nz] = c
                nz += 1
        counts[t] = nz


@njit(cache=True, fastmath=_FLAGS)
def _block_inner(delta, t, states, nz, BT, j0, nb, m):
    """``m[jj] = ⟨δ_t, B_{j0+jj}⟩`` over the nonzero states of ``δ_t``, four states per
    sweep of the block."""
    for jj in range(nb):
        m[jj] = 0.0
    u = 0
    while u + 4 <= nz:
        c0, c1, c2, c3 = states[t, u], states[t, u + 1], states[t, u + 2], states[t, u + 3]
        x0, x1, x2, x3 = delta[t, c0], delta[t, c1], delta[t, c2], delta[t, c3]
        cols = slice(j0, j0 + nb)
        b0, b1, b2, b3 = BT[c0, cols], BT[c1, cols], BT[c2, cols], BT[c3, cols]
        for jj in range(nb):
            m[jj] += x0 * b0[jj] + x1 * b1[jj] + x2 * b2[jj] + x3 * b3[jj]
        u += 4
    while u < nz:
        c = states[t, u]
        x, b = delta[t, c], BT[c, j0 : j0 + nb]
        for jj in range(nb):
            m[jj] += x * b[jj]
        u += 1


@njit(cache=True, fastmath=_FLAGS)
def _block_inner_pair(delta, t, BT, j0, nb, m, m2):
    """:func:`_block_inner` of the dense rows ``δ_t``, ``δ_{t+1}`` in one sweep of the
    block (every state, four per sweep)."""
    q = BT.shape[0]
    for jj in range(nb):
        m[jj] = 0.0
        m2[jj] = 0.0
    c = 0
    while c + 4 <= q:
        x0, x1, x2, x3 = delta[t, c], delta[t, c + 1], delta[t, c + 2], delta[t, c + 3]
        y0, y1, y2, y3 = (
            delta[t + 1, c],
            delta[t + 1, c + 1],
            delta[t + 1, c + 2],
            delta[t + 1, c + 3],
        )
        cols = slice(j0, j0 + nb)
        b0, b1, b2, b3 = BT[c, cols], BT[c + 1, cols], BT[c + 2, cols], BT[c + 3, cols]
        for jj in range(nb):
            p0, p1, p2, p3 = b0[jj], b1[jj], b2[jj], b3[jj]
            m[jj] += x0 * p0 + x1 * p1 + x2 * p2 + x3 * p3
            m2[jj] += y0 * p0 + y1 * p1 + y2 * p2 + y3 * p3
        c += 4
    while c < q:
        x, y, b = delta[t, c], delta[t + 1, c], BT[c, j0 : j0 + nb]
        for jj in range(nb):
            m[jj] += x * b[jj]
            m2[jj] += y * b[jj]
        c += 1


@njit(cache=True, fastmath=_FLAGS)
def _block_products(delta, states, counts, BT, j0, nb, M):
    """``M[t, jj] = ⟨δ_t, B_{j0+jj}⟩`` for every row ``δ_t ≠ 0``: two dense rows per sweep,
    sparse ones by their nonzero states."""
    T, q = delta.shape
    t = 0
    while t < T:
        if counts[t] == q and t + 1 < T and counts[t + 1] == q:
            _block_inner_pair(delta, t, BT, j0, nb, M[t], M[t + 1])
            t += 2
            continue
        if counts[t] > 0:
            _block_inner(delta, t, states, counts[t], BT, j0, nb, M[t])
        t += 1


@njit(cache=True, fastmath=_FLAGS)
def _block_kinds(BT, DT, j0, nb, size, change, row_kind):
    """``row_kind[jj]``: ``ROW_UNVISITED`` where ``D_j = 0``, ``ROW_NEW`` where ``D_j = B_j ≠ 0``,
    ``ROW_CHANGED`` otherwise (rows
    ``j = j0 + jj``; ``Σ_c |D_jc|`` and ``Σ_c |D_jc − B_jc|`` in ``size``, ``change``);
    returns the largest kind of the block."""
    for jj in range(nb):
        size[jj] = 0.0
        change[jj] = 0.0
    for c in range(DT.shape[0]):
        d, b = DT[c, j0 : j0 + nb], BT[c, j0 : j0 + nb]
        for jj in range(nb):
            size[jj] += abs(d[jj])
            change[jj] += abs(d[jj] - b[jj])
    top = ROW_UNVISITED
    for jj in range(nb):
        if size[jj] == 0.0:
            row_kind[jj] = ROW_UNVISITED
        else:
            row_kind[jj] = ROW_CHANGED if change[jj] != 0.0 else ROW_NEW
        top = max(top, row_kind[jj])
    return top


@njit(cache=True, fastmath=_FLAGS, inline="always")
def _product_sums(code, g, c, p, values, m, wk, x):
    """``(Σ_jj k(jj) m[jj], Σ_jj k(jj) wk[jj] x[jj])`` of a kernel of products ``k``
    (:func:`~kernfw.operators._products_numba.kernel_of_products`; inlined with constant
    ``code`` and ``p`` where the caller knows them, so that the loop is specialized and
    vectorizes)."""
    a = b = 0.0
    for jj in range(values.shape[0]):
        z = kp.kernel_of_products(code, g, c, p, values[jj], 0.0, 0.0)
        a += z * m[jj]
        b += z * (wk[jj] * x[jj])
    return a, b


@njit(cache=True, fastmath=_FLAGS, inline="always")
def _specialized_sums(code, g, c, p, values, m, wk, x):
    """:func:`_product_sums` with constant ``code`` and ``p`` for the linear kernel and the
    polynomials of degree 2 and 3."""
    if code == kp.LINEAR:
        return _product_sums(kp.LINEAR, g, c, 0, values, m, wk, x)
    if code == kp.POLY and p == 2:
        return _product_sums(kp.POLY, g, c, 2, values, m, wk, x)
    if code == kp.POLY and p == 3:
        return _product_sums(kp.POLY, g, c, 3, values, m, wk, x)
    return _product_sums(code, g, c, p, values, m, wk, x)


@njit(cache=True, fastmath=_FLAGS)
def _block_sums(values, e, m, w, x, codes, gammas, coef0s, powers, scales, groups, ladder, out):
    """For every kernel ``r`` of a program (group ``k = groups[r]``) along the block:
    ``out[0, k] += scales[r] Σ_jj k_r(jj) m[jj]`` and
    ``out[1, k] += scales[r] Σ_jj k_r(jj) w[k, jj] x[jj]``.

    The kernel values come from the program's arithmetic (``values`` the inner products,
    ``e = exp(−γ_0 D)``; the RBF ladder is squared in ``ladder`` in the same sweep as the
    sums, as :func:`_kernel_row` does in passes), which vectorizes where a table read per
    kernel and pair would not.
    """
    n = values.shape[0]
    lad = ladder[:n]
    have = 0  # the power of e held in lad (0: none yet)
    for r in range(codes.shape[0]):
        code, g, c, p = codes[r], gammas[r], coef0s[r], powers[r]
        wk = w[groups[r], :n]
        a = b = 0.0
        if code != kp.RBF:
            a, b = _specialized_sums(code, g, c, p, values, m, wk, x)
        elif p == 0:  # an RBF off the ladder: e^(γ/γ_0)
            ratio = g / gammas[0]
            for jj in range(n):
                z = e[jj] ** ratio
                a += z * m[jj]
                b += z * (wk[jj] * x[jj])
        elif have > 0 and p == 2 * have:  # the next rung: square the ladder
            for jj in range(n):
                z = lad[jj] * lad[jj]
                lad[jj] = z
                a += z * m[jj]
                b += z * (wk[jj] * x[jj])
            have = p
        else:
            step = p // have if have > 0 and p % have == 0 else p
            if step == p:
                for jj in range(n):
                    lad[jj] = e[jj]
            for jj in range(n):
                z = kp.int_power(lad[jj], step)
                lad[jj] = z
                a += z * m[jj]
                b += z * (wk[jj] * x[jj])
            have = p
        out[0, groups[r]] += scales[r] * a
        out[1, groups[r]] += scales[r] * b


# complex: one compiled pass over the table groups (math.md §4.4)
@njit(cache=True, fastmath=_FLAGS)
def table_inner(  # noqa: C901
    ip,
    sq_rows,
    sq_cols,
    ip_tables,
    dist_tables,
    exp_table,
    program_groups,
    program_codes,
    gammas,
    coef0s,
    powers,
    program_scales,
    delta,
    BT,
    weights,
    DT,
    kinds,
    out,
):
    """``out[0, k] = ⟨δ, K_k B⟩ = Σ_{t,j} k_k(t, j) ⟨δ_t, B_j⟩`` and
    ``out[1, k] = Σ_{t,j} k_k(t, j) weights[j, k] ⟨δ_t, D_j⟩`` over the rows ``D_j ≠ 0``
    (``weights`` with no rows: that sum is skipped).

    By blocks of support rows; per block, the products ``m_{tj} = ⟨δ_t, B_j⟩`` along the
    block (two dense rows of ``δ`` per sweep of the coefficients, sparse rows of ``δ``
    — the hinge's — by their nonzero states, rows ``δ_t = 0`` skipped).  In a block
    without rows ``D_j ≠ 0`` a kernel value is ``ip_tables[v, k] + dist_tables[d, k]``
    (``v`` the inner product's row, ``d`` the squared distance), so the first sum
    collects ``m_{tj}`` by table row, ``h^ip[v] = Σ_{v_{tj} = v} m_{tj}`` and ``h^d[d]``
    likewise, and weights the collected sums by each kernel's table at the end (math.md
    §4.4): two additions per pair for any number of kernels.  In a block with such rows
    the second sum needs a value per kernel and pair anyway: both sums then run along the
    block with each kernel's values from its program (:func:`_block_sums`), and a row with
    ``D_j = B_j`` (one that entered the support in this epoch) reuses ``m_{tj}``.

    Parameters
    ----------
    ip, sq_rows, sq_cols
        As :func:`table_scores`.
    ip_tables : ndarray (2S + 1, Mk)
        ``ip_tables[v + S, k]``: kernel ``k`` at inner product ``v`` (0 for an RBF).
    dist_tables : ndarray (4S + 1, Mk)
        ``dist_tables[d, k]``: an RBF ``k`` at squared distance ``d`` (0 for the others).
    exp_table : ndarray (4S + 1,)
        ``exp(−γ_0 d)``, ``γ_0`` the program's narrowest RBF (any values without one).
    program_groups, program_codes, gammas, coef0s, powers, program_scales : ndarray
        The same kernels as a program (one entry per kernel; :func:`_kernel_row`).
    delta : ndarray (T, q)
    BT, DT : ndarray (q, ≥ n_S)
        ``Bᵀ`` and ``Dᵀ`` (by state).
    weights : ndarray (≥ n_S, Mk) or (0, Mk)
    kinds : ndarray of int8 (≥ n_S,) or (0,)
        The kind of every row, 0 (``D_j = 0``), 1 (``D_j = B_j``) or 2 (other), when the
        caller keeps them (else they are read off ``D`` and ``B``).
    out : ndarray (2, Mk)
    """
    T, ns = ip.shape
    q = delta.shape[1]
    Mk = ip_tables.shape[1]
    half = (ip_tables.shape[0] - 1) // 2
    weighted = weights.shape[0] > 0
    states = np.empty((T, q), dtype=np.intp)
    counts = np.empty(T, dtype=np.intp)
    _nonzero_states(delta, states, counts)
    h_ip = np.zeros(ip_tables.shape[0])
    h_dist = np.zeros(dist_tables.shape[0])
    M = np.empty((T, _BLOCK))  # ⟨δ_t, B_j⟩ over the block
    M_visit = np.empty((T, _BLOCK))  # ⟨δ_t, D_j⟩
    x = np.empty(_BLOCK)  # ⟨δ_t, D_j⟩ where D_j ≠ B_j, else ⟨δ_t, B_j⟩
    values, e, ladder = np.empty(_BLOCK), np.empty(_BLOCK), np.empty(_BLOCK)
    row_kind = np.zeros(_BLOCK, dtype=np.intp)  # ROW_UNVISITED, ROW_NEW or ROW_CHANGED
    size, change = np.empty(_BLOCK), np.empty(_BLOCK)
    w_block = np.zeros((Mk, _BLOCK))  # weights[j, k] of the block's rows D_j ≠ 0, by group
    sums = np.zeros((2, Mk))  # both sums over the blocks with rows D_j ≠ 0
    for j0 in range(0, ns, _BLOCK):
        nb = min(ns - j0, _BLOCK)
        top = ROW_UNVISITED
        if weighted and kinds.shape[0] > 0:
            for jj in range(nb):
                row_kind[jj] = kinds[j0 + jj]
                top = max(top, row_kind[jj])
        elif weighted:
            top = _block_kinds(BT, DT, j0, nb, size, change, row_kind)
        if top > ROW_UNVISITED:
            for k in range(Mk):
                for jj in range(nb):
                    w_block[k, jj] = weights[j0 + jj, k] if row_kind[jj] != ROW_UNVISITED else 0.0
        _block_products(delta, states, counts, BT, j0, nb, M)
        if top == ROW_CHANGED:
            _block_products(delta, states, counts, DT, j0, nb, M_visit)
        for t in range(T):
            if counts[t] == 0:
                continue
            m = M[t]
            m_visit = M_visit[t]
            st, ipt, sqc = sq_rows[t], ip[t, j0 : j0 + nb], sq_cols[j0 : j0 + nb]
            if top == ROW_UNVISITED:  # by table row
                for jj in range(nb):
                    vv = int(ipt[jj])
                    h_ip[vv + half] += m[jj]
                    h_dist[st + sqc[jj] - 2 * vv] += m[jj]
                continue
            for jj in range(nb):  # along the block, with the weighted sum
                vv = int(ipt[jj])
                values[jj] = ipt[jj]
                e[jj] = exp_table[st + sqc[jj] - 2 * vv]
                x[jj] = m_visit[jj] if row_kind[jj] == ROW_CHANGED else m[jj]
            _block_sums(
                values[:nb],
                e[:nb],
                m,
                w_block,
                x,
                program_codes,
                gammas,
                coef0s,
                powers,
                program_scales,
                program_groups,
                ladder,
                sums,
            )
    for k in range(Mk):
        acc = sums[0, k]
        for v in range(ip_tables.shape[0]):
            acc += ip_tables[v, k] * h_ip[v]
        for d in range(dist_tables.shape[0]):
            acc += dist_tables[d, k] * h_dist[d]
        out[0, k] = acc
        out[1, k] = sums[1, k]


@njit(cache=True, fastmath=_FLAGS)
def _average_kernels(
    ip, t, st, sq_cols, j0, nb, half, tables, combined, coef, row_kind, kappa, own
):
    """The kernels of the epoch average's coefficients at the pairs ``(t, j0 + jj)``:
    ``kappa`` that of ``B_j`` (the combined kernel, or that of ``coef[jj]`` where
    ``D_j = B_j``), ``own`` that of ``D_j`` (``coef[jj]`` where ``D_j ∉ {0, B_j}``, else 0);
    ``tables = (ip_tables, dist_tables)``, ``combined`` their combinations by ``scales``."""
    ip_tables, dist_tables = tables
    ip_combined, dist_combined = combined
    ipt, sqc = ip[t, j0 : j0 + nb], sq_cols[j0 : j0 + nb]
    for jj in range(nb):
        vv = int(ipt[jj])
        v, d = vv + half, st + sqc[jj] - 2 * vv
        if row_kind[jj] == ROW_UNVISITED:
            kappa[jj] = ip_combined[v] + dist_combined[d]
            own[jj] = 0.0
            continue
        x = 0.0
        for k in range(ip_tables.shape[1]):
            x += coef[jj, k] * (ip_tables[v, k] + dist_tables[d, k])
        if row_kind[jj] == ROW_NEW:
            kappa[jj] = x
            own[jj] = 0.0
        else:
            kappa[jj] = ip_combined[v] + dist_combined[d]
            own[jj] = x


@njit(cache=True, fastmath=_FLAGS)
def table_average_scores(
    ip, sq_rows, sq_cols, ip_tables, dist_tables, scales, BT, weights, DT, out
):
    """``out[t] = Σ_j Σ_k k_k(t, j) (scales[k] B[j] + weights[j, k] D[j])``: the scores of
    the epoch average (math.md §4.8; tables as :func:`table_inner`, ``BT``, ``DT`` by
    state).

    Per row ``j`` the coefficients are ``B_j`` times the combined kernel of ``scales``
    (two lookups per pair) when ``D_j = 0``; ``B_j`` times the kernel of
    ``scales + weights[j]`` when ``D_j = B_j`` (a row that entered the support in this
    epoch); otherwise both terms.  By blocks of support rows as :func:`table_scores`.
    """
    T, ns = ip.shape
    Mk = ip_tables.shape[1]
    half = (ip_tables.shape[0] - 1) // 2
    ip_combined = ip_tables @ scales
    dist_combined = dist_tables @ scales
    acc = np.zeros(out.shape)
    row_kind = np.empty(_BLOCK, dtype=np.intp)
    size, change = np.empty(_BLOCK), np.empty(_BLOCK)
    coef = np.empty((_BLOCK, Mk))  # scales + weights[j] (rows D_j = B_j), weights[j] (others)
    kappa = np.empty((2, _BLOCK))  # the kernel of B_j's coefficients (two positions)
    own = np.empty((2, _BLOCK))  # the kernel of weights[j] (rows D_j ∉ {0, B_j})
    tables, combined = (ip_tables, dist_tables), (ip_combined, dist_combined)
    for j0 in range(0, ns, _BLOCK):
        nb = min(ns - j0, _BLOCK)
        top = _block_kinds(BT, DT, j0, nb, size, change, row_kind)
        for jj in range(nb):
            for k in range(Mk):
                coef[jj, k] = weights[j0 + jj, k] + (scales[k] if row_kind[jj] == ROW_NEW else 0.0)
        for t in range(0, T, 2):  # two positions per sweep of the coefficients
            two = t + 1 < T
            for u in range(2 if two else 1):
                st = sq_rows[t + u]
                if top == ROW_UNVISITED:
                    _block_kernel(
                        ip, t + u, st, sq_cols, j0, nb, half, ip_combined, dist_combined, kappa[u]
                    )
                else:
                    _average_kernels(
                        ip,
                        t + u,
                        st,
                        sq_cols,
                        j0,
                        nb,
                        half,
                        tables,
                        combined,
                        coef,
                        row_kind,
                        kappa[u],
                        own[u],
                    )
            if two:
                _block_dots_pair(kappa[0], kappa[1], BT, j0, nb, acc[t], acc[t + 1])
                if top == ROW_CHANGED:
                    _block_dots_pair(own[0], own[1], DT, j0, nb, acc[t], acc[t + 1])
            else:
                _block_dots(kappa[0], BT, j0, nb, acc[t])
                if top == ROW_CHANGED:
                    _block_dots(own[0], DT, j0, nb, acc[t])
    out[:] = acc
