"""The projected-subgradient baseline of the multi-category SVM ("PG", math.md §1.11).

It reports the same objectives as the Frank-Wolfe solvers of
:mod:`kernfw.solvers.multiclass.iterate`, whose full-batch iterate it extends;
:func:`kernfw.solvers.multiclass.solve_multiclass` dispatches ``solver="pg"`` here.
"""

import math

from ...fw import run
from .iterate import FullBatchIterate
from .problem import inner

__all__ = ["solve_multiclass_subgradient"]


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

    def __init__(self, problem, At, S):
        super().__init__(problem, At, S)
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
    S_init=None,
    tol=1e-3,
    max_iter=1000,
    max_time=None,
    check_every=1,
    callback=None,
):
    """Full-batch projected subgradient ("PG", math.md §1.11) for the multi-category SVM.

    Parameters
    ----------
    problem : kernfw.solvers.multiclass.problem.MulticlassDual
        The problem (``smoothing`` must be 0: PG is defined on the plain primal).
    A_init : ndarray (m, n) or None
        Starting dual point (default 0, i.e. ``w = 0``).
    S_init : ndarray (n, m) or None
        Its scores ``K A_initᵀ/(λn)``, when known.
    tol, max_iter, max_time, check_every, callback
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
    At, S = problem.start(A_init, S_init)
    iterate = _MulticlassPG(problem, At, S)
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
