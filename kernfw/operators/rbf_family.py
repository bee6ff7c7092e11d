"""The RBF kernels of many ``γ`` on the same points (math.md §7.2).

``k_γ(x, x') = exp(−γ ‖x − x'‖²)``: every member of the family is a function of the same
squared distances ``D_ij = ‖x_i − x_j‖²``.  With float64 kernel values, a search over
``γ`` computes ``D`` once (one BLAS product, float64, exactly symmetric) and each
``K_γ = exp(−γ D)`` in one compiled pass (:mod:`kernfw.operators._rbf_family_numba`),
instead of one product per ``γ``.  With float32 kernel values (an estimator's
``precision`` at its default ``tol``), each ``K_γ`` is the Gram the estimator itself
computes (:func:`~kernfw.operators.rbf_gram.rbf_gram`, from the points): a stored float64
``D`` would take twice the memory of the kernel it serves.
"""

import numpy as np
from scipy.linalg.blas import dsyrk

from .._threads import thread_limit
from . import _gram_numba, _rbf_family_numba
from .gram import Gram
from .pairwise import PairwiseKernel
from .rbf_gram import rbf_gram

__all__ = ["RBFFamily"]


class RBFFamily:
    """The RBF Grams ``K_γ`` of dense points for many ``γ``, with values of one type.

    Parameters
    ----------
    X : ndarray of shape (n, d), float64
        Validated dense training points (finite).
    dtype : {numpy.float64, numpy.float32}
        The type of the kernel values.

    Attributes
    ----------
    D : ndarray of shape (n, n), float64, or None
        For float64 values, ``D_ij = max(‖x_i‖² + ‖x_j‖² − 2 x_iᵀx_j, 0)`` of the centred
        points (the distances do not change; the rounding is relative to the spread of
        the data), ``D_ii = 0``, symmetric bit for bit; None for float32 values.
    """

    def __init__(self, X, dtype=np.float64):
        X = np.asarray(X)
        if X.ndim != 2 or X.dtype != np.float64:
            raise ValueError(f"X must be a 2-D float64 array, got {X.dtype} {X.shape}")
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        self.X = X
        self.D = None if self.dtype == np.float32 else _squared_distances(X)

    @property
    def n(self):
        return self.X.shape[0]

    def gram(self, gamma, out=None):
        """The RBF Gram ``K_γ`` as a :class:`~kernfw.operators.Gram` (of the family's
        ``dtype``, exactly symmetric, with the kernel and the points for ``cross``).

        Parameters
        ----------
        gamma : float > 0
            The RBF coefficient.
        out : ndarray of shape (n, n) of the family's ``dtype``, C-contiguous, or None
            Memory for ``K_γ``.
        """
        gamma = float(gamma)
        if not gamma > 0 or not np.isfinite(gamma):
            raise ValueError(f"gamma must be a positive finite number, got {gamma!r}")
        if self.D is None:
            K = rbf_gram(self.X, gamma, out=out)
        else:
            K = np.empty_like(self.D) if out is None else out
            _rbf_family_numba.exp_scaled(self.D, gamma, K)
        kernel = PairwiseKernel("rbf", {"gamma": gamma})
        return Gram(K, kernel=kernel, X=self.X, check=False, symmetric=True)


def _squared_distances(X):
    """``D`` of :class:`RBFFamily` (float64, exactly symmetric) for the points ``X``."""
    n, d = X.shape
    centred = X - X.mean(axis=0)
    with thread_limit(n * n * max(d, 1) / 2.0):
        # BLAS writes the upper triangle of the Fortran-ordered (Xᵀ)ᵀXᵀ: the lower
        # triangle of its C-ordered transpose (no copy)
        D = dsyrk(1.0, centred.T, trans=1).T
    sq = np.diagonal(D).copy()
    D *= -2.0
    D += sq[:, None]
    D += sq[None, :]
    np.maximum(D, 0.0, out=D)
    np.fill_diagonal(D, 0.0)
    _gram_numba.mirror_lower(D)
    return D
