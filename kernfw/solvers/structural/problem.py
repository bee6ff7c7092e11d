"""The n-slack structural SVM: data, oracle passes, primal, dual and certificate (math.md §3.1–§3.3).

The primal

    P(w) = λ/2 ‖w‖² + (1/n) Σ_i c_i H_i(w),   H_i(w) = max_y L_i(y) − ⟨w, ψ_i(y)⟩,

with ``ψ_i(y) = φ(x_i, y_i) − φ(x_i, y)``, has the dual
``D(α) = −λ/2 ‖w(α)‖² + ℓ(α)`` over a product of simplices, one block per example (with per-example weights
``c_i``, math.md §3.11, block ``i`` enters ``w`` and ``ℓ`` scaled by ``c_i``; ``c_i = 1``
without them).
The solvers keep a dual-feasible pair ``(w(α), ℓ(α))``; the duality gap ``P − D``
certifies ``P(w) − P*``.

The oracles are the model's (:class:`~kernfw.structured.StructuredModel`), for any
model; a :class:`~kernfw.structured.Chain` model's passes run in the compiled chain
core (:mod:`kernfw.solvers.structural._numba`).  Approximate oracles are allowed: a
decoding that returns a good but not optimal ``ŷ`` still gives feasible dual steps
(every ``ŷ`` is a vertex), but the gap computed with it is an estimate (a lower bound
of the exact gap) rather than a certificate.
"""

import numpy as np
import scipy.sparse as sp

from ...fw import Certificate
from ...fw.result import rounding_bound
from ...structured import Chain
from . import _numba

__all__ = ["StructuredProblem"]


def _check_weights(sample_weight, n):
    """The weights ``c_i`` as a float array of length ``n`` (finite, ``≥ 0``), or None."""
    if sample_weight is None:
        return None
    c = np.asarray(sample_weight, dtype=np.float64)
    if c.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {c.shape}")
    if not np.all(np.isfinite(c)) or np.any(c < 0):
        raise ValueError("sample_weight must be finite and nonnegative")
    return c


