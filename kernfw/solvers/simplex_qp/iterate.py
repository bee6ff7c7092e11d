"""Minimum enclosing ball and L2-SVM by Frank-Wolfe and away-step MFW (math.md §2).

Both problems are one concave quadratic over the unit simplex Δₙ (math.md §2.3)::

    maximize  f(α) = qᵀα − αᵀQα   subject to  α ≥ 0, 1ᵀα = 1.

- **MEB** of points ``z_i`` with Gram matrix ``Q``: ``q = diag(Q)``; ``f(α)`` is
  the squared radius ``r²`` of the ball centred at ``c = Σ α_i z_i``.
- **L2-SVM** (the CVM form, §2.1): ``Q = K̃`` with the modified kernel
  ``K̃_ij = y_i y_j (K_ij + 1) + δ_ij / C`` and ``q = 0``;
  :class:`~kernfw.solvers.simplex_qp.L2SVMKernel` is that operator (nothing ``n × n`` is
  formed).

The solver keeps ``v = Qα`` up to date from **one** kernel column per
iteration (the column of the vertex that moves), so each iteration costs one
column fetch plus O(n) vector work; the column cache of
:class:`~kernfw.operators.KernelFunction` serves the columns of the active
points.  Plain FW steps toward the vertex ``i* = argmax_i g_i`` of the
gradient ``g = q − 2v`` (for the MEB: the farthest point); MFW also considers
the away step from ``j* = argmin_{α_j>0} g_j`` (the nearest support point)
and takes whichever has the larger first-order progress.  Both use the exact
line search of a quadratic.  The active set ``{i : α_i > 0}`` is the coreset.
"""

import math

import numpy as np
from scipy.linalg.blas import daxpy

from ...fw import FWIterate, away_step_max, quadratic_step
from .active_set import ActiveSet
from .certificate import (
    NEGATIVE_CURVATURE,
    STOP_SCALES,
    ball_shift,
    negative_curvature_tol,
    raise_not_psd,
    simplex_certificate,
    simplex_rounding,
)
from .start import cvm_first_point, cvm_second_point

__all__ = ["SimplexQPIterate", "REFRESH_EVERY"]

#: recompute the maintained scalars qᵀα, αᵀv exactly every this many iterations
REFRESH_EVERY = 512
#: columns fetched per block when a warm start rebuilds v = Qα
_WARM_BLOCK = 256
#: a warm start with at least n / _WARM_PRODUCT_SHARE nonzeros computes Qα₀ by one
#: product with a stored Gram (reading K once) rather than by copies of its columns
_WARM_PRODUCT_SHARE = 8


