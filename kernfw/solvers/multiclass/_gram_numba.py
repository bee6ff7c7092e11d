"""The compiled product of a float32 Gram matrix with float64 vectors (math.md §1.5).

The full-batch multi-class solvers update the scores ``S = K Aᵀ/(λn)`` by products
``K V``; their certificate holds for the exact product, so a float32 ``K`` must
be multiplied in float64 arithmetic (a float32 BLAS product sums in float32).
:func:`gram_times` reads each entry of ``K`` once, as float32, and sums in
float64 (:meth:`kernfw.solvers.multiclass.problem.MulticlassDual.kernel_times`).
"""

import numpy as np
from numba import njit

__all__ = ["gram_times"]


@njit(cache=True)
def gram_times(K, V, out):
    """``out = K V`` summed in float64 (``K`` (n, n) float32, ``V`` (n, r) float64)."""
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
