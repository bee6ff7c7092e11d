"""Compiled (numba) core of :func:`kernfw.operators.gram_check.check_gram`: one pass over a square
matrix that finds whether it is finite, its largest magnitude and its largest asymmetry
``max |K_ij − K_ji|``, tile by tile (a tile and its transposed partner stay in cache, so
the transposed read is cheap)."""

import numpy as np
from numba import njit

__all__ = ["gram_summary"]

#: rows and columns of a tile
_TILE = 64


@njit(cache=True, nogil=True)
def gram_summary(K):
    """``(finite, max_ij |K_ij|, max_ij |K_ij − K_ji|)`` of the square ``K`` (the two maxima
    are meaningful only when ``finite``)."""
    n = K.shape[0]
    biggest = 0.0
    asym = 0.0
    for I in range(0, n, _TILE):
        i1 = min(I + _TILE, n)
        for J in range(I, n, _TILE):
            j1 = min(J + _TILE, n)
            for i in range(I, i1):
                for j in range(max(J, i), j1):
                    a = np.float64(K[i, j])
                    b = np.float64(K[j, i])
                    if not (np.isfinite(a) and np.isfinite(b)):
                        return False, 0.0, 0.0
                    biggest = max(biggest, abs(a), abs(b))
                    asym = max(asym, abs(a - b))
    return True, biggest, asym
