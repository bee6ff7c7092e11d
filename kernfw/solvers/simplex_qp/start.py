"""Starting points of the simplex QP: the CVM initialization (math.md §2.6) and a warm start."""

import numpy as np

from .certificate import NEGATIVE_CURVATURE, check_curvature

__all__ = ["cvm_first_point", "cvm_second_point", "check_alpha0"]


def cvm_first_point(n, rng):
    """The first point ``a`` of the CVM start: 0, or uniform with a generator (math.md §2.6)."""
    return 0 if rng is None else int(rng.integers(n))


def cvm_second_point(diag, col_a, a, negative_tol=NEGATIVE_CURVATURE):
    """``b = argmax_i ‖z_i − z_a‖² = argmax_i (Q_ii − 2Q_ia)``, or None if every point is ``z_a``.

    ``negative_tol`` is the relative threshold of
    :func:`~kernfw.solvers.simplex_qp.certificate.negative_curvature_tol`.
    """
    b = int(np.argmax(diag - 2.0 * col_a))
    dist2 = diag[b] - 2.0 * col_a[b] + diag[a]
    # every ‖z_i − z_a‖² = Q_ii − 2Q_ia + Q_aa ≥ 0 for a PSD Q: the 2 × 2 principal minors
    nearest = int(np.argmin(diag - 2.0 * col_a))
    d2_min = diag[nearest] - 2.0 * col_a[nearest] + diag[a]
    check_curvature(d2_min, nearest, (diag[nearest], 2.0 * col_a[nearest], diag[a]), negative_tol)
    if b == a or dist2 <= 0:
        return None
    return b


def check_alpha0(alpha0, n):
    """A warm start on the simplex: shape (n,), α ≥ 0, 1ᵀα = 1 (renormalized)."""
    alpha = np.array(alpha0, dtype=np.float64).ravel()
    if alpha.shape != (n,):
        raise ValueError(f"alpha0 must have shape ({n},), got {np.shape(alpha0)}")
    total = alpha.sum()
    if not np.isfinite(total) or not alpha.min(initial=0.0) >= 0:  # two reductions: NaN fails both
        raise ValueError("alpha0 must be finite and nonnegative")
    if not total > 0 or abs(total - 1.0) > 1e-6:
        raise ValueError(f"alpha0 must lie on the unit simplex (sum 1), its sum is {total:.6g}")
    return alpha / total
