"""Compiled float32 ``e^x`` for ``x ≤ 0``, branch-free so that its loops vectorize.

``e^x = 2^m p(r)`` with ``x = m ln2 + r``, ``|r| ≤ ln2/2``, ``ln 2`` split in two parts
(Cody–Waite) and ``p`` the degree-6 Taylor polynomial (float32 precision); ``2^m`` is
built from its exponent bits.  Inlined where it is called: the RBF Gram tiles
(:mod:`kernfw.operators._rbf_gram_numba`) and the float32 RBF columns of the simplex-QP
step (:mod:`kernfw.operators._columns_numba`).
"""

import numpy as np
from numba import njit

__all__ = ["exp_in_place"]

_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693145751953125)  # ln 2 = hi + lo, hi with 12 zero low bits
_LN2_LO = np.float32(1.428606765330187e-06)
_EXP_MIN = np.float32(-87.0)  # below: e^x < 1.7e-38, returned as 0


@njit(cache=True, fastmath={"contract"}, inline="always")
def exp_in_place(x, bits):
    """``x ← e^x`` for ``x ≤ 0`` (float32); ``bits`` (int32, same length) is scratch."""
    for k in range(x.shape[0]):
        v = x[k]
        xc = max(v, _EXP_MIN)
        m = np.floor(xc * _LOG2E + np.float32(0.5))
        r = (xc - m * _LN2_HI) - m * _LN2_LO
        p = np.float32(1.0 / 720.0)
        p = p * r + np.float32(1.0 / 120.0)
        p = p * r + np.float32(1.0 / 24.0)
        p = p * r + np.float32(1.0 / 6.0)
        p = p * r + np.float32(0.5)
        p = p * r + np.float32(1.0)
        p = p * r + np.float32(1.0)
        x[k] = p if v >= _EXP_MIN else np.float32(0.0)
        bits[k] = (np.int32(m) + np.int32(127)) << np.int32(23)
    powers = bits.view(np.float32)
    for k in range(x.shape[0]):
        x[k] *= powers[k]
