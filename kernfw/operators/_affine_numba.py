"""Compiled copy of a stored Gram through ``K̃_ij = d_i d_j (K_ij + c)`` (one pass, no
temporaries; :meth:`kernfw.operators.ShiftedScaled.stored_gram`)."""

from numba import njit

__all__ = ["shifted_scaled_copy"]


@njit(cache=True)
def shifted_scaled_copy(K, shift, d, out):
    """``out_ij = (K_ij + c) · (d_i d_j)`` for C-ordered ``K`` and ``out`` (float32 or
    float64; the value is formed in float64 and rounded once).  The product ``d_i d_j``
    is formed first, so ``out`` is symmetric bit for bit when ``K`` is."""
    n, m = K.shape
    for i in range(n):
        di = d[i]
        for j in range(m):
            out[i, j] = (K[i, j] + shift) * (di * d[j])
