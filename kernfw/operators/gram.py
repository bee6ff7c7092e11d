"""Precomputed dense Gram matrix."""

import copy

import numpy as np

from .._threads import thread_limit
from .._validation import check_new_features
from . import _gram_numba
from .base import ArraySlot, KernelOperator, as_index, check_block
from .function import KernelFunction
from .gram_check import check_gram
from .pairwise import PairwiseKernel
from .rbf_gram import rbf_gram

__all__ = ["Gram", "materialize", "mirror_lower", "take_block", "block_times", "index_runs"]

#: entries from which :meth:`Gram.block` reads its block by a compiled loop (one pass,
#: no intermediate rows) rather than numpy's fancy indexing
_COMPILED_BLOCK = 4096


class Gram(KernelOperator):
    """A precomputed dense Gram matrix ``K`` (float64 or float32, kept as given).

    Parameters
    ----------
    K : array-like of shape (n, n)
        Symmetric kernel matrix.
    kernel : PairwiseKernel or None
        The kernel that produced ``K`` together with ``X`` (set by
        :func:`kernfw.kernels.make_operator`); it lets :meth:`cross` evaluate
        ``k(X_new, x_j)``.  Without it :meth:`cross` expects a test Gram.
    X : array-like of shape (n, d) or None
        Training inputs matching ``kernel``.
    check : bool
        Validate ``K`` (finite, square, symmetric); the validation also finds whether
        ``K`` is symmetric bit for bit (then ``symmetric`` is set).  A C-ordered ``K``
        symmetric only within the tolerance is held as the view ``Kᵀ`` (its columns
        are ``K``'s contiguous rows; the two differ by at most the tolerance).
        Internal callers that already validated pass False.
    symmetric : bool
        ``K`` is symmetric bit for bit (``K[i, j] == K[j, i]`` exactly), by
        construction (as :func:`~kernfw.operators.rbf_gram.rbf_gram` builds it) or as
        validated: the compiled view says so, and solvers read its rows as columns
        without testing it.  False means "not known" (a solver may test it).
    """

    _symmetric = None  # exact symmetry as tested by stored_gram (None: not yet)

    def __init__(self, K, kernel=None, X=None, check=True, symmetric=False):
        if check:
            K, exact = check_gram(K)
            symmetric = symmetric or exact
            if not exact and K.flags.c_contiguous:
                K = K.T  # symmetric within the tolerance: hold Kᵀ, whose columns are contiguous
        self.K = K
        self.n = self.K.shape[0]
        self.dtype = self.K.dtype
        if (kernel is None) != (X is None):
            raise ValueError("Gram needs both kernel and X, or neither")
        self.kernel = kernel
        self.X = X
        self.symmetric = bool(symmetric)

    @classmethod
    def from_kernel(cls, kernel, X, dtype, products=None, out=None):
        """The Gram ``K = k(X, X)`` of a kernel on (validated) training points ``X``.

        The RBF kernel on dense points with float32 values is computed in float32,
        exactly symmetric (:func:`~kernfw.operators.rbf_gram.rbf_gram`); every other
        kernel is evaluated in the precision of ``X`` (the inner-product kernels on dense
        float64 points from one product ``X Xᵀ``, without revalidating ``X``, shared by
        the kernels of a list: :meth:`PairwiseKernel.gram`) and stored in ``dtype``.

        Parameters
        ----------
        kernel : PairwiseKernel
            The kernel ``k``.
        X : ndarray or sparse matrix of shape (n, d)
            Training points.
        dtype : numpy dtype
            Storage type of ``K``.
        products : InnerProducts or None
            ``X Xᵀ`` and ``‖x_i‖²`` shared with the other kernels of a kernel list
            (:func:`kernfw.kernels.make_operators`).
        out : ndarray of shape (n, n), float64, C-contiguous, or None
            Memory for ``K`` when ``dtype`` is float64 (a slot of a
            :class:`~kernfw.operators.KernelStack`'s array): ``K`` is computed into it
            and made exactly symmetric (:func:`mirror_lower`).
        """
        dtype = np.dtype(dtype)
        if _float32_rbf(kernel, X, dtype):
            return cls(rbf_gram(kernel.select(X), kernel.params["gamma"]), kernel, X, False, True)
        with thread_limit(X.shape[0] ** 2 * max(X.shape[1], 1) / 2.0):
            if out is not None and dtype == np.float64:
                mirror_lower(kernel.gram(X, products, out=out))
                return cls(out, kernel=kernel, X=X, check=False, symmetric=True)
            K = kernel.gram(X, products).astype(dtype, copy=False)
        return cls(K, kernel=kernel, X=X, check=False)

    def diag(self):
        return np.diagonal(self.K).copy()

    def matmat(self, V):
        return self.K @ check_block(V, self.n)

    def columns(self, idx):
        return self.K[:, as_index(idx, self.n)]

    def cross(self, X_new, idx=None):
        cols = slice(None) if idx is None else as_index(idx, self.n)
        if self.kernel is not None:
            X_new = check_new_features(X_new, self.X.shape[1])
            return self.kernel(X_new, self.X[cols])
        K_new = np.asarray(X_new)
        if K_new.ndim != 2 or K_new.shape[1] != self.n:
            raise ValueError(
                "cross on a precomputed Gram needs a test Gram of shape "
                f"(n_test, n_train={self.n}); got an array of shape {K_new.shape}"
            )
        if not np.all(np.isfinite(K_new)):
            raise ValueError("test Gram contains NaN or infinity")
        return K_new[:, cols]

    def new_diag(self, X_new):
        if self.kernel is None:
            return super().new_diag(X_new)
        return self.kernel.diag(check_new_features(X_new, self.X.shape[1]))

    def subset(self, idx):
        idx = as_index(idx, self.n)
        X = None if self.X is None else self.X[idx]
        K = self.K[np.ix_(idx, idx)]  # a principal submatrix: as symmetric as K
        return Gram(K, kernel=self.kernel, X=X, check=False, symmetric=self.symmetric)

    def predictor(self, idx):
        """The kernel on the points ``X[idx]`` (a :class:`KernelFunction` with no cache):
        prediction evaluates ``k(x_new, x_j)``, never the block ``K[idx][:, idx]``; a
        precomputed Gram (no kernel) gives :meth:`subset`."""
        if self.kernel is None:
            return self.subset(idx)
        X = self.X[as_index(idx, self.n)]
        return KernelFunction(X, self.kernel, cache_size=0, check=False, dtype=self.dtype)

    def dense(self):
        return self.K

    def dense_factors(self):
        """``(K, 1.0, symmetric)``: the matrix itself and whether it is symmetric bit for bit."""
        return self.K, 1.0, self.symmetric

    def stored_gram(self, by_columns=False):
        """``K`` (a plain ndarray; None while detached); ``by_columns``: ``K`` when it is
        symmetric bit for bit (known, or tested once in one compiled pass), else ``Kᵀ``."""
        if not isinstance(self.K, np.ndarray):
            return None
        K = np.asarray(self.K)
        if not by_columns or self.symmetric:
            return K
        if self._symmetric is None:
            self._symmetric = check_gram(K)[1]
        return K if self._symmetric else K.T

    def matmat64(self, V):
        """``K @ V`` in float64; a float32 ``K`` is read once by a compiled loop that sums
        in float64 (no float64 copy of ``K``)."""
        V = np.asarray(check_block(V, self.n), dtype=np.float64)
        if self.K.dtype != np.float32:
            return np.asarray(self.K @ V, dtype=np.float64)
        out = np.empty(V.shape)
        _gram_numba.gram_times(
            self.K, np.ascontiguousarray(V.reshape(self.n, -1)), out.reshape(self.n, -1)
        )
        return out

    def block(self, rows, cols):
        rows, cols = as_index(rows, self.n), as_index(cols, self.n)
        if type(self.K) is not np.ndarray or rows.size * cols.size < _COMPILED_BLOCK:
            return self.K[np.ix_(rows, cols)]
        return take_block(self.K, rows, cols)

    def detach_arrays(self, store):
        index = next((q for q, K in enumerate(store) if K is self.K), None)
        if index is None:
            index = len(store)
            store.append(self.K)
        shell = copy.copy(self)
        shell.K = ArraySlot(index)
        return shell

    def attach_arrays(self, store):
        if not isinstance(self.K, ArraySlot):
            return self
        op = copy.copy(self)
        op.K = store[self.K.index]
        return op


