"""Core vector machine (CVM): Bădoiu–Clarkson core-set iterations (the baseline of [Frandi2013]).

The baseline that [Frandi2013] compares MFW with ([Tsang2005]), on
the same problem as :func:`kernfw.solvers.simplex_qp.solve_simplex_qp`::

    maximize  f(α) = qᵀα − αᵀQα   over the unit simplex.

Each CVM iteration

1. solves the problem restricted to the core set ``S`` (a small QP, solved by
   the simplex-QP solver itself — MFW, warm-started from the previous core
   solution — on the ``|S| × |S|`` block ``Q_SS``);
2. computes ``v = Q_{:,S} α_S`` on all points from the columns of ``S`` (the
   columns are requested from the operator once, when a point joins ``S``:
   they are foreseeable, so the start fetches its two columns in one call);
3. finds the FW vertex (for the MEB: the farthest point) ``i* = argmax_i g_i``,
   ``g = q − 2v``, whose FW gap ``g_{i*} − αᵀg`` certifies ``f* − f(α)``;
4. stops by the problem's rule (math.md §2.5: for a ball the (1+ε) rule
   ``‖z_{i*} − c‖ ≤ (1+ε) r``); otherwise adds ``i*`` to ``S``.

The core QP is solved to a fraction of the gap the outer rule accepts: it only has to
be good enough for the outer test; the outer certificate is exact for the
returned ``α`` whatever the inner accuracy.  Memory: the ``n × |S|`` columns
of the core set.
"""

import math
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ...fw import FWIterate
from ...operators.gram import Gram
from .certificate import (
    ball_shift,
    negative_curvature_tol,
    simplex_certificate,
    simplex_rounding,
    simplex_scale,
)
from .start import cvm_first_point, cvm_second_point

__all__ = ["CoreVectorIterate", "INNER_FRACTION"]

#: each core QP is solved to this fraction of the FW gap the outer stopping rule accepts
INNER_FRACTION = 0.1


