"""Compiled (numba) float32 RBF Gram matrices, exactly symmetric (math.md §1.1).

The loops of :func:`kernfw.operators.rbf_gram.rbf_gram`.  The matrix
``K_ij = exp(−γ ‖x_i − x_j‖²)`` is filled by square tiles of the lower triangle:
each tile's squared distances are formed, turned into kernel values in place and
stored at ``(I, J)`` and, transposed, at ``(J, I)`` — so ``K`` is symmetric bit for
bit by construction, and every entry is written once.  Two ways to the squared
distances of a tile:

- :func:`direct_tiles` sums ``Σ_f (x_if − x_jf)²`` from the features (few features:
  no product matrix, no cancellation);
- :func:`product_tiles` reads them off ``‖x_i‖² + ‖x_j‖² − 2 x_iᵀx_j`` with the inner
  products ``G = X Xᵀ`` already computed by BLAS (many features), in place in ``G``.

``e^x`` (``x ≤ 0``) is :func:`kernfw.operators._exp_numba.exp_in_place` (float32
precision, branch-free so that it vectorizes).  Each kernel is compiled twice: serial, and with the tiles spread over
numba's threads (``parallel=True``) for large matrices.
"""

import numpy as np
from numba import njit, prange

from ._exp_numba import exp_in_place

__all__ = ["direct_tiles", "product_tiles", "direct_tiles_parallel", "product_tiles_parallel"]

#: rows and columns of a tile (a 64 × 64 float32 tile is 16 kB: it stays in L1)
TILE = 64


@njit(cache=True, inline="always")
def _tile_corner(p):
    """The tile ``(a, b)``, ``b ≤ a``, of number ``p`` in the order (0,0), (1,0), (1,1), …"""
    a = int((np.sqrt(8.0 * p + 1.0) - 1.0) / 2.0)
    while a * (a + 1) // 2 > p:
        a -= 1
    while (a + 1) * (a + 2) // 2 <= p:
        a += 1
    return a, p - a * (a + 1) // 2


@njit(cache=True, inline="always")
def _store(K, tile, I, i1, J, j1):
    """Write the tile of rows ``I:i1``, columns ``J:j1`` and its transpose; on the diagonal
    (``I == J``) only its strict lower part is read, and ``K_ii = 1``."""
    if I == J:
        for i in range(I, i1):
            for j in range(J, i):
                v = tile[i - I, j - J]
                K[i, j] = v
                K[j, i] = v
            K[i, i] = np.float32(1.0)
        return
    for i in range(I, i1):  # element by element: a slice assignment compiles its shape check
        row = K[i, J:j1]
        for j in range(j1 - J):
            row[j] = tile[i - I, j]
    for j in range(J, j1):
        row = K[j, I:i1]
        for i in range(i1 - I):
            row[i] = tile[i, j - J]


def _direct_tiles(XT, gamma, K):
    """``K`` (float32, n × n, written) from the features ``XT`` (float32, d × n):
    ``K_ij = exp(−γ Σ_f (x_fi − x_fj)²)``."""
    d, n = XT.shape
    g = np.float32(-gamma)
    tiles = (n + TILE - 1) // TILE
    for p in prange(tiles * (tiles + 1) // 2):
        a, b = _tile_corner(p)
        I, J = a * TILE, b * TILE
        i1, j1 = min(I + TILE, n), min(J + TILE, n)
        w = j1 - J
        tile = np.empty((TILE, TILE), dtype=np.float32)
        bits = np.empty(TILE, dtype=np.int32)
        for i in range(I, i1):
            t = tile[i - I, :w]
            t[:] = np.float32(0.0)
            for f in range(d):
                row = XT[f, J:j1]
                c = XT[f, i]
                for k in range(w):
                    u = row[k] - c
                    t[k] += u * u
            for k in range(w):
                t[k] *= g
            exp_in_place(t, bits[:w])
        _store(K, tile, I, i1, J, j1)


def _product_tiles(G, sq, gamma):
    """``G = X Xᵀ`` (float32, n × n) overwritten by ``K_ij = exp(−γ max(‖x_i‖² + ‖x_j‖²
    − 2 G_ij, 0))`` (``sq`` the squared norms); only the lower triangle of ``G`` is read."""
    n = G.shape[0]
    g = np.float32(-gamma)
    two, zero = np.float32(2.0), np.float32(0.0)
    tiles = (n + TILE - 1) // TILE
    for p in prange(tiles * (tiles + 1) // 2):
        a, b = _tile_corner(p)
        I, J = a * TILE, b * TILE
        i1, j1 = min(I + TILE, n), min(J + TILE, n)
        w = j1 - J
        tile = np.empty((TILE, TILE), dtype=np.float32)
        bits = np.empty(TILE, dtype=np.int32)
        for i in range(I, i1):
            t = tile[i - I, :w]
            row = G[i, J:j1]
            si = sq[i]
            for k in range(w):
                t[k] = g * max((si + sq[J + k]) - two * row[k], zero)
            exp_in_place(t, bits[:w])
        _store(G, tile, I, i1, J, j1)


direct_tiles = njit(cache=True, fastmath={"contract"})(_direct_tiles)
product_tiles = njit(cache=True, fastmath={"contract"})(_product_tiles)
direct_tiles_parallel = njit(cache=True, fastmath={"contract"}, parallel=True)(_direct_tiles)
product_tiles_parallel = njit(cache=True, fastmath={"contract"}, parallel=True)(_product_tiles)
