"""A kernel function ``k(a, b)`` evaluated with :mod:`sklearn.metrics.pairwise`.

:class:`PairwiseKernel` is the small value object that the Gram and on-the-fly
backends share: it evaluates blocks ``k(A, B)``, the diagonal ``k(a, a)`` (in
closed form for the common kernels) and optionally restricts the kernel to a
subset of feature columns.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS, pairwise_kernels

__all__ = ["PairwiseKernel", "InnerProducts", "KERNEL_NAMES", "resolve_gamma"]

#: kernel names accepted (everything ``sklearn.metrics.pairwise`` knows).
KERNEL_NAMES = tuple(sorted(PAIRWISE_KERNEL_FUNCTIONS))

# kernels whose value k(x, x) does not depend on x
_UNIT_DIAGONAL = {"rbf", "laplacian", "cosine"}
_PARAMS = {
    "linear": (),
    "rbf": ("gamma",),
    "laplacian": ("gamma",),
    "poly": ("gamma", "degree", "coef0"),
    "polynomial": ("gamma", "degree", "coef0"),
    "sigmoid": ("gamma", "coef0"),
    "cosine": (),
    "chi2": ("gamma",),
    "additive_chi2": (),
}


#: kernels computed by :meth:`PairwiseKernel.block` from inner products and norms
_PRODUCT_KERNELS = {"linear", "rbf", "poly", "polynomial", "sigmoid"}

#: rows per block when a diagonal has to be read off kernel blocks
_DIAG_BLOCK = 256


def _sq_norms(A):
    """Squared row norms ``‖a_i‖²`` (dtype of ``A``); a canonical CSR matrix's (no
    duplicate entries) from its stored values, row by row (no product matrix ``A ⊙ A``)."""
    if sp.issparse(A) and A.format == "csr" and A.has_canonical_format:
        out = np.zeros(A.shape[0], dtype=A.dtype)
        filled = np.flatnonzero(np.diff(A.indptr))
        if filled.size:
            out[filled] = np.add.reduceat(A.data * A.data, A.indptr[filled])
        return out
    if sp.issparse(A):
        return np.asarray(A.multiply(A).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", A, A)


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _weighted_variance(X, sample_weight):
    """The variance of the entries of ``X`` with row ``i`` counted ``sample_weight[i]`` times."""
    s = np.asarray(sample_weight, dtype=np.float64)
    total = float(s.sum()) * X.shape[1]
    if sp.issparse(X):
        mean = float(s @ np.asarray(X.sum(axis=1)).ravel()) / total
        return float(s @ np.asarray(X.multiply(X).sum(axis=1)).ravel()) / total - mean**2
    mean = float(s @ X.sum(axis=1, dtype=np.float64)) / total
    return float(s @ np.square(X - mean, dtype=np.float64).sum(axis=1)) / total


def resolve_gamma(gamma, X, sample_weight=None):
    """``gamma`` as :class:`sklearn.svm.SVC` resolves it.

    "scale" is ``1 / (d · Var(X))`` (1 when ``Var(X) = 0``), "auto" is ``1 / d``;
    a positive finite number is returned unchanged (as a Python float).  With
    ``sample_weight`` (nonnegative, not all 0) ``Var(X)`` counts row ``i`` that many times,
    so that integer weights give the ``gamma`` of the repeated rows.
    """
    d = X.shape[1]
    if isinstance(gamma, str) and gamma == "scale":
        if sample_weight is not None:
            var = _weighted_variance(X, sample_weight)
        elif sp.issparse(X):
            var = float(X.multiply(X).mean()) - float(X.mean()) ** 2
        else:
            var = float(np.var(X, dtype=np.float64))
        return 1.0 / (d * var) if var != 0 else 1.0
    if isinstance(gamma, str) and gamma == "auto":
        return 1.0 / d
    if _is_real(gamma) and np.isfinite(gamma) and gamma > 0:
        return float(gamma)
    raise ValueError(f"gamma must be 'scale', 'auto' or a positive finite number, got {gamma!r}")


def _check_params(metric, params):
    """Type and range checks of ``gamma``, ``coef0`` and ``degree``."""
    for name in ("gamma", "coef0", "degree"):
        val = params.get(name)
        if val is None:
            continue
        if not _is_real(val):
            raise TypeError(f"kernel parameter {name} must be a real number, got {val!r}")
        if not np.isfinite(val):
            raise ValueError(f"kernel parameter {name} must be finite, got {val!r}")
    gamma = params.get("gamma")
    if gamma is not None and gamma <= 0 and metric != "sigmoid":
        raise ValueError(f"gamma must be > 0, got {gamma}")
    degree = params.get("degree")
    if degree is not None and (degree < 0 or float(degree) != int(degree)):
        raise ValueError(f"degree must be a nonnegative integer, got {degree}")


class InnerProducts:
    """``X Xᵀ`` and the squared row norms ``‖x_i‖²`` of dense float64 points, computed at
    the first request and shared by every inner-product kernel (linear, rbf, poly,
    sigmoid) of a kernel list on all of ``X``'s columns: one product instead of one
    per kernel (:meth:`PairwiseKernel.gram`).

    Parameters
    ----------
    X : ndarray of shape (n, d), float64
        Validated training points.
    """

    def __init__(self, X):
        self.X = X
        self._products = None

    @staticmethod
    def applies(X):
        """Whether ``X`` is dense float64 points (what the shared products take)."""
        return isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64

    def get(self):
        """``(X Xᵀ, ‖x_i‖²)``, computed once (read-only: copy before writing)."""
        if self._products is None:
            self._products = (self.X @ self.X.T, _sq_norms(self.X))
        return self._products


class PairwiseKernel:
    """The kernel ``k`` as a function of two blocks of points.

    Parameters
    ----------
    metric : str or callable
        A name from ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``
        ("linear", "rbf", "poly", "sigmoid", "laplacian", "cosine", "chi2", ...)
        or a callable ``k(A, B) -> ndarray of shape (len(A), len(B))`` on two
        blocks of points, as :class:`sklearn.svm.SVC` accepts.
    params : dict
        Keyword parameters of the kernel (``gamma``, ``degree``, ``coef0``).
    feature_columns : slice, array of int or None
        If given, the kernel only sees these columns of its inputs.
    """

    def __init__(self, metric="rbf", params=None, feature_columns=None):
        if isinstance(metric, str):
            if metric not in PAIRWISE_KERNEL_FUNCTIONS:
                raise ValueError(
                    f"unknown kernel {metric!r}; expected one of {list(KERNEL_NAMES)} or a callable"
                )
            allowed = _PARAMS.get(metric)
            if allowed is not None:
                extra = set(params or {}) - set(allowed)
                if extra:
                    raise TypeError(
                        f"kernel {metric!r} takes parameters {list(allowed)}; "
                        f"got unexpected {sorted(extra)}"
                    )
        elif not callable(metric):
            raise TypeError(f"kernel must be a string or a callable, got {metric!r}")
        self.metric = metric
        self.params = {k: v for k, v in (params or {}).items() if v is not None}
        _check_params(metric, self.params)
        self.feature_columns = feature_columns

    def select(self, A):
        """Restrict ``A`` to the kernel's feature columns."""
        if self.feature_columns is None:
            return A
        return A[:, self.feature_columns]

    def __call__(self, A, B):
        """Block ``k(A, B)`` of shape (len(A), len(B)).

        The dtype is float32 when both blocks are float32 (a callable's
        float64 answer is cast back), float64 otherwise.
        """
        return self._evaluate(self.select(A), self.select(B))

    def block(self, A, B, A_sq=None, B_sq=None):
        """Block ``k(A, B)`` like :meth:`__call__`, fast for trusted dense float64 blocks.

        The inner-product kernels (linear, rbf, poly, sigmoid) are computed from
        one product ``A Bᵀ`` (and, for rbf, the squared row norms ``A_sq``,
        ``B_sq``, computed if not given) without sklearn's input validation:
        operators call this on their own, already validated training points,
        where a single kernel column costs O(n d) and the validation would
        dominate.  Other kernels, sparse or float32 inputs go to :meth:`__call__`.
        """
        A, B = self.select(A), self.select(B)
        if not (
            self.metric in _PRODUCT_KERNELS
            and isinstance(A, np.ndarray)
            and isinstance(B, np.ndarray)
            and A.dtype == np.float64
            and B.dtype == np.float64
        ):
            return self._evaluate(A, B)
        # one column: a matrix-vector product (numpy's gemm path is slower here)
        out = (A @ B[0])[:, None] if B.shape[0] == 1 else A @ B.T
        if self.metric == "rbf":
            A_sq = _sq_norms(A) if A_sq is None else A_sq
            B_sq = _sq_norms(B) if B_sq is None else B_sq
        return self.from_products(out, A.shape[1], A_sq, B_sq)

    def gram(self, X, products=None, out=None):
        """``k(X, X)`` of training points ``X`` (:meth:`block`), from the shared
        ``products`` (:class:`InnerProducts` of ``X``) when the kernel is an
        inner-product kernel on all of ``X``'s columns; written into ``out`` (n × n)
        when given."""
        if products is None or not self.is_product or self.feature_columns is not None:
            if out is None:
                return self.block(X, X)
            out[...] = self.block(X, X)
            return out
        inner, sq = products.get()
        if out is None:
            out = inner.copy()
        else:
            np.copyto(out, inner)
        return self.from_products(out, X.shape[1], sq, sq)

    @property
    def is_product(self):
        """Whether ``k(a, b)`` is a function of ``a·b`` (and ``‖a‖²``, ``‖b‖²``): linear, rbf,
        poly, sigmoid -- the kernels :meth:`from_products` evaluates."""
        return isinstance(self.metric, str) and self.metric in _PRODUCT_KERNELS

    def from_products(self, out, n_features, A_sq=None, B_sq=None):
        """Kernel values from inner products, in place: ``out ← k`` with ``out = A Bᵀ``.

        Parameters
        ----------
        out : ndarray of shape (len(A), len(B)), float
            The inner products ``a·b`` of the selected feature columns; overwritten.
        n_features : int
            Number of selected feature columns (the default ``γ = 1/d``).
        A_sq, B_sq : ndarray or None
            Squared row norms ``‖a‖²``, ``‖b‖²`` (rbf only).

        Returns
        -------
        ndarray
            ``out``, now holding ``k(a, b)``.
        """
        p = self.params
        if self.metric == "linear":
            return out
        gamma = p.get("gamma", 1.0 / n_features)
        if self.metric == "rbf":
            out *= -2.0
            out += A_sq[:, None]
            out += B_sq[None, :]
            np.maximum(out, 0.0, out=out)  # squared distances, clipped as sklearn does
            out *= -gamma
            return np.exp(out, out=out)
        out *= gamma
        out += p.get("coef0", 1.0)
        if self.metric == "sigmoid":
            return np.tanh(out, out=out)
        return np.power(out, p.get("degree", 3), out=out)

    def _evaluate(self, A, B):
        """``k(A, B)`` on blocks already restricted to the feature columns."""
        if not callable(self.metric):
            return pairwise_kernels(A, B, metric=self.metric, **self.params)
        out = np.asarray(self.metric(A, B, **self.params))
        if out.shape != (A.shape[0], B.shape[0]):
            raise ValueError(
                f"kernel callable returned shape {out.shape}, expected {(A.shape[0], B.shape[0])}"
            )
        if not np.all(np.isfinite(out)):
            raise ValueError("kernel callable returned NaN or infinity")
        if A.dtype == np.float32 and B.dtype == np.float32:
            return out.astype(np.float32, copy=False)
        return out

    def diag(self, A):
        """``k(a, a)`` for every row ``a`` of ``A``."""
        A = self.select(A)
        n = A.shape[0]
        dtype = A.dtype if A.dtype in (np.float32, np.float64) else np.float64
        metric, p = self.metric, self.params
        if metric in _UNIT_DIAGONAL:
            if metric == "cosine":
                return (_sq_norms(A) > 0).astype(dtype)
            return np.ones(n, dtype=dtype)
        if metric == "linear":
            return _sq_norms(A).astype(dtype, copy=False)
        if metric in ("poly", "polynomial"):
            gamma = p.get("gamma", 1.0 / A.shape[1])
            return ((gamma * _sq_norms(A) + p.get("coef0", 1.0)) ** p.get("degree", 3)).astype(
                dtype
            )
        if metric == "sigmoid":
            gamma = p.get("gamma", 1.0 / A.shape[1])
            return np.tanh(gamma * _sq_norms(A) + p.get("coef0", 1.0)).astype(dtype)
        if metric == "chi2":
            return np.ones(n, dtype=dtype)
        # general case (callables, additive_chi2): the diagonals of
        # _DIAG_BLOCK × _DIAG_BLOCK blocks k(A_b, A_b), O(n · block) evaluations
        out = np.empty(n, dtype=dtype)
        for start in range(0, n, _DIAG_BLOCK):
            rows = slice(start, min(start + _DIAG_BLOCK, n))
            out[rows] = np.diagonal(self._evaluate(A[rows], A[rows]))
        return out

    def __eq__(self, other):
        if not isinstance(other, PairwiseKernel):
            return NotImplemented
        cols, other_cols = self.feature_columns, other.feature_columns
        if isinstance(cols, slice) or isinstance(other_cols, slice) or cols is None:
            same_columns = cols == other_cols
        else:
            same_columns = other_cols is not None and np.array_equal(cols, other_cols)
        return self.metric == other.metric and self.params == other.params and bool(same_columns)

    def __hash__(self):
        return hash((self.metric, tuple(sorted(self.params.items()))))

    def __repr__(self):
        name = (
            self.metric
            if isinstance(self.metric, str)
            else getattr(self.metric, "__name__", "callable")
        )
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{name}({args})"
