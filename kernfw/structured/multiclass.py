"""Multi-class classification as a structured model (math.md §3.7, §3.8 (i))."""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_array

from .base import StructuredModel, check_pair_lengths

__all__ = ["MultiClass", "check_cost_matrix"]


def check_cost_matrix(cost, n_classes):
    """Validate a label-cost matrix ``Δ`` (``Δ[y_true, y] ≥ 0``, ``Δ[y, y] = 0``).

    ``None`` gives the 0/1 cost ``1 − δ``.
    """
    if cost is None:
        return 1.0 - np.eye(n_classes)
    cost = check_array(cost, dtype=np.float64, input_name="cost")
    if cost.shape != (n_classes, n_classes):
        raise ValueError(f"cost must have shape ({n_classes}, {n_classes}), got {cost.shape}")
    if np.any(cost < 0):
        raise ValueError("cost must be nonnegative")
    if np.any(np.diag(cost) != 0):
        raise ValueError("cost must have a zero diagonal (Δ[y, y] = 0)")
    return cost


def _dense_row(x):
    """One input ``x`` as a dense 1-D float array (a row of a sparse matrix is densified)."""
    if sp.issparse(x):
        return x.toarray().ravel()
    return np.asarray(x, dtype=float).ravel()


class MultiClass(StructuredModel):
    """Multi-class classification: ``φ(x, y) = e_y ⊗ x``, ``L(y_true, y) = Δ[y_true, y]``.

    The weights are ``w = vec(W)`` with ``W`` of shape (m, d) (row ``j``
    scores class ``j``: ``⟨w, φ(x, j)⟩ = W_j x``).  With these features the
    structural objective is exactly the multi-class objective of math.md §1
    with the max hinge (0/1 cost) or the structured hinge (cost ``Δ``) and the
    same ``λ`` (§3.7).

    Parameters
    ----------
    n_classes : int
        Number of classes ``m ≥ 2``; labels are the integers ``0, …, m − 1``.
    cost : array-like of shape (m, m) or None
        Label-cost matrix ``Δ`` (``Δ[y_true, y]``, nonnegative, zero diagonal);
        None is the 0/1 cost.

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw.structured import MultiClass
    >>> model = MultiClass(3).initialize(np.eye(3), np.arange(3))
    >>> model.size_joint_feature
    9
    >>> int(model.decode(np.array([0.0, 1.0, 0.0]), np.eye(3).ravel()))
    1
    """

    #: inputs may be scipy.sparse matrices (stored as CSR)
    accepts_sparse = True

    def __init__(self, n_classes, cost=None):
        if not isinstance(n_classes, numbers.Integral) or n_classes < 2:
            raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
        self.n_classes = int(n_classes)
        self.cost = check_cost_matrix(cost, self.n_classes)
        self.n_features = None

    def __repr__(self):
        return f"MultiClass(n_classes={self.n_classes})"

    # -- sizes and validation ----------------------------------------------------
    def prepare(self, X):
        """Inputs as a float matrix of shape (n, d) (dense, or CSR for sparse input)."""
        X = check_array(X, accept_sparse="csr", dtype=np.float64, input_name="X")
        if sp.issparse(X):  # a csr_matrix: X[i] is a row on every scipy (csr_array: >= 1.14)
            X = sp.csr_matrix(X)
        if self.n_features is not None and X.shape[1] != self.n_features:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is "
                f"expecting {self.n_features} features as input"
            )
        return X

    def prepare_outputs(self, Y):
        """Labels as an int array."""
        return np.asarray(Y, dtype=np.intp)

    def check_labels(self, Y):
        """Labels as an int array with values in ``0, …, m − 1``."""
        Y = np.asarray(Y)
        integral = np.issubdtype(Y.dtype, np.integer) or (
            np.issubdtype(Y.dtype, np.floating) and np.all(np.mod(Y, 1) == 0)
        )
        if Y.ndim != 1 or not integral:
            raise ValueError(
                "Unknown label type: multi-class labels must be a 1-D sequence of "
                f"integers 0..{self.n_classes - 1}, got dtype {Y.dtype}, "
                f"shape {Y.shape}"
            )
        Y = Y.astype(np.intp)
        if Y.size and (Y.min() < 0 or Y.max() >= self.n_classes):
            raise ValueError(
                f"labels must lie in 0..{self.n_classes - 1}, got values in {Y.min()}..{Y.max()}"
            )
        return Y

    def initialize(self, X, Y):
        check_pair_lengths(X, Y)
        self.n_features = None
        self.n_features = self.prepare(X).shape[1]
        self.check_labels(Y)
        self.size_joint_feature = self.n_classes * self.n_features
        return self

    def _weights(self, w):
        """``W`` (m × d) as a view of ``w``."""
        return np.asarray(w).reshape(self.n_classes, self.n_features)

    # -- protocol ----------------------------------------------------------------------
    def statistics(self, x, y):
        """``s(y) = e_y`` (length m); ``φ(x, y) = s ⊗ x``."""
        s = np.zeros(self.n_classes)
        s[y] = 1.0
        return s

    def expand(self, x, s):
        """``s ⊗ x`` flattened (length m·d)."""
        return np.outer(s, _dense_row(x)).ravel()

    def joint_feature(self, x, y):
        return self.expand(x, self.statistics(x, y))

    def loss(self, y_true, y):
        return float(self.cost[y_true, y])

    def max_loss(self, y_true):
        return float(self.cost[y_true].max())

    def labelings(self, x):
        return iter(range(self.n_classes))

    def loss_augmented_decode(self, x, y_true, w):
        return int(np.argmax(self.cost[y_true] + self._weights(w) @ _dense_row(x)))

    def decode(self, x, w):
        return int(np.argmax(self._weights(w) @ _dense_row(x)))

    # -- whole passes --------------------------------------------------------------
    def batch_decode(self, X, w, Y=None):
        scores = np.asarray(X @ self._weights(w).T)
        if Y is not None:
            scores += self.cost[np.asarray(Y, dtype=np.intp)]
        return scores.argmax(axis=1)

    def batch_joint_feature(self, X, Y, weights=None):
        onehot = np.zeros((X.shape[0], self.n_classes))
        onehot[np.arange(X.shape[0]), np.asarray(Y, dtype=np.intp)] = (
            1.0 if weights is None else weights
        )
        return np.asarray(X.T @ onehot).T.ravel()

    def batch_loss(self, Y_true, Y):
        return self.cost[np.asarray(Y_true, dtype=np.intp), np.asarray(Y, dtype=np.intp)]
