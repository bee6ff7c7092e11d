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

**Start.**  The LMO vertex of ``Δ_u`` at the gradient of the landmark centre: ``α_L`` uniform
on :data:`LANDMARKS` evenly spaced points, ``g_L = q − 2Kα_L``, and ``α_0 = u`` on the ``⌊νn⌋``
largest ``g_L`` (the points farthest from that centre) with the remainder on the next; it
costs about ``νn`` kernel columns, against ``n`` for the centre ``1/n`` of ``Δ_u``.

**Steps.**  Pairwise Frank-Wolfe: with ``g = ∇f = q − 2Kα``, mass moves from the away
vertex ``j = argmin_{α_j>0} g_j`` to ``i = argmax_{α_i<u} g_i`` along ``e_i − e_j``, by the
exact line search of the quadratic (slope ``g_i − g_j``, curvature
``2(K_ii + K_jj − 2K_ij)``) capped at ``min(u − α_i, α_j)``.  Each step reads two kernel
columns and updates ``v = Kα`` in O(n).  The steps run in the
compiled core :mod:`kernfw.solvers.simplex_qp._soft_ball_numba`: with a column source
(:meth:`~kernfw.operators.KernelOperator.column_source`: an RBF kernel or a stored Gram) a
run of steps is one compiled call that evaluates the columns into its own LRU cache;
other operators serve the columns through ``Q.columns``.

**Certificate.**  At the centre ``c = Σ α_i z_i`` the distances are
``d_i = ‖z_i − c‖² = g_i + αᵀKα`` and the best radius gives the primal value
``P(α) = u · (sum of the νn largest d_i, the last one fractional)``, the value of the linear
maximization oracle over ``Δ_u``; the gap ``P − f(α) = max_{s∈Δ_u} sᵀg − αᵀg ≥ 0`` is the
Frank-Wolfe gap and bounds ``f* − f(α)`` and ``P(α) − P*``.
"""

import math

import numpy as np

from ...fw import Certificate, FWIterate, run
from ...fw.capped_simplex import sum_top_t, top_t_vertex
from ...fw.result import rounding_bound
from . import _soft_ball_numba as core
from .dense import capped_vertex
from .exact import ExactIterate
from .iterate import column_cache
from .solve import check_max_iter, default_max_iter

__all__ = ["SoftBallIterate", "solve_soft_ball", "soft_ball_radius2", "soft_ball_caps"]

#: pairwise steps between the compiled estimates of the FW gap (each O(n))
ESTIMATE_EVERY = 16
#: points of the landmark centre whose LMO vertex starts the iterate
LANDMARKS = 64
#: columns per ``Q.columns`` call when the start's ``v = Kα`` is summed from them
_COLUMN_BLOCK = 256


def soft_ball_caps(nu, n, sample_weight=None):
    """The caps of the ν-soft ball's dual: ``u_i = w_i / (ν Σ_j w_j)`` (math.md §2.14), or
    None for ``w = 1`` (one cap ``u = 1/(νn)``)."""
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or not np.all(w > 0):
        raise ValueError(
            f"the soft ball's weights must be positive and finite, of shape ({n},) (leave "
            "points of weight 0 out: they do not enter the problem)"
        )
    return w / (nu * float(w.sum()))


def soft_ball_radius2(d, nu, sample_weight=None):
    """The radius ``R²`` of the ν-soft ball: the ``⌈νn⌉``-th largest distance ``d_i``.

    It minimizes the primal ``R² + u Σ (d_i − R²)_+`` over ``R²`` and leaves strictly
    outside at most ``⌈νn⌉ − 1 < νn`` points (the ν-property: the fraction of training
    outliers is at most ν).  With weights ``w`` (math.md §2.14) it is the largest ``d_i``
    at which the weight of the points at or beyond it reaches ``νΣw``: the weighted
    fraction of training outliers is at most ν.
    """
    d = np.asarray(d, dtype=np.float64)
    if sample_weight is None:
        k = min(max(math.ceil(nu * d.size - 1e-9), 1), d.size)
        return float(np.partition(d, d.size - k)[d.size - k])
    w = np.asarray(sample_weight, dtype=np.float64)
    order = np.argsort(-d, kind="stable")
    reached = np.cumsum(w[order])
    k = int(np.searchsorted(reached, nu * reached[-1] * (1.0 - 1e-12)))
    return float(d[order[min(k, d.size - 1)]])


def _column_source(source, n, con, st):
    """The arguments ``(src, slab, slot_of, slots)`` of the compiled
    :func:`~kernfw.solvers.simplex_qp._soft_ball_numba.run_cached` when ``Q`` has a
    :class:`~kernfw.operators.base.ColumnSource` of a plain kernel (an RBF kernel on dense
    features, or a stored Gram), else None; ``‖x_k‖²`` goes to ``con``.

    The LRU cache holds ``cache_mb / (itemsize · n)`` whole columns (at least two, the
    pair of a step) in the source's dtype; a stored Gram is read in place (two rows)."""
    if source is None or source.labels is not None:
        return None
    if source.sq_norms is not None:
        con[core.SQ_NORMS] = source.sq_norms
    return column_cache(source, n, st, min_rows=2)


