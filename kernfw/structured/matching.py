"""Bipartite matching model (math.md §3.8 (iii))."""

import itertools

import numpy as np
from scipy.optimize import linear_sum_assignment

from .base import StructuredModel, check_pair_lengths

__all__ = ["Matching"]


class Matching(StructuredModel):
    """Perfect bipartite matching of ``r`` rows to ``r`` columns with edge features.

    An input is an array ``x`` of shape (r, r, d): ``x[j, l]`` are the features
    of the edge row ``j`` – column ``l``.  An output is a permutation ``y``
    (int array of length r, ``y[j]`` = the column matched to row ``j``).
    ``φ(x, y) = Σ_j x[j, y[j]]`` (D = d) and the loss is the Hamming loss
    ``Σ_j [y[j] ≠ y_true[j]]`` (divided by ``r`` when ``normalize``).  Both
    decodings are a linear assignment problem
    (:func:`scipy.optimize.linear_sum_assignment`) on the edge scores
    ``M[j, l] = ⟨w, x[j, l]⟩ (+ [l ≠ y_true[j]] for the loss-augmented one)``.
    ``r`` may differ between examples.

    Parameters
    ----------
    normalize : bool, default=False
        Divide the Hamming loss by ``r``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw.structured import Matching
    >>> x = np.eye(3)[:, :, None] * np.ones((3, 3, 1))   # one feature: 1 on the diagonal
    >>> model = Matching().initialize([x], [np.arange(3)])
    >>> model.decode(x, np.array([1.0])).tolist()
    [0, 1, 2]
    """

    def __init__(self, normalize=False):
        self.normalize = bool(normalize)
        self.n_features = None

    def __repr__(self):
        return f"Matching(normalize={self.normalize})"

    def _check_input(self, x, i=0):
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 3 or x.shape[0] != x.shape[1] or x.shape[0] == 0:
            raise ValueError(f"matching input {i} must have shape (r, r, d), got {x.shape}")
        if self.n_features is not None and x.shape[2] != self.n_features:
            raise ValueError(
                f"matching input {i} has {x.shape[2]} edge features, "
                f"the model expects {self.n_features}"
            )
        if not np.all(np.isfinite(x)):
            raise ValueError(f"matching input {i} must be finite")
        return x

    def prepare(self, X):
        return [self._check_input(x, i) for i, x in enumerate(X)]

    def prepare_outputs(self, Y):
        """Permutations as int arrays."""
        return [np.asarray(y, dtype=np.intp) for y in Y]

    def check_labels(self, X, Y):
        out = []
        for i, (x, y) in enumerate(zip(X, Y)):
            y = np.asarray(y)
            r = np.shape(x)[0]
            if y.shape != (r,) or not np.array_equal(np.sort(y), np.arange(r)):
                raise ValueError(f"output {i} must be a permutation of 0..{r - 1}, got {y!r}")
            out.append(y.astype(np.intp))
        return out

    def initialize(self, X, Y):
        check_pair_lengths(X, Y)
        self.n_features = None
        X = self.prepare(X)
        self.check_labels(X, Y)
        self.n_features = X[0].shape[2]
        self.size_joint_feature = self.n_features
        return self

    def _unit(self, r):
        return 1.0 / r if self.normalize else 1.0

    def joint_feature(self, x, y):
        return x[np.arange(x.shape[0]), y].sum(axis=0)

    def loss(self, y_true, y):
        return float(np.count_nonzero(np.asarray(y_true) != np.asarray(y))) * self._unit(
            len(y_true)
        )

    def max_loss(self, y_true):
        r = len(y_true)
        return 0.0 if r < 2 else r * self._unit(r)

    def labelings(self, x):
        for y in itertools.permutations(range(np.shape(x)[0])):
            yield np.array(y, dtype=np.intp)

    def _assign(self, scores):
        rows, cols = linear_sum_assignment(scores, maximize=True)
        y = np.empty(scores.shape[0], dtype=np.intp)
        y[rows] = cols
        return y

    def loss_augmented_decode(self, x, y_true, w):
        scores = x @ w + self._unit(x.shape[0])
        scores[np.arange(x.shape[0]), y_true] -= self._unit(x.shape[0])
        return self._assign(scores)

    def decode(self, x, w):
        return self._assign(x @ w)
