"""The 1-slack cutting plane for structural SVMs (SVMstruct; [LacosteJulien2013], Figure 1).

The method of [Joachims2009] (math.md §3.10) solves the n-slack primal of §3.1
through its 1-slack form (same optimal ``w`` and value):

    min_{w, ξ} λ/2 ‖w‖² + ξ   s.t.  ξ ≥ b(ȳ) − ⟨w, a(ȳ)⟩  for every joint labeling ȳ,

with ``a(ȳ) = (1/n) Σ_i ψ_i(ȳ_i)`` and ``b(ȳ) = (1/n) Σ_i L_i(ȳ_i)``.  Each
iteration calls the loss-augmented oracle on every example at the current
``w`` (one pass) and adds the cut of the answers to a working set; ``w`` is
then the solution of the problem restricted to the working set, whose dual is
a concave QP over the simplex of the cuts,

    max_{β ∈ Δ_k} bᵀβ − ‖Aᵀβ‖²/(2λ),    w = Aᵀβ/λ,

(rows ``a_j`` of ``A``), solved here by the active-set method of
:func:`kernfw.solvers.simplex_qp.dense.solve_dense_simplex_qp`, warm-started
from the previous ``β``, to a Frank-Wolfe gap within :data:`QP_GAP_FRACTION` of the
certified gap of the outer problem (:meth:`CuttingPlane.restricted_rule`).

Scale.  Since ``Σ_j β_j = 1``, ``Aᵀβ = c + Ãᵀβ`` for the centred cuts
``ã_j = a_j − c`` and any ``c``; the QP is then ``max_β (b − Ãc/λ)ᵀβ − βᵀQ̃β``
with ``Q̃ = ÃÃᵀ/(2λ)`` (plus a constant).  With ``c = Aᵀβ`` at the current
``β`` the entries of ``Q̃`` measure how the cuts differ, not how large they are:
features with a large common offset (data far from the origin) no longer put
``Q`` a factor ``‖a‖²/‖ã‖²`` above the differences the QP has to resolve.
A cut already in the working set is not added twice, and a cut whose weight
has been zero for :data:`MAX_IDLE` iterations leaves it (Joachims, Finley and
Yu 2009 do the same); the certificate below holds for any working set.

Certificate.  A convex combination ``β`` of cuts is the n-slack dual point
``α_i = Σ_j β_j e_{ȳ_i^{(j)}}`` (§3.2), with ``w(α) = Aᵀβ/λ`` and ``ℓ(α) = bᵀβ``,
so ``D = −λ/2‖w‖² + bᵀβ`` and the gap ``P(w) − D`` is the duality gap of the
*same* problem as the Frank-Wolfe solvers'.  The oracle pass that makes the
next cut also gives ``P(w)``: the gap comes with every iteration.  The working
set starts with the cut of the true outputs (``a = 0``, ``b = 0``: ``ξ ≥ 0``).
"""

import numpy as np

from ...fw import StoppingRule
from ..simplex_qp.dense import solve_dense_simplex_qp
from .iterate import OraclePassIterate

__all__ = ["CuttingPlane", "MAX_IDLE", "QP_GAP_FRACTION"]

#: iterations a cut may keep zero weight before it leaves the working set
MAX_IDLE = 50
#: the restricted QP's Frank-Wolfe gap, as a fraction of the outer certified gap
QP_GAP_FRACTION = 0.1
#: the floor of the restricted QP's absolute tolerance
QP_TOL_MIN = 1e-13


class CuttingPlane(OraclePassIterate):
    """1-slack cutting-plane iterate: the working set of cuts, ``β`` and ``w = Aᵀβ/λ``.

    Parameters
    ----------
    problem : kernfw.solvers.structural.StructuredProblem
        Data, oracles and ``λ``.
    max_idle : int
        Iterations a cut may keep zero weight before it leaves the working set.

    Attributes
    ----------
    A : ndarray (k, D)
        Cuts ``a_j`` (rows).
    b : ndarray (k,)
        Offsets ``b_j``.
    beta : ndarray (k,)
        Weights of the cuts (a point of the simplex).
    idle : ndarray (k,)
        Consecutive iterations each cut has had zero weight.
    w : ndarray (D,)
        ``Aᵀβ/λ``.
    """

    def __init__(self, problem, max_idle=MAX_IDLE):
        super().__init__(problem)
        self.max_idle = int(max_idle)
        self.A = np.zeros((1, problem.dim))  # the cut of the true outputs: ξ ≥ 0
        self.b = np.zeros(1)
        self.beta = np.ones(1)
        self.idle = np.zeros(1, dtype=np.intp)
        self.qp_iterations = 0
        self._gap = np.inf

    def certificate(self):
        cert = self.certify(float(self.b @ self.beta), cuts=float(self.b.size))
        self._gap = cert.gap
        return cert

    def add_cut(self, phi_hat, loss):
        """Add the cut ``a = (Σ_i φ(x_i, y_i) − Σ_i φ(x_i, ŷ_i))/n``, ``b = loss/n``.

        Returns False (and adds nothing) when the working set already holds it.
        """
        p = self.problem
        a = (p.phi_true - phi_hat) / p.n
        b = loss / p.n
        if np.any((self.b == b) & np.all(self.A == a, axis=1)):
            return False
        self.A = np.vstack([self.A, a])
        self.b = np.append(self.b, b)
        self.beta = np.append(self.beta, 0.0)
        self.idle = np.append(self.idle, 0)
        return True

    def drop_idle_cuts(self):
        """Remove the cuts whose weight has been zero for more than ``max_idle`` iterations."""
        keep = self.idle <= self.max_idle
        if not keep.all():
            self.A, self.b = self.A[keep], self.b[keep]
            self.beta, self.idle = self.beta[keep], self.idle[keep]

    def restricted_rule(self):
        """The restricted QP's stopping rule: an absolute Frank-Wolfe gap of
        :data:`QP_GAP_FRACTION` times the last certified gap (1 before the first one),
        at least :data:`QP_TOL_MIN`."""
        gap = self._gap if np.isfinite(self._gap) else 1.0
        return StoppingRule(max(QP_GAP_FRACTION * gap, QP_TOL_MIN), "absolute")

    def solve_restricted(self):
        """Maximize ``bᵀβ − ‖Aᵀβ‖²/(2λ)`` over the simplex from the current ``β``, on cuts
        centred at ``c = Aᵀβ`` (see the module docstring); update ``w``."""
        p = self.problem
        c = self.A.T @ self.beta
        centred = self.A - c
        beta, _, n_iter = solve_dense_simplex_qp(
            centred @ centred.T / (2.0 * p.lam),
            self.b - (centred @ c) / p.lam,
            self.beta,
            tol=self.restricted_rule().tol,
        )
        self.qp_iterations += n_iter
        self.beta = beta
        self.idle = np.where(beta > 0, 0, self.idle + 1)
        self.w = (self.A.T @ self.beta) / p.lam

    def step(self, t):
        added = self.add_cut(*self.next_pass())
        self.solve_restricted()
        self.drop_idle_cuts()
        return float(self.beta[-1]) if added else 0.0  # the weight the new cut received

    def solution(self):
        return {"w": self.w.copy(), "beta": self.beta.copy(), "cuts": self.b.size}