class SoftBallIterate(FWIterate):
    """Pairwise FW on the capped-simplex dual of the ν-soft ball (math.md §2.9).

    Starts at the LMO vertex of the landmark centre (module docstring).  A :meth:`step` is
    one pairwise step, or
    after :meth:`configure_runs` a run of them that ends early where the stopping rule's
    estimate holds on the exact FW gap, computed in O(n) every :data:`ESTIMATE_EVERY`
    steps (the driver certifies after each run).

    Parameters
    ----------
    Q : KernelOperator
        The Gram operator ``K`` (n × n).
    nu : float in (0, 1]
        ν, the largest fraction of training points left outside the ball.
    q : array-like of shape (n,) or None
        The linear term (None: ``diag(K)``; math.md §8.4 for another).
    sample_weight : ndarray of shape (n,) or None
        Positive weights ``w_i`` of the points' slacks: the caps ``u_i = w_i/(νΣw)``
        (math.md §2.14; None: ``u = 1/(νn)``).
    """

    gap_scale = "primal"

    def __init__(self, Q, nu, q=None, sample_weight=None):
        self.Q, self.n, self.nu = Q, Q.n, float(nu)
        self.t = self.nu * self.n  # the LMO budget: Δ_u = u · {0 ≤ s ≤ 1, 1ᵀs = t}
        self.u = 1.0 / self.t
        self.caps = soft_ball_caps(self.nu, self.n, sample_weight)
        self.sample_weight = sample_weight
        self._vec, self._con = np.zeros((3, self.n)), np.zeros((4, self.n))
        self.alpha, self.v = self._vec[core.ALPHA], self._vec[core.V]
        self._con[core.DIAG] = Q.diag()
        self._con[core.Q] = self._con[core.DIAG] if q is None else np.ravel(q)
        self.kdiag, self.q = self._con[core.DIAG], self._con[core.Q]
        self._state = np.zeros(1, dtype=core.STATE)
        self._st = st = self._state[0]  # a view: the fields read and write the record
        st["cap"], st["t"], st["weighted"] = self.u, self.t, self.caps is not None
        if self.caps is not None:
            self._con[core.CAP] = self.caps
        st["check_every"], st["estimate_b"] = ESTIMATE_EVERY, -math.inf  # no estimate yet
        self.steps, self._run_length, self._max_steps = 0, 1, math.inf
        self._source = _column_source(Q.column_source(), self.n, self._con, st)
        landmarks = np.linspace(0, self.n - 1, min(self.n, LANDMARKS)).astype(np.intp)
        self.alpha[landmarks] = 1.0 / landmarks.size
        self._fill_v()
        self.alpha[:] = self._vertex(self._gradient())
        self._fill_v()

    def _vertex(self, g):
        """The LMO vertex ``argmax_{s∈Δ_u} sᵀg``."""
        if self.caps is None:
            return top_t_vertex(g, self.t) * self.u
        return capped_vertex(g, self.caps)

    def _lmo_value(self, g):
        """``max_{s∈Δ_u} sᵀg``."""
        if self.caps is None:
            return self.u * sum_top_t(g, self.t)
        return float(capped_vertex(g, self.caps) @ g)

    def _fill_v(self):
        """``v = Kα``: from the columns of the support of ``α`` (about ``νn`` of them, against
        the ``n`` of a product), compiled from the view or by blocks of ``Q.columns``; by
        ``Q.matmat`` for explicit features (``K = XXᵀ``: a product costs O(nd))."""
        if self._source is not None:
            self._st["fill"] = True
            core.run_cached(0, self._vec, self._con, self._state, *self._source)
            return
        if self.Q.features() is not None:
            self.v[:] = np.ravel(self.Q.matmat(self.alpha))
            return
        support = np.flatnonzero(self.alpha)
        self.v[:] = 0.0
        for start in range(0, support.size, _COLUMN_BLOCK):
            block = support[start : start + _COLUMN_BLOCK]
            self.v += np.asarray(self.Q.columns(block), dtype=np.float64) @ self.alpha[block]

    @property
    def column_cache_info(self):
        """Dict of ``hits`` and ``misses`` of the compiled column cache (zeros when the
        columns come from ``Q.columns``)."""
        return {"hits": int(self._st["hits"]), "misses": int(self._st["misses"])}

    def configure_runs(self, tol, length, max_steps):
        """Let each :meth:`step` take up to ``length`` pairwise steps (``max_steps`` in all),
        ending early where the stopping rule of ``tol`` may hold:
        :meth:`~kernfw.fw.stopping.StoppingRule.estimate` on the exact FW gap."""
        a, b, absolute = self.stopping_rule(tol).estimate()
        st = self._st
        st["estimate_a"], st["estimate_b"], st["estimate_absolute"] = a, b, absolute
        self._run_length, self._max_steps = max(int(length), 1), int(max_steps)

    def work_done(self, t):
        """Pairwise steps taken (a :meth:`step` call takes a run of them)."""
        return self.steps

    def _gradient(self):
        return self.q - 2.0 * self.v

    def certificate(self):
        g = self._gradient()
        aka = float(self.alpha @ self.v)
        qa = float(self.q @ self.alpha)
        dual = qa - aka
        gap = self._lmo_value(g) - float(self.alpha @ g)
        magnitude = abs(qa) + 2.0 * abs(aka) + 2.0 * float(np.max(np.abs(g)))
        return Certificate(
            primal=dual + gap,
            dual=dual,
            gap=gap,
            extra={"center_norm2": aka},
            rounding=rounding_bound(2 * self.n, magnitude),
        )

    def step(self, t):
        length = int(max(1, min(self._run_length, self._max_steps - self.steps)))
        if self._source is None:
            self.steps += self._run_fetched(length)
        else:
            self.steps += core.run_cached(length, self._vec, self._con, self._state, *self._source)
        return float(self._st["gamma"])

    def _run_fetched(self, length):
        """:func:`~kernfw.solvers.simplex_qp._soft_ball_numba.run_cached` with the columns
        from ``Q.columns``: the same compiled vertices, step and estimate."""
        vec, con, state, st = self._vec, self._con, self._state, self._st
        for t in range(length):
            if not core.select_pair(vec, con, state):
                return t + 1
            cols = self.Q.columns(np.array([st["i"], st["j"]], dtype=np.intp))
            cols = np.asarray(cols, dtype=np.float64).T.copy()  # rows K_{:,i}, K_{:,j}
            core.pair_step(cols[0], cols[1], vec, con, state)
            if (t + 1) % ESTIMATE_EVERY == 0 and core.estimate_met(vec, con, state):
                return t + 1
        return length

    def solution(self):
        d = self._gradient() + float(self.alpha @ self.v)
        support = np.flatnonzero(self.alpha > 0.0)
        return {
            "alpha": self.alpha.copy(),
            "v": self.v.copy(),
            "support": support,
            "radius2": soft_ball_radius2(d, self.nu, self.sample_weight),
        }


