"""The soft minimum enclosing ball: at most a fraction ν of the points outside (math.md §2.9).

The ν-soft ball (the support vector data description of Tax and Duin, with the ν
parametrization of Schölkopf et al.; see the references page) of points ``z_i = φ(x_i)``
with Gram matrix ``K`` is::

    minimize   R² + u Σ_i ξ_i      over c, R², ξ ≥ 0,   u = 1/(νn),
    subject to ‖z_i − c‖² ≤ R² + ξ_i.

Its dual is the MEB dual restricted to the *capped* simplex::

    maximize   f(α) = qᵀα − αᵀKα,   q = diag(K),
    over       Δ_u = {α : 0 ≤ α_i ≤ u, 1ᵀα = 1}.

At ``u ≥ 1`` (``νn ≤ 1``) the cap is inactive and this is the minimum enclosing ball.

**Steps.**  Pairwise Frank-Wolfe: with ``g = ∇f = q − 2Kα``, mass moves from the away
vertex ``j = argmin_{α_j>0} g_j`` to ``i = argmax_{α_i<u} g_i`` along ``e_i − e_j``, by the
exact line search of the quadratic (:func:`kernfw.fw.quadratic_step`, slope ``g_i − g_j``,
curvature ``2(K_ii + K_jj − 2K_ij)``) capped at ``min(u − α_i, α_j)``.  Each step reads two
kernel columns and updates ``v = Kα`` in O(n).

**Certificate.**  At the centre ``c = Σ α_i z_i`` the distances are
``d_i = ‖z_i − c‖² = g_i + αᵀKα`` and the best radius gives the primal value
``P(α) = u · (sum of the νn largest d_i, the last one fractional)``, the value of the linear
maximization oracle over ``Δ_u``; the gap ``P − f(α) = max_{s∈Δ_u} sᵀg − αᵀg ≥ 0`` is the
Frank-Wolfe gap and bounds ``f* − f(α)`` and ``P(α) − P*``.
"""

import math

import numpy as np

from ...fw import Certificate, FWIterate, quadratic_step, run
from ...fw.capped_simplex import sum_top_t
from ...fw.result import rounding_bound

__all__ = ["SoftBallIterate", "solve_soft_ball", "soft_ball_radius2"]


def soft_ball_radius2(d, nu):
    """The radius ``R²`` of the ν-soft ball: the ``⌈νn⌉``-th largest distance ``d_i``.

    It minimizes the primal ``R² + u Σ (d_i − R²)_+`` over ``R²`` and leaves strictly
    outside at most ``⌈νn⌉ − 1 < νn`` points (the ν-property: the fraction of training
    outliers is at most ν).
    """
    d = np.asarray(d, dtype=np.float64)
    k = min(max(math.ceil(nu * d.size - 1e-9), 1), d.size)
    return float(np.partition(d, d.size - k)[d.size - k])