class SimplexQPIterate(FWIterate):
    """FW / MFW state for ``max_{α∈Δₙ} qᵀα − αᵀQα`` (math.md §2.3).

    Maintained quantities, updated from one column per step:

    - ``α = s·β`` and ``v = Qα = s·u`` with a common scalar ``s`` (``scale``):
      the FW update ``α ← (1−γ)α + γe_i``, ``v ← (1−γ)v + γQ_{:,i}`` becomes
      ``s ← (1−γ)s``, ``β_i += γ/s``, ``u += (γ/s)Q_{:,i}`` — a single O(n)
      pass (and likewise for away steps), instead of rescaling two n-vectors;
    - the scalars ``qa = qᵀα`` and ``ava = αᵀv = αᵀQα`` (O(1) updates,
      recomputed exactly on the active set every few hundred steps);
    - the active set ``{i : α_i > 0}`` (the coreset);
    - between a certificate and the next step, the FW vertex ``i*``.

    Parameters
    ----------
    Q : KernelOperator
        The PSD matrix ``Q``; only ``diag`` and ``columns`` are used.
    q : ndarray of shape (n,) or None
        Linear term (None: zero, as for the L2-SVM).
    solver : {"lsfw", "mfw"}
        Plain FW or away-step MFW.
    alpha0 : ndarray of shape (n,) or None
        Warm start on the simplex; None uses the CVM initialization (§2.6).
    stop : {"gap", "relative", "radius"}
        Stopping rule (see :func:`solve_simplex_qp`).
    rng : numpy.random.Generator or None
        Picks the first CVM point (None: point 0).
    """

    #: renormalize α = s·β and v = s·u when s leaves [1/_SCALE_LIMIT, _SCALE_LIMIT]
    _SCALE_LIMIT = 1e100

    #: relative threshold of a not-PSD curvature (float64 kernel values unless
    #: ``__init__`` finds float32 ones: :func:`.certificate.negative_curvature_tol`)
    negative_tol = NEGATIVE_CURVATURE

    def __init__(self, Q, q, solver, alpha0, stop, rng):
        self.Q = Q
        n = self.n = Q.n
        self.away = solver == "mfw"
        self.stop, self.gap_scale = stop, STOP_SCALES[stop]
        self.diag = np.asarray(Q.diag(), dtype=np.float64)
        self.negative_tol = negative_curvature_tol(Q)
        self.q = q
        self.half_q = None if q is None else 0.5 * q
        self.ball_shift = self._ball_shift() if stop == "radius" else 0.0
        self.scale = 1.0
        self.beta = np.zeros(n)
        self.u = np.zeros(n)
        self.scores = None if q is None else np.empty(n)
        self.active = self._new_active_set(n)
        self.n_fw = self.n_away = self.n_drop = 0
        self.columns_fetched = 0
        self.steps = 0
        self._init_runs()
        if alpha0 is None:
            self._init_cvm(rng)
        else:
            self._init_warm(alpha0)
        self._vertex = None

    # -- setup -------------------------------------------------------------------
    def _new_active_set(self, n):
        return ActiveSet(n)

    def _ball_shift(self):
        """The constant ``c`` with ``diag(Q) = q + c·1`` (then ``r² = f(α) + c``)."""
        return ball_shift(self.diag, self.q)

    def _column(self, i):
        """Column ``Q_{:,i}`` as float64 (never modified: operators may cache it)."""
        self.columns_fetched += 1
        return np.asarray(self.Q.columns(np.array([i]))[:, 0], dtype=np.float64)

    def _init_cvm(self, rng):
        """α₀ = ½(e_a + e_b), b the point farthest from a (math.md §2.6)."""
        a = cvm_first_point(self.n, rng)
        col_a = self._column(a)
        b = cvm_second_point(self.diag, col_a, a, self.negative_tol)
        if b is None:
            self.beta[a] = 1.0
            self.u[:] = col_a
            self.active.add(a)
        else:
            col_b = self._column(b)
            self.beta[[a, b]] = 0.5
            np.add(col_a, col_b, out=self.u)
            self.u *= 0.5
            self.active.add(a)
            self.active.add(b)
        self._refresh()

    def _init_warm(self, alpha0):
        """α₀ given: v = Qα₀ by one product with a stored Gram when α₀ has many nonzeros,
        else from the columns of its support, in blocks."""
        self.beta[:] = alpha0
        support = np.flatnonzero(alpha0)
        if _stored_gram(self.Q) and support.size * _WARM_PRODUCT_SHARE >= self.n:
            self.u += self.Q.matmat(alpha0)
            support_blocks = ()
        else:
            support_blocks = range(0, support.size, _WARM_BLOCK)
        for start in support_blocks:
            block = support[start : start + _WARM_BLOCK]
            self.u += self.Q.columns(block) @ alpha0[block]
            self.columns_fetched += block.size
        self.active.extend(support)  # a fresh iterate: the active set is empty
        self._refresh()

    def _refresh(self):
        """Recompute ``qᵀα`` and ``αᵀv`` exactly; renormalize ``s`` if extreme."""
        if not 1.0 / self._SCALE_LIMIT < self.scale < self._SCALE_LIMIT:
            self.beta *= self.scale
            self.u *= self.scale
            self.scale = 1.0
        idx = self.active.indices()
        b = self.beta[idx]
        s = self.scale
        self.ava = s * s * float(b @ self.u[idx])
        self.qa = 0.0 if self.q is None else s * float(b @ self.q[idx])

    # -- current iterate -------------------------------------------------------------
    @property
    def alpha(self):
        """α = s·β, shape (n,) (a new array)."""
        return self.scale * self.beta

    @property
    def v(self):
        """v = Qα = s·u, shape (n,) (a new array)."""
        return self.scale * self.u

    def objective(self):
        """``f(α) = qᵀα − αᵀQα``."""
        return self.qa - self.ava

    # -- FW geometry -----------------------------------------------------------------
    def _score_vector(self):
        """A vector whose argmin is the FW vertex ``argmax g``: ``u`` (q = 0) or ``v − q/2``."""
        if self.q is None:
            return self.u
        np.multiply(self.u, self.scale, out=self.scores)
        self.scores -= self.half_q
        return self.scores

    def _v(self, i):
        """``v_i = (Qα)_i``."""
        return self.scale * self.u[i]

    def _q_at(self, i):
        """``q_i`` (0 when ``q = 0``)."""
        return 0.0 if self.q is None else float(self.q[i])

    def _is_the_vertex(self, i):
        """True when ``α = e_i``: the only support point is ``i``."""
        return self.active.size == 1 and self.beta[i] > 0

    def _grad(self, i):
        """Gradient entry ``g_i = q_i − 2 v_i``."""
        qi = 0.0 if self.q is None else self.q[i]
        return qi - 2.0 * self._v(i)

    def _alpha_grad(self):
        """``αᵀg = qᵀα − 2αᵀv``."""
        return self.qa - 2.0 * self.ava

    def _fw_vertex(self):
        """``i* = argmax_i g_i`` (cached until the next step) and the FW gap ``g_{i*} − αᵀg``."""
        if self._vertex is None:
            i = int(np.argmin(self._score_vector()))
            self._vertex = (i, self._grad(i) - self._alpha_grad())
        return self._vertex

    def _away_vertex(self):
        """``j* = argmin_{α_j>0} g_j`` (the nearest support point of the MEB).

        Uses the score vector of the preceding :meth:`_fw_vertex` call.
        """
        idx = self.active.indices()
        s = self.u if self.q is None else self.scores
        return int(idx[np.argmax(s[idx])])

    def _curvature(self, i):
        """``dᵀQd = Q_ii − 2v_i + αᵀv`` for ``d = ±(e_i − α)``; raises if ``Q`` is not PSD."""
        vi = self._v(i)
        curvature = self.diag[i] - 2.0 * vi + self.ava
        if curvature < -self.negative_tol * max(
            abs(self.diag[i]), 2.0 * abs(vi), abs(self.ava), 1e-300
        ):
            raise_not_psd(curvature, i)
        return curvature

    # -- FWIterate protocol ---------------------------------------------------------
    def certificate(self):
        i, gap = self._fw_vertex()
        self._curvature(i)  # O(1): a gap on a non-concave f (dᵀQd < 0) certifies nothing
        extra = {"coreset": self.active.size, "away_steps": self.n_away, "drop_steps": self.n_drop}
        if self._is_the_vertex(i):  # α = e_{i*}: the gap is exactly 0
            rounding = 0.0
        else:
            rounding = simplex_rounding(
                self.n + self.steps, self._q_at(i), self._v(i), self.qa, self.ava
            )
        return simplex_certificate(
            self.objective(), gap, self.stop, self.ball_shift, extra, rounding
        )

    def work_done(self, t):
        """Iterations taken (a :meth:`step` call takes a run of them)."""
        return self.steps

    def _init_runs(self):
        """One iteration per :meth:`step`, no early end (until :meth:`configure_runs`)."""
        self._run_length, self._max_steps = 1, math.inf
        self._estimate = (0.0, -math.inf, False)

    def configure_runs(self, tol, length, max_steps):
        """Let each :meth:`step` take a run of up to ``length`` iterations (at most
        ``max_steps`` in all), ending early at the first iteration whose O(1) estimate
        of the stopping rule with ``tol`` holds
        (:meth:`~kernfw.fw.stopping.StoppingRule.estimate`: the gap of
        the cached FW vertex): the driver certifies after each run, so a run replaces
        ``length`` single steps with ``check_every = length`` without stepping past the
        first point that may pass the test.  By default a step is one iteration."""
        self._run_length, self._max_steps = max(int(length), 1), int(max_steps)
        self._estimate = self.stopping_rule(tol).estimate(self.ball_shift)

    def _next_run_length(self):
        """The run ends at ``max_steps`` and at the next refresh of the scalars."""
        return int(
            max(
                1,
                min(
                    self._run_length,
                    self._max_steps - self.steps,
                    REFRESH_EVERY - self.steps % REFRESH_EVERY,
                ),
            )
        )

    def _stop_estimate_met(self):
        """The test of :meth:`~kernfw.fw.stopping.StoppingRule.estimate`
        at the cached FW vertex."""
        a, b, absolute = self._estimate
        value = self.objective()
        if absolute:
            value = abs(value)
        return max(self._fw_vertex()[1], 0.0) <= a * value + b

    def step(self, t):
        gamma = 0.0
        for _ in range(self._next_run_length()):
            gamma = self._single_step()
            if self.steps % REFRESH_EVERY == 0:
                self._refresh()
            if gamma <= 0.0 or self._stop_estimate_met():
                break
        return gamma

    def _single_step(self):
        """One FW or away step; returns its size (0: no progress)."""
        i, fw_slope = self._fw_vertex()
        self._vertex = None
        self.steps += 1
        gamma = None
        if self.away and self.active.size > 1:
            j = self._away_vertex()
            away_slope = self._alpha_grad() - self._grad(j)
            if away_slope > fw_slope:
                gamma = self._away_step(j, away_slope)
        if gamma is None:
            gamma = self._fw_step(i, fw_slope)
        return gamma

    def _fw_step(self, i, slope):
        """α ← (1−γ)α + γe_i, v ← (1−γ)v + γQ_{:,i} with the exact step."""
        curvature = self._curvature(i)
        gamma = quadratic_step(slope, 2.0 * curvature, 1.0)
        if gamma <= 0.0:
            return 0.0
        col = self._column(i)
        vi, ava = self._v(i), self.ava
        self.ava = (1 - gamma) ** 2 * ava + 2 * gamma * (1 - gamma) * vi + gamma**2 * self.diag[i]
        if self.q is not None:
            self.qa = (1 - gamma) * self.qa + gamma * self.q[i]
        self.n_fw += 1
        if gamma >= 1.0:
            self.beta[self.active.indices()] = 0.0
            self.beta[i] = 1.0
            self.u[:] = col
            self.scale = 1.0
            self.active.reset([i])
            return 1.0
        self.scale *= 1.0 - gamma
        step = gamma / self.scale
        self.beta[i] += step
        daxpy(col, self.u, a=step)
        self.active.add(i)
        return gamma

    def _away_step(self, j, slope):
        """α ← (1+γ)α − γe_j, v ← (1+γ)v − γQ_{:,j}; a drop step at γ = γ_max."""
        gamma_max = away_step_max(self.scale * self.beta[j])
        gamma = quadratic_step(slope, 2.0 * self._curvature(j), gamma_max)
        if gamma <= 0.0 or not math.isfinite(gamma):
            return 0.0
        col = self._column(j)
        vj, ava = self._v(j), self.ava
        self.ava = (1 + gamma) ** 2 * ava - 2 * gamma * (1 + gamma) * vj + gamma**2 * self.diag[j]
        if self.q is not None:
            self.qa = (1 + gamma) * self.qa - gamma * self.q[j]
        self.scale *= 1.0 + gamma
        step = gamma / self.scale
        self.beta[j] -= step
        daxpy(col, self.u, a=-step)
        self.n_away += 1
        if gamma >= gamma_max:
            self.beta[j] = 0.0
            self.active.remove(j)
            self.n_drop += 1
        return gamma

    def solution(self):
        support = np.sort(self.active.indices())
        return {"alpha": self.alpha, "v": self.v, "support": support}


def _stored_gram(Q):
    """Whether ``Q``'s values are read from a stored Gram (its column view is "gram", or
    the L2-SVM transform of one): then ``Q.matmat`` reads ``K`` once, at no kernel
    evaluation."""
    view = Q.column_view()
    if view is not None and view.kind == "l2svm":
        view = view.matrix
    return view is not None and view.kind == "gram"