def index_runs(points, ends=None):
    """The runs of consecutive values of ``points`` as rows ``[lo, hi)`` of an int64
    array (concatenated, they are ``points``), and the bounds of each part's runs:
    ``ends`` (int, increasing from 0 to ``points.size``) cuts ``points`` into parts whose
    runs are kept apart (None: one part).

    Returns
    -------
    runs : int64 array (S, 2)
    run_ends : int64 array (len(ends),)
        Part ``p``'s runs are ``runs[run_ends[p]:run_ends[p + 1]]``.
    """
    points = np.asarray(points, dtype=np.int64)
    ends = np.array([0, points.size] if ends is None else ends, dtype=np.int64)
    cut = np.zeros(points.size + 1, dtype=bool)  # a run starts at k (and ends before it)
    cut[ends] = True
    cut[1:-1] |= np.diff(points) != 1
    starts = np.flatnonzero(cut)  # run starts and the end of points
    lo, hi = starts[:-1], starts[1:]
    runs = np.stack([points[lo], points[hi - 1] + 1], axis=1) if lo.size else np.empty((0, 2))
    return runs.astype(np.int64), np.searchsorted(starts, ends).astype(np.int64)


def block_times(K, rows, cols, W, out=None):
    """``K[rows][:, cols] @ Wᵀ`` summed in float64, without forming the block: each row
    ``K[rows[a]]`` is read in place along the runs of consecutive indices of ``cols``
    (:func:`index_runs`; few runs when ``cols`` are a few ranges of a Gram ordered by
    class), so a float32 ``K`` is never copied to float64.

    Parameters
    ----------
    K : ndarray of shape (n, m), float32 or float64, C-contiguous
    rows, cols : ndarray of int, valid indices
    W : ndarray of shape (r, len(cols))
        The vectors, one per row.
    out : ndarray of shape (len(rows), r), float64, C-contiguous, or None
        Added to (None: zeros).

    Returns
    -------
    ndarray of shape (len(rows), r), float64
    """
    W = np.ascontiguousarray(W, dtype=np.float64)
    if out is None:
        out = np.zeros((np.size(rows), W.shape[0]))
    runs, _ = index_runs(cols)
    _gram_numba.block_times(K, np.asarray(rows, dtype=np.int64), runs, W, out)
    return out


