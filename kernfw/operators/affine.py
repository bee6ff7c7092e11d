"""A constant added to a kernel, and a kernel seen through scaled points.

``K̃ = D (K + c 11ᵀ) D`` with ``D = diag(d)``:

- ``c > 0`` is the kernel of the points with one more feature of value ``√c`` appended
  (liblinear's intercept: ``c = s²`` for ``intercept_scaling`` ``s``; math.md §1.15);
- ``d`` scales point ``i``'s feature map by ``d_i`` (per-example weights of the
  multi-category dual after its change of variables, math.md §1.15).

:class:`ShiftedScaled` rewrites the answers of its base operator; the base kernel is
never copied, except when a stored Gram matrix is asked for
(:meth:`ShiftedScaled.stored_gram`: one transformed copy made on the first request by
one compiled pass, or the base's own matrix transformed in place when the base is private
to the wrapper, ``overwrite=True``) and explicit features (one column appended, rows
scaled).  Compiled code that can form ``K̃`` as it reads the base's matrix asks
:meth:`ShiftedScaled.scaled_gram` instead: the matrix, ``c`` and ``d``, no pass over them.
"""

import copy

import numpy as np
import scipy.sparse as sp

from ._affine_numba import shifted_scaled_copy
from .base import KernelOperator, as_index, check_block
from .gram import Gram

__all__ = ["ShiftedScaled", "shift_kernel", "scale_points"]


