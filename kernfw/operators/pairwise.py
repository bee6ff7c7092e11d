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

__all__ = ["PairwiseKernel", "KERNEL_NAMES"]

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


def _sq_norms(A):
    if sp.issparse(A):
        return np.asarray(A.multiply(A).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", A, A)


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
                    f"unknown kernel {metric!r}; expected one of {list(KERNEL_NAMES)} "
                    "or a callable"
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
        for name in ("gamma", "coef0"):
            val = self.params.get(name)
            if val is not None and not isinstance(val, numbers.Real):
                raise TypeError(f"kernel parameter {name} must be a real number")
        if self.params.get("gamma", 1.0) <= 0 and metric not in ("sigmoid",):
            raise ValueError(f"gamma must be > 0, got {self.params['gamma']}")
        self.feature_columns = feature_columns

    def select(self, A):
        """Restrict ``A`` to the kernel's feature columns."""
        if self.feature_columns is None:
            return A
        return A[:, self.feature_columns]

    def __call__(self, A, B):
        """Block ``k(A, B)`` of shape (len(A), len(B)), dtype of ``A``."""
        A, B = self.select(A), self.select(B)
        if callable(self.metric):
            out = np.asarray(self.metric(A, B, **self.params))
            if out.shape != (A.shape[0], B.shape[0]):
                raise ValueError(
                    f"kernel callable returned shape {out.shape}, expected "
                    f"{(A.shape[0], B.shape[0])}"
                )
            if not np.all(np.isfinite(out)):
                raise ValueError("kernel callable returned NaN or infinity")
            return out
        return pairwise_kernels(A, B, metric=self.metric, **self.params)

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
            return ((gamma * _sq_norms(A) + p.get("coef0", 1.0)) ** p.get("degree", 3)).astype(dtype)
        if metric == "sigmoid":
            gamma = p.get("gamma", 1.0 / A.shape[1])
            return np.tanh(gamma * _sq_norms(A) + p.get("coef0", 1.0)).astype(dtype)
        if metric == "chi2":
            return np.ones(n, dtype=dtype)
        # general case: evaluate pairs (a_i, a_i) one row at a time
        out = np.empty(n, dtype=dtype)
        for i in range(n):
            row = A[i : i + 1]
            if callable(metric):
                out[i] = np.asarray(metric(row, row, **p))[0, 0]
            else:
                out[i] = pairwise_kernels(row, row, metric=metric, **p)[0, 0]
        return out

    def __eq__(self, other):
        return (
            isinstance(other, PairwiseKernel)
            and self.metric == other.metric
            and self.params == other.params
        )

    def __repr__(self):
        name = self.metric if isinstance(self.metric, str) else getattr(
            self.metric, "__name__", "callable")
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{name}({args})"
