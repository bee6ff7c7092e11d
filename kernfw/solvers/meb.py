"""Minimum enclosing ball and L2-SVM by Frank-Wolfe and away-step MFW (math.md §2).

Both problems are one concave quadratic over the unit simplex Δₙ (math.md §2.3)::

    maximize  f(α) = qᵀα − αᵀQα   subject to  α ≥ 0, 1ᵀα = 1.

- **MEB** of points ``z_i`` with Gram matrix ``Q``: ``q = diag(Q)``; ``f(α)`` is
  the squared radius ``r²`` of the ball centred at ``c = Σ α_i z_i``.
- **L2-SVM** (the CVM form, §2.1): ``Q = K̃`` with the modified kernel
  ``K̃_ij = y_i y_j (K_ij + 1) + δ_ij / C`` and ``q = 0``; :class:`L2SVMKernel`
  is that operator (nothing ``n × n`` is formed).

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

import functools
import math
import numbers

import numpy as np
from scipy.linalg.blas import daxpy
from threadpoolctl import ThreadpoolController

from .._compiled import compiled_module
from ..fw import FWIterate, away_step_max, quadratic_step, run
from ..operators.base import KernelOperator
from ..operators.l2svm import L2SVMKernel
from .cvm import (
    NEGATIVE_CURVATURE,
    CoreVectorIterate,
    ball_shift,
    cvm_first_point,
    cvm_second_point,
    raise_not_psd,
    simplex_certificate,
    simplex_converged,
    simplex_stop_estimate,
    simplex_stopping_rule,
)

__all__ = ["solve_simplex_qp", "l2svm", "L2SVMKernel", "SimplexQPIterate", "METHODS", "STOPS"]

#: solver variants: plain Frank-Wolfe, modified (away-step) Frank-Wolfe, and the core
#: vector machine baseline (core-set iterations, :mod:`kernfw.solvers.cvm`)
METHODS = ("fw", "mfw", "cvm")
#: stopping rules (math.md §2.5)
STOPS = ("gap", "relative", "radius")

#: recompute the maintained scalars qᵀα, αᵀv exactly every this many iterations
_REFRESH_EVERY = 512
#: columns fetched per block when a warm start rebuilds v = Qα
_WARM_BLOCK = 256
#: MB of the compiled column cache when the columns are read from a stored Gram
_GRAM_COLUMN_CACHE_MB = 0.0


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return float(value)


def _check_choice(name, value, options):
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def _check_operator(Q):
    if not isinstance(Q, KernelOperator):
        raise TypeError(f"Q must be a KernelOperator, got {type(Q).__name__}")
    return Q


def _check_alpha0(alpha0, n):
    """A warm start on the simplex: shape (n,), α ≥ 0, 1ᵀα = 1 (renormalized)."""
    alpha = np.array(alpha0, dtype=np.float64).ravel()
    if alpha.shape != (n,):
        raise ValueError(f"alpha0 must have shape ({n},), got {np.shape(alpha0)}")
    if not np.all(np.isfinite(alpha)) or np.any(alpha < 0):
        raise ValueError("alpha0 must be finite and nonnegative")
    total = alpha.sum()
    if not total > 0 or abs(total - 1.0) > 1e-6:
        raise ValueError(f"alpha0 must lie on the unit simplex (sum 1), its sum is {total:.6g}")
    return alpha / total


class _ActiveSet:
    """The indices ``{i : α_i > 0}`` with O(1) insertion and removal.

    ``items[:size]`` holds the members in arbitrary order; ``where[i]`` is the
    position of ``i`` in ``items`` (−1 if absent).
    """

    def __init__(self, n):
        self.items = np.empty(n, dtype=np.intp)
        self.where = np.full(n, -1, dtype=np.intp)
        self.size = 0

    def indices(self):
        """The members (a view; arbitrary order)."""
        return self.items[: self.size]

    def add(self, i):
        if self.where[i] < 0:
            self.items[self.size] = i
            self.where[i] = self.size
            self.size += 1

    def remove(self, i):
        pos = self.where[i]
        if pos >= 0:
            last = self.items[self.size - 1]
            self.items[pos] = last
            self.where[last] = pos
            self.where[i] = -1
            self.size -= 1

    def reset(self, members):
        self.where[self.indices()] = -1
        self.size = 0
        for i in members:
            self.add(int(i))


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
    method : {"fw", "mfw"}
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

    def __init__(self, Q, q, method, alpha0, stop, rng):
        self.Q = Q
        n = self.n = Q.n
        self.away = method == "mfw"
        self.stop = stop
        self.diag = np.asarray(Q.diag(), dtype=np.float64)
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
        return _ActiveSet(n)

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
        b = cvm_second_point(self.diag, col_a, a)
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
        """α₀ given: v = Qα₀ from the columns of its support, in blocks."""
        self.beta[:] = alpha0
        support = np.flatnonzero(alpha0)
        for start in range(0, support.size, _WARM_BLOCK):
            block = support[start : start + _WARM_BLOCK]
            self.u += self.Q.columns(block) @ alpha0[block]
            self.columns_fetched += block.size
        for i in support.tolist():
            self.active.add(i)
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
        if curvature < -NEGATIVE_CURVATURE * max(
            abs(self.diag[i]), 2.0 * abs(vi), abs(self.ava), 1e-300
        ):
            raise_not_psd(curvature, i)
        return curvature

    # -- FWIterate protocol ---------------------------------------------------------
    def certificate(self):
        i, gap = self._fw_vertex()
        self._curvature(i)  # O(1): a gap on a non-concave f (dᵀQd < 0) certifies nothing
        extra = {"coreset": self.active.size, "away_steps": self.n_away, "drop_steps": self.n_drop}
        return simplex_certificate(self.objective(), gap, self.stop, self.ball_shift, extra)

    def is_converged(self, cert, tol):
        return simplex_converged(cert, tol, self.stop)

    def stopping_rule(self, tol):
        return simplex_stopping_rule(tol, self.stop)

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
        of the stopping rule with ``tol`` holds (:func:`simplex_stop_estimate`: the
        gap of the cached FW vertex): the driver certifies after each run, so a run
        replaces ``length`` single steps with ``check_every = length`` without
        stepping past the first point that may pass the test.  By default a step is
        one iteration."""
        self._run_length, self._max_steps = max(int(length), 1), int(max_steps)
        self._estimate = simplex_stop_estimate(tol, self.stop, self.ball_shift)

    def _next_run_length(self):
        """The run ends at ``max_steps`` and at the next refresh of the scalars."""
        return int(
            max(
                1,
                min(
                    self._run_length,
                    self._max_steps - self.steps,
                    _REFRESH_EVERY - self.steps % _REFRESH_EVERY,
                ),
            )
        )

    def _stop_estimate_met(self):
        """:func:`simplex_stop_estimate`'s test at the cached FW vertex."""
        a, b, absolute = self._estimate
        value = self.objective()
        if absolute:
            value = abs(value)
        return max(self._fw_vertex()[1], 0.0) <= a * value + b

    def step(self, t):
        gamma = 0.0
        for _ in range(self._next_run_length()):
            gamma = self._single_step()
            if self.steps % _REFRESH_EVERY == 0:
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