class StructuredProblem:
    """Training data of an n-slack structural SVM and its whole-pass oracle (§3.1).

    Parameters
    ----------
    model : kernfw.structured.StructuredModel
        The model (initialized on ``X, Y`` here if it is not yet).
    X, Y : sequences of length n
        Inputs ``x_i`` and outputs ``y_i``.
    lam : float
        Regularization ``λ > 0``.
    sample_weight : array-like of shape (n,) or None
        Weights ``c_i ≥ 0`` of the examples' loss terms (math.md §3.11): the primal is
        ``λ/2 ‖w‖² + (1/n) Σ_i c_i H_i(w)``.  None: every ``c_i = 1``.

    Attributes
    ----------
    X : prepared inputs (``model.prepare(X)``); ``X[i]`` is ``x_i``.
    n : int
        Number of examples.
    phi_true : ndarray (D,)
        ``Σ_i c_i φ(x_i, y_i)``.
    weights : ndarray (n,) or None
        The ``c_i`` (None: all 1).
    chain : bool
        Whether the model is a :class:`~kernfw.structured.Chain`, whose passes run in
        the compiled chain core (then ``labels`` holds the true state of every position).
    """

    def __init__(self, model, X, Y, lam, sample_weight=None):
        if not lam > 0:
            raise ValueError(f"lam must be > 0, got {lam}")
        if model.size_joint_feature is None:
            model.initialize(X, Y)
        self.model = model
        self.lam = float(lam)
        self.X = model.prepare(X)
        self.Y = model.prepare_outputs(Y)
        self.n = self.X.shape[0] if sp.issparse(self.X) else len(self.X)
        if self.n != len(self.Y):
            raise ValueError(
                f"X and Y have different numbers of examples: {self.n} != {len(self.Y)}"
            )
        self.dim = int(model.size_joint_feature)
        self.weights = _check_weights(sample_weight, self.n)
        self.phi_true = self._joint_feature(self.Y)
        self.chain = type(model) is Chain
        if self.chain:
            self.labels = np.concatenate(self.Y).astype(np.int64)

    def block_weight(self, i):
        """``c_i``, the weight of example ``i``'s loss term."""
        return 1.0 if self.weights is None else float(self.weights[i])

    def _joint_feature(self, Y):
        """``Σ_i c_i φ(x_i, y_i)`` of outputs ``Y`` (a user's model without weights is
        called as it was written)."""
        if self.weights is None:
            return self.model.batch_joint_feature(self.X, Y)
        return self.model.batch_joint_feature(self.X, Y, weights=self.weights)

    def oracle_pass(self, w):
        """Loss-augmented decoding of every example at ``w``.

        Returns
        -------
        phi_hat : ndarray (D,)
            ``Σ_i c_i φ(x_i, ŷ_i)``.
        loss : float
            ``Σ_i c_i L_i(ŷ_i)``.
        """
        model, X = self.model, self.X
        if self.chain:
            y_hat = np.empty(X.features.shape[0], dtype=np.int64)
            w = np.ascontiguousarray(w, dtype=np.float64)
            args = (model.n_states, model.normalize, True, y_hat)
            loss = _numba.chain_oracle_pass(X.features, X.offsets, self.labels, w, *args)
            if self.weights is not None:
                Y_hat = np.split(y_hat, X.offsets[1:-1])
                loss = self.weights @ model.batch_loss(self.Y, Y_hat)
            return model.flat_joint_feature(X, y_hat, self.weights), float(loss)
        Y_hat = model.batch_decode(X, w, self.Y)
        losses = model.batch_loss(self.Y, Y_hat)
        loss = np.sum(losses) if self.weights is None else self.weights @ losses
        return self._joint_feature(Y_hat), float(loss)

    def primal(self, w):
        """The primal objective ``P(w)`` (one oracle pass)."""
        phi_hat, loss = self.oracle_pass(w)
        return (
            0.5 * self.lam * float(w @ w) + (loss + float(w @ (phi_hat - self.phi_true))) / self.n
        )

    def dual(self, w, ell):
        """``D = −λ/2 ‖w‖² + ℓ`` of a dual-feasible pair ``(w(α), ℓ(α))`` (§3.2)."""
        return -0.5 * self.lam * float(w @ w) + float(ell)

    def certificate(self, w, ell, extra=None, oracle=None):
        """``Certificate(P(w), D, g)`` of the dual-feasible pair ``(w, ℓ)`` (§3.3).

        The gap is summed as ``g = λ‖w‖² + (1/n) Σ_i c_i H_i(w) − ℓ`` (§3.3, §3.11), not as
        the difference of ``P`` and ``D``; its rounding bound
        (:func:`~kernfw.fw.result.rounding_bound`) is taken over the
        ``D + n`` terms of ``‖w‖²``, ``⟨w, Σ_i φ(x_i, ŷ_i) − φ(x_i, y_i)⟩`` and the
        sums over examples, at the magnitude
        ``λ‖w‖² + (|L| + ⟨|w|, |Σ_i φ(x_i, ŷ_i)| + |Σ_i φ(x_i, y_i)|⟩)/n + |ℓ|``.
        ``oracle`` is the pass ``(phi_hat, loss)`` at ``w`` when the caller has it.
        """
        phi_hat, loss = oracle or self.oracle_pass(w)
        reg = self.lam * float(w @ w)  # λ‖w‖²
        hinge = (loss + float(w @ (phi_hat - self.phi_true))) / self.n  # (1/n) Σ_i c_i H_i(w)
        size = np.abs(np.asarray(phi_hat)) + np.abs(self.phi_true)
        magnitude = reg + (abs(loss) + float(np.abs(w) @ size)) / self.n + abs(ell)
        return Certificate(
            0.5 * reg + hinge,
            -0.5 * reg + float(ell),
            reg + hinge - float(ell),
            dict(extra or {}),
            rounding=rounding_bound(self.dim + self.n, magnitude),
        )

    def block_statistics(self):
        """Statistics ``s(y_i)`` of the true outputs, one flat array and offsets.

        ``α_i = e_{y_i}`` (``w = 0``) is the starting point of every solver.
        """
        pieces = [
            np.asarray(self.model.statistics(x, y), dtype=float) for x, y in zip(self.X, self.Y)
        ]
        offsets = np.concatenate([[0], np.cumsum([p.size for p in pieces])])
        return np.concatenate(pieces), offsets
