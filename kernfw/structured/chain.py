"""Chain (sequence labeling) model with Viterbi decoding (math.md §3.8 (ii)).

Weights ``w = (U, b_start, b_end, G)`` laid out as one vector of length
``D = q·d + 2q + q²``:

- ``U`` (q × d): unary weights, ``U_l · x_t`` scores state ``l`` at position ``t``;
- ``b_start``, ``b_end`` (q): biases of the first and of the last state;
- ``G`` (q × q): transition scores, ``G[l', l]`` for ``l' → l``.

``⟨w, φ(x, y)⟩ = Σ_t U_{y_t} x_t + b_start[y_1] + b_end[y_T] + Σ_{t<T} G[y_t, y_{t+1}]``.
"""

import itertools
import numbers

import numpy as np
import scipy.sparse as sp

from .base import StructuredModel, check_pair_lengths

__all__ = ["Chain", "ChainBatch", "viterbi", "viterbi_one"]


def viterbi(theta, G):
    """Max-sum (Viterbi) decoding of ``B`` chains of the same length ``T``.

    Maximizes ``Σ_t θ_t(y_t) + Σ_{t<T} G[y_t, y_{t+1}]`` by the recursion
    ``δ_1 = θ_1``, ``δ_t(l) = θ_t(l) + max_{l'} (δ_{t−1}(l') + G[l', l])`` with
    back-pointers, vectorized over the ``q`` states and the ``B`` chains
    (O(B·T·q²) work, T numpy steps).  Ties go to the smallest state.

    Parameters
    ----------
    theta : ndarray of shape (B, T, q)
        Node scores ``θ_t(l)`` of each chain.
    G : ndarray of shape (q, q)
        Transition scores.

    Returns
    -------
    ndarray of shape (B, T), dtype intp
        The maximizing state sequences.
    """
    B, T, q = theta.shape
    GT = np.ascontiguousarray(G.T)  # GT[l, l'] = G[l', l]: reduce the last axis
    back = np.empty((T, B, q), dtype=np.intp)
    cand = np.empty((B, q, q))
    delta = theta[:, 0]
    for t in range(1, T):
        np.add(GT, delta[:, None, :], out=cand)  # cand[b, l, l'] = δ_{t−1}(l') + G[l', l]
        cand.argmax(axis=2, out=back[t])
        delta = cand.max(axis=2)
        delta += theta[:, t]
    labels = np.empty((B, T), dtype=np.intp)
    labels[:, T - 1] = delta.argmax(axis=1)
    rows = np.arange(B)
    for t in range(T - 1, 0, -1):
        labels[:, t - 1] = back[t, rows, labels[:, t]]
    return labels


def viterbi_one(theta, GT):
    """:func:`viterbi` for one chain (the block-coordinate hot path).

    Parameters
    ----------
    theta : ndarray of shape (T, q)
        Node scores.
    GT : ndarray of shape (q, q), C-contiguous
        The *transposed* transition scores ``Gᵀ`` (``GT[l, l'] = G[l', l]``).
    """
    T, q = theta.shape
    back = np.empty((T, q), dtype=np.intp)
    cand = np.empty((q, q))
    flat = cand.ravel()
    row_start = np.arange(0, q * q, q)
    where = np.empty(q, dtype=np.intp)
    delta = theta[0]
    for t in range(1, T):
        np.add(GT, delta, out=cand)  # cand[l, l'] = δ_{t−1}(l') + G[l', l]
        cand.argmax(axis=1, out=back[t])
        np.add(back[t], row_start, out=where)
        delta = flat.take(where)
        delta += theta[t]
    labels = np.empty(T, dtype=np.intp)
    state = int(delta.argmax())
    labels[T - 1] = state
    for t in range(T - 1, 0, -1):
        state = int(back[t, state])
        labels[t - 1] = state
    return labels


