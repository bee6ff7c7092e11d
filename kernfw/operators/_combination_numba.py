"""Compiled (numba) weighted sum of stacked kernels, the backend of
:meth:`kernfw.operators.combination.KernelStack.weighted`, and the symmetrization of a
stacked kernel (in place, or copied into the stack in the same pass).

``out = Σ_j w_j K_j`` in one pass over the stack: the entries are taken in blocks
small enough for the block of ``out`` to stay in L1 while every kernel adds to it.
Each entry is the same sequence of rounded products and sums (no fused
multiply-add), in the order of the kernels, so equal entries of the kernels give
equal entries of ``out``: symmetric kernels give a symmetric sum, bit for bit.
"""

from numba import njit

__all__ = ["weighted_sum", "symmetrize", "symmetrize_into"]

#: entries per block (32 kB of float64)
_BLOCK = 4096


@njit(cache=True)
def weighted_sum(K, w, out):
    """``out[e] = Σ_j w_j K[j, e]`` over the kernels with ``w_j ≠ 0`` (``K``: p × N,
    ``out``: N, float64; some ``w_j > 0``)."""
    p, size = K.shape
    for start in range(0, size, _BLOCK):
        stop = min(start + _BLOCK, size)
        first = True
        for j in range(p):
            wj = w[j]
            if wj == 0.0:
                continue
            row = K[j]
            if first:
                for e in range(start, stop):
                    out[e] = wj * row[e]
                first = False
            else:
                for e in range(start, stop):
                    out[e] += wj * row[e]


#: rows and columns of a tile of :func:`symmetrize`
_TILE = 64


@njit(cache=True)
def symmetrize(K):
    """``K ← ½(K + Kᵀ)`` in place (square float64), tile by tile: ``K_ij`` and ``K_ji``
    both become ``(K_ij + K_ji) · 0.5``, equal bit for bit."""
    n = K.shape[0]
    for I in range(0, n, _TILE):
        i1 = min(I + _TILE, n)
        for J in range(0, I + 1, _TILE):
            j1 = min(J + _TILE, n)
            for i in range(I, i1):
                for j in range(J, min(j1, i)):
                    v = (K[i, j] + K[j, i]) * 0.5
                    K[i, j] = v
                    K[j, i] = v


@njit(cache=True)
def symmetrize_into(K, out):
    """``out ← ½(K + Kᵀ)`` (square float64, ``out`` not ``K``), tile by tile: ``out_ij`` and
    ``out_ji`` both become ``(K_ij + K_ji) · 0.5``, the values of :func:`symmetrize`."""
    n = K.shape[0]
    for I in range(0, n, _TILE):
        i1 = min(I + _TILE, n)
        for J in range(0, I + 1, _TILE):
            j1 = min(J + _TILE, n)
            for i in range(I, i1):
                for j in range(J, min(j1, i + 1)):
                    v = (K[i, j] + K[j, i]) * 0.5
                    out[i, j] = v
                    out[j, i] = v
