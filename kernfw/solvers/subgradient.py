"""Subgradient baselines reporting the same objectives as the Frank-Wolfe solvers.

- :func:`solve_multiclass_subgradient` — the full-batch projected subgradient method
  ("PG" of [Tajima2021], Pegasos-style; math.md §1.11) for the multi-category SVM;
- :func:`solve_structural_ssg` — stochastic subgradient (SSG, SSG-wavg; math.md §3.6)
  for the structural SVM.

The multi-class problem comes from :mod:`kernfw.solvers.multiclass_dual`
(shared with :mod:`kernfw.solvers.multiclass`, which dispatches
``solver="pg"`` here), the structural one from :mod:`kernfw.solvers.structural`.
"""

import math

import numpy as np

from ..fw import BlockCoordinateIterate, Certificate, RunBudget, WeightedAverage, run
from .multiclass_dual import FullBatchIterate, inner
from .structural import StructuredProblem, check_averaging

__all__ = ["solve_multiclass_subgradient", "StructuralSSG", "solve_structural_ssg"]


# -- multi-category SVM: full-batch projected subgradient (math.md §1.11) ------------------


class _MulticlassPG(FullBatchIterate):
    """Projected subgradient on ``P(W)`` written on the dual iterate ``A``.

    Step ``t = 0, 1, …`` with ``η = 1/(λ(t+1))``: the subgradient
    ``λw + (1/n) Σ_i Ψ_i g_i`` (``g_i = −u_i``, the LMO vertex of §1.6) gives

        A ← (1 − 1/(t+1)) A + U/(t+1),   then   A ← min(1, R/‖w(A)‖) A,

    with ``R = sqrt(P(0)/λ)``.  One ``matmat`` per step (``ΔS = K ΔAᵀ/(λn)``).
    ``A`` stays in the dual domain (a convex combination of vertices, scaled
    towards 0 ∈ A_i), so ``P(w(A)) − D(A)`` is a valid (certified) gap; it is
    reported as ``gap``, together with the projection ``scale``.
    """

    def __init__(self, problem, At, S, rtol=0.0):
        super().__init__(problem, At, S, rtol)
        self.radius_sq = problem.radius() ** 2

    def step(self, t):
        U, _, _ = self._direction()
        self._oracle = None
        p = self.problem
        eta = 1.0 / (t + 1.0)
        dA = U - self.At
        self.At += eta * dA
        self.S += eta * p.scores(dA)  # the one matmat
        w_sq = inner(self.At, self.S) / p.scale
        if w_sq > self.radius_sq:  # projection on ‖w‖ ≤ R
            shrink = math.sqrt(self.radius_sq / w_sq)
            self.At *= shrink
            self.S *= shrink
        return eta


def solve_multiclass_subgradient(
    problem,
    *,
    A_init=None,
    tol=1e-3,
    rtol=0.0,
    max_iter=1000,
    max_time=None,
    check_every=1,
    callback=None,
):
    """Full-batch projected subgradient ("PG", math.md §1.11) for the multi-category SVM.

    Parameters
    ----------
    problem : kernfw.solvers.multiclass_dual.MulticlassDual
        The problem (``smoothing`` must be 0: PG is defined on the plain primal).
    A_init : ndarray (m, n) or None
        Starting dual point (default 0, i.e. ``w = 0``).
    tol, rtol, max_iter, max_time, check_every, callback
        As in :func:`kernfw.solvers.multiclass.solve_multiclass`.

    Returns
    -------
    FWResult
        ``primal`` is ``P(w(A))`` (the same objective the FW solvers report);
        ``gap`` is ``P(w(A)) − D(A)``, valid because ``A`` stays dual feasible.
    """
    if problem.smoothing:
        raise ValueError(
            "the projected-subgradient baseline (solver='pg') is defined for smoothing=0 only"
        )
    At, S = problem.start(A_init)
    iterate = _MulticlassPG(problem, At, S, rtol=rtol)
    return run(
        iterate,
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        check_every=check_every,
        callback=callback,
        keep_best=True,
        remedy="increase max_iter (PG converges as O(1/t)) or use solver='lsfw'",
        name="MultiClassSVM solver='pg'",
    )


# -- structural SVM: stochastic subgradient, SSG and SSG-wavg (math.md §3.6) ------------------


