"""The six multi-category losses of [Tajima2021] as mdos support functions (math.md §1.2–§1.3).

For example ``i`` with scores ``s_i`` and label ``y_i`` every loss is evaluated on
the *margin-violation vector*

    a_i = c_i + s_i − s_{i, y_i} 1   (so a_{i, y_i} = 0),

where ``c_i`` is the cost vector (``1 − e_{y_i}``, or a row of a user cost matrix
for the structured hinge).  Each loss is the support function of a polytope
``B ⊂ R^m_+``::

    Φ(s; y) = max_{β ∈ B} ⟨β, a⟩,

so one object gives, vectorized over the ``n`` rows of a margin matrix:

- :meth:`MulticlassLoss.value` — ``Φ`` per row;
- :meth:`MulticlassLoss.lmo` — a maximizer ``β*`` per row (the closed-form
  direction-finding step of the dual Frank-Wolfe solver, a subgradient);
- :meth:`MulticlassLoss.costs` — the cost vectors ``c_i`` (the dual linear term
  is ``−(1/n) Σ_i ⟨c_i, α_i⟩``, math.md §1.4).

All six are written with a weight vector ``ρ`` (``ρ_1 ≥ … ≥ ρ_m = 0``):

========================  ===========================================  ==========================
loss                      ``Φ``                                        ``ρ``
========================  ===========================================  ==========================
``max_hinge``             ``a_[1]``                                    ``e_1``
``structured_hinge``      ``a_[1]`` with ``c_i = Δ^{(i)}``             ``e_1``
``topk_hinge``            ``max(0, T_k(a) / k)``                       ``(1/k)·1_{j ≤ k}``
``usunier``               ``Σ_{j≤k} (a_[j])⁺ / k``                     ``(1/k)·1_{j ≤ k}``
``weighted_topk``         ``max(0, Σ_j ρ_j a_[j])``                    user ``ρ``
``weighted_usunier``      ``Σ_j ρ_j (a_[j])⁺``                         user ``ρ``
========================  ===========================================  ==========================

(``a_[1] ≥ … ≥ a_[m]`` are the sorted entries of ``a``.)  The "top-k" family
takes the positive part of the weighted sum, the "Usunier" family sums positive
parts; :attr:`MulticlassLoss.positive_part` says which.

Examples
--------
>>> import numpy as np
>>> from kernfw.losses import make_loss
>>> loss = make_loss("topk_hinge", k=2).check(4)
>>> a = np.array([[0.0, 0.5, 1.5, -1.0]])
>>> loss.value(a)
array([1.])
>>> loss.lmo(a)
array([[0. , 0.5, 0.5, 0. ]])
"""

import numbers
from abc import ABC, abstractmethod

import numpy as np

__all__ = [
    "MulticlassLoss",
    "MaxHinge",
    "StructuredHinge",
    "TopKHinge",
    "Usunier",
    "WeightedTopKHinge",
    "WeightedUsunier",
    "LOSSES",
    "make_loss",
    "dual_vertices",
    "check_rho",
]


# -- validation ----------------------------------------------------------------------


def check_rho(rho, n_classes=None):
    """Validate a weight vector ``ρ``: 1-D, finite, ``ρ ≥ 0``, nonincreasing, ``ρ_m = 0``, ``ρ ≠ 0``.

    Parameters
    ----------
    rho : array-like of shape (m,)
        The weights of the weighted top-k / Usunier losses (math.md §1.2).
    n_classes : int or None
        If given, ``ρ`` must have exactly this length.

    Returns
    -------
    ndarray of float64
    """
    rho = np.asarray(rho, dtype=np.float64)
    if rho.ndim != 1 or rho.size < 2:
        raise ValueError(f"rho must be a 1-D array of length m >= 2, got shape {rho.shape}")
    if n_classes is not None and rho.size != n_classes:
        raise ValueError(f"rho has length {rho.size} but there are {n_classes} classes")
    if not np.all(np.isfinite(rho)):
        raise ValueError("rho must be finite")
    if np.any(rho < 0):
        raise ValueError(f"rho must be nonnegative, got {rho}")
    if np.any(np.diff(rho) > 0):
        raise ValueError(f"rho must be nonincreasing (rho_1 >= ... >= rho_m), got {rho}")
    if rho[-1] != 0:
        raise ValueError(f"the last weight rho_m must be 0, got {rho[-1]}")
    if not np.any(rho > 0):
        raise ValueError("rho must have a positive entry")
    return rho


def _check_k(k):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    return int(k)


