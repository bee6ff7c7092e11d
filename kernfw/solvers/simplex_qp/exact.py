"""Small simplex QPs solved exactly: the active-set method on the stored ``Q`` (math.md §2.16).

A problem of at most :data:`EXACT_MAX` points costs ``n`` kernel columns to store, no more
than the iterations an iterative method takes on it, and the primal active-set method of
:mod:`~kernfw.solvers.simplex_qp.dense` then returns its optimum up to rounding, on the
unit simplex (the L2-SVM and the hard ball) and on the capped simplex ``Δ_u`` (the soft
ball, math.md §2.9).  An exact optimum does not depend on the path to it: a fit with
integer weights equals the fit on repeated rows to rounding (math.md §2.14), which
no iterative method stopped at a tolerance can promise.
"""

import numpy as np

from ...fw import SMALL_PROBLEM_MAX, FWIterate
from ...fw.result import rounding_bound
from .certificate import ball_shift, simplex_certificate, simplex_scale
from .dense import simplex_fw_gap, solve_dense_simplex_qp

__all__ = ["EXACT_MAX", "ExactIterate"]

#: problems of at most this many points are solved exactly by ``solver="auto"``: the
#: simplex QPs' arm of the small-problem rule (:data:`kernfw.fw.SMALL_PROBLEM_MAX`)
EXACT_MAX = SMALL_PROBLEM_MAX


class ExactIterate(FWIterate):
    """``max qᵀα − αᵀQα`` over ``Δₙ`` (or the capped ``Δ_u``) by one exact active-set solve.

    The first :meth:`step` runs :func:`~kernfw.solvers.simplex_qp.dense.solve_dense_simplex_qp`
    to optimality from the start (the vertex of the largest ``q_j − Q_jj``, capped);
    :meth:`work_done` counts its active-set iterations.  The certificate is the FW gap
    over the feasible set, exact up to rounding.

    Parameters
    ----------
    Q : KernelOperator
        The PSD matrix ``Q`` (its ``n`` columns are stored, symmetrized).
    q : ndarray of shape (n,) or None
        Linear term (None: zero, the L2-SVM).
    cap : ndarray of shape (n,) or None
        The caps ``u_i`` of ``Δ_u`` (None: the unit simplex).
    """

    def __init__(self, Q, q=None, cap=None):
        self.n = Q.n
        M = np.asarray(Q.columns(np.arange(self.n)), dtype=np.float64)
        self.M = (M + M.T) / 2
        self.q = np.zeros(self.n) if q is None else np.asarray(q, dtype=np.float64)
        self.cap = None if cap is None else np.asarray(cap, dtype=np.float64)
        self.gap_scale = simplex_scale(q) if cap is None else "primal"
        self._shift = None
        if q is not None and cap is None:
            try:
                self._shift = ball_shift(np.diag(self.M), self.q)
            except ValueError:  # no ball: the radius rule is refused by the driver
                self._shift = None
        self.alpha, _, _ = solve_dense_simplex_qp(self.M, self.q, max_iter=0, cap=self.cap)
        self.steps = 0
        self.solved = False

    def step(self, t):
        if self.solved:
            return 0.0
        self.alpha, _, n_iter = solve_dense_simplex_qp(
            self.M, self.q, self.alpha, tol=0.0, cap=self.cap
        )
        self.steps += max(n_iter, 1)
        self.solved = True
        return 1.0

    def work_done(self, t):
        """Active-set iterations taken."""
        return self.steps

    def certificate(self):
        a = self.alpha
        v = self.M @ a
        qa, ava = float(self.q @ a), float(a @ v)
        gap = simplex_fw_gap(self.M, self.q, a, self.cap)
        magnitude = float(np.abs(self.q).max() + 2.0 * np.abs(v).max()) + abs(qa) + 2 * abs(ava)
        extra = {"coreset": int(np.count_nonzero(a)), "away_steps": 0, "drop_steps": 0}
        if self.cap is not None:
            extra["center_norm2"] = ava
        rounding = rounding_bound(2 * self.n, magnitude)
        return simplex_certificate(qa - ava, gap, extra, rounding, self._shift)

    def solution(self):
        alpha = self.alpha.copy()
        return {"alpha": alpha, "v": self.M @ alpha, "support": np.flatnonzero(alpha > 0.0)}
