"""Stochastic subgradient on the structural SVM primal: SSG and SSG-wavg (math.md §3.6).

The baseline of [LacosteJulien2013], Figure 1: it reports the same primal objective as
the Frank-Wolfe solvers but certifies nothing (its iterates are not dual feasible).
"""

import math

import numpy as np

from ...fw import BlockCoordinateIterate, Certificate, RunBudget, WeightedAverage

__all__ = ["StructuralSSG"]


class StructuralSSG(BlockCoordinateIterate):
    """Stochastic subgradient (Pegasos) on the structural SVM primal (§3.6).

    Step ``k = 0, 1, …`` on block ``i``: ``ŷ`` = the loss-augmented oracle at
    ``w``, ``γ = 1/(k+1)`` (``η_k = 1/(λ(k+1))`` on ``λ/2‖w‖² + H_i(w)``) and

        w ← (1 − γ) w + γ c_i ψ_i(ŷ)/λ,

    (``c_i`` the example's weight, 1 without weights; math.md §3.11), optionally projected
    on ``‖w‖ ≤ sqrt(P(0)/λ)``, ``P(0) = (1/n) Σ_i c_i max_y L_i(y)``.
    With ``averaging`` (SSG-wavg) the weighted average ``w̄`` (weights
    ``2/(k+2)``, as BCFW-wavg) is certified and returned.  The iterate is not
    dual feasible: the certificate has the primal ``P`` only (``dual`` NaN,
    ``gap`` inf), so the run always uses its whole budget.

    Parameters
    ----------
    problem : kernfw.solvers.structural.problem.StructuredProblem
    averaging : bool
    project : bool
        Project on the ball that contains the optimum (needs ``model.max_loss``).
    sample, random_state
        Block order, as in :class:`kernfw.solvers.structural.iterate.BCFW`.
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
            c = np.ones(problem.n) if problem.weights is None else problem.weights
            self.radius = math.sqrt(float(c @ np.asarray(max_losses)) / problem.n / problem.lam)
        self.average = WeightedAverage() if averaging else None
        self.oracle_calls = 0

    def block_step(self, i):
        p, model = self.problem, self.problem.model
        x, y = p.X[i], p.Y[i]
        y_hat = model.loss_augmented_decode(x, y, self.w)
        psi = model.expand(x, model.statistics(x, y) - model.statistics(x, y_hat))  # ψ_i(ŷ)
        psi *= p.block_weight(i)  # the subgradient of c_i H_i (§3.11)
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