class StructuralSSG(BlockCoordinateIterate):
    """Stochastic subgradient (Pegasos) on the structural SVM primal (§3.6).

    Step ``k = 0, 1, …`` on block ``i``: ``ŷ`` = the loss-augmented oracle at
    ``w``, ``γ = 1/(k+1)`` (``η_k = 1/(λ(k+1))`` on ``λ/2‖w‖² + H_i(w)``) and

        w ← (1 − γ) w + γ ψ_i(ŷ)/λ,

    optionally projected on ``‖w‖ ≤ sqrt(P(0)/λ)``, ``P(0) = (1/n) Σ_i max_y L_i(y)``.
    With ``averaging`` (SSG-wavg) the weighted average ``w̄`` (weights
    ``2/(k+2)``, as BCFW-wavg) is certified and returned.  The iterate is not
    dual feasible: the certificate has the primal ``P`` only (``dual`` NaN,
    ``gap`` inf), so the run always uses its whole budget.

    Parameters
    ----------
    problem : kernfw.solvers.structural.StructuredProblem
    averaging : bool
    project : bool
        Project on the ball that contains the optimum (needs ``model.max_loss``).
    sample, random_state
        Block order, as in :class:`kernfw.solvers.structural.BCFW`.
    """

    def __init__(
        self, problem, averaging=False, project=False, sample="uniform", random_state=None
    ):
        super().__init__(problem.n, random_state=random_state, sample=sample)
        self.problem = problem
        self.w = np.zeros(problem.dim)
        self.radius = None
        if project:
            max_losses = [problem.model.max_loss(y) for y in problem.Y]
            if any(v is None for v in max_losses):
                raise ValueError("project=True needs model.max_loss(y) (the radius sqrt(P(0)/λ))")
            self.radius = math.sqrt(float(np.mean(max_losses)) / problem.lam)
        self.average = WeightedAverage() if averaging else None
        self.oracle_calls = 0

    def block_step(self, i):
        p, model = self.problem, self.problem.model
        x, y = p.X[i], p.Y[i]
        y_hat = model.loss_augmented_decode(x, y, self.w)
        psi = model.expand(x, model.statistics(x, y) - model.statistics(x, y_hat))  # ψ_i(ŷ)
        gamma = 1.0 / (self.k + 1.0)
        self.w *= 1.0 - gamma
        self.w += (gamma / p.lam) * psi
        if self.radius is not None:
            norm = math.sqrt(float(self.w @ self.w))
            if norm > self.radius:
                self.w *= self.radius / norm
        self.oracle_calls += 1
        if self.average is not None:
            self.average.update(w=self.w)
        return gamma

    def _point(self):
        if self.average is not None and self.average.values is not None:
            return self.average["w"]
        return self.w

    def certificate(self):
        p = self.problem
        return Certificate(
            p.primal(self._point()),
            math.nan,
            math.inf,
            {"oracle_calls": self.oracle_calls, "pass": self.oracle_calls / p.n},
        )

    def stopping_rule(self, tol):
        """A baseline certifies nothing of its own: it runs its whole budget."""
        return RunBudget()

    def solution(self):
        return {"w": self._point().copy(), "w_last": self.w.copy()}


def solve_structural_ssg(
    model,
    X,
    Y,
    lam,
    *,
    averaging="weighted",
    project=False,
    sample="uniform",
    max_iter=50,
    check_every=5,
    random_state=None,
    max_time=None,
    callback=None,
):
    """SSG / SSG-wavg baseline for the structural SVM (math.md §3.6).

    Parameters
    ----------
    model, X, Y, lam
        As in :func:`kernfw.solvers.structural.solve_structural_bcfw`.
    averaging : {"weighted", "none"}
        "weighted" (SSG-wavg): the weighted average of the iterates; "none":
        the last iterate.
    project : bool
        Project on ``‖w‖ ≤ sqrt(P(0)/λ)``.
    max_iter : int
        Passes (``n`` stochastic steps each); the run always uses them all.
    check_every : int
        Passes between two primal evaluations (one oracle pass each).
    sample, random_state, max_time, callback
        As in :func:`~kernfw.solvers.structural.solve_structural_bcfw`.

    Returns
    -------
    FWResult
        ``solution["w"]``; ``primal`` is ``P(w)`` as the FW solvers report it,
        ``gap`` is inf (not certified); history columns ``oracle_calls``, ``pass``.
    """
    if int(check_every) < 1:
        raise ValueError(f"check_every must be >= 1, got {check_every}")
    problem = StructuredProblem(model, X, Y, lam)
    iterate = StructuralSSG(
        problem,
        averaging=check_averaging(averaging) == "weighted",
        project=project,
        sample=sample,
        random_state=random_state,
    )
    return run(
        iterate,
        tol=0.0,
        max_iter=max_iter,
        max_time=max_time,
        check_every=int(check_every),
        callback=callback,
        keep_best=False,
        name="structural SVM SSG",
    )