def _check_margins(a):
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"margins must be a 2-D array (n, m), got shape {a.shape}")
    return a


def _check_labels(y, n_classes):
    y = np.asarray(y)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError("y must be a 1-D array of integer class indices")
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(
            f"class indices must lie in [0, {n_classes}), got range [{y.min()}, {y.max()}]"
        )
    return y


# -- the dual vertex of one LMO answer ---------------------------------------------------


def dual_vertices(beta, y):
    """Map LMO answers ``β*_i`` to dual vertices ``u_i = (1ᵀβ*_i) e_{y_i} − β*_i`` (math.md §1.6).

    Parameters
    ----------
    beta : ndarray of shape (n, m)
        Rows ``β*_i`` returned by :meth:`MulticlassLoss.lmo`.
    y : ndarray of int, shape (n,)
        Class indices ``y_i``.

    Returns
    -------
    U : ndarray of shape (n, m)
        Row ``i`` is ``u_i``, a vertex of the dual domain ``A_i`` (rows of ``Aᵀ``).
    """
    U = -beta
    U[np.arange(beta.shape[0]), y] += beta.sum(axis=1)
    return U


# -- the losses -----------------------------------------------------------------------------


class MulticlassLoss(ABC):
    """A multi-category loss ``Φ(s; y) = max_{β ∈ B} ⟨β, a⟩`` (math.md §1.3).

    Subclasses implement :meth:`lmo`; :meth:`value` is derived from it (the
    LMO value equals the loss).  Losses whose parameters depend on the number
    of classes ``m`` are validated by :meth:`check`, which every solver calls.

    Attributes
    ----------
    name : str
        The ``loss=`` string of :class:`kernfw.MultiClassSVM`.
    positive_part : bool
        True for the Usunier family ``Σ_j ρ_j (a_[j])⁺``; False for the top-k
        family ``max(0, Σ_j ρ_j a_[j])``.  (Both coincide for the max hinge.)
    """

    name = "loss"
    positive_part = False

    def check(self, n_classes):
        """Validate the loss for ``n_classes`` classes; return ``self``."""
        if n_classes < 2:
            raise ValueError(f"a multi-category loss needs at least 2 classes, got {n_classes}")
        return self

    @abstractmethod
    def rho(self, n_classes):
        """The weights ``ρ ∈ R^m`` of the loss (math.md §1.2)."""

    @abstractmethod
    def lmo(self, a):
        """Maximizers ``β*_i ∈ argmax_{β ∈ B} ⟨β, a_i⟩`` for every row of ``a``.

        Parameters
        ----------
        a : ndarray of shape (n, m)
            Margin-violation vectors ``a_i = c_i + s_i − s_{i,y_i} 1``.

        Returns
        -------
        beta : ndarray of shape (n, m)
            A vertex of ``B`` per row; ``0`` when the loss is 0.
        """

    def value(self, a):
        """``Φ`` for every row of the margin matrix ``a`` (shape (n, m)); returns (n,)."""
        a = _check_margins(a)
        return np.einsum("ij,ij->i", self.lmo(a), a)

    def costs(self, y, n_classes):
        """Cost vectors ``c_i = 1 − e_{y_i}`` as an (n, m) matrix ``C``."""
        y = _check_labels(y, n_classes)
        C = np.ones((y.size, n_classes))
        C[np.arange(y.size), y] = 0.0
        return C

    def lmo_row(self, a):
        """:meth:`lmo` for one margin vector ``a`` of shape (m,) (block-coordinate steps)."""
        return self.lmo(a[None, :])[0]

    def get_params(self):
        """The constructor arguments (for ``repr`` and equality)."""
        return {}

    def __eq__(self, other):
        if type(self) is not type(other):
            return NotImplemented
        mine, theirs = self.get_params(), other.get_params()
        return mine.keys() == theirs.keys() and all(
            np.array_equal(np.asarray(mine[k]), np.asarray(theirs[k])) for k in mine
        )

    __hash__ = object.__hash__

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


class MaxHinge(MulticlassLoss):
    """Crammer–Singer max hinge ``Φ = max_j a_j``; ``B = {β ≥ 0, 1ᵀβ ≤ 1}``.

    LMO: ``e_{argmax_j a_j}`` if ``max_j a_j > 0``, else 0 — O(m) per row.
    """

    name = "max_hinge"

    def rho(self, n_classes):
        r = np.zeros(n_classes)
        r[0] = 1.0
        return r

    def lmo(self, a):
        a = _check_margins(a)
        rows = np.arange(a.shape[0])
        j = np.argmax(a, axis=1)
        beta = np.zeros_like(a)
        beta[rows, j] = a[rows, j] > 0
        return beta

    def value(self, a):
        a = _check_margins(a)
        return np.maximum(a.max(axis=1), 0.0) if a.shape[1] else np.zeros(a.shape[0])

    def lmo_row(self, a):
        j = int(np.argmax(a))
        beta = np.zeros(a.shape[0])
        if a[j] > 0:
            beta[j] = 1.0
        return beta


