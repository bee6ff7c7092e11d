"""Weighted sums of kernels: ``K_w = Σ_j w_j K_j``."""

import copy

import numpy as np
import scipy.sparse as sp

from .._threads import thread_limit
from . import _combination_numba
from .base import KernelOperator, as_index, check_block

__all__ = ["MultiKernel", "KernelStack"]


def _check_weights(weights, p):
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (p,):
        raise ValueError(f"expected {p} kernel weights, got shape {w.shape}")
    low, high = (w.min(), w.max()) if p else (0.0, 0.0)
    if not (np.isfinite(low) and np.isfinite(high)):  # (NaN propagates to both)
        raise ValueError("kernel weights must be finite")
    if low < 0:
        raise ValueError(f"kernel weights must be nonnegative, got {w}")
    if not high > 0:
        raise ValueError(
            f"kernel weights are all zero: the combination Σ_j w_j K_j would be the zero "
            f"kernel; give at least one kernel a positive weight, got {w}"
        )
    return w


class MultiKernel(KernelOperator):
    """The combination ``Σ_j w_j K_j`` of kernel operators on the same points.

    Parameters
    ----------
    operators : sequence of KernelOperator
        The base kernels ``K_1 … K_p`` (any backends, same ``n``).
    weights : array-like of shape (p,) or None
        Nonnegative weights ``w_j``, at least one positive (default: all ones).

    Attributes
    ----------
    stack : KernelStack or None
        The base kernels formed as one dense array, when whoever built the operators
        formed it (the MKL estimators: their Grams are computed into it); solvers that
        re-weight the kernels use it instead of forming their own.  Kept by
        :meth:`with_weights`, dropped by every method that changes the kernels.

    Notes
    -----
    Kernels with zero weight are skipped in every product, so a sparse weight
    vector costs only its support.  :meth:`with_weights` shares the base
    operators (and their caches): no kernel is recomputed.
    """

    stack = None

    def __init__(self, operators, weights=None):
        operators = list(operators)
        if not operators:
            raise ValueError("MultiKernel needs at least one kernel")
        for op in operators:
            if not isinstance(op, KernelOperator):
                raise TypeError(f"expected KernelOperator instances, got {type(op).__name__}")
        sizes = [op.n for op in operators]
        if len(set(sizes)) != 1:
            raise ValueError(f"kernels have different sizes n: {sizes}")
        self.operators = operators
        self.p = len(operators)
        self.n = sizes[0]
        self.dtype = np.result_type(*[op.dtype for op in operators])
        self.weights = _check_weights(np.ones(self.p) if weights is None else weights, self.p)

    def _active(self):
        return [(w, op) for w, op in zip(self.weights, self.operators) if w != 0]

    def features(self):
        """``[√w_1 X_1, …, √w_p X_p]`` when every kernel with a positive weight is explicit
        features ``K_j = X_j X_jᵀ`` (so ``K_w = X_w X_wᵀ`` with the weighted blocks side
        by side), else None.

        The concatenation is a copy of the active blocks, O(n·Σ_j m_j) memory (kept with
        this operator; :meth:`with_weights` makes a new one): it lets the solvers that take
        explicit features (coordinate passes, BCFW with primal weights) run on a
        combination of feature blocks, such as approximated kernels.
        """
        if not hasattr(self, "_features"):
            self._features = self._weighted_features()
        return self._features

    def _weighted_features(self):
        views = [(w, op.features()) for w, op in self._active()]
        if any(X is None for _, X in views):
            return None
        dtype = np.result_type(*[X.dtype for _, X in views])
        blocks = [X * dtype.type(np.sqrt(w)) for w, X in views]
        if any(sp.issparse(b) for b in blocks):
            X = sp.hstack([sp.csr_matrix(b) for b in blocks], format="csr")
            X.sum_duplicates()
        else:
            X = np.ascontiguousarray(np.hstack(blocks))
        return X

    def _sum(self, parts, shape, dtype=None):
        """``Σ w_j part_j`` over ``(w_j, part_j)`` pairs, one part in memory at a time.

        The weights are applied as Python floats, so float32 parts stay
        float32 (no float64 temporaries); ``shape``/``dtype`` give the zero
        result when every weight is zero.
        """
        out = None
        for w, part in parts:
            term = float(w) * part
            if out is None:
                out = term
                continue
            if term.dtype != out.dtype:
                out = out.astype(np.result_type(out, term), copy=False)
            out += term
        if out is None:
            out = np.zeros(shape, dtype=self.dtype if dtype is None else dtype)
        return out

    def map_operators(self, fn):
        out = copy.copy(self)
        out.__dict__.pop("_features", None)  # the copy's features come from its children
        out.__dict__.pop("stack", None)  # (so does its stack)
        out.operators = [fn(op) for op in self.operators]
        return out

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_features", None)  # a cache, rebuilt on demand
        state.pop("stack", None)  # the operators' arrays, pickled with them
        return state

    def with_weights(self, weights):
        """The same kernels with new weights (nothing is recomputed; the stack is kept)."""
        out = MultiKernel(self.operators, weights)
        out.stack = self.stack
        return out

    def per_kernel_quad(self, v):
        """All quadratic forms ``d_j = vᵀ K_j v``, shape (p,) (or (p, r) for 2-D v)."""
        v = check_block(v, self.n)
        return np.stack([op.quad(v) for op in self.operators])

    def diag(self):
        return self._sum(((w, op.diag()) for w, op in self._active()), (self.n,))

    def matmat(self, V):
        V = check_block(V, self.n)
        return self._sum(
            ((w, op.matmat(V)) for w, op in self._active()),
            V.shape,
            np.result_type(self.dtype, V.dtype),
        )

    def columns(self, idx):
        idx = as_index(idx, self.n)
        return self._sum(((w, op.columns(idx)) for w, op in self._active()), (self.n, idx.size))

    def _split_new(self, X_new):
        """One input per kernel: a list of p 2-D inputs (e.g. test Grams) or a
        3-D array; any other ``X_new`` (also nested lists of rows) goes to all."""
        if (
            isinstance(X_new, (list, tuple))
            and X_new
            and all(sp.issparse(x) or np.ndim(x) == 2 for x in X_new)
        ):
            if len(X_new) != self.p:
                raise ValueError(
                    f"expected {self.p} test inputs (one per kernel), got {len(X_new)}"
                )
            return list(X_new)
        arr = np.asarray(X_new) if not hasattr(X_new, "tocsr") else X_new
        if getattr(arr, "ndim", 2) == 3:
            if arr.shape[0] != self.p:
                raise ValueError(f"expected {self.p} test Grams, got {arr.shape[0]}")
            return list(arr)
        return [X_new] * self.p

    def cross(self, X_new, idx=None):
        inputs = self._split_new(X_new)
        if not np.any(self.weights):
            return 0.0 * self.operators[0].cross(inputs[0], idx)
        return self._sum(
            (
                (w, op.cross(x, idx))
                for w, op, x in zip(self.weights, self.operators, inputs)
                if w != 0
            ),
            None,
        )

    def cross_matmat(self, X_new, V):
        """``Σ_j w_j k_j(X_new, X) V``, each term by its operator's ``cross_matmat``."""
        inputs = self._split_new(X_new)
        V = check_block(V, self.n)
        if not np.any(self.weights):
            return 0.0 * self.operators[0].cross_matmat(inputs[0], V)
        return self._sum(
            (
                (w, op.cross_matmat(x, V))
                for w, op, x in zip(self.weights, self.operators, inputs)
                if w != 0
            ),
            None,
        )

    def new_diag(self, X_new):
        inputs = self._split_new(X_new)
        if not np.any(self.weights):
            return 0.0 * self.operators[0].new_diag(inputs[0])
        return self._sum(
            (
                (w, op.new_diag(x))
                for w, op, x in zip(self.weights, self.operators, inputs)
                if w != 0
            ),
            None,
        )

    def subset(self, idx):
        return MultiKernel([op.subset(idx) for op in self.operators], self.weights)

    def predictor(self, idx):
        return MultiKernel([op.predictor(idx) for op in self.operators], self.weights)

    def __repr__(self):
        return f"MultiKernel(p={self.p}, n={self.n}, weights={np.round(self.weights, 4).tolist()})"


