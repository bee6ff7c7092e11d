"""The structured-output model protocol of math.md §3.1.

A structured SVM learns ``w ∈ R^D`` so that ``argmax_y ⟨w, φ(x, y)⟩`` predicts the
output ``y`` of an input ``x``.  The *model* owns the combinatorics (the joint
feature map ``φ``, the task loss ``L`` and the two decodings); the solvers in
:mod:`kernfw.solvers.structural` own the optimization and only call the methods
below.  A user plugs in a new model by subclassing :class:`StructuredModel` and
implementing its five abstract methods; every other method has a correct
(looping) default that a model may override for speed.
"""

from abc import ABC, abstractmethod

import numpy as np
import scipy.sparse as sp

__all__ = ["StructuredModel", "check_pair_lengths"]


def check_pair_lengths(X, Y):
    """Check that ``X`` and ``Y`` hold the same (positive) number of examples."""
    n_x = X.shape[0] if sp.issparse(X) else len(X)
    if n_x != len(Y):
        raise ValueError(f"X and Y have different numbers of examples: {n_x} != {len(Y)}")
    if n_x == 0:
        raise ValueError("at least one training example is needed")


class StructuredModel(ABC):
    """Joint feature map, task loss and decodings of one structured output space.

    Notation (math.md §3.1): ``φ(x, y) ∈ R^D`` is the joint feature map,
    ``L(y_true, y) ≥ 0`` the task loss with ``L(y, y) = 0``, and the two
    decodings are

    - plain: ``argmax_y ⟨w, φ(x, y)⟩`` (prediction);
    - loss-augmented: ``argmax_y L(y_true, y) + ⟨w, φ(x, y)⟩`` (the
      maximization oracle of the structured hinge ``H_i``).

    Required methods: :meth:`joint_feature`, :meth:`loss`,
    :meth:`loss_augmented_decode`, :meth:`decode`, :meth:`initialize` (or set
    ``size_joint_feature``).

    Optional methods, with defaults:

    - :meth:`max_loss` (``max_y L(y_true, y)``; the SSG projection radius);
    - :meth:`labelings` (enumerate the output space; brute-force tests and the
      cvxpy reference);
    - :meth:`statistics` / :meth:`expand`: a compact linear representation
      ``φ(x, y) = A_x s(y)``.  Solvers store convex combinations of ``s(y)``
      per training example instead of vectors of length ``D`` (the default is
      ``s = φ``, ``A_x = I``);
    - :meth:`prepare`, :meth:`prepare_outputs` and the ``batch_*`` methods: data
      converted once, and a whole pass over the data at a fixed ``w`` (duality
      gaps, batch Frank-Wolfe, prediction).

    Attributes
    ----------
    size_joint_feature : int
        ``D``, the length of ``w`` (set by :meth:`initialize`).
    accepts_sparse : bool
        Whether inputs may be scipy.sparse matrices (False by default;
        :class:`~kernfw.structured.MultiClass` sets it).
    """

    size_joint_feature = None
    accepts_sparse = False

    # -- required ------------------------------------------------------------------
    def initialize(self, X, Y):
        """Learn the sizes from training data and validate it; return self.

        The default checks the lengths and sets ``size_joint_feature`` from the
        first example.
        """
        check_pair_lengths(X, Y)
        self.size_joint_feature = int(np.asarray(self.joint_feature(X[0], Y[0])).size)
        return self

    @abstractmethod
    def joint_feature(self, x, y):
        """``φ(x, y)``, a float array of shape (D,)."""

    @abstractmethod
    def loss(self, y_true, y):
        """Task loss ``L(y_true, y) ≥ 0`` (zero when ``y == y_true``)."""

    @abstractmethod
    def loss_augmented_decode(self, x, y_true, w):
        """``argmax_y L(y_true, y) + ⟨w, φ(x, y)⟩``."""

    @abstractmethod
    def decode(self, x, w):
        """``argmax_y ⟨w, φ(x, y)⟩``."""

    # -- optional: output space ----------------------------------------------------
    def max_loss(self, y_true):
        """``max_y L(y_true, y)``, or None when unknown (then SSG does not project)."""
        return None

    def labelings(self, x):
        """Iterate over every output ``y`` of input ``x`` (small instances only)."""
        raise NotImplementedError(f"{type(self).__name__} cannot enumerate its outputs")

    # -- optional: compact representation -----------------------------------------
    def statistics(self, x, y):
        """``s(y)``: a 1-D float array with ``φ(x, y) = A_x s(y)`` (default ``φ``).

        Its length may depend on ``x`` but not on ``y``.
        """
        return np.asarray(self.joint_feature(x, y), dtype=float)

    def expand(self, x, s):
        """``A_x s``: the joint-feature vector (D,) of statistics ``s`` (linear in ``s``)."""
        return np.asarray(s, dtype=float)

    # -- optional: whole passes ------------------------------------------------------
    def prepare(self, X):
        """Data in the form the batch methods take; indexing it gives ``x_i``.

        The default is the list ``X`` itself.
        """
        return list(X)

    def prepare_outputs(self, Y):
        """Outputs in the form the oracles take (e.g. int arrays); the default is ``list(Y)``."""
        return list(Y)

    def batch_decode(self, X, w, Y=None):
        """Decode every example of prepared ``X`` at ``w``.

        Loss-augmented with respect to ``Y`` when it is given, plain otherwise.
        Returns a list of outputs.
        """
        if Y is None:
            return [self.decode(x, w) for x in X]
        return [self.loss_augmented_decode(x, y, w) for x, y in zip(X, Y)]

    def batch_joint_feature(self, X, Y, weights=None):
        """``Σ_i c_i φ(x_i, y_i)`` over prepared ``X``, shape (D,) (``c_i = 1`` without
        ``weights``, the per-example weights of math.md §3.11)."""
        total = np.zeros(self.size_joint_feature)
        c = np.ones(len(Y)) if weights is None else weights
        for x, y, c_i in zip(X, Y, c):
            total += c_i * np.asarray(self.joint_feature(x, y), dtype=float)
        return total

    def batch_loss(self, Y_true, Y):
        """Task losses ``L(y_true_i, y_i)``, shape (n,)."""
        return np.array([self.loss(a, b) for a, b in zip(Y_true, Y)], dtype=float)

    def __repr__(self):
        return f"{type(self).__name__}()"