class CoreVectorIterate(FWIterate):
    """CVM state: core set ``S``, its weights ``α_S``, its columns ``Q_{:,S}`` and ``v = Qα``.

    One :meth:`step` is one core-set iteration (add the FW vertex, re-solve the
    core QP).

    Parameters
    ----------
    Q : KernelOperator
        The PSD matrix ``Q`` (``diag`` and ``columns`` only).
    q : ndarray of shape (n,) or None
        Linear term (None: zero).
    rng : numpy.random.Generator or None
        Picks the first point (None: point 0).
    tol : float or StoppingRule
        The outer tolerance (as :func:`~kernfw.solvers.simplex_qp.solve_simplex_qp`);
        each core QP is solved to an absolute FW gap of
        ``INNER_FRACTION`` × the gap the outer rule accepts at the current value.
    inner_solve : callable
        ``inner_solve(Q_SS, q_S, alpha0, tol) -> (α_S, iterations)``: the solver of the
        core QP to the absolute FW gap ``tol`` (passed in by
        :func:`kernfw.solvers.simplex_qp.solve_simplex_qp`: the active-set method on
        small cores, MFW on large ones).
    alpha0 : ndarray of shape (n,) or None
        Warm start: its support is the first core set.
    """

    def __init__(self, Q, q, rng, tol, inner_solve, alpha0=None):
        self.Q, self.n, self.q = Q, Q.n, q
        self.gap_scale = simplex_scale(q)
        self._inner_solve = inner_solve
        self.diag = np.asarray(Q.diag(), dtype=np.float64)
        rule = self.stopping_rule(tol)
        self._shift = ball_shift(self.diag, q) if rule.scale == "radius" else None
        self._accepted = rule.estimate(self._shift or 0.0)
        self.tol = rule.tol
        self.inner_fraction = INNER_FRACTION
        self.qa = self.ava = 0.0
        self.inner_iterations = 0
        self.columns_fetched = 0
        self._core = np.empty(16, dtype=np.intp)
        self._cols = np.empty((self.n, 16))  # Q_{:,S}, grown by doubling
        self._core_gram = np.empty((16, 16))  # Q_SS, grown with it
        self._size = 0
        if alpha0 is None:
            a = cvm_first_point(self.n, rng)
            col_a = self._fetch([a])
            b = cvm_second_point(self.diag, col_a[:, 0], a, negative_curvature_tol(Q))
            self._add_columns([a], col_a)
            if b is not None:
                self._add_columns([b], self._fetch([b]))
            weights = np.full(self._size, 1.0 / self._size)
        else:
            support = np.flatnonzero(alpha0)
            self._add_columns(support, self._fetch(support))
            weights = alpha0[support]
        self._solve_core(weights)

    @property
    def core(self):
        """The core set ``S`` (indices, in the order they joined)."""
        return self._core[: self._size]

    # -- columns and the core QP -------------------------------------------------------
    def _fetch(self, idx):
        """Columns ``Q_{:,idx}`` as float64 (one operator call for all of them)."""
        idx = np.asarray(idx, dtype=np.intp)
        self.columns_fetched += idx.size
        return np.asarray(self.Q.columns(idx), dtype=np.float64)

    def _add_columns(self, idx, cols):
        """Append points ``idx`` (columns ``cols``) to the core set, growing ``Q_{:,S}`` and
        ``Q_SS`` by doubling (no re-copy per point)."""
        idx = np.asarray(idx, dtype=np.intp)
        k, m = self._size, idx.size
        if k + m > self._cols.shape[1]:
            cap = max(2 * self._cols.shape[1], k + m)
            cols_new = np.empty((self.n, cap))
            cols_new[:, :k] = self._cols[:, :k]
            gram_new = np.empty((cap, cap))
            gram_new[:k, :k] = self._core_gram[:k, :k]
            core_new = np.empty(cap, dtype=np.intp)
            core_new[:k] = self._core[:k]
            self._cols, self._core_gram, self._core = cols_new, gram_new, core_new
        self._cols[:, k : k + m] = cols
        self._core[k : k + m] = idx
        self._size = k + m
        S = self._core[: k + m]
        self._core_gram[k : k + m, : k + m] = cols[S].T
        self._core_gram[: k + m, k : k + m] = cols[S]

    def _solve_core(self, weights):
        """Solve the QP on ``S`` from the warm start ``weights``; set ``α_S`` and ``v = Q_{:,S}α_S``."""
        k = self._size
        sub = Gram(self._core_gram[:k, :k], check=False)
        q_core = None if self.q is None else self.q[self.core]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            alpha, n_iter = self._inner_solve(
                sub, q_core, weights / weights.sum(), self._inner_tol()
            )
        self.inner_iterations += n_iter
        self.alpha_core = alpha / alpha.sum()  # on the simplex to rounding (the dual needs it)
        self.v = self._cols[:, :k] @ self.alpha_core
        self.qa = 0.0 if self.q is None else float(self.q[self.core] @ self.alpha_core)
        self.ava = float(self.alpha_core @ self.v[self.core])
        g = -2.0 * self.v if self.q is None else self.q - 2.0 * self.v
        self._vertex = int(np.argmax(g))
        self._gap = float(g[self._vertex] - (self.qa - 2.0 * self.ava))

    def _inner_tol(self):
        """Absolute FW-gap target of the core QP: a fraction of the outer rule's gap."""
        f = self.qa - self.ava
        a, b, absolute = self._accepted  # the rule's gap at f (StoppingRule.estimate)
        accepted = a * (abs(f) if absolute else f) + b
        if not accepted > 0:  # before the first solve (f = 0): the diagonal's scale
            accepted = self.tol * float(np.max(np.abs(self.diag)))
        return max(self.inner_fraction * accepted, 1e-300)

    # -- FWIterate protocol --------------------------------------------------------------
    def certificate(self):
        extra = {"coreset": int(self.core.size), "inner_iterations": self.inner_iterations}
        i = self._vertex
        qi = 0.0 if self.q is None else self.q[i]
        rounding = simplex_rounding(self.n + self.core.size, qi, self.v[i], self.qa, self.ava)
        return simplex_certificate(self.qa - self.ava, self._gap, extra, rounding, self._shift)

    def step(self, t):
        i = self._vertex
        if np.any(self.core == i):  # the core QP was not solved accurately enough
            self.inner_fraction *= 0.1
            self._solve_core(self.alpha_core)
            return 0.0
        self._add_columns([i], self._fetch([i]))
        self._solve_core(np.append(self.alpha_core, 0.0))
        return math.nan

    def solution(self):
        alpha = np.zeros(self.n)
        alpha[self.core] = self.alpha_core
        return {"alpha": alpha, "v": self.v.copy(), "support": np.flatnonzero(alpha > 0)}
