"""The stochastic subgradient baseline of the structural SVM (SSG, SSG-wavg; math.md §3.6).

It reports the same objectives as the Frank-Wolfe solvers; the problem comes from
:mod:`kernfw.solvers.structural`.  (The multi-category SVM's projected-subgradient
baseline is :mod:`kernfw.solvers.multiclass.pg`.)
"""

import math

import numpy as np

from ..fw import BlockCoordinateIterate, Certificate, RunBudget, WeightedAverage, run
from .structural import StructuredProblem, check_averaging

__all__ = ["StructuralSSG", "solve_structural_ssg"]


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