class ShiftedScaled(KernelOperator):
    """``K̃_ij = d_i d_j (K_ij + c)``: a kernel plus a constant, on scaled points.

    Parameters
    ----------
    base : KernelOperator
        The kernel ``K``.
    shift : float
        ``c ≥ 0``, added to every kernel value (``c = 0``: none).
    scale : ndarray of shape (n,) or None
        ``d`` (None: all ones).
    overwrite : bool
        The base is private to this operator (e.g. the Gram an estimator has just
        computed from its features): :meth:`stored_gram` transforms the base's stored
        matrix in place instead of copying it, and from then on every kernel value comes
        from it (only :meth:`cross`, :meth:`new_diag` and :meth:`predictor`, which
        evaluate the base's kernel function, still ask the base).

    Notes
    -----
    :meth:`cross` and :meth:`new_diag` give the shifted kernel of new points (scaled on
    the training side by ``d_j``: the columns of ``K̃``); new points have no scale.
    """

    def __init__(self, base, shift=0.0, scale=None, overwrite=False):
        if not isinstance(base, KernelOperator):
            raise TypeError(f"base must be a KernelOperator, got {type(base).__name__}")
        shift = float(shift)
        if not (np.isfinite(shift) and shift >= 0):
            raise ValueError(f"shift must be a finite number >= 0, got {shift!r}")
        if scale is not None:
            scale = np.asarray(scale, dtype=np.float64)
            if scale.shape != (base.n,) or not np.all(np.isfinite(scale)):
                raise ValueError(f"scale must be a finite array of shape ({base.n},)")
        self.base, self.shift, self.scale = base, shift, scale
        self.n, self.dtype = base.n, base.dtype
        self._grams, self._features = {}, None
        self.overwrite, self._inner = bool(overwrite), None  # _inner: Gram of K̃ in place

    # -- the transform ----------------------------------------------------------------
    def _rows(self, M, rows, cols):
        """``d_rows ⊙ (M + c) ⊙ d_colsᵀ`` for a block ``M`` of ``K`` (a new array)."""
        out = M + self.shift if self.shift else np.array(M, copy=True)
        if self.scale is not None:
            # (d_i d_j) formed first: the result is symmetric bit for bit when M is
            out = out * (self.scale[rows][:, None] * self.scale[cols][None, :])
        return np.asarray(out, dtype=M.dtype)

    def _scaled(self, V):
        return V if self.scale is None else (self.scale if V.ndim == 1 else self.scale[:, None]) * V

    def diag(self):
        if self._inner is not None:
            return np.asarray(self._inner.diag(), dtype=np.float64)
        d = np.asarray(self.base.diag(), dtype=np.float64) + self.shift
        return d if self.scale is None else self.scale**2 * d

    def _times(self, V, product):
        if self._inner is not None:
            return np.asarray(getattr(self._inner, product.__name__)(V), dtype=np.float64)
        V = check_block(V, self.n)
        DV = self._scaled(np.asarray(V, dtype=np.result_type(V.dtype, np.float64)))
        out = np.asarray(product(DV), dtype=np.float64)
        if self.shift:
            out = out + self.shift * DV.sum(axis=0)
        return self._scaled(out)

    def matmat(self, V):
        return self._times(V, self.base.matmat)

    def matmat64(self, V):
        return self._times(V, self.base.matmat64)

    def columns(self, idx):
        if self._inner is not None:
            return self._inner.columns(idx)
        idx = as_index(idx, self.n)
        return self._rows(np.asarray(self.base.columns(idx)), slice(None), idx)

    def block(self, rows, cols):
        if self._inner is not None:
            return self._inner.block(rows, cols)
        rows, cols = as_index(rows, self.n), as_index(cols, self.n)
        return self._rows(np.asarray(self.base.block(rows, cols)), rows, cols)

    def cross(self, X_new, idx=None):
        cols = slice(None) if idx is None else as_index(idx, self.n)
        C = np.asarray(self.base.cross(X_new, idx), dtype=np.float64) + self.shift
        return C if self.scale is None else C * self.scale[cols]

    def new_diag(self, X_new):
        return self.base.new_diag(X_new) + self.shift

    def subset(self, idx):
        if self._inner is not None:
            return self._inner.subset(idx)
        idx = as_index(idx, self.n)
        scale = None if self.scale is None else self.scale[idx]
        return ShiftedScaled(self.base.subset(idx), self.shift, scale)

    def predictor(self, idx):
        idx = as_index(idx, self.n)
        scale = None if self.scale is None else self.scale[idx]
        return ShiftedScaled(self.base.predictor(idx), self.shift, scale)

    def map_operators(self, fn):
        out = copy.copy(self)
        out.base, out._grams, out._features = fn(self.base), {}, None
        return out

    # -- what compiled solvers read ---------------------------------------------------
    def features(self):
        """``D [Φ, √c 1]`` for the base's features ``Φ`` (the column only when ``c > 0``),
        in the base's format (dense C-contiguous or canonical CSR); None when the base
        has none.  Computed once."""
        if self._features is not None:
            return self._features
        F = self.base.features()
        if F is None:
            return None
        if self.shift:
            column = np.full((self.n, 1), np.sqrt(self.shift), dtype=F.dtype)
            F = (
                sp.hstack([F, sp.csr_matrix(column)], format="csr")
                if sp.issparse(F)
                else (np.hstack([F, column]))
            )
        if self.scale is not None:
            F = sp.diags(self.scale.astype(F.dtype)) @ F if sp.issparse(F) else self._scaled(F)
        if sp.issparse(F):
            F = sp.csr_matrix(F)
            F.sum_duplicates()
            F.sort_indices()
        else:
            F = np.ascontiguousarray(F, dtype=F.dtype)
        self._features = F
        return F

    def stored_gram(self, by_columns=False):
        """The transformed copy of the base's stored Gram (its dtype; None when the base
        stores none), made at the first request and kept; ``by_columns`` as the base's."""
        if self._inner is not None:
            return self._inner.stored_gram(by_columns)
        if self.overwrite and self._transform_in_place():
            return self._inner.stored_gram(by_columns)
        if bool(by_columns) in self._grams:
            return self._grams[bool(by_columns)][1]
        K = self.base.stored_gram(by_columns=by_columns)
        if K is None:
            return None
        for source, out in self._grams.values():
            if source is K:  # (a symmetric Gram answers both requests with one matrix)
                return out
        out = np.empty_like(K)  # (the order of K)
        d = np.ones(self.n) if self.scale is None else self.scale
        if K.flags.c_contiguous:
            shifted_scaled_copy(K, self.shift, d, out)
        elif K.flags.f_contiguous:  # (d_i d_j symmetric: the transposes are the same map)
            shifted_scaled_copy(K.T, self.shift, d, out.T)
        else:
            out[...] = self._rows(np.asarray(K), slice(None), slice(None))
        self._grams[bool(by_columns)] = (K, out)
        return out

    def scaled_gram(self, by_columns=False):
        """``(K₀, c, d)`` of the base's stored matrix ``K₀`` (``K̃_ij = d_i d_j (K₀_ij + c)``)
        without transforming it: no copy and no pass over ``K₀``.  The Gram of ``K̃`` once
        it is stored (:meth:`stored_gram` was asked first), and that Gram, transformed, when
        the base is itself a shifted or scaled kernel."""
        if self._inner is not None:
            return self._inner.scaled_gram(by_columns)
        form = self.base.scaled_gram(by_columns)
        if form is None:
            return None
        K, shift, scale = form
        if shift == 0.0 and scale is None:
            return K, self.shift, self.scale
        K = self.stored_gram(by_columns)
        return None if K is None else (K, 0.0, None)

    def scaled_column_source(self):
        """``(source, c, d)`` of the base's column source (``K̃_ij = d_i d_j (K₀_ij + c)``);
        None when the base has none or is itself shifted or scaled."""
        if self._inner is not None:
            return self._inner.scaled_column_source()
        form = self.base.scaled_column_source()
        if form is None or form[1] != 0.0 or form[2] is not None:
            return None
        return form[0], self.shift, self.scale

    def _transform_in_place(self):
        """``overwrite``: transform the base's stored C- or F-ordered writable matrix in
        place (one compiled pass) and keep it as the Gram of ``K̃``; False when the base
        stores no such matrix."""
        K = self.base.stored_gram()
        if not (isinstance(K, np.ndarray) and K.flags.writeable and K.ndim == 2):
            return False
        symmetric = self.base.stored_gram(by_columns=True) is K
        d = np.ones(self.n) if self.scale is None else self.scale
        if K.flags.c_contiguous:
            shifted_scaled_copy(K, self.shift, d, K)
        elif K.flags.f_contiguous:
            shifted_scaled_copy(K.T, self.shift, d, K.T)
        else:
            return False
        self._inner = Gram(K, check=False, symmetric=symmetric)
        return True

    def dense(self):
        if self._inner is not None:
            return self._inner.dense()
        return self._rows(np.asarray(self.base.dense()), slice(None), slice(None))


def shift_kernel(op, shift, overwrite=False):
    """``K + c 11ᵀ`` (``op`` itself when ``c = 0``); ``overwrite``: ``op`` is private to the
    result, whose stored Gram is ``op``'s transformed in place (see :class:`ShiftedScaled`)."""
    return op if not shift else ShiftedScaled(op, shift, overwrite=overwrite)


def scale_points(op, scale):
    """``D K D`` with ``D = diag(scale)`` (``op`` itself when ``scale`` is None); composes
    with a shift made by :func:`shift_kernel` (and its ``overwrite``)."""
    if scale is None:
        return op
    if isinstance(op, ShiftedScaled) and op.scale is None and op._inner is None:
        return ShiftedScaled(op.base, op.shift, scale, overwrite=op.overwrite)
    return ShiftedScaled(op, 0.0, scale)