class StructuredHinge(MaxHinge):
    """Structured (cost-sensitive) hinge ``Φ = max_j (Δ_j + s_j − s_y)``.

    Parameters
    ----------
    cost : array-like of shape (m, m) or (n, m), or None
        Costs ``Δ``: a label-pair matrix (row ``y`` is the cost vector of every
        example of class ``y``) or one row per example.  Entries are finite,
        ``≥ 0`` and zero on the true label (``Δ_yy = 0``).  Columns follow the
        order of the class indices (``classes_`` of the estimator).  A square
        matrix is read as a label-pair matrix.  None means 0/1 costs (the max
        hinge).
    """

    name = "structured_hinge"

    def __init__(self, cost=None):
        self.cost = None if cost is None else np.asarray(cost, dtype=np.float64)
        if self.cost is not None:
            if self.cost.ndim != 2:
                raise ValueError(f"cost must be a 2-D array, got shape {self.cost.shape}")
            if not np.all(np.isfinite(self.cost)):
                raise ValueError("cost must be finite")
            if np.any(self.cost < 0):
                raise ValueError("cost must be nonnegative")

    def get_params(self):
        return {"cost": self.cost}

    def check(self, n_classes):
        super().check(n_classes)
        if self.cost is not None:
            if self.cost.shape[1] != n_classes:
                raise ValueError(
                    f"cost has {self.cost.shape[1]} columns but there are {n_classes} classes"
                )
            if self.cost.shape[0] == n_classes and np.any(np.diagonal(self.cost) != 0):
                raise ValueError("a label-pair cost matrix must have a zero diagonal (Δ_yy = 0)")
        return self

    def costs(self, y, n_classes):
        """Cost vectors ``c_i = Δ^{(i)}``: ``Δ[y_i]`` (label pairs) or row ``i``."""
        if self.cost is None:
            return super().costs(y, n_classes)
        y = _check_labels(y, n_classes)
        self.check(n_classes)
        if self.cost.shape[0] == n_classes:
            return self.cost[y]
        if self.cost.shape[0] != y.size:
            raise ValueError(
                f"cost must have shape (m, m) = ({n_classes}, {n_classes}) or "
                f"(n, m) = ({y.size}, {n_classes}), got {self.cost.shape}"
            )
        C = self.cost.copy()
        if np.any(C[np.arange(y.size), y] != 0):
            raise ValueError("per-example costs must be zero on the true label (Δ_{i,y_i} = 0)")
        return C


class WeightedTopKHinge(MulticlassLoss):
    """Weighted top-k hinge ``Φ = max(0, Σ_j ρ_j a_[j])``.

    ``B = {θ p : θ ∈ [0, 1], p ∈ conv(permutations of ρ)}``; LMO: ``ρ`` placed
    on the decreasing order of ``a`` when ``Σ_j ρ_j a_[j] > 0`` (O(m log m)).

    Parameters
    ----------
    rho : array-like of shape (m,)
        Nonincreasing weights with ``ρ_m = 0``.
    """

    name = "weighted_topk"

    def __init__(self, rho):
        self._rho = check_rho(rho)

    def get_params(self):
        return {"rho": self._rho}

    def rho(self, n_classes):
        return self._rho

    def check(self, n_classes):
        super().check(n_classes)
        check_rho(self._rho, n_classes)
        return self

    def _weights(self, sorted_a):
        """Per-row weights placed on the sorted entries ``a_[1] ≥ … ≥ a_[m]``."""
        w = np.broadcast_to(self._rho, sorted_a.shape)
        keep = sorted_a @ self._rho > 0
        return w * keep[:, None]

    def lmo(self, a):
        a = _check_margins(a)
        if a.shape[1] != self._rho.size:
            raise ValueError(f"margins have {a.shape[1]} classes, rho has {self._rho.size}")
        order = np.argsort(-a, axis=1, kind="stable")
        w = self._weights(np.take_along_axis(a, order, axis=1))
        beta = np.zeros_like(a)
        np.put_along_axis(beta, order, w, axis=1)
        return beta