class SoftBallIterate(FWIterate):
    """Pairwise FW on the capped-simplex dual of the ν-soft ball (math.md §2.9).

    Parameters
    ----------
    Q : KernelOperator
        The Gram operator ``K`` (n × n).
    nu : float in (0, 1]
        ν, the largest fraction of training points left outside the ball.
    q : array-like of shape (n,) or None
        The linear term (None: ``diag(K)``; math.md §8.4 for another).
    """

    gap_scale = "primal"

    def __init__(self, Q, nu, q=None):
        self.Q = Q
        self.n = Q.n
        self.nu = float(nu)
        self.t = self.nu * self.n  # the LMO budget: Δ_u = u · {0 ≤ s ≤ 1, 1ᵀs = t}
        self.u = 1.0 / self.t
        self.kdiag = np.asarray(Q.diag(), dtype=np.float64)
        self.q = self.kdiag if q is None else np.asarray(q, dtype=np.float64).ravel()
        self.alpha = np.full(self.n, 1.0 / self.n)
        self.v = np.asarray(Q.matmat(self.alpha), dtype=np.float64).ravel()

    def _gradient(self):
        return self.q - 2.0 * self.v

    def certificate(self):
        g = self._gradient()
        aka = float(self.alpha @ self.v)
        qa = float(self.q @ self.alpha)
        dual = qa - aka
        gap = self.u * sum_top_t(g, self.t) - float(self.alpha @ g)
        magnitude = abs(qa) + 2.0 * abs(aka) + 2.0 * float(np.max(np.abs(g)))
        return Certificate(
            primal=dual + gap,
            dual=dual,
            gap=gap,
            extra={"center_norm2": aka},
            rounding=rounding_bound(2 * self.n, magnitude),
        )

    def step(self, t):
        g = self._gradient()
        room = self.alpha < self.u * (1.0 - 1e-12)
        mass = self.alpha > 0.0
        i = int(np.flatnonzero(room)[np.argmax(g[room])])
        j = int(np.flatnonzero(mass)[np.argmin(g[mass])])
        if i == j or g[i] <= g[j]:
            return 0.0
        cols = np.asarray(self.Q.columns(np.array([i, j])), dtype=np.float64)
        curvature = 2.0 * (self.kdiag[i] + self.kdiag[j] - 2.0 * cols[j, 0])  # K_ij = K[j, i]
        step_max = min(self.u - self.alpha[i], self.alpha[j])
        gamma = quadratic_step(g[i] - g[j], curvature, step_max)
        self.alpha[i] += gamma
        self.alpha[j] -= gamma  # exactly 0 on a drop step (γ = α_j)
        self.v += gamma * (cols[:, 0] - cols[:, 1])
        return gamma

    def solution(self):
        d = self._gradient() + float(self.alpha @ self.v)
        support = np.flatnonzero(self.alpha > 0.0)
        return {
            "alpha": self.alpha.copy(),
            "v": self.v.copy(),
            "support": support,
            "radius2": soft_ball_radius2(d, self.nu),
        }


def solve_soft_ball(
    Q, nu, *, q=None, tol=1e-4, max_iter=None, check_every=10, callback=None, max_time=None
):
    """The ν-soft minimum enclosing ball by pairwise Frank-Wolfe (math.md §2.9).

    Parameters
    ----------
    Q : KernelOperator
        PSD Gram operator of the points.
    nu : float in (0, 1]
        Largest fraction of points outside the ball (``ν n > 1``; at ``ν n ≤ 1`` the
        problem is the hard ball of :func:`kernfw.solvers.simplex_qp.solve_simplex_qp`).
    q : array-like of shape (n,) or None
        The linear term of the dual (None: ``diag(Q)``; an approximated kernel passes the
        exact ``k(x_i, x_i)``, math.md §8.4).
    tol : float
        Stop when the certified relative gap ``(P − D)/|P| ≤ tol``.
    max_iter : int or None
        Pairwise steps (None: ``max(100000, 20 n)``).
    check_every : int
        Steps between certificates (each costs a partial sort, O(n)).
    callback, max_time
        As in :func:`kernfw.fw.run`.

    Returns
    -------
    FWResult
        ``solution``: ``alpha`` (on ``Δ_u``), ``v = Kα``, ``support`` (``α_i > 0``) and
        ``radius2`` (``R²``, :func:`soft_ball_radius2`).
    """
    if not 0.0 < nu <= 1.0:
        raise ValueError(f"nu must lie in (0, 1], got {nu}")
    if nu * Q.n <= 1.0:
        raise ValueError(
            f"nu * n = {nu * Q.n:.3g} <= 1 leaves no point outside: solve the hard ball"
        )
    iterate = SoftBallIterate(Q, nu, q)
    if max_iter is None:
        max_iter = max(100_000, 20 * Q.n)
    return run(
        iterate,
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        check_every=check_every,
        callback=callback,
        remedy="increase max_iter or tol",
        name="pairwise Frank-Wolfe (soft ball)",
    )
