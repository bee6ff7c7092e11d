"""The n-slack structural SVM: data, oracle passes, primal, dual and certificate (math.md §3.1–§3.3).

The primal

    P(w) = λ/2 ‖w‖² + (1/n) Σ_i H_i(w),   H_i(w) = max_y L_i(y) − ⟨w, ψ_i(y)⟩,

with ``ψ_i(y) = φ(x_i, y_i) − φ(x_i, y)``, has the dual
``D(α) = −λ/2 ‖w(α)‖² + ℓ(α)`` over a product of simplices, one block per example.
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

    Attributes
    ----------
    X : prepared inputs (``model.prepare(X)``); ``X[i]`` is ``x_i``.
    n : int
        Number of examples.
    phi_true : ndarray (D,)
        ``Σ_i φ(x_i, y_i)``.
    chain : bool
        Whether the model is a :class:`~kernfw.structured.Chain`, whose passes run in
        the compiled chain core (then ``labels`` holds the true state of every position).
    """

    def __init__(self, model, X, Y, lam):
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
        self.phi_true = model.batch_joint_feature(self.X, self.Y)
        self.chain = type(model) is Chain
        if self.chain:
            self.labels = np.concatenate(self.Y).astype(np.int64)

    def oracle_pass(self, w):
        """Loss-augmented decoding of every example at ``w``.

        Returns
        -------
        phi_hat : ndarray (D,)
            ``Σ_i φ(x_i, ŷ_i)``.
        loss : float
            ``Σ_i L_i(ŷ_i)``.
        """
        model, X = self.model, self.X
        if self.chain:
            y_hat = np.empty(X.features.shape[0], dtype=np.int64)
            w = np.ascontiguousarray(w, dtype=np.float64)
            args = (model.n_states, model.normalize, True, y_hat)
            loss = _numba.chain_oracle_pass(X.features, X.offsets, self.labels, w, *args)
            return model.flat_joint_feature(X, y_hat), float(loss)
        Y_hat = model.batch_decode(X, w, self.Y)
        return model.batch_joint_feature(X, Y_hat), float(np.sum(model.batch_loss(self.Y, Y_hat)))

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

        The gap is summed as ``g = λ‖w‖² + (1/n) Σ_i H_i(w) − ℓ`` (§3.3), not as
        the difference of ``P`` and ``D``; its rounding bound
        (:func:`~kernfw.fw.result.rounding_bound`) is taken over the
        ``D + n`` terms of ``‖w‖²``, ``⟨w, Σ_i φ(x_i, ŷ_i) − φ(x_i, y_i)⟩`` and the
        sums over examples, at the magnitude
        ``λ‖w‖² + (|L| + ⟨|w|, |Σ_i φ(x_i, ŷ_i)| + |Σ_i φ(x_i, y_i)|⟩)/n + |ℓ|``.
        ``oracle`` is the pass ``(phi_hat, loss)`` at ``w`` when the caller has it.
        """
        phi_hat, loss = oracle or self.oracle_pass(w)
        reg = self.lam * float(w @ w)  # λ‖w‖²
        hinge = (loss + float(w @ (phi_hat - self.phi_true))) / self.n  # (1/n) Σ_i H_i(w)
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
