"""The modified kernel of the L2-SVM (math.md §2.1), as an operator wrapper."""

import math
import numbers

import numpy as np

from .base import CompiledView, KernelOperator, as_index, check_block

__all__ = ["L2SVMKernel", "check_binary_labels"]


def check_binary_labels(y, n):
    """Labels ``y_i ∈ {−1, +1}`` of shape (n,) as float64 (ValueError otherwise)."""
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    values = np.unique(y)
    if values.size > 2:
        raise ValueError(
            f"the binary L2-SVM needs exactly two classes, y has {values.size} "
            f"({values[:5].tolist()}{'...' if values.size > 5 else ''}); use "
            "kernfw.L2SVC for multi-class problems"
        )
    if not np.all(np.isin(values, (-1, 1))):
        raise ValueError(f"binary labels must be -1 and +1, got {values.tolist()}")
    return y.astype(np.float64)


class L2SVMKernel(KernelOperator):
    """The modified kernel ``K̃_ij = y_i y_j (K_ij + 1) + δ_ij / C`` of the L2-SVM (§2.1).

    An operator wrapper: it answers the operator protocol from the base
    operator without forming any ``n × n`` matrix.

    Parameters
    ----------
    base : KernelOperator
        The kernel ``K`` on the training points.
    y : array-like of shape (n,)
        Labels ``y_i`` in {−1, +1}.
    C : float > 0
        Penalty ``C`` of the squared slacks.

    Notes
    -----
    ``cross(X_new, idx)`` returns ``y_j (k(x, x_j) + 1)`` for ``j`` in ``idx``:
    the modified kernel of a new point taken with label +1 (and no δ term),
    so that the decision function is ``h(x) = cross(x, S) @ α_S``.
    """

    def __init__(self, base, y, C):
        if not isinstance(base, KernelOperator):
            raise TypeError(f"base must be a KernelOperator, got {type(base).__name__}")
        if (
            isinstance(C, bool)
            or not isinstance(C, numbers.Real)
            or not C > 0
            or not math.isfinite(C)
        ):
            raise ValueError(f"C must be a positive finite number, got {C!r}")
        self.base = base
        self.y = check_binary_labels(y, base.n)
        self.C = float(C)
        self.n = base.n
        self.dtype = np.result_type(base.dtype, np.float64)
        self._signed_y = (-self.y[:, None], self.y[:, None])  # y_i y for y_i = −1, +1

    def column_view(self):
        """A :class:`~kernfw.operators.base.CompiledView` of kind "l2svm" over the base
        operator's column view (``params``: labels ``y``, penalty ``C``), or None
        when the base operator has none."""
        inner = self.base.column_view()
        if inner is None:
            return None
        return CompiledView("l2svm", inner, {"y": self.y, "C": self.C})

    def diag(self):
        return np.asarray(self.base.diag(), dtype=np.float64) + 1.0 + 1.0 / self.C

    def columns(self, idx):
        idx = as_index(idx, self.n)
        out = np.add(self.base.columns(idx), 1.0, dtype=np.float64)
        if idx.size == 1:  # the solvers' case: y_i y is y or −y, one pass
            i = int(idx[0])
            out *= self._signed_y[int(self.y[i] > 0)]
            out[i, 0] += 1.0 / self.C
            return out
        out *= np.multiply.outer(self.y, self.y[idx])
        out[idx, np.arange(idx.size)] += 1.0 / self.C
        return out

    def matmat(self, V):
        V = check_block(V, self.n)
        yV = V * (self.y if V.ndim == 1 else self.y[:, None])
        out = self.base.matmat(yV) + yV.sum(axis=0)
        out *= self.y if V.ndim == 1 else self.y[:, None]
        out += V / self.C
        return out

    def cross(self, X_new, idx=None):
        cols = slice(None) if idx is None else as_index(idx, self.n)
        return (self.base.cross(X_new, idx) + 1.0) * self.y[cols]

    def subset(self, idx):
        idx = as_index(idx, self.n)
        return L2SVMKernel(self.base.subset(idx), self.y[idx], self.C)
