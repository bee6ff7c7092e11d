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

(rows ``a_j`` of ``A``), solved here by the project's simplex-QP solver
(:func:`kernfw.solvers.simplex_qp.solve_simplex_qp`, away-step FW with
``Q = AAᵀ/(2λ)``, ``q = b``), warm-started from the previous ``β``.

Certificate.  A convex combination ``β`` of cuts is the n-slack dual point
``α_i = Σ_j β_j e_{ȳ_i^{(j)}}`` (§3.2), with ``w(α) = Aᵀβ/λ`` and ``ℓ(α) = bᵀβ``,
so ``D = −λ/2‖w‖² + bᵀβ`` and the gap ``P(w) − D`` is the duality gap of the
*same* problem as the Frank-Wolfe solvers'.  The oracle pass that makes the
next cut also gives ``P(w)``: the gap comes with every iteration.  The working
set starts with the cut of the true outputs (``a = 0``, ``b = 0``: ``ξ ≥ 0``).
"""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..fw import FWIterate, run
from ..operators import Gram
from .simplex_qp import solve_simplex_qp
from .structural import StructuredProblem

__all__ = ["CuttingPlane", "solve_structural_cutting_plane"]


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

    Attributes
    ----------
    A : ndarray (k, D)
        Cuts ``a_j`` (rows).
    b : ndarray (k,)
        Offsets ``b_j``.
    beta : ndarray (k,)
        Weights of the cuts (a point of the simplex).
    w : ndarray (D,)
        ``Aᵀβ/λ``.
    """

    def __init__(self, problem, qp_rtol=0.1, qp_tol_min=1e-13):
        self.problem = problem
        self.qp_rtol, self.qp_tol_min = float(qp_rtol), float(qp_tol_min)
        self.A = np.zeros((1, problem.dim))  # the cut of the true outputs: ξ ≥ 0
        self.b = np.zeros(1)
        self.Q = np.zeros((1, 1))  # AAᵀ/(2λ)
        self.beta = np.ones(1)
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
        """Add the cut ``a = (Σ_i φ(x_i, y_i) − Σ_i φ(x_i, ŷ_i))/n``, ``b = loss/n``."""
        p = self.problem
        a = (p.phi_true - phi_hat) / p.n
        row = (self.A @ a) / (2.0 * p.lam)
        k = self.b.size
        Q = np.empty((k + 1, k + 1))
        Q[:k, :k] = self.Q
        Q[k, :k] = Q[:k, k] = row
        Q[k, k] = float(a @ a) / (2.0 * p.lam)
        self.A = np.vstack([self.A, a])
        self.b = np.append(self.b, loss / p.n)
        self.Q = Q
        self.beta = np.append(self.beta, 0.0)

    def solve_restricted(self):
        """Maximize ``bᵀβ − βᵀQβ`` over the simplex from the current ``β``; update ``w``."""
        p = self.problem
        gap = self._gap if np.isfinite(self._gap) else 1.0
        tol = max(self.qp_rtol * gap, self.qp_tol_min)
        with warnings.catch_warnings():
            # the outer certificate is valid for any β: an inexact QP only slows the method
            warnings.simplefilter("ignore", ConvergenceWarning)
            result = solve_simplex_qp(
                Gram(self.Q, check=False),
                q=self.b,
                method="mfw",
                tol=tol,
                max_iter=20000,
                alpha0=self.beta,
                check_every=5,
            )
        self.qp_iterations += result.n_iter
        beta = np.clip(np.asarray(result["alpha"], dtype=float), 0.0, None)
        self.beta = beta / beta.sum()
        self.w = (self.A.T @ self.beta) / p.lam

    def step(self, t):
        phi_hat, loss = self._current_oracle()
        self._oracle = None
        self.add_cut(phi_hat, loss)
        self.solve_restricted()
        self.passes += 1
        return float(self.beta[-1])  # the weight the new cut received

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
        Stop when the duality gap ``P(w) − D(β) ≤ tol`` (the n-slack gap of
        math.md §3.3, computed every iteration from the pass that makes the cut).
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
