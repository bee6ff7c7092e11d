"""Compiled (numba) cores of :class:`kernfw.operators.gram.Gram`: :func:`mirror_lower` (the
lower triangle of a square matrix copied onto its upper triangle, tile by tile: a tile and
its transposed partner stay in cache, so the transposed read is cheap),
:func:`gram_times` (a float32 Gram times float64 vectors summed in float64, math.md §1.5)
and :func:`take_block` (the block ``K[rows][:, cols]``, read once), :func:`block_times`
(that block times float64 vectors without forming it)."""

import numpy as np
from numba import njit

__all__ = ["mirror_lower", "gram_times", "take_block", "block_times"]

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


@njit(cache=True)
def gram_times(K, V, out):
    """``out = K V`` summed in float64 (``K`` (n, n) float32 read once, ``V`` (n, r) float64)."""
    n, r = V.shape
    acc = np.empty(r)
    for i in range(K.shape[0]):
        row = K[i]
        acc[:] = 0.0
        for l in range(n):
            k = np.float64(row[l])
            for j in range(r):
                acc[j] += k * V[l, j]
        out[i] = acc


@njit(cache=True, nogil=True)
def take_block(K, rows, cols, out):
    """``out[a, b] = K[rows[a], cols[b]]``: the block read row by row, no intermediate."""
    for a in range(rows.shape[0]):
        src, dst = K[rows[a]], out[a]
        for b in range(cols.shape[0]):
            dst[b] = src[cols[b]]


@njit(cache=True, nogil=True, fastmath=True)
def block_times(K, rows, runs, W, out):
    """``out[a, q] += Σ_b K[rows[a], c_b] W[q, b]`` summed in float64, where the columns
    ``c_0, c_1, …`` are the runs ``runs[s, 0]:runs[s, 1]`` of ``K``'s indices one after
    the other: each row of the block is read in place, contiguously along the runs.  The
    runs are read as slices (indices that cannot be negative: the sums vectorize;
    ``fastmath`` reassociates them).  ``K`` float32 or float64, ``W`` float64
    (r, columns), ``out`` float64 (len(rows), r)."""
    for a in range(rows.shape[0]):
        src = K[rows[a]]
        for q in range(W.shape[0]):
            acc = 0.0
            at = 0
            for s in range(runs.shape[0]):
                lo, hi = runs[s, 0], runs[s, 1]
                x, w = src[lo:hi], W[q, at : at + hi - lo]
                for j in range(hi - lo):
                    acc += x[j] * w[j]
                at += hi - lo
            out[a, q] += acc
