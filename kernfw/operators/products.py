"""Products of float32 features with float64 dual or primal blocks, without a float64 copy.

numpy computes ``A @ B`` for a float32 ``A`` and a float64 ``B`` by first casting all of
``A`` to float64: at n = 10⁶ Nyström features of m = 1000 columns that is an 8 GB copy of
a 4 GB matrix.  The functions here give the same float64 result (the same products,
summed in another order) reading ``A`` by blocks of rows, so the extra memory is one
float64 block of ``A``.
"""

import numpy as np

__all__ = ["matmul", "tmatmul"]

#: float64 entries of one cast block of rows (64 MB)
BLOCK_ENTRIES = 1 << 23


def _blocked(A, B):
    """Whether ``A`` (dense) would be upcast whole by a product with ``B``."""
    return (
        isinstance(A, np.ndarray)
        and np.result_type(A.dtype, B.dtype) != A.dtype
        and A.size > BLOCK_ENTRIES
    )


def _row_blocks(A):
    rows = max(1, BLOCK_ENTRIES // max(A.shape[1], 1))
    for start in range(0, A.shape[0], rows):
        yield slice(start, start + rows)


def matmul(A, B):
    """``A @ B`` (``A`` of shape (n, d), ``B`` of shape (d,) or (d, r)).

    Returns the product in ``result_type(A, B)``; a dense float32 ``A`` against a
    float64 ``B`` is cast one block of rows at a time.
    """
    if not _blocked(A, B):
        return A @ B
    dtype = np.result_type(A.dtype, B.dtype)
    out = np.empty((A.shape[0],) + B.shape[1:], dtype=dtype)
    for rows in _row_blocks(A):
        np.matmul(A[rows].astype(dtype), B, out=out[rows])
    return out


def tmatmul(A, V):
    """``Aᵀ @ V`` (``A`` of shape (n, d), ``V`` of shape (n,) or (n, r)): the sum over
    row blocks ``B`` of ``A_Bᵀ V_B``, each block of ``A`` cast alone (see :func:`matmul`)."""
    if not _blocked(A, V):
        return A.T @ V
    dtype = np.result_type(A.dtype, V.dtype)
    out = np.zeros((A.shape[1],) + V.shape[1:], dtype=dtype)
    for rows in _row_blocks(A):
        out += A[rows].astype(dtype).T @ V[rows]
    return out