class ChainBatch:
    """Sequences stored once for whole passes (what :meth:`Chain.prepare` returns).

    Indexing gives the (T_i × d) float array of sequence ``i`` (a view into
    ``features``).

    Attributes
    ----------
    features : ndarray of shape (N, d)
        All positions of all sequences, concatenated (``N = Σ_i T_i``).
    offsets : ndarray of shape (n + 1,)
        Sequence ``i`` is ``features[offsets[i]:offsets[i + 1]]``.
    lengths : ndarray of shape (n,)
        ``T_i``.
    groups : dict
        Length ``T`` → indices of the sequences of that length (batched Viterbi).
    """

    def __init__(self, X):
        if sp.issparse(X) or any(sp.issparse(x) for x in X):
            raise TypeError(
                "Chain needs dense sequences (arrays of shape (T, d)), got a scipy.sparse matrix"
            )
        words = [np.asarray(x) for x in X]
        for i, x in enumerate(words):
            if x.ndim != 2 or x.shape[0] == 0:
                raise ValueError(
                    f"sequence {i} must be a non-empty 2-D array (T, d), got shape {x.shape}"
                )
            if x.shape[1] != words[0].shape[1]:
                raise ValueError(
                    f"sequence {i} has {x.shape[1]} features, sequence 0 has {words[0].shape[1]}"
                )
        self.lengths = np.array([x.shape[0] for x in words], dtype=np.intp)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        self.features = np.concatenate(words).astype(np.float64, copy=False)
        if not np.all(np.isfinite(self.features)):
            raise ValueError("sequence features must be finite")
        self.words = [self.features[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]
        self.groups = {int(T): np.flatnonzero(self.lengths == T) for T in np.unique(self.lengths)}
        self.starts = self.offsets[:-1]
        self.ends = self.offsets[1:] - 1
        inner = np.ones(self.offsets[-1], dtype=bool)
        inner[self.ends] = False
        self.inner = np.flatnonzero(inner)  # positions t with a successor t + 1 in the sequence

    @property
    def n_features(self):
        return self.features.shape[1]

    def __len__(self):
        return len(self.words)

    def __getitem__(self, i):
        return self.words[i]


class Chain(StructuredModel):
    """Chain sequence labeling: unary, start/end bias and transition features.

    Inputs are arrays ``x`` of shape (T, d) (one row per position, ``T`` may
    differ between sequences); outputs are int arrays ``y`` of length ``T``
    with states in ``0, …, q − 1``.  The loss is the Hamming loss
    ``Σ_t [y_t ≠ y_true_t]``, divided by ``T`` when ``normalize`` (as in the
    reference OCR experiments).  Both decodings are Viterbi (:func:`viterbi`);
    the loss-augmented one adds ``[l ≠ y_true_t] / T`` to the node scores.

    Parameters
    ----------
    n_states : int
        Number of states ``q ≥ 2``.
    normalize : bool, default=True
        Divide the Hamming loss by the sequence length.

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw.structured import Chain
    >>> model = Chain(2).initialize([np.eye(2)], [np.array([0, 1])])
    >>> model.size_joint_feature  # q·d + 2q + q²
    12
    """

    def __init__(self, n_states, normalize=True):
        if not isinstance(n_states, numbers.Integral) or n_states < 2:
            raise ValueError(f"n_states must be an integer >= 2, got {n_states!r}")
        self.n_states = int(n_states)
        self.normalize = bool(normalize)
        self.n_features = None

    def __repr__(self):
        return f"Chain(n_states={self.n_states}, normalize={self.normalize})"

    # -- sizes and validation ----------------------------------------------------
    def prepare(self, X):
        if isinstance(X, ChainBatch):
            batch = X
        else:
            batch = ChainBatch(X)
        if self.n_features is not None and batch.n_features != self.n_features:
            raise ValueError(
                f"sequences have {batch.n_features} features, the model expects {self.n_features}"
            )
        return batch

    def prepare_outputs(self, Y):
        """Labelings as int arrays."""
        return [np.asarray(y, dtype=np.intp) for y in Y]

    def check_labels(self, X, Y):
        """Labelings as int arrays matching the sequence lengths of ``X``."""
        out = []
        for i, (x, y) in enumerate(zip(X, Y)):
            y = np.asarray(y)
            if y.ndim != 1 or y.shape[0] != np.shape(x)[0]:
                raise ValueError(f"labeling {i} must have shape ({np.shape(x)[0]},), got {y.shape}")
            if y.size and not np.issubdtype(y.dtype, np.integer):
                raise ValueError(f"labeling {i} must hold integers, got dtype {y.dtype}")
            if y.min() < 0 or y.max() >= self.n_states:
                raise ValueError(f"labeling {i} has states outside 0..{self.n_states - 1}")
            out.append(y.astype(np.intp, copy=False))
        return out

    def initialize(self, X, Y):
        check_pair_lengths(X, Y)
        self.n_features = None
        batch = self.prepare(X)
        self.check_labels(batch, Y)
        self.n_features = batch.n_features
        q, d = self.n_states, self.n_features
        self.size_joint_feature = q * d + 2 * q + q * q
        return self

    def unpack(self, w):
        """Views ``(U, b_start, b_end, G)`` of the weight vector ``w``."""
        q, d = self.n_states, self.n_features
        qd = q * d
        return (
            w[:qd].reshape(q, d),
            w[qd : qd + q],
            w[qd + q : qd + 2 * q],
            w[qd + 2 * q :].reshape(q, q),
        )

    def _unit(self, T):
        """Loss of one wrong position: ``1/T`` (normalized) or 1."""
        return 1.0 / T if self.normalize else 1.0

    # -- protocol ----------------------------------------------------------------------
    def node_scores(self, x, w):
        """Node scores ``θ_t(l) = U_l x_t + [t = 1] b_start[l] + [t = T] b_end[l]``, (T, q),
        and ``Gᵀ`` (C-contiguous, the layout :func:`viterbi_one` reads)."""
        U, b_start, b_end, G = self.unpack(w)
        theta = x @ U.T
        theta[0] += b_start
        theta[-1] += b_end
        return theta, np.ascontiguousarray(G.T)

    def loss_augmented_decode(self, x, y_true, w):
        theta, GT = self.node_scores(x, w)
        unit = self._unit(theta.shape[0])
        theta += unit
        theta[np.arange(theta.shape[0]), y_true] -= unit
        return viterbi_one(theta, GT)

    def decode(self, x, w):
        return viterbi_one(*self.node_scores(x, w))

    def loss(self, y_true, y):
        return float(np.count_nonzero(np.asarray(y_true) != np.asarray(y))) * self._unit(
            len(y_true)
        )

    def max_loss(self, y_true):
        return 1.0 if self.normalize else float(len(y_true))

    def labelings(self, x):
        for y in itertools.product(range(self.n_states), repeat=np.shape(x)[0]):
            yield np.array(y, dtype=np.intp)

    def statistics(self, x, y):
        """``s(y) = (E_y, C_y)`` flattened, length ``T·q + q²``.

        ``E_y`` (T × q) is the one-hot encoding of ``y`` and ``C_y`` (q × q) counts
        the transitions ``y_t → y_{t+1}``; convex combinations of ``s`` are node
        marginals and expected transition counts.
        """
        q, T = self.n_states, len(y)
        s = np.zeros(T * q + q * q)
        s[np.arange(T) * q + y] = 1.0
        s[T * q :] = np.bincount(y[:-1] * q + y[1:], minlength=q * q)
        return s

    def expand(self, x, s):
        """``φ = (Eᵀx, E_1, E_T, C)`` of statistics ``s = (E, C)``."""
        q, d = self.n_states, self.n_features
        T, qd = x.shape[0], q * d
        E = s[: T * q].reshape(T, q)
        out = np.empty(self.size_joint_feature)
        np.dot(E.T, x, out=out[:qd].reshape(q, d))
        out[qd : qd + q] = E[0]
        out[qd + q : qd + 2 * q] = E[-1]
        out[qd + 2 * q :] = s[T * q :]
        return out

    def joint_feature(self, x, y):
        return self.expand(x, self.statistics(x, np.asarray(y, dtype=np.intp)))

    # -- whole passes --------------------------------------------------------------
    def batch_decode(self, X, w, Y=None):
        batch = self.prepare(X)
        U, b_start, b_end, G = self.unpack(w)
        theta = batch.features @ U.T
        theta[batch.starts] += b_start
        theta[batch.ends] += b_end
        if Y is not None:
            unit = np.repeat([self._unit(T) for T in batch.lengths], batch.lengths)
            theta += unit[:, None]
            theta[np.arange(theta.shape[0]), np.concatenate(Y)] -= unit
        out = [None] * len(batch)
        for T, idx in batch.groups.items():
            positions = batch.offsets[idx][:, None] + np.arange(T)
            labels = viterbi(theta[positions], G)
            for j, i in enumerate(idx.tolist()):
                out[i] = labels[j]
        return out

    def batch_joint_feature(self, X, Y, weights=None):
        return self.flat_joint_feature(self.prepare(X), np.concatenate(Y), weights)

    def flat_joint_feature(self, batch, y, weights=None):
        """``Σ_i c_i φ(x_i, y_i)`` from the states of every position of ``batch``.

        Parameters
        ----------
        batch : ChainBatch
            Prepared sequences (:meth:`prepare`).
        y : array of int, shape (N,)
            States of all positions, sequence after sequence.
        weights : ndarray of shape (n,) or None
            Per-sequence weights ``c_i`` (None: 1).

        Returns
        -------
        ndarray of shape (D,)
            The summed joint features.
        """
        q, d = self.n_states, self.n_features
        qd, N = q * d, batch.features.shape[0]
        y = np.asarray(y).astype(np.intp, copy=False)
        at = np.ones(N) if weights is None else np.repeat(weights, batch.lengths)
        onehot = sp.csr_matrix((at, (y, np.arange(N))), shape=(q, N))
        out = np.empty(self.size_joint_feature)
        out[:qd] = (onehot @ batch.features).ravel()
        out[qd : qd + q] = np.bincount(y[batch.starts], at[batch.starts], minlength=q)
        out[qd + q : qd + 2 * q] = np.bincount(y[batch.ends], at[batch.ends], minlength=q)
        pairs = y[batch.inner] * q + y[batch.inner + 1]
        out[qd + 2 * q :] = np.bincount(pairs, at[batch.inner], minlength=q * q)
        return out

    def batch_loss(self, Y_true, Y):
        lengths = np.array([len(y) for y in Y_true])
        wrong = np.concatenate(Y_true) != np.concatenate(Y)
        counts = np.add.reduceat(wrong, np.concatenate([[0], np.cumsum(lengths)[:-1]]))
        counts = counts.astype(float)
        return counts / lengths if self.normalize else counts