class _SharedActiveSet(_ActiveSet):
    """:class:`_ActiveSet` whose arrays are the rows of ``ind`` and whose size is ``st[0]``
    (the compiled state)."""

    def __init__(self, n, st):
        self._st = st
        self.ind = np.empty((2, n), dtype=np.intp)
        self.items, self.where = self.ind[0], self.ind[1]
        self.where[:] = -1
        self.size = 0

    @property
    def size(self):
        return int(self._st[0])

    @size.setter
    def size(self, value):
        self._st[0] = value


def _state_property(array_name, pos, kind):
    """An attribute stored in slot ``pos`` of the compiled state array ``array_name``."""

    def get(self):
        return kind(getattr(self, array_name)[pos])

    def set(self, value):
        getattr(self, array_name)[pos] = value

    return property(get, set)


class CompiledSimplexQPIterate(SimplexQPIterate):
    """:class:`SimplexQPIterate` whose steps run in :mod:`kernfw.solvers._mfw_numba`.

    Same state, same formulas, same setup (CVM start, warm start, refresh); the
    scalars and counters live in two small arrays (``f``, ``st``) shared with the
    compiled :func:`~kernfw.solvers._mfw_numba.plan` and
    :func:`~kernfw.solvers._mfw_numba.apply`.  Each iteration is one compiled
    plan, one column request to the operator ``Q`` (the only source of kernel
    values, with its own LRU cache) and one compiled update that also finds the
    next FW vertex, so the certificate stays O(1).  When ``Q.column_view()`` is an
    on-the-fly RBF kernel or a stored Gram (possibly inside the L2-SVM's modified
    kernel), the whole iteration is one compiled call,
    :func:`~kernfw.solvers._mfw_numba.step_cached`, which evaluates the column from
    the view's arrays into its own LRU cache (``cache_size`` of the view) and
    updates from it in place.

    Parameters
    ----------
    module : module
        :mod:`kernfw.solvers._mfw_numba` (from :func:`kernfw._compiled.compiled_module`).
    *args
        As :class:`SimplexQPIterate`.
    """

    scale = _state_property("_f", 0, float)
    qa = _state_property("_f", 1, float)
    ava = _state_property("_f", 2, float)
    n_fw = _state_property("_st", 5, int)
    n_away = _state_property("_st", 6, int)
    n_drop = _state_property("_st", 7, int)

    def __init__(self, module, Q, q, method, alpha0, stop, rng):
        self._mod = module
        self._f = np.zeros(16)
        self._st = np.zeros(16, dtype=np.int64)
        self._scores_fresh = False
        super().__init__(Q, q, method, alpha0, stop, rng)
        n, has_q = self.n, self.q is not None
        # β, u, scores, scratch as rows of one array (views: the numpy methods update them
        # in place)
        self._vec = np.zeros((4, n))
        self._vec[0], self._vec[1] = self.beta, self.u
        self.beta, self.u, self.scores = self._vec[0], self._vec[1], self._vec[2]
        self._con = np.zeros((5, n))
        self._con[0] = self.diag
        if has_q:
            self._con[1], self._con[2] = self.q, self.half_q
        # a constant q (the MEB of an RBF kernel): argmin(s·u − q/2) = argmin(u), as s > 0
        self._argmin_u = not has_q or bool(np.all(self.half_q == self.half_q[0]))
        self._st[8:11] = has_q, self.away, not self._argmin_u
        self._f[7] = NEGATIVE_CURVATURE
        self._source = self._column_source(Q.column_view())

    def _column_source(self, view):
        """The arguments ``(src, slab, slot_of, slots)`` of the compiled
        :func:`~kernfw.solvers._mfw_numba.step_cached` when the compiled step can evaluate
        the columns of ``Q`` from its column view (:meth:`KernelOperator.column_view`:
        "rbf", "gram", or either inside "l2svm"), else None (columns from ``Q.columns``).

        The column cache holds ``m = cache_size / (itemsize · n)`` whole columns (at
        least one) of ``Q`` itself (the L2-SVM transform included), in the view's
        dtype: a float32 view (an operator that keeps float32 kernel values) is
        evaluated and cached in float32.  The slab is allocated once, its pages
        touched as columns arrive."""
        inner = view.matrix if view is not None and view.kind == "l2svm" else view
        if inner is None or inner.kind not in ("rbf", "gram"):
            return None
        matrix = inner.matrix
        if (
            type(matrix) is not np.ndarray
            or matrix.dtype not in (np.float32, np.float64)
            or matrix.ndim != 2
            or matrix.shape[0] != self.n
            or matrix.shape[1] == 0
        ):
            return None
        # a Gram in either memory order (a Fortran-ordered one, e.g. a sum of column
        # blocks, has contiguous columns); features in C order
        if not (matrix.flags.c_contiguous or (inner.kind == "gram" and matrix.flags.f_contiguous)):
            return None
        single = matrix.dtype == np.float32
        if inner.kind == "rbf":
            src = np.ascontiguousarray(matrix.T)  # d × n: inner products by rows
            if not single:
                self._con[3] = inner.params["sq_norms"]
            self._f[8] = inner.params["gamma"]
            self._st[11] = self._mod.SOURCE_RBF32 if single else self._mod.SOURCE_RBF
            budget = float(inner.params["cache_size"])
        else:
            # column j of an exactly symmetric C-ordered Gram is its row j: read it there
            # (Kᵀ, an F-ordered view, has that row as its contiguous column j)
            known = bool((inner.params or {}).get("symmetric"))
            symmetric = matrix.flags.c_contiguous and (known or self._mod.is_symmetric(matrix))
            src = matrix.T if symmetric else matrix
            self._st[11] = self._mod.SOURCE_GRAM
            budget = _GRAM_COLUMN_CACHE_MB
        if view.kind == "l2svm":
            self._con[4] = view.params["y"]
            self._f[9], self._f[10] = 1.0 / view.params["C"], 1.0
        rows = int(min(self.n, max(1, budget * 2**20 // (matrix.itemsize * self.n))))
        slab = np.empty((rows, self.n), dtype=matrix.dtype)
        slot_of = np.full(self.n, -1, dtype=np.int64)
        slots = np.zeros((2, rows), dtype=np.int64)
        return src, slab, slot_of, slots

    @property
    def column_cache_info(self):
        """Dict of ``hits`` and ``misses`` of the compiled column cache (zeros when the
        columns come from ``Q.columns``)."""
        return {"hits": int(self._st[14]), "misses": int(self._st[15])}

    def _new_active_set(self, n):
        return _SharedActiveSet(n, self._st)

    def _refresh(self):
        super()._refresh()
        self._st[2] = 0  # the cached FW vertex is recomputed from the refreshed state
        self._scores_fresh = False

    def _vertex_index(self):
        """``i* = argmin`` of the scores (``u`` when ``q`` is constant)."""
        if self._argmin_u:
            return int(self.u.argmin())
        if not self._scores_fresh:
            self._score_vector()
        return int(self.scores.argmin())

    def _fw_vertex(self):
        st = self._st
        if st[2] == 0:
            i = self._vertex_index()
            st[1], st[2] = i, 1
            self._f[3] = self._grad(i) - self._alpha_grad()
        return int(st[1]), float(self._f[3])

    def configure_runs(self, tol, length, max_steps):
        super().configure_runs(tol, length, max_steps)
        a, b, absolute = self._estimate
        self._f[12:15] = a, b, float(absolute)

    def step(self, t):
        if self._source is None:
            return super().step(t)
        mod, f, st = self._mod, self._f, self._st
        if st[2] == 0:
            self._fw_vertex()  # after a refresh; every compiled step caches the next
        fetched = st[5] + st[6]
        # the whole run is one compiled call: vertex, plan, column, update, estimate
        self.steps += mod.run_cached(
            self._next_run_length(), self._vec, self.active.ind, self._con, f, st, *self._source
        )
        self.columns_fetched += int(st[5] + st[6] - fetched)
        self._scores_fresh = True
        if st[3] == mod.KIND_NEGATIVE:
            raise_not_psd(float(f[6]), int(st[4]))
        if self.steps % _REFRESH_EVERY == 0:
            self._refresh()
        return 0.0 if st[3] == mod.KIND_NONE else float(f[4])

    def _single_step(self):
        """Plan, the column from the operator (``Q.columns``), update: the compiled
        step for operators without a column view."""
        mod, f, st = self._mod, self._f, self._st
        self.steps += 1
        self._fw_vertex()
        kind = mod.plan(self._vec, self.active.ind, self._con, f, st)
        if kind == mod.KIND_NEGATIVE:
            raise_not_psd(float(f[6]), int(st[4]))
        if kind == mod.KIND_NONE:
            return 0.0
        col = self.Q.columns(np.array([st[4]], dtype=np.intp))[:, 0]
        if col.dtype != np.float64 or not col.flags.c_contiguous:
            col = np.ascontiguousarray(col, dtype=np.float64)
        self.columns_fetched += 1
        self._scores_fresh = True
        return mod.apply(col, self._vec, self.active.ind, self._con, f, st)


def _core_qp(Q_core, q_core, alpha0, tol):
    """The core QP of a CVM iteration: MFW to the absolute FW gap ``tol``, warm-started.

    Runs inside the outer :func:`solve_simplex_qp` (single-threaded BLAS already; the
    inputs are the solver's own), so it skips the validation and the thread limit."""
    iterate = make_iterate(Q_core, q_core, "mfw", alpha0, "gap", None)
    return drive(iterate, tol, _default_max_iter(Q_core.n), name="MFW (CVM core QP)")


def drive(iterate, tol, max_iter, check_every=None, **options):
    """:func:`kernfw.fw.run` on a simplex-QP iterate: FW / MFW take runs of ``check_every``
    iterations per step (None: the default, 100; :meth:`SimplexQPIterate.configure_runs`),
    certified after each; other iterates are certified every ``check_every`` steps."""
    if check_every is None:
        check_every = _default_check_every(iterate.n)
    if isinstance(iterate, SimplexQPIterate):
        iterate.configure_runs(tol, check_every, max_iter)
        check_every = 1
    return run(iterate, tol=tol, max_iter=max_iter, check_every=check_every, **options)


def make_iterate(Q, q, method, alpha0, stop, rng, tol=None):
    """The iterate of ``method``: CVM core-set iterations, or FW / MFW — compiled when
    :func:`kernfw._compiled.compiled_module` allows it, else numpy."""
    if method == "cvm":
        return CoreVectorIterate(Q, q, stop, rng, tol, _core_qp, alpha0=alpha0)
    module = compiled_module("kernfw.solvers._mfw_numba")
    if module is None:
        return SimplexQPIterate(Q, q, method, alpha0, stop, rng)
    return CompiledSimplexQPIterate(module, Q, q, method, alpha0, stop, rng)


@functools.lru_cache(maxsize=1)
def _blas_controller():
    """The process's BLAS thread pools, found once: finding them reads the process's
    memory map, which costs milliseconds per fit otherwise."""
    return ThreadpoolController()


def _default_max_iter(n):
    return max(100_000, 20 * n)


def _default_check_every(n):
    """Certify every 100 iterations at most: a certificate is O(1), but the loop's
    history row and its copy of the best iterate are O(n).  A run of steps ends
    early where the certificate may pass (:meth:`SimplexQPIterate.configure_runs`),
    so a long run does not step past the tolerance."""
    return 100


def solve_simplex_qp(
    Q,
    q=None,
    method="mfw",
    tol=1e-6,
    max_iter=None,
    alpha0=None,
    stop="gap",
    random_state=None,
    callback=None,
    max_time=None,
    check_every=None,
):
    """Maximize ``f(α) = qᵀα − αᵀQα`` over the unit simplex by FW or MFW (math.md §2.3).

    Parameters
    ----------
    Q : KernelOperator
        The PSD matrix ``Q`` (for the MEB the Gram matrix ``K``; for the L2-SVM
        :class:`L2SVMKernel`).  The solver uses only ``Q.diag()`` and
        ``Q.columns(idx)`` (one column per iteration, two at the start); a warm
        start fetches the columns of its support once.
    q : array-like of shape (n,) or None
        Linear term ``q`` (None means 0; the MEB uses ``q = diag(Q)``).
    method : {"mfw", "fw", "cvm"}
        "mfw": Frank-Wolfe with away steps and drop steps (linear
        convergence); "fw": plain Frank-Wolfe toward ``i* = argmax g``.
        Both use the exact line search and run compiled (numba) when
        :func:`kernfw._compiled.compiled_module` allows it, with the same
        iterates as the numpy path.  "cvm": the core vector machine baseline
        (:class:`~kernfw.solvers.cvm.CoreVectorIterate`): each iteration adds
        the FW vertex to the core set and re-solves the QP on the core set by
        MFW; an iteration is then a core-set iteration.
    tol : float > 0
        Tolerance of the stopping rule ``stop``.
    max_iter : int or None
        Iteration budget (None: ``max(100000, 20 n)``).
    alpha0 : array-like of shape (n,) or None
        Warm start on the simplex (e.g. the previous solution when only the
        kernel changed).  None: CVM initialization ``α₀ = ½(e_a + e_b)`` with
        ``b`` the point farthest from ``a`` (math.md §2.6).
    stop : {"gap", "relative", "radius"}
        "gap": FW duality gap ``g_{i*} − αᵀg ≤ tol``; "relative": gap
        ``≤ tol·|f(α)|`` (for the L2-SVM: ``gap/(αᵀQα) ≤ tol``); "radius": the
        (1+ε)-approximate ball of CVM, ``δ = gap/r² ≤ (1+tol)² − 1`` with
        ``r² = f(α) + c`` — requires ``diag(Q) − q = c·1`` constant.
    random_state : int, numpy.random.Generator or None
        None starts the CVM initialization at point 0; otherwise at a random point.
    callback : callable or None
        ``callback(row) -> bool`` after each certificate (see :func:`kernfw.fw.run`).
    max_time : float or None
        Wall-clock budget in seconds.
    check_every : int or None
        Certify at least every ``check_every`` iterations (None: 100; CVM: 1).
        FW and MFW take runs of ``check_every`` iterations that end early at the
        first iteration whose O(1) gap estimate meets the stopping rule, so a
        run never steps past the tolerance; the certificate after each run (with
        its history row and the copy of the best iterate, both O(n)) decides.

    Returns
    -------
    FWResult
        ``solution`` holds ``alpha`` (α, shape (n,)), ``v`` (Qα), ``support``
        (sorted indices with ``α_i > 0``: the coreset).  ``dual`` is ``f(α)``,
        ``gap`` the FW gap, ``primal = dual + gap`` (for the MEB the exact
        primal ``max_i ‖z_i − c‖²`` of the current centre).  The history has
        columns ``coreset``, ``away_steps``, ``drop_steps`` (and ``radius2``,
        ``delta`` for ``stop="radius"``).

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw.operators import Gram
    >>> Z = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.5]])
    >>> op = Gram(Z @ Z.T)
    >>> res = solve_simplex_qp(op, q=op.diag(), tol=1e-10)
    >>> round(res.dual, 6)      # r² of the smallest ball: radius 1 around (1, 0)
    1.0
    """
    Q = _check_operator(Q)
    n = Q.n
    if n < 1:
        raise ValueError("the problem needs at least one point")
    _check_choice("method", method, METHODS)
    _check_choice("stop", stop, STOPS)
    tol = _check_positive("tol", tol)
    if q is not None:
        q = np.asarray(q, dtype=np.float64).ravel()
        if q.shape != (n,) or not np.all(np.isfinite(q)):
            raise ValueError(f"q must be a finite array of shape ({n},), got shape {q.shape}")
    if max_iter is None:
        max_iter = _default_max_iter(n)
    elif isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 0:
        raise ValueError(f"max_iter must be a nonnegative integer or None, got {max_iter!r}")
    if max_time is not None:
        max_time = _check_positive("max_time", max_time)
    if check_every is None:
        check_every = 1 if method == "cvm" else _default_check_every(n)
    rng = None if random_state is None else np.random.default_rng(random_state)
    alpha0 = None if alpha0 is None else _check_alpha0(alpha0, n)
    # one column per iteration is memory-bound O(n d) work: BLAS threads only
    # contend (and libsvm, the usual peer, is single-threaded as well)
    with _blas_controller().limit(limits=1, user_api="blas"):
        iterate = make_iterate(Q, q, method, alpha0, stop, rng, tol)
        return drive(
            iterate,
            tol,
            int(max_iter),
            check_every,
            max_time=max_time,
            callback=callback,
            remedy="increase max_iter or tol (or use method='mfw')",
            name=f"{method.upper()} (simplex QP)",
        )


# -- L2-SVM ------------------------------------------------------------------------
def l2svm(
    op,
    y,
    C,
    method="mfw",
    tol=1e-6,
    max_iter=None,
    alpha0=None,
    random_state=None,
    callback=None,
    stop="gap",
    max_time=None,
    check_every=None,
):
    """Train the binary L2-SVM of CVM (math.md §2.1) as a quadratic over the simplex.

    Solves ``max_{α∈Δₙ} −αᵀK̃α`` with ``K̃ = L2SVMKernel(op, y, C)`` by
    :func:`solve_simplex_qp` (``q = 0``), and recovers the primal solution::

        w = Σ α_i y_i φ(x_i),  b = Σ α_i y_i,  ξ_i = α_i / C,  ρ = αᵀK̃α,
        h(x) = Σ_{i∈S} α_i y_i (k(x_i, x) + 1).

    Parameters
    ----------
    op : KernelOperator
        The kernel ``K`` on the training points (any backend; with
        :class:`~kernfw.operators.KernelFunction` no ``n × n`` matrix is formed).
    y : array-like of shape (n,)
        Labels in {−1, +1}.
    C : float > 0
        Penalty ``C`` of ``C Σ ξ_i²``.
    method, tol, max_iter, random_state, callback, stop, max_time, check_every
        As in :func:`solve_simplex_qp` (``stop="gap"``: FW gap ≤ ``tol``, which
        bounds the primal–dual gap of the L2-SVM; ``stop="relative"``:
        ``gap ≤ tol·ρ``; ``stop="radius"`` needs a constant ``diag(K)``).
    alpha0 : array-like of shape (n,) or None
        Warm start on the simplex, e.g. the previous ``alpha`` when only the
        kernel (weights) changed.

    Returns
    -------
    FWResult
        ``solution`` holds ``alpha`` (n,), ``v`` (``K̃α``; ``v_i = y_i h(x_i) + α_i/C``),
        ``support`` (sorted indices with ``α_i > 0``), ``coef`` (``α_S ⊙ y_S``:
        dual coefficients of ``h`` on the support), ``b`` and ``rho``.
        ``dual = −ρ``; ``primal = dual + gap`` is the primal objective
        ``‖w‖² + b² − 2ρ' + CΣξ²`` at ``(w, b, ξ)`` above with the feasible
        margin ``ρ' = min_i v_i``.
    """
    K_tilde = L2SVMKernel(op, y, C)
    result = solve_simplex_qp(
        K_tilde,
        None,
        method=method,
        tol=tol,
        max_iter=max_iter,
        alpha0=alpha0,
        stop=stop,
        random_state=random_state,
        callback=callback,
        max_time=max_time,
        check_every=check_every,
    )
    result.solution.update(l2svm_recover(result.solution, K_tilde.y))
    return result


def l2svm_recover(solution, y):
    """``b``, ``rho`` and ``coef`` of the L2-SVM from ``alpha``, ``v``, ``support`` (§2.1)."""
    alpha, v, support = solution["alpha"], solution["v"], solution["support"]
    a = alpha[support]
    return {"b": float(a @ y[support]), "rho": float(a @ v[support]), "coef": a * y[support]}
