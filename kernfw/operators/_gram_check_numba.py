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
    are meaningful only when ``finite``).

    The inner loop runs over the slices ``K[i, j0:j1]`` and ``K[j0:j1, i]`` indexed from 0
    and without a branch (an entry ``x`` is non-finite when ``x − x ≠ 0``), so that the
    compiler drops the negative-index checks and pipelines it (docs/benchmarks/precomputed.md).
    """
    n = K.shape[0]
    biggest = 0.0
    asym = 0.0
    bad = False
    for I in range(0, n, _TILE):
        i1 = min(I + _TILE, n)
        for J in range(I, n, _TILE):
            j1 = min(J + _TILE, n)
            for i in range(I, i1):
                j0 = max(J, i)
                row = K[i, j0:j1]
                col = K[j0:j1, i]
                for b in range(j1 - j0):
                    a = np.float64(row[b])
                    c = np.float64(col[b])
                    bad |= (a - a != 0.0) | (c - c != 0.0)
                    biggest = max(biggest, abs(a), abs(c))
                    asym = max(asym, abs(a - c))
    return not bad, biggest, asym