class KernelStack:
    """The base kernels of a :class:`MultiKernel`, formed once as one dense array.

    Solvers that re-weight the same kernels many times (the MKL solvers: one SVM
    solve per weight vector) form each base kernel ``K_j`` once — as its operator
    answers it, normalization included — instead of at every weight vector.  Then
    a weighted sum ``K_w = Σ_j w_j K_j`` is one pass over the stack into a buffer
    that is reused, and all quadratic forms ``v_rᵀ K_j v_r`` are one matrix product.

    The stack holds ``K_j = s_j D_j`` as the matrix ``D_j`` of the operator and its
    factor ``s_j`` (a trace normalization's ``n / tr K``,
    :meth:`~kernfw.operators.base.KernelOperator.dense_factors`), applied to the weights.
    Each ``D_j`` is exactly symmetric, and so is every weighted sum (:meth:`weighted`):
    a Gram that :func:`kernfw.kernels.make_operators` computed into the stack's own
    array (``out``) is adopted as it is (symmetric by construction, no second copy);
    a matrix known to be symmetric bit for bit (a Gram validated so, the third value of
    ``dense_factors``) is copied as it is; any other kernel is copied in symmetrized,
    ``½(D_j + D_jᵀ)`` (a rounding-level change for a symmetric kernel).

    Parameters
    ----------
    kernels : MultiKernel
        The base kernels ``K_1 … K_p`` (their weights are ignored).
    out : ndarray of shape (p, n, n), float64, C-contiguous, or None
        The array to hold the stack, as given to ``make_operators(..., out=out)``:
        a kernel whose matrix is ``out[j]`` (its own slot) is adopted; the other slots
        are written.  None allocates one.
    """

    def __init__(self, kernels, out=None):
        self.p, self.n = kernels.p, kernels.n
        shape = (self.p, self.n, self.n)
        if out is None:
            out = np.empty(shape)
        elif out.shape != shape or out.dtype != np.float64 or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous float64 array of shape {shape}")
        self.D, self.scale = out, np.empty(self.p)
        with thread_limit(self.D.size):
            for j, op in enumerate(kernels.operators):
                D, self.scale[j], symmetric = op.dense_factors()
                if _in_slot(D, self.D, j):
                    continue  # computed into the stack, exactly symmetric
                if isinstance(D, np.ndarray) and np.may_share_memory(D, self.D):
                    raise ValueError(f"kernel {j}'s matrix lies in another slot of out")
                if symmetric:  # symmetric bit for bit: a plain copy (rows read in order)
                    np.copyto(self.D[j], D)
                else:  # copy and symmetrize in one pass
                    _combination_numba.symmetrize_into(np.asarray(D), self.D[j])
        self._out = np.empty((self.n, self.n))

    @staticmethod
    def megabytes(p, n):
        """Memory (MB) of the stack of ``p`` kernels on ``n`` points and its buffer:
        ``(p + 1) n²`` float64."""
        return (p + 1) * n**2 * 8 / 2**20

    def weighted(self, weights):
        """``K_w = Σ_j w_j K_j``, dense (n, n), symmetric bit for bit.

        Returns the stack's buffer: it is overwritten by the next call.
        """
        w = _check_weights(weights, self.p) * self.scale  # K_w = Σ_j (w_j s_j) D_j
        _combination_numba.weighted_sum(self.D.reshape(self.p, -1), w, self._out.reshape(-1))
        return self._out

    def per_kernel_quad(self, V, rows=None):
        """``d_j = Σ_r v_rᵀ K_j v_r`` for the columns ``v_r`` of ``V`` (n, r), shape (p,).

        ``rows``: the indices where some ``v_r`` may be nonzero (None: all).  Up to
        ``n/2`` of them, only those rows and columns of the kernels are read;
        otherwise ``d_j = ⟨K_j, V Vᵀ⟩`` for all ``j`` in one product of the stack with
        ``V Vᵀ`` (one read of the stack, whatever the number r of columns).
        """
        V = np.asarray(V, dtype=np.float64).reshape(self.n, -1)
        if rows is None or 2 * len(rows) > self.n:
            return self.scale * (self.D.reshape(self.p, -1) @ (V @ V.T).reshape(-1))
        rows = as_index(rows, self.n)
        out = np.empty(self.p)
        _combination_numba.quad_on_rows(
            self.D, np.ascontiguousarray(V), np.asarray(rows, np.int64), out
        )
        return self.scale * out


def _in_slot(D, K, j):
    """Whether the array ``D`` is the slot ``K[j]`` of the stack's array itself."""
    slot = K[j]
    return (
        isinstance(D, np.ndarray)
        and D.shape == slot.shape
        and D.strides == slot.strides
        and D.dtype == slot.dtype
        and D.__array_interface__["data"][0] == slot.__array_interface__["data"][0]
    )