def take_block(K, rows, cols, out=None):
    """The block ``K[rows][:, cols]`` of a stored matrix, read in one compiled pass.

    Parameters
    ----------
    K : ndarray of shape (n, m), C-contiguous
    rows, cols : ndarray of int (intp), valid indices
    out : ndarray of shape (len(rows), len(cols)), dtype of ``K``, C-contiguous, or None
        Memory for the block (reused memory costs no page faults).
    """
    if out is None:
        out = np.empty((rows.size, cols.size), dtype=K.dtype)
    _gram_numba.take_block(K, rows, cols, out)
    return out


def _float32_rbf(kernel, X, dtype):
    """Whether :func:`~kernfw.operators.rbf_gram.rbf_gram` computes ``k(X, X)``: the RBF
    kernel with a numeric ``γ`` on dense points, values stored in float32."""
    return (
        dtype == np.float32
        and isinstance(kernel, PairwiseKernel)
        and isinstance(kernel.metric, str)
        and kernel.metric == "rbf"
        and "gamma" in kernel.params
        and isinstance(X, np.ndarray)
    )


def mirror_lower(K):
    """Copy the lower triangle of the square float64 array ``K`` onto its upper triangle,
    in place (``K_ij ← K_ji`` for ``i < j``), so that ``K`` is symmetric bit for bit; returns
    ``K``.  A kernel computed by BLAS products is symmetric only up to rounding."""
    _gram_numba.mirror_lower(K)
    return K


def materialize(op, allocate, max_mb):
    """A copy of the operator tree ``op`` where every on-the-fly kernel
    (:class:`~kernfw.operators.KernelFunction`) whose Gram fits ``max_mb`` MB becomes a
    :class:`Gram` written into ``allocate((n, n), dtype)``.

    ``allocate`` returns the memory (``numpy.empty`` or a memory map of a sweep); the
    matrix is written block by block, never held twice, exactly symmetric
    (:meth:`~kernfw.operators.KernelFunction.fill_gram`).  Other operators are returned
    unchanged (composites are recursed into, :meth:`KernelOperator.map_operators`).
    """
    if not isinstance(op, KernelFunction):
        return op.map_operators(lambda child: materialize(child, allocate, max_mb))
    if op.n * op.n * np.dtype(op.dtype).itemsize / 2**20 > max_mb:
        return op
    K = op.fill_gram(allocate((op.n, op.n), op.dtype))
    return Gram(K, kernel=op.kernel, X=op.X, check=False, symmetric=True)