class WeightedUsunier(WeightedTopKHinge):
    """Weighted Usunier loss ``Φ = Σ_j ρ_j (a_[j])⁺``.

    ``B = {β : 0 ≤ β ≤ p, p ∈ conv(permutations of ρ)}``; LMO: ``ρ_j`` on the
    ``j``-th largest entry where it is positive (O(m log m)).
    """

    name = "weighted_usunier"
    positive_part = True

    def _weights(self, sorted_a):
        return self._rho * (sorted_a > 0)


class TopKHinge(MulticlassLoss):
    """Unweighted top-k hinge ``Φ = max(0, T_k(a) / k)`` (``1 ≤ k < m``).

    LMO: ``1/k`` on the ``k`` largest entries when their sum is positive;
    O(m) per row with ``argpartition``.

    Parameters
    ----------
    k : int
        Number of top labels.
    """

    name = "topk_hinge"

    def __init__(self, k=1):
        self.k = _check_k(k)

    def get_params(self):
        return {"k": self.k}

    def rho(self, n_classes):
        r = np.zeros(n_classes)
        r[: self.k] = 1.0 / self.k
        return r

    def check(self, n_classes):
        super().check(n_classes)
        if self.k >= n_classes:
            raise ValueError(
                f"k must be smaller than the number of classes m={n_classes}, got k={self.k}"
            )
        return self

    def _top(self, a):
        """Column indices of the ``k`` largest entries of each row, and their values."""
        if self.k >= a.shape[1]:
            raise ValueError(f"k={self.k} must be smaller than the number of classes {a.shape[1]}")
        idx = np.argpartition(-a, self.k - 1, axis=1)[:, : self.k]
        return idx, np.take_along_axis(a, idx, axis=1)

    def _weights(self, top):
        return np.broadcast_to((top.sum(axis=1) > 0)[:, None] / self.k, top.shape)

    def lmo(self, a):
        a = _check_margins(a)
        idx, top = self._top(a)
        beta = np.zeros_like(a)
        np.put_along_axis(beta, idx, self._weights(top), axis=1)
        return beta

    def lmo_row(self, a):
        """One row, with the stable tie rule of math.md §0 (ties to the smaller index).

        Block-coordinate steps use it, so that the numpy and the compiled
        block steps pick the same vertex when entries tie (e.g. at ``A = 0``).
        """
        if self.k >= a.shape[0]:
            raise ValueError(f"k={self.k} must be smaller than the number of classes {a.shape[0]}")
        idx = np.argsort(-a, kind="stable")[: self.k]
        beta = np.zeros(a.shape[0])
        beta[idx] = self._weights(a[idx][None, :])[0]
        return beta


class Usunier(TopKHinge):
    """Unweighted Usunier loss ``Φ = Σ_{j≤k} (a_[j])⁺ / k`` (``1 ≤ k < m``).

    LMO: ``1/k`` on those of the ``k`` largest entries that are positive.
    """

    name = "usunier"
    positive_part = True

    def _weights(self, top):
        return (top > 0) / self.k


#: loss name -> class
LOSSES = {
    cls.name: cls
    for cls in (MaxHinge, StructuredHinge, TopKHinge, Usunier, WeightedTopKHinge, WeightedUsunier)
}


def make_loss(loss="max_hinge", k=1, rho=None, cost=None):
    """Build a loss object from the estimator's parameters.

    Parameters
    ----------
    loss : str or MulticlassLoss
        One of :data:`LOSSES` or a ready loss object (returned as is).
    k : int
        ``k`` of ``topk_hinge`` and ``usunier``.
    rho : array-like or None
        ``ρ`` of ``weighted_topk`` and ``weighted_usunier`` (required there).
    cost : array-like or None
        ``Δ`` of ``structured_hinge``.

    Returns
    -------
    MulticlassLoss
    """
    if isinstance(loss, MulticlassLoss):
        return loss
    if not isinstance(loss, str):
        raise TypeError(f"loss must be a string or a MulticlassLoss, got {type(loss).__name__}")
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; expected one of {sorted(LOSSES)}")
    if cost is not None and loss != "structured_hinge":
        raise ValueError(f"cost is only used by loss='structured_hinge', not {loss!r}")
    if loss == "max_hinge":
        return MaxHinge()
    if loss == "structured_hinge":
        return StructuredHinge(cost)
    if loss in ("topk_hinge", "usunier"):
        return LOSSES[loss](k)
    if rho is None:
        raise ValueError(f"loss={loss!r} needs rho (nonincreasing weights with rho_m = 0)")
    return LOSSES[loss](rho)
