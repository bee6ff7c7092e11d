"""Certificates and the scale of the simplex QP's stopping rule (math.md §2.5).

Every iterate of the family (compiled, CVM, sharded, coordinate passes) has a value
``f = f(α) = qᵀα − αᵀQα`` and the FW gap ``g_{i*} − αᵀg`` of its FW vertex, which
bounds ``f* − f(α)``.  This module turns those two numbers into a
:class:`~kernfw.fw.Certificate` (with the squared radius of a ball for the radius rule),
declares the problem's scale of ``tol`` and raises the error of a line search that met
negative curvature (``Q`` not PSD).
"""

import math

import numpy as np

from ...fw import Certificate
from ...fw.result import rounding_bound
from ...operators.psd import NotPSDError

__all__ = [
    "NEGATIVE_CURVATURE",
    "negative_curvature_tol",
    "check_curvature",
    "raise_not_psd",
    "simplex_scale",
    "ball_shift",
    "simplex_certificate",
    "simplex_rounding",
]

#: a curvature ``dᵀQd`` below −this × the scale ``max(|Q_ii|, |2v_i|, |αᵀQα|)`` is not round-off: Q is not PSD
NEGATIVE_CURVATURE = 1e-8

#: the same for kernel values kept in float32 (ε ≈ 1.2e-7): a sum of ``m`` float32 products
#: is off by up to ``m·ε`` of its scale, so round-off alone reaches 1e-8 at any ``m``
NEGATIVE_CURVATURE_FLOAT32 = 1e-4


def negative_curvature_tol(Q):
    """The relative threshold below which a curvature ``dᵀQd < 0`` means ``Q`` is not PSD.

    Parameters
    ----------
    Q : KernelOperator
        The operator of ``Q`` (an L2-SVM kernel is judged by the operator it wraps).

    Returns
    -------
    float
        :data:`NEGATIVE_CURVATURE`, or :data:`NEGATIVE_CURVATURE_FLOAT32` when the kernel
        values are float32 (their round-off is larger than 1e-8).
    """
    values = getattr(Q, "base", Q)
    single = np.dtype(getattr(values, "dtype", np.float64)) == np.float32
    return NEGATIVE_CURVATURE_FLOAT32 if single else NEGATIVE_CURVATURE


def check_curvature(curvature, i, terms, negative_tol):
    """Raise :func:`raise_not_psd` when ``dᵀQd = curvature`` is below ``−negative_tol`` times
    the largest magnitude of the ``terms`` it sums (round-off does not explain it)."""
    if curvature < -negative_tol * max(max(abs(t) for t in terms), 1e-300):
        raise_not_psd(curvature, i)


def simplex_scale(q):
    """The scale of ``tol`` (:class:`~kernfw.fw.StoppingRule`, math.md §2.5) of the simplex
    QP with linear term ``q``: the L2-SVM's (``q = 0``) is its dual value ``|f| = ρ``, the
    ball's (``q`` given, the MEB) its squared radius ``r²``."""
    return "dual" if q is None else "radius"


def raise_not_psd(curvature, i):
    """The error of a line search that met negative curvature ``dᵀQd < 0`` (``Q`` not PSD)."""
    raise NotPSDError(
        f"the kernel matrix is not positive semidefinite: the line search toward point {i} "
        f"met negative curvature d^T Q d = {curvature:.3g} < 0, so the dual is not concave "
        "and no duality gap can be certified. Use a PSD kernel (e.g. 'rbf' or 'linear'), or "
        "repair a precomputed Gram matrix (clip its negative eigenvalues, or add a multiple "
        "of the identity)."
    )


def ball_shift(diag, q):
    """The constant ``c`` with ``diag(Q) = q + c·1`` (then ``r² = f(α) + c``); ValueError if
    ``diag(Q) − q`` is not constant (the radius rule needs a ball).  ``diag`` may also be
    the pair ``(min, max)`` of ``diag(Q) − q`` (``q`` None)."""
    shift = np.asarray(diag, dtype=np.float64) if q is None else diag - q
    c = float(shift[-1]) if shift.size else 0.0
    if not np.allclose(shift, c, rtol=1e-10, atol=1e-12 * max(1.0, abs(c))):
        raise ValueError(
            "the radius rule needs diag(Q) − q to be constant (a ball: the MEB with "
            "q = diag(Q), or an L2-SVM whose kernel has a constant diagonal such as "
            "RBF); pass tol=StoppingRule(tol, 'dual') or 'absolute' for this problem"
        )
    return c


def simplex_rounding(n_terms, qi, vi, qa, ava):
    """Rounding bound of ``f`` and of the FW gap ``(q_i − 2v_i) − (qᵀα − 2αᵀv)`` (math.md §2.5).

    :func:`~kernfw.fw.result.rounding_bound` of ``n_terms`` accumulated terms
    (the dot products of ``qᵀα`` and ``αᵀv`` and the column updates that made
    ``v``) at the magnitude ``|q_i| + 2|v_i| + |qᵀα| + 2|αᵀv|`` of the numbers
    the gap subtracts.
    """
    return rounding_bound(n_terms, abs(qi) + 2.0 * abs(vi) + abs(qa) + 2.0 * abs(ava))


def simplex_certificate(f, gap, extra, rounding=0.0, shift=None):
    """Certificate of an iterate with value ``f = f(α)`` and FW gap ``gap`` (math.md §2.5).

    ``primal = f + gap``; with a ``shift`` (the radius rule: ``c`` of :func:`ball_shift`)
    ``extra`` gains ``radius2`` (``r² = f + c``) and ``delta = gap / r²``.
    The FW gap is nonnegative in exact arithmetic: a computed value below 0
    is rounding (at most ``rounding``, :func:`simplex_rounding`) and is
    reported as 0, so ``f* − f ≤ gap + rounding`` still holds.
    """
    gap = max(gap, 0.0)
    if shift is not None:
        r2 = f + shift
        extra["radius2"] = r2
        extra["delta"] = gap / r2 if r2 > 0 else (0.0 if gap <= 0 else math.inf)
    return Certificate(primal=f + gap, dual=f, gap=gap, extra=extra, rounding=rounding)
