"""The RBF Gram matrix of training points, computed in float32 and exactly symmetric.

:func:`rbf_gram` is what :meth:`kernfw.operators.Gram.from_kernel` uses for the RBF
kernel when the kernel values are kept in float32: the inner products and ``exp``
run in float32 (half the memory traffic of float64 values cast afterwards, and a
vectorized ``exp``), and ``K`` comes out symmetric bit for bit, so no solver has
to test it.  The points are centred first (distances do not change), which keeps
the float32 rounding of ``‖x_i‖² + ‖x_j‖² − 2 x_iᵀx_j`` relative to the spread of
the data rather than to its offset.

The compiled loops (:mod:`kernfw.operators._rbf_gram_numba`) fill ``K`` by tiles.
"""

import numpy as np
from scipy.linalg.blas import ssyrk

from .._threads import thread_limit
from . import _rbf_gram_numba

__all__ = ["rbf_gram", "rbf_block", "DIRECT_MAX_FEATURES"]

#: up to this many features the squared distances are summed from the features
#: themselves (no product matrix); above, they come from one BLAS product ``X Xᵀ``
DIRECT_MAX_FEATURES = 32


def rbf_gram(X, gamma, out=None):
    """``K_ij = exp(−γ ‖x_i − x_j‖²)`` in float32, exactly symmetric, ``K_ii = 1``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Dense training points (float64 or float32; validated by the caller).
    gamma : float
        The RBF coefficient ``γ > 0``.
    out : ndarray of shape (n, n), float32, C-contiguous, or None
        Memory for ``K`` (reused memory costs no page faults).

    Returns
    -------
    ndarray of shape (n, n), float32, C-contiguous
        ``K``, within a few float32 roundings of ``exp(−γ d²)`` with ``d²`` summed in
        float64 (relative error about 1e-6 on data of unit spread).
    """
    n, d = X.shape
    centred = np.asarray(X - X.mean(axis=0), dtype=np.float32)
    work = n * n * max(d, 1) / 2.0  # multiply-adds of the squared distances
    lib = _rbf_gram_numba
    with thread_limit(work) as parallel:
        if d <= DIRECT_MAX_FEATURES:
            K = np.empty((n, n), dtype=np.float32) if out is None else out
            fill = lib.direct_tiles_parallel if parallel else lib.direct_tiles
            fill(np.ascontiguousarray(centred.T), float(gamma), K)
            return K
        G = _lower_products(centred, out)
        fill = lib.product_tiles_parallel if parallel else lib.product_tiles
        fill(G, np.diagonal(G).copy(), float(gamma))  # ‖x_i‖² = G_ii
        return G


def _lower_products(X, out=None):
    """``G = X Xᵀ`` (float32, C order; into ``out`` when given) with only its lower
    triangle computed: BLAS ``ssyrk`` writes the upper triangle of the Fortran-ordered
    ``(Xᵀ)ᵀ Xᵀ``, which is the lower triangle of its C-ordered transpose (half the
    multiply-adds of ``X @ X.T``)."""
    if out is None:
        return ssyrk(1.0, X.T, trans=1).T
    return ssyrk(1.0, X.T, trans=1, c=out.T, overwrite_c=True).T


def rbf_block(X, C, X_sq, C_sq, gamma):
    """``exp(−γ (‖x‖² + ‖c‖² − 2 xᵀc))`` for every row ``x`` of ``X`` against every row ``c``
    of ``C``, by the product formula in float32.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32
        Points, centred like ``C`` (the rounding of the formula is relative to their spread).
    C : ndarray of shape (m, d), float32
        Second points (landmarks, or ``X`` itself).
    X_sq, C_sq : ndarray of shape (n,) and (m,)
        ``‖x‖²`` and ``‖c‖²``.
    gamma : float
        The RBF coefficient ``γ``.

    Returns
    -------
    ndarray of shape (n, m), float32
    """
    D = X @ C.T
    D *= np.float32(-2.0)
    D += X_sq[:, None]
    D += C_sq[None, :]
    np.maximum(D, np.float32(0.0), out=D)
    D *= np.float32(-gamma)
    np.exp(D, out=D)
    return D
