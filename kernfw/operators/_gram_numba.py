"""Compiled (numba) core of :func:`kernfw.operators.gram.mirror_lower`: the lower triangle
of a square matrix copied onto its upper triangle, tile by tile (a tile and its
transposed partner stay in cache, so the transposed read is cheap)."""

from numba import njit

__all__ = ["mirror_lower"]

#: rows and columns of a tile
_TILE = 64


@njit(cache=True, nogil=True)
def mirror_lower(K):
    """``K_ij ← K_ji`` for ``i < j`` (``K`` square, float64): ``K`` becomes exactly symmetric."""
    n = K.shape[0]
    for I in range(0, n, _TILE):
        i1 = min(I + _TILE, n)
        for J in range(I, n, _TILE):
            j1 = min(J + _TILE, n)
            for i in range(I, i1):
                for j in range(max(J, i + 1), j1):
                    K[i, j] = K[j, i]
