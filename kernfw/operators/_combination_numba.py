"""Compiled (numba) cores of :class:`kernfw.operators.combination.KernelStack`: the
weighted sum of the stacked kernels (:meth:`~kernfw.operators.combination.KernelStack.weighted`),
a kernel symmetrized and copied into the stack in one pass, and the quadratic
forms of :meth:`~kernfw.operators.combination.KernelStack.per_kernel_quad` on a few rows.

``out = Σ_j w_j K_j`` in one pass over the stack: the entries are taken in blocks
small enough for the block of ``out`` to stay in L1 while every kernel adds to it.
Each entry is the same sequence of rounded products and sums (no fused
multiply-add), in the order of the kernels, so equal entries of the kernels give
equal entries of ``out``: symmetric kernels give a symmetric sum, bit for bit.
"""

import numpy as np
from numba import njit

__all__ = ["weighted_sum", "symmetrize_into", "quad_on_rows"]

#: entries per block (32 kB of float64)
_BLOCK = 4096


@njit(cache=True)
def weighted_sum(K, w, out):
    """``out[e] = Σ_j w_j K[j, e]`` over the kernels with ``w_j ≠ 0`` (``K``: p × N,
    ``out``: N, float64; some ``w_j > 0``).

    Each block is taken as slices (``out[start:stop]``, ``K[j, start:stop]``): on those
    views the compiler vectorizes the loops (2.8× faster than indexing the whole arrays,
    the same sums; docs/benchmarks/mkl.md)."""
    p, size = K.shape
    for start in range(0, size, _BLOCK):
        stop = min(start + _BLOCK, size)
        block = out[start:stop]
        first = True
        for j in range(p):
            wj = w[j]
            if wj == 0.0:
                continue
            row = K[j, start:stop]
            if first:
                for e in range(stop - start):
                    block[e] = wj * row[e]
                first = False
            else:
                for e in range(stop - start):
                    block[e] = block[e] + wj * row[e]


#: rows and columns of a tile of :func:`symmetrize_into`
_TILE = 64


@njit(cache=True)
def symmetrize_into(K, out):
    """``out ← ½ (K + Kᵀ)`` (square, ``out`` float64 and not ``K``), tile by tile: ``out_ij``
    and ``out_ji`` both become ``(K_ij + K_ji) · 0.5``, equal bit for bit (``K`` float32 or
    float64, summed in float64)."""
    n = K.shape[0]
    for I in range(0, n, _TILE):
        i1 = min(I + _TILE, n)
        for J in range(0, I + 1, _TILE):
            j1 = min(J + _TILE, n)
            for i in range(I, i1):
                for j in range(J, min(j1, i + 1)):
                    v = (np.float64(K[i, j]) + np.float64(K[j, i])) * 0.5
                    out[i, j] = v
                    out[j, i] = v


@njit(cache=True)
def quad_on_rows(K, V, rows, out):
    """``out[j] = Σ_r Σ_{a,b ∈ rows} V[a, r] K[j, a, b] V[b, r]`` (``K``: p × n × n,
    ``V``: n × r, float64; ``rows``: the indices where some column of ``V`` may be
    nonzero): the stack's quadratic forms reading only those rows and columns."""
    p, m, r = K.shape[0], rows.shape[0], V.shape[1]
    Vs = np.empty((m, r))
    for a in range(m):
        for c in range(r):
            Vs[a, c] = V[rows[a], c]
    for j in range(p):
        total = 0.0
        for a in range(m):
            row = K[j, rows[a]]
            for c in range(r):
                inner = 0.0
                for b in range(m):
                    inner += row[rows[b]] * Vs[b, c]
                total += Vs[a, c] * inner
        out[j] = total
