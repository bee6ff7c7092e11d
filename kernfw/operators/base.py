"""The kernel operator protocol shared by every solver.

A kernel operator stands for the Gram matrix ``K`` (``K[i, j] = k(x_i, x_j)``)
of ``n`` training points without promising that ``K`` is ever stored.  Solvers
only use the methods below, so the same solver runs on a precomputed Gram
matrix, on explicit (sparse) features, on a kernel evaluated on the fly or on
a weighted sum of kernels.
"""

from abc import ABC, abstractmethod
from typing import NamedTuple

import numpy as np

__all__ = [
    "KernelOperator",
    "ColumnSource",
    "ProductForm",
    "ArraySlot",
    "as_index",
    "check_block",
]

#: the kernels a :class:`ColumnSource` computes columns of: RBF on float64 features, a
#: stored Gram, RBF on float32 features (:mod:`kernfw.operators._columns_numba`)
SOURCE_RBF, SOURCE_GRAM, SOURCE_RBF32 = 1, 2, 3


class ColumnSource(NamedTuple):
    """What compiled code needs to compute the columns ``Q_{:,j}`` itself
    (:func:`kernfw.operators._columns_numba.evaluate_column`); what
    :meth:`KernelOperator.column_source` answers.

    Attributes
    ----------
    code : int
        ``SOURCE_RBF`` (``K_ij = exp(−γ ‖x_i − x_j‖²)``), ``SOURCE_RBF32`` (the same on
        float32 features, in float32) or ``SOURCE_GRAM`` (a stored ``K``).
    matrix : ndarray
        The features transposed, ``Xᵀ`` (d × n, C-contiguous), or a matrix whose column
        ``j`` is ``K[:, j]`` (``Kᵀ`` of an exactly symmetric C-ordered ``K``: contiguous).
    sq_norms : ndarray of shape (n,) or None
        ``‖x_i‖²`` (``SOURCE_RBF``).
    gamma : float
        ``γ`` (0 for a Gram).
    cache_mb : float
        The column-cache budget of the operator (MB; 0: its values are stored).
    labels : ndarray of shape (N,) or None
        ``y`` of the L2-SVM's modified kernel ``Q_ij = y_i y_j (K_ij + 1) + δ_ij c_i``
        (math.md §2.1), None for ``K`` itself.  ``N`` may exceed the ``n`` points of
        ``matrix``: point ``i`` is then ``i mod n`` (the regression's copies, §2.15).
    inv_c : ndarray of shape (N,) or None
        The diagonal term ``c_i`` of that kernel (``1/(C w_i)`` for the L2-SVM with the
        per-example weights ``w_i`` of §2.14, ``1/C`` unweighted; None for ``K``).
    """

    code: int
    matrix: np.ndarray
    sq_norms: object = None
    gamma: float = 0.0
    cache_mb: float = 0.0
    labels: object = None
    inv_c: object = None


class ProductForm(NamedTuple):
    """A kernel of inner products: ``K_ij = scale · k_code(⟨x_i, x_j⟩, ‖x_i‖², ‖x_j‖²)``.

    What :meth:`KernelOperator.product_form` answers; compiled code evaluates ``k_code``
    with :func:`kernfw.operators._products_numba.kernel_of_products` (math.md §4.4).

    Attributes
    ----------
    features : ndarray of shape (n, d)
        The points ``x_i`` (C-contiguous, in the operator's dtype).
    code : int
        ``LINEAR``, ``POLY``, ``RBF`` or ``SIGMOID`` (:mod:`kernfw.operators._products_numba`).
    gamma, coef0 : float
        ``γ`` and ``c`` (0 where the kernel has none).
    degree : int
        The polynomial's degree (0 for the other kernels).
    scale : float
        ``s`` (a trace normalization ``n / tr K``; 1 otherwise).
    """

    features: np.ndarray
    code: int
    gamma: float
    coef0: float
    degree: int
    scale: float


class ArraySlot:
    """Placeholder for array number ``index`` of a store (see :meth:`KernelOperator.detach_arrays`)."""

    def __init__(self, index):
        self.index = int(index)

    def __repr__(self):
        return f"ArraySlot({self.index})"


def as_index(idx, n):
    """Validate column indices ``idx`` into ``range(n)`` as a 1-D int array."""
    if type(idx) is np.ndarray and idx.shape == (1,) and idx.dtype == np.intp:
        # the hot path of column-wise solvers: one nonnegative column index
        j = int(idx[0])
        if 0 <= j < n:
            return idx
    idx = np.asarray(idx)
    if idx.dtype == bool:
        if idx.shape != (n,):
            raise ValueError(f"boolean index has shape {idx.shape}, expected ({n},)")
        return np.flatnonzero(idx)
    idx = np.atleast_1d(idx)
    if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
        raise TypeError("indices must be a 1-D array of integers")
    idx = idx.astype(np.intp, copy=False)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(f"index out of range for an operator on n={n} points")
    return np.where(idx < 0, idx + n, idx)


