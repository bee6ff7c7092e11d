"""Compiled ``e^x`` for ``x ≤ 0`` in float32 and float64, branch-free so that its loops
vectorize.

``e^x = 2^m p(r)`` with ``x = m ln2 + r``, ``|r| ≤ ln2/2``, ``ln 2`` split in two parts
(Cody–Waite: the high part with zero low bits, so ``m·ln2_hi`` is exact) and ``p`` the
Taylor polynomial of the precision of ``x`` (degree 6 in float32, degree 13 in float64:
about 1 ulp against ``numpy.exp``); ``2^m`` is built from its exponent bits.  Inlined
where it is called: the RBF Gram tiles (:mod:`kernfw.operators._rbf_gram_numba`) and the
RBF columns (:mod:`kernfw.operators._columns_numba`).
"""

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

__all__ = ["exp_in_place"]


def _taylor(degree, dtype):
    """The Taylor coefficients ``1/k!`` of ``e^r``, from ``k = degree`` down to 0."""
    return tuple(dtype(1.0 / math.factorial(k)) for k in range(degree, -1, -1))


# (log₂e, ln2_hi, ln2_lo, lowest exponent, ½, 0, exponent bias, mantissa bits, Taylor
# coefficients from the highest degree down); below the lowest exponent e^x is 0
_F32 = tuple(np.float32(c) for c in (1.4426950408889634, 0.693145751953125, 1.428606765330187e-06))
_F32 += (np.float32(-87.0), np.float32(0.5), np.float32(0.0), np.int32(127), np.int32(23))
_F32 += (_taylor(6, np.float32),)
# ln 2 split as fdlibm's
_F64 = (1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10)
_F64 += (-708.0, 0.5, 0.0, np.int64(1023), np.int64(52), _taylor(13, float))


def _constants(x):
    """The constants of ``e^x`` at the precision of ``x`` (chosen when numba types the call)."""
    return _F32 if x.dtype == np.float32 else _F64


@overload(_constants, inline="always")
def _constants_typed(x):
    constants = _F32 if x.dtype == types.float32 else _F64
    return lambda x: constants


def _horner(c, r):
    """``Σ_i c_i r^(len(c)−1−i)`` by Horner's rule, unrolled when numba types the call."""


@overload(_horner, inline="always")
def _horner_typed(c, r):
    n = len(c)
    body = "    p = c[0]\n" + "".join(f"    p = p * r + c[{i}]\n" for i in range(1, n))
    scope = {}
    exec(f"def horner(c, r):\n{body}    return p\n", scope)
    return scope["horner"]


def _to_int(like, m):
    return int(m)


@overload(_to_int, inline="always")
def _to_int_typed(like, m):
    if like == types.int32:
        return lambda like, m: np.int32(m)
    return lambda like, m: np.int64(m)


@njit(cache=True, fastmath={"contract"}, inline="always")
def exp_in_place(x, bits):
    """``x ← e^x`` for ``x ≤ 0`` (float32 or float64); ``bits`` (int32 or int64, of the
    width of ``x``, at least as long) is scratch."""
    log2e, ln2_hi, ln2_lo, lowest, half, zero, bias, shift, coefficients = _constants(x)
    for k in range(x.shape[0]):
        v = x[k]
        xc = max(v, lowest)
        m = np.floor(xc * log2e + half)
        r = (xc - m * ln2_hi) - m * ln2_lo
        p = _horner(coefficients, r)
        x[k] = p if v >= lowest else zero
        bits[k] = (_to_int(bias, m) + bias) << shift
    powers = bits.view(x.dtype)
    for k in range(x.shape[0]):
        x[k] *= powers[k]