def solve_soft_ball(
    Q,
    nu,
    *,
    q=None,
    tol=1e-4,
    max_iter=None,
    check_every=100,
    callback=None,
    max_time=None,
    sample_weight=None,
    solver="pairwise",
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
        Certify at least every ``check_every`` pairwise steps (each certificate sorts the
        gradient, O(n log n)); a run of steps ends earlier where the compiled estimate of
        the stopping rule holds (:meth:`SoftBallIterate.configure_runs`).
    callback, max_time
        As in :func:`kernfw.fw.run`.
    sample_weight : array-like of shape (n,) or None
        Positive weights ``w_i`` of the points: ``R² + Σ_i w_i ξ_i / (νΣw)``, the caps
        ``u_i = w_i/(νΣw)`` (math.md §2.14; None: all 1).  Leave points of weight 0 out.
        The problem is soft when some cap is below 1 (``νn > 1`` unweighted).
    solver : {"pairwise", "active_set"}
        Pairwise Frank-Wolfe, or the active-set method on the stored ``K`` (small
        problems, math.md §2.16; to the optimum whatever ``tol``).

    Returns
    -------
    FWResult
        ``solution``: ``alpha`` (on ``Δ_u``), ``v = Kα``, ``support`` (``α_i > 0``) and
        ``radius2`` (``R²``, :func:`soft_ball_radius2`).
    """
    if not 0.0 < nu <= 1.0:
        raise ValueError(f"nu must lie in (0, 1], got {nu}")
    if solver not in ("pairwise", "active_set"):
        raise ValueError(f"solver must be 'pairwise' or 'active_set', got {solver!r}")
    caps = soft_ball_caps(nu, Q.n, sample_weight)
    if (nu * Q.n <= 1.0) if caps is None else bool(np.all(caps >= 1.0)):
        raise ValueError(
            f"nu * n = {nu * Q.n:.3g} <= 1 (every cap u_i >= 1) leaves no point outside: "
            "solve the hard ball"
        )
    max_iter = check_max_iter(max_iter, default_max_iter(Q.n))
    if solver == "active_set":
        iterate = ExactIterate(Q, Q.diag() if q is None else q, _full_caps(caps, nu, Q.n))
        check_every = 1
    else:
        iterate = SoftBallIterate(Q, nu, q, sample_weight)
        iterate.configure_runs(tol, check_every, max_iter)
        check_every = 1
    result = run(
        iterate,
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        check_every=check_every,
        callback=callback,
        remedy="increase max_iter or tol",
        name=f"{'active-set' if solver == 'active_set' else 'pairwise Frank-Wolfe'} (soft ball)",
    )
    sol = result.solution
    if "radius2" not in sol:  # the exact solve: R² from the distances at its centre
        d = np.asarray(iterate.q) - 2.0 * sol["v"] + float(sol["alpha"] @ sol["v"])
        sol["radius2"] = soft_ball_radius2(d, nu, sample_weight)
    return result


def _full_caps(caps, nu, n):
    """The caps as an array: ``caps``, or ``1/(νn)`` everywhere."""
    return np.full(n, 1.0 / (nu * n)) if caps is None else caps