def check_block(V, n):
    """Check a right-hand side ``V`` of shape (n,) or (n, r) for ``K @ V``."""
    V = np.asarray(V)
    if V.ndim not in (1, 2) or V.shape[0] != n:
        raise ValueError(f"matmat expects an array of shape ({n},) or ({n}, r); got {V.shape}")
    return V


class KernelOperator(ABC):
    """Abstract Gram matrix ``K`` of ``n`` training points.

    Subclasses implement :meth:`diag`, :meth:`matmat`, :meth:`columns`,
    :meth:`cross` and :meth:`subset`; :meth:`quad` and :meth:`dense` are derived.

    Attributes
    ----------
    n : int
        Number of training points (the order of ``K``).
    dtype : numpy.dtype
        Floating type of the values returned (float64 or float32 as given).
    """

    n: int
    dtype: np.dtype

    @property
    def shape(self):
        """``(n, n)``, the shape of ``K``."""
        return (self.n, self.n)

    @abstractmethod
    def diag(self):
        """Diagonal ``K_ii``, shape (n,)."""

    @abstractmethod
    def matmat(self, V):
        """Product ``K @ V`` for ``V`` of shape (n,) or (n, r)."""

    @abstractmethod
    def columns(self, idx):
        """Columns ``K[:, idx]``, shape (n, len(idx))."""

    @abstractmethod
    def cross(self, X_new, idx=None):
        """Cross kernel ``k(X_new, x_j)`` for training points ``j`` in ``idx``.

        Returns an array of shape (n_new, len(idx)) (all ``n`` columns when
        ``idx`` is None).  Prediction uses it with ``idx`` = the support points.
        """

    @abstractmethod
    def subset(self, idx):
        """The operator on the training points ``idx`` (``K[idx][:, idx]``)."""

    def predictor(self, idx):
        """The operator on the training points ``idx`` for prediction only.

        Its :meth:`cross`, :meth:`cross_matmat` and :meth:`new_diag` are those of
        :meth:`subset` ``(idx)``; backends that can evaluate the kernel on new points
        without the block ``K[idx][:, idx]`` do not form it (what a fitted model keeps
        of its support points).  The default is :meth:`subset`.
        """
        return self.subset(idx)

    def cross_matmat(self, X_new, V):
        """``k(X_new, X) V``: the cross kernel times coefficients ``V`` of shape (n,) or (n, r).

        What prediction computes (``V`` the dual coefficients); backends with explicit
        features override it so that no ``n_new × n`` block is formed.
        """
        return self.cross(X_new) @ check_block(V, self.n)

    def new_diag(self, X_new):
        """Self-similarities ``k(x, x)`` of new points, shape (n_new,).

        Needed to normalize cross kernels (unit-diagonal normalization) and by
        the minimum enclosing ball.  Backends that cannot compute it raise.
        """
        raise TypeError(f"{type(self).__name__} cannot evaluate k(x, x) for new points")

    # -- questions a backend may answer (compiled solvers; None: ask the protocol) ------
    def features(self):
        """Explicit features ``Φ`` with ``K = Φ Φᵀ``, or None (the default).

        A C-contiguous ndarray (n, m) or a CSR matrix in canonical format (sorted indices,
        no duplicates).  Solvers that can keep primal weights ``W = Φᵀ V`` ask for it.
        """
        return None

    def stored_gram(self, by_columns=False):
        """The stored dense matrix ``K`` (float64 or float32, C- or F-ordered), or None
        (the default: ``K`` is not stored).

        Parameters
        ----------
        by_columns : bool
            Return a matrix whose row ``i`` is the column ``K[:, i]``: ``K`` itself when it
            is symmetric bit for bit (then its rows are read contiguously), else ``Kᵀ``.
        """
        return None

    def scaled_gram(self, by_columns=False):
        """A stored matrix ``K₀`` with a shift ``c`` and point scales ``d`` such that
        ``K_ij = d_i d_j (K₀_ij + c)``, as ``(K₀, c, d)`` (``d`` None: all ones), or None
        when no Gram is stored.

        Compiled code that reads kernel columns forms ``K_ij`` from ``K₀`` as it reads it,
        instead of a transformed copy of the matrix.  The default is
        ``(stored_gram(by_columns), 0.0, None)``; ``by_columns`` as there.
        """
        K = self.stored_gram(by_columns=by_columns)
        return None if K is None else (K, 0.0, None)

    def matmat64(self, V):
        """``K @ V`` summed in float64 arithmetic (float64 result), also on float32 values.

        A certificate computed from the product needs its float64 sum (a float32 sum is
        off by up to ``n·6e-8`` relative).  The default is :meth:`matmat` of a float64
        ``V``; a float32 Gram reads each entry once, as float32, and sums in float64.
        """
        V = np.asarray(V, dtype=np.float64)
        return np.asarray(self.matmat(V), dtype=np.float64)

    def block(self, rows, cols):
        """The block ``K[rows][:, cols]``, shape (len(rows), len(cols)).

        The default computes the shorter list's columns (``K`` is symmetric, so
        ``K[rows][:, cols] = K[:, rows][cols]ᵀ``); a Gram indexes its matrix.
        """
        rows, cols = as_index(rows, self.n), as_index(cols, self.n)
        if rows.size < cols.size:
            return self.columns(rows)[cols].T
        return self.columns(cols)[rows]

    def product_form(self):
        """The kernel as a :class:`ProductForm` (compiled code evaluates it from inner
        products of dense features), or None (the default)."""
        return None

    # -- arrays and operator trees (compiled backends, sweeps) --------------------------
    def column_source(self):
        """The :class:`ColumnSource` from which compiled code computes columns ``K[:, j]``
        itself, or None.  The default serves a stored Gram (:meth:`stored_gram`, float32
        or float64, C- or F-ordered), read where its columns are contiguous: an F-ordered
        ``K`` as it is, a C-ordered one through ``Kᵀ`` when it is symmetric bit for bit."""
        K = self.stored_gram()
        if type(K) is not np.ndarray or K.dtype not in (np.float32, np.float64):
            return None
        if K.ndim != 2 or K.shape != (self.n, self.n) or self.n == 0:
            return None
        if K.flags.f_contiguous:
            return ColumnSource(SOURCE_GRAM, K)
        if not K.flags.c_contiguous:
            return None
        return ColumnSource(SOURCE_GRAM, self.stored_gram(by_columns=True).T)

    def scaled_column_source(self):
        """A :class:`ColumnSource` of ``K₀`` with a shift ``c`` and point scales ``d`` such that
        ``K_ij = d_i d_j (K₀_ij + c)``, as ``(source, c, d)`` (``d`` None: all ones), or None.

        What :meth:`scaled_gram` is to :meth:`stored_gram`: compiled code that computes the
        columns of ``K₀`` forms those of ``K`` from them.  The default is
        ``(column_source(), 0.0, None)``.
        """
        source = self.column_source()
        return None if source is None else (source, 0.0, None)

    def map_operators(self, fn):
        """A shallow copy with ``fn`` applied to every child operator.

        Leaves (``Gram``, ``Features``, ``KernelFunction``) have no children and
        return ``self``; composites (``Normalized``, ``MultiKernel``) return a
        copy whose children are ``fn(child)`` (a child shared twice is mapped once).
        """
        return self

    def detach_arrays(self, store):
        """A copy of the operator tree whose large arrays are moved to ``store``.

        Every dense Gram matrix of the tree is appended to the list ``store``
        (once, however many operators share it) and replaced by an
        :class:`ArraySlot`; the returned "shell" is small to pickle.  A parallel
        sweep sends the shell to its workers and the arrays as memory maps;
        :meth:`attach_arrays` puts them back.

        Parameters
        ----------
        store : list of ndarray
            Arrays detached so far (appended to in place).
        """
        return self.map_operators(lambda op: op.detach_arrays(store))

    def attach_arrays(self, store):
        """Inverse of :meth:`detach_arrays`: a copy with every :class:`ArraySlot`
        replaced by ``store[slot.index]`` (e.g. the memory-mapped matrices)."""
        return self.map_operators(lambda op: op.attach_arrays(store))

    def quad(self, v):
        """Quadratic form ``vᵀ K v`` (one value per column when ``v`` is 2-D)."""
        v = check_block(v, self.n)
        Kv = self.matmat(v)
        return np.einsum("i...,i...->...", v, Kv)

    def dense(self):
        """The full ``n × n`` matrix ``K`` (for small problems and tests only)."""
        return self.columns(np.arange(self.n))

    def dense_factors(self):
        """``(D, s, symmetric)`` with ``K = s·D``: a matrix and a factor for who copies
        ``K`` anyway and can scale it in the same pass, and whether ``D`` is symmetric bit
        for bit (then a copy needs no symmetrizing; False: not known).  Here
        ``(dense(), 1.0, False)``."""
        return self.dense(), 1.0, False

    def __repr__(self):
        return f"{type(self).__name__}(n={self.n}, dtype={np.dtype(self.dtype).name})"
