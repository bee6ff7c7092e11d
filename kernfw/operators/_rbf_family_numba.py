"""Compiled (numba) RBF kernel values from squared distances: ``K = exp(−γ D)`` (math.md §7.2).

The loop of :meth:`kernfw.operators.rbf_family.RBFFamily.gram` for float64 values: each row of the
squared distances ``D`` is scaled by ``−γ`` into ``K`` and exponentiated in place by
:func:`kernfw.operators._exp_numba.exp_in_place` (float64, branch-free so that it
vectorizes).  An exactly symmetric ``D`` gives an exactly symmetric ``K``: every entry
goes through the same arithmetic.
"""

import numpy as np
from numba import njit

from ._exp_numba import exp_in_place

__all__ = ["exp_scaled"]


@njit(cache=True, nogil=True)
def exp_scaled(D, gamma, K):
    """``K_ij ← exp(−γ D_ij)`` for float64 ``D`` and ``K`` of the same shape (``D ≥ 0``)."""
    n, m = D.shape
    bits = np.empty(m, dtype=np.int64)
    g = -gamma
    for i in range(n):
        row, out = D[i], K[i]
        for j in range(m):
            out[j] = g * row[j]
        exp_in_place(out, bits)
