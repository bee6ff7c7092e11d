"""Explicit (dense or sparse) features: the linear kernel ``K = X Xᵀ``, never formed."""

import numpy as np
import scipy.sparse as sp

from .._validation import check_features, check_new_features
from ._products_numba import LINEAR
from .base import KernelOperator, ProductForm, as_index, check_block
from .pairwise import _sq_norms
from .products import matmul, tmatmul

__all__ = ["Features"]


def _dense(A):
    return A.toarray() if sp.issparse(A) else np.asarray(A)


class Features(KernelOperator):
    """Linear kernel on explicit features ``X`` (rows ``x_i``).

    ``matmat(V)`` is ``X @ (Xᵀ @ V)``: O(nnz(X)·r) work and no ``n × n`` matrix.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n, d)
        Training features (float32 kept as given; sparse input stored as CSR).
    check : bool
        Validate ``X`` (finite, 2-D).

    Notes
    -----
    A sparse product reads one side at random (the dense factor, CSR kernel)
    or writes the result at random (CSC kernel); the random accesses are
    cheap when they hit the smaller array.  With ``d <= n`` both products use
    the CSR ``X`` as given (``Xᵀ`` is its free CSC view), exactly the bare
    ``X @ (X.T @ V)``; with ``d > n`` a CSC copy of ``X`` serves both
    products (their random accesses then fall on the ``n × r`` arrays).
    See ``docs/benchmarks/operators.md`` for the measurements behind this.
    """

    def __init__(self, X, check=True):
        X = check_features(X) if check else X
        if sp.issparse(X):
            X = X.tocsr()
        self.X = X
        self.n, self.d = X.shape
        self.dtype = X.dtype
        # the matrix used in products (see Notes): X itself, or its CSC copy
        self._Xmul = X.tocsc() if sp.issparse(X) and self.d > self.n else X
        self._XT = self._Xmul.T

    @property
    def is_sparse(self):
        return sp.issparse(self.X)

    def features(self):
        """``X``: C-contiguous dense or canonical CSR."""
        X = self.X
        if sp.issparse(X):
            if not X.has_canonical_format:
                X = X.copy()
                X.sum_duplicates()  # one entry per (i, feature), sorted
            return X
        return np.ascontiguousarray(X)

    def product_form(self):
        """The linear kernel of dense ``X`` (None for sparse ``X``)."""
        return None if self.is_sparse else ProductForm(self.features(), LINEAR, 0.0, 0.0, 0, 1.0)

    def primal(self, V):
        """``Xᵀ V`` of shape (d,) or (d, r): the primal weights of dual ``V``."""
        return _dense(tmatmul(self._Xmul, check_block(V, self.n)))

    def matmat(self, V):
        return _dense(matmul(self._Xmul, self.primal(V)))

    def diag(self):
        return _sq_norms(self.X).astype(self.dtype, copy=False)

    def columns(self, idx):
        return _dense(self.X @ self.X[as_index(idx, self.n)].T)

    def cross(self, X_new, idx=None):
        X_new = check_new_features(X_new, self.d)
        rows = self.X if idx is None else self.X[as_index(idx, self.n)]
        return _dense(X_new @ rows.T)

    def cross_matmat(self, X_new, V):
        """``X_new (Xᵀ V)``: no ``n_new × n`` block is formed."""
        X_new = check_new_features(X_new, self.d)
        return _dense(matmul(X_new, self.primal(V)))

    def new_diag(self, X_new):
        X_new = check_new_features(X_new, self.d)
        return _sq_norms(X_new).astype(X_new.dtype, copy=False)

    def subset(self, idx):
        return Features(self.X[as_index(idx, self.n)], check=False)
