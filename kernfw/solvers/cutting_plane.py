"""The 1-slack cutting-plane baseline for structural SVMs (SVMstruct; [LacosteJulien2013], Figure 1).

The method of [Joachims2009] (math.md §3.10) solves the n-slack primal of §3.1
through its 1-slack form (same optimal ``w`` and value):

    min_{w, ξ} λ/2 ‖w‖² + ξ   s.t.  ξ ≥ b(ȳ) − ⟨w, a(ȳ)⟩  for every joint labeling ȳ,

with ``a(ȳ) = (1/n) Σ_i ψ_i(ȳ_i)`` and ``b(ȳ) = (1/n) Σ_i L_i(ȳ_i)``.  Each
iteration calls the loss-augmented oracle on every example at the current
``w`` (one pass) and adds the cut of the answers to a working set; ``w`` is
then the solution of the problem restricted to the working set, whose dual is
a concave QP over the simplex of the cuts,

    max_{β ∈ Δ_k} bᵀβ − ‖Aᵀβ‖²/(2λ),    w = Aᵀβ/λ,

(rows ``a_j`` of ``A``), solved here exactly by the active-set method of
:func:`kernfw.solvers.simplex_qp.dense.solve_dense_simplex_qp`, warm-started
from the previous ``β``.

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

from ..fw import FWIterate, run
from .simplex_qp.dense import solve_dense_simplex_qp
from .structural import StructuredProblem

__all__ = ["CuttingPlane", "solve_structural_cutting_plane", "MAX_IDLE"]

#: iterations a cut may keep zero weight before it leaves the working set
MAX_IDLE = 50


class CuttingPlane(FWIterate):
    """1-slack cutting-plane iterate: the working set of cuts, ``β`` and ``w = Aᵀβ/λ``.

    Parameters
    ----------
    problem : kernfw.solvers.structural.StructuredProblem
        Data, oracles and ``λ``.
    qp_rtol : float
        The restricted QP is solved to a FW gap ``≤ qp_rtol · g`` (``g`` the
        current certified gap; at least ``qp_tol_min``).
    qp_tol_min : float
        Floor of the restricted QP's tolerance.
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

    gap_scale = "primal"

    def __init__(self, problem, qp_rtol=0.1, qp_tol_min=1e-13, max_idle=MAX_IDLE):
        self.problem = problem
        self.qp_rtol, self.qp_tol_min = float(qp_rtol), float(qp_tol_min)
        self.max_idle = int(max_idle)
        self.A = np.zeros((1, problem.dim))  # the cut of the true outputs: ξ ≥ 0
        self.b = np.zeros(1)
        self.beta = np.ones(1)
        self.idle = np.zeros(1, dtype=np.intp)
        self.w = np.zeros(problem.dim)
        self.passes = 0
        self.qp_iterations = 0
        self._oracle = None
        self._gap = np.inf

    def _current_oracle(self):
        if self._oracle is None:
            self._oracle = self.problem.oracle_pass(self.w)
        return self._oracle

    def certificate(self):
        p = self.problem
        cert = p.certificate(
            self.w,
            float(self.b @ self.beta),
            {
                "oracle_calls": self.passes * p.n,
                "pass": float(self.passes),
                "cuts": float(self.b.size),
            },
            oracle=self._current_oracle(),
        )
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
            self.A, self.b, self.beta, self.idle = (
                self.A[keep],
                self.b[keep],
                self.beta[keep],
                self.idle[keep],
            )

    def solve_restricted(self):
        """Maximize ``bᵀβ − ‖Aᵀβ‖²/(2λ)`` over the simplex from the current ``β``, on cuts
        centred at ``c = Aᵀβ`` (see the module docstring); update ``w``."""
        p = self.problem
        gap = self._gap if np.isfinite(self._gap) else 1.0
        c = self.A.T @ self.beta
        centred = self.A - c
        beta, _, n_iter = solve_dense_simplex_qp(
            centred @ centred.T / (2.0 * p.lam),
            self.b - (centred @ c) / p.lam,
            self.beta,
            tol=max(self.qp_rtol * gap, self.qp_tol_min),
        )
        self.qp_iterations += n_iter
        self.beta = beta
        self.idle = np.where(beta > 0, 0, self.idle + 1)
        self.w = (self.A.T @ self.beta) / p.lam

    def step(self, t):
        phi_hat, loss = self._current_oracle()
        self._oracle = None
        added = self.add_cut(phi_hat, loss)
        self.solve_restricted()
        self.drop_idle_cuts()
        self.passes += 1
        return float(self.beta[-1]) if added else 0.0  # the weight the new cut received

    def solution(self):
        return {"w": self.w.copy(), "beta": self.beta.copy(), "cuts": self.b.size}


def solve_structural_cutting_plane(
    model,
    X,
    Y,
    lam,
    *,
    max_iter=200,
    tol=1e-3,
    qp_rtol=0.1,
    max_time=None,
    callback=None,
    compiled="auto",
):
    """1-slack cutting plane (SVMstruct) for the structural SVM, with the certified gap.

    Parameters
    ----------
    model : StructuredModel
        Joint features, loss and oracles.
    X, Y : sequences
        Training inputs and outputs.
    lam : float
        ``λ > 0``.
    max_iter : int
        Iterations; each is one oracle pass (one new cut) and one restricted QP.
    tol : float
        Relative tolerance: stop when the duality gap ``P(w) − D(β) ≤ tol·|P(w)|``
        (the n-slack gap of math.md §3.3, computed every iteration from the pass
        that makes the cut).
    qp_rtol : float
        Relative accuracy of each restricted QP (see :class:`CuttingPlane`).
    max_time : float or None
        Wall-clock budget (s).
    callback : callable or None
        ``callback(row) -> bool`` on each history row.
    compiled : bool or "auto"
        Compiled oracle passes for a Chain model
        (:class:`~kernfw.solvers.structural.StructuredProblem`).

    Returns
    -------
    FWResult
        ``solution["w"]``, ``["beta"]`` (weights of the cuts); history columns
        ``oracle_calls``, ``pass`` and ``cuts`` (working-set size).
    """
    problem = StructuredProblem(model, X, Y, lam, compiled=compiled)
    return run(
        CuttingPlane(problem, qp_rtol=qp_rtol),
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        check_every=1,
        callback=callback,
        keep_best=True,
        remedy="increase max_iter or tol",
        name="structural SVM cutting plane",
    )
