"""Kernel evaluated on the fly, with an LRU cache of whole columns (as libsvm)."""

import numpy as np
import scipy.sparse as sp

from .._validation import check_features, check_new_features
from ._products_numba import LINEAR, POLY, RBF, SIGMOID
from .base import (
    SOURCE_RBF,
    SOURCE_RBF32,
    ColumnSource,
    KernelOperator,
    ProductForm,
    as_index,
    check_block,
)
from .column_cache import ColumnCache
from .pairwise import PairwiseKernel, resolve_gamma

#: the codes of the kernels of inner products (:class:`~kernfw.operators.base.ProductForm`)
_CODES = {"linear": LINEAR, "poly": POLY, "polynomial": POLY, "rbf": RBF, "sigmoid": SIGMOID}

__all__ = ["KernelFunction"]


class KernelFunction(KernelOperator):
    """Kernel ``k`` evaluated column by column on demand.

    The ``n × n`` matrix is never formed: :meth:`columns` computes missing
    columns in batches of ``batch_size`` (O(n · batch) memory) and keeps whole
    columns in a least-recently-used cache bounded by ``cache_size`` megabytes;
    :meth:`matmat` streams row blocks of ``K``.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n, d)
        Training inputs.
    kernel : str, callable or PairwiseKernel, default="rbf"
        Any kernel :func:`sklearn.metrics.pairwise.pairwise_kernels` knows, or a
        callable ``k(A, B)`` on two blocks of points returning the
        ``len(A) × len(B)`` kernel block (as :class:`sklearn.svm.SVC` accepts).
        A ready :class:`PairwiseKernel` is used as is (``params`` and
        ``feature_columns`` are then ignored).
    cache_size : float, default=200
        Column cache budget in MB.
    batch_size : int, default=256
        Number of columns (or rows, in :meth:`matmat`) computed per block.
    feature_columns : slice, array of int or None
        Restrict the kernel to these feature columns.
    check : bool
        Validate ``X`` (finite, 2-D).
    dtype : {None, numpy.float32, numpy.float64}, default=None
        Type of the kernel values this operator returns and caches (None: the
        type of ``X``).  float32 rounds them to about 1e-7 relative, as libsvm's
        kernel cache does, and halves the memory of the cache and of a column;
        its :meth:`column_source` then holds the features in float32, so compiled
        solvers compute the columns in float32 too.
    **params
        Kernel parameters (``gamma``, ``degree``, ``coef0``); ``gamma`` may be
        "scale" or "auto" as in :class:`sklearn.svm.SVC`.

    Attributes
    ----------
    hits, misses : int
        Column requests served from the cache / computed.
    max_cached : int
        Number of whole columns (``n`` values each) that fit in ``cache_size`` MB.
    """

    def __init__(
        self,
        X,
        kernel="rbf",
        cache_size=200.0,
        batch_size=256,
        feature_columns=None,
        check=True,
        dtype=None,
        **params,
    ):
        self.X = check_features(X) if check else X
        if sp.issparse(self.X):
            self.X = self.X.tocsr()  # row blocks are sliced all the time (no copy if CSR)
        if isinstance(kernel, PairwiseKernel):
            self.kernel = kernel
        else:
            if isinstance(params.get("gamma"), str):
                Xk = self.X if feature_columns is None else self.X[:, feature_columns]
                params["gamma"] = resolve_gamma(params["gamma"], Xk)
            self.kernel = PairwiseKernel(kernel, params, feature_columns)
        if not cache_size >= 0:
            raise ValueError(f"cache_size must be >= 0 MB, got {cache_size}")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.n = self.X.shape[0]
        self.dtype = np.dtype(self.X.dtype if dtype is None else dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        self.cache_size = float(cache_size)
        self.batch_size = int(batch_size)
        self._column_bytes = self.n * np.dtype(self.dtype).itemsize
        self.max_cached = int(self.cache_size * 2**20 // max(self._column_bytes, 1))
        self._columns = ColumnCache(self.n, self.max_cached, self.dtype)
        self._diag = None
        self._sq_norms = None

    # -- cache -----------------------------------------------------------------
    hits = property(lambda self: self._columns.hits, doc="Column requests served by the cache.")
    misses = property(lambda self: self._columns.misses, doc="Column requests computed.")

    @property
    def _cache(self):
        """``{j: cached K[:, j]}``, least recently used first."""
        return self._columns.ordered()

    @property
    def cache_info(self):
        """Dict of ``hits``, ``misses``, ``cached`` columns and ``max_cached``."""
        cached = len(self._columns)
        return {
            "hits": self.hits,
            "misses": self.misses,
            "cached": cached,
            "max_cached": self.max_cached,
        }

    def clear_cache(self):
        """Forget every cached column and reset the counters."""
        self._columns.clear()

    def _train_sq_norms(self):
        """Squared norms of the training rows the kernel sees (for rbf blocks); computed once."""
        if self._sq_norms is None:
            X = self.kernel.select(self.X)
            self._sq_norms = (
                np.einsum("ij,ij->i", X, X)
                if isinstance(X, np.ndarray)
                else np.zeros(self.n, dtype=self.dtype)
            )
        return self._sq_norms

    def product_form(self):
        """The kernel as a :class:`~kernfw.operators.base.ProductForm` on dense features
        (in this operator's ``dtype``; a float32 form promises its values only to float32
        rounding), else None (other kernels, sparse features, float64 values of float32
        features: the operator's own path)."""
        if not self.kernel.is_product or not isinstance(self.X, np.ndarray):
            return None
        X = self.kernel.select(self.X)
        if X.dtype == np.float32 and self.dtype == np.float64:
            return None
        code, p = _CODES[self.kernel.metric], self.kernel.params
        gamma = float(p.get("gamma", 1.0 / X.shape[1])) if code != LINEAR else 0.0
        coef0 = float(p.get("coef0", 1.0)) if code in (POLY, SIGMOID) else 0.0
        degree = int(p.get("degree", 3)) if code == POLY else 0
        features = np.ascontiguousarray(X, dtype=self.dtype)
        return ProductForm(features, code, gamma, coef0, degree, 1.0)

    def column_source(self):
        """For the RBF kernel on dense features, the :class:`~kernfw.operators.base.ColumnSource`
        of :meth:`product_form` (``Xᵀ``, ``‖x_i‖²``, γ, this operator's cache budget; float32
        features compute float32 columns); else None."""
        form = self.product_form()
        if form is None or form.code != RBF or form.features.shape[1] == 0:
            return None
        XT = np.ascontiguousarray(form.features.T)
        if XT.dtype == np.float32:
            return ColumnSource(SOURCE_RBF32, XT, None, form.gamma, float(self.cache_size))
        sq = self._train_sq_norms()
        return ColumnSource(SOURCE_RBF, XT, sq, form.gamma, float(self.cache_size))

    # -- protocol ----------------------------------------------------------------
    def diag(self):
        if self._diag is None:
            self._diag = self.kernel.diag(self.X).astype(self.dtype, copy=False)
        return self._diag.copy()

    def columns(self, idx):
        idx = as_index(idx, self.n)
        rows = self._columns.lookup(idx)
        if idx.size == 1 and rows[0] < 0:  # one missing column, returned without a copy
            return self._compute(idx)
        # Fortran order: each column is contiguous, so copies to and from the
        # cache are contiguous too (a strided n-column copy costs n cache misses)
        out = np.empty((self.n, idx.size), dtype=self.dtype, order="F")
        for pos, r in enumerate(rows.tolist()):
            if r >= 0:
                out[:, pos] = self._columns.slab[r]
        missing = np.flatnonzero(rows < 0)
        for start in range(0, missing.size, self.batch_size):
            pos = missing[start : start + self.batch_size]
            out[:, pos] = self._compute(idx[pos])
        return out

    def _compute(self, idx):
        """The columns ``K[:, idx]`` (n × |idx|, F-ordered), computed and cached."""
        sq = self._train_sq_norms()
        # rows k(x_j, X) of the symmetric K are its columns: the transpose of a C-order
        # (batch, n) block is F-ordered
        cols = self.kernel.block(self.X[idx], self.X, sq[idx], sq).T.astype(self.dtype, copy=False)
        self._columns.store(idx, cols)
        return cols

    def block(self, rows, cols):
        """``K[rows][:, cols]`` evaluated directly (no column of ``K`` computed or cached)."""
        rows, cols = as_index(rows, self.n), as_index(cols, self.n)
        sq = self._train_sq_norms()
        return self.kernel.block(self.X[rows], self.X[cols], sq[rows], sq[cols]).astype(
            self.dtype, copy=False
        )

    def matmat(self, V):
        V = check_block(V, self.n)
        out = np.empty(V.shape, dtype=np.result_type(self.dtype, V.dtype))
        step = self.batch_size
        for start in range(0, self.n, step):
            rows = slice(start, min(start + step, self.n))
            sq = self._train_sq_norms()
            out[rows] = self.kernel.block(self.X[rows], self.X, sq[rows], sq) @ V
        return out

    def cross(self, X_new, idx=None):
        X_new = check_new_features(X_new, self.X.shape[1])
        rows = self.X if idx is None else self.X[as_index(idx, self.n)]
        return self.kernel(X_new, rows)

    def new_diag(self, X_new):
        return self.kernel.diag(check_new_features(X_new, self.X.shape[1]))

    def fill_gram(self, out):
        """Write the whole ``K`` into ``out`` (n × n) by row blocks and return it.

        Each block of ``batch_size`` rows computes the columns from its first
        row on and mirrors them, so ``out`` is exactly symmetric; the diagonal
        is the exact ``k(x, x)``.  No column is cached.
        """
        for start in range(0, self.n, self.batch_size):
            stop = min(start + self.batch_size, self.n)
            B = self.kernel(self.X[start:stop], self.X[start:])
            head = np.triu(B[:, : stop - start])  # the diagonal block, upper triangle
            B[:, : stop - start] = head + np.triu(head, 1).T
            out[start:stop, start:] = B
            out[start:, start:stop] = B.T
        np.fill_diagonal(out, self.kernel.diag(self.X))
        return out

    def subset(self, idx):
        return KernelFunction(
            self.X[as_index(idx, self.n)],
            self.kernel,
            cache_size=self.cache_size,
            batch_size=self.batch_size,
            check=False,
            dtype=self.dtype,
        )
