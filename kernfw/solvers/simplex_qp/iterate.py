"""Minimum enclosing ball and L2-SVM by Frank-Wolfe and away-step MFW (math.md §2).

Both problems are one concave quadratic over the unit simplex Δₙ (math.md §2.3)::

    maximize  f(α) = qᵀα − αᵀQα   subject to  α ≥ 0, 1ᵀα = 1.

- **MEB** of points ``z_i`` with Gram matrix ``Q``: ``q = diag(Q)``; ``f(α)`` is
  the squared radius ``r²`` of the ball centred at ``c = Σ α_i z_i``.
- **L2-SVM** (the CVM form, §2.1): ``Q = K̃`` with the modified kernel
  ``K̃_ij = y_i y_j (K_ij + 1) + δ_ij / C`` and ``q = 0``;
  :class:`~kernfw.solvers.simplex_qp.L2SVMKernel` is that operator (nothing ``n × n`` is
  formed).

The iterate keeps ``v = Qα`` up to date from **one** kernel column per iteration
(the column of the vertex that moves), so each iteration costs one column plus
O(n) vector work.  Plain FW steps toward the vertex ``i* = argmax_i g_i`` of the
gradient ``g = q − 2v`` (for the MEB: the farthest point); MFW also considers the
away step from ``j* = argmin_{α_j>0} g_j`` (the nearest support point) and takes
whichever has the larger first-order progress.  Both use the exact line search of
a quadratic.  The active set ``{i : α_i > 0}`` is the coreset.  The steps run in
the compiled core :mod:`kernfw.solvers.simplex_qp._numba`; this module holds the
setup (CVM start, warm start, the column source), the certificate and the runs.
"""

import math

import numpy as np

from ...fw import FWIterate
from ...operators.base import SOURCE_GRAM
from . import _numba as core
from .certificate import (
    ball_shift,
    check_curvature,
    negative_curvature_tol,
    raise_not_psd,
    simplex_certificate,
    simplex_rounding,
    simplex_scale,
)
from .start import cvm_first_point, cvm_second_point

__all__ = ["SimplexQPRuns", "SimplexQPIterate", "REFRESH_EVERY"]

#: recompute the maintained scalars qᵀα, αᵀv exactly every this many iterations
REFRESH_EVERY = 512
#: renormalize α = s·β and v = s·u when s leaves [1/SCALE_LIMIT, SCALE_LIMIT]
SCALE_LIMIT = 1e100
#: columns fetched per block when a warm start rebuilds v = Qα
_WARM_BLOCK = 256
#: a warm start with at least n / _WARM_PRODUCT_SHARE nonzeros computes Qα₀ by one
#: product with a stored Gram (reading K once) rather than by copies of its columns
_WARM_PRODUCT_SHARE = 8


def _state_field(name, cast):
    """An attribute stored in the field ``name`` of the compiled state record ``_st``."""

    def get(self):
        return cast(self._st[name])

    def set(self, value):
        self._st[name] = value

    return property(get, set, doc=f"The compiled state's ``{name}``.")


def column_cache(source, n, st, min_rows=1):
    """``(src, slab, slot_of, slots)``: the column source's matrix and a least-recently-used
    cache of ``max(min_rows, cache_mb / (itemsize · n))`` columns (at most ``n``) for the
    compiled :func:`~kernfw.operators._columns_numba.cached_column`; sets the state
    record's ``source`` and ``rbf_gamma``.  The slab is allocated once, its pages touched
    as columns arrive."""
    st["source"], st["rbf_gamma"] = source.code, source.gamma
    itemsize = source.matrix.itemsize
    rows = int(min(n, max(min_rows, source.cache_mb * 2**20 // (itemsize * n))))
    slab = np.empty((rows, n), dtype=source.matrix.dtype)
    slots = np.zeros((2, rows), dtype=np.int64)
    return source.matrix, slab, np.full(n, -1, dtype=np.int64), slots


class SimplexQPRuns(FWIterate):
    """What the FW / MFW iterates of the simplex QP share (math.md §2.3, §2.5).

    The scalars live in one record of dtype :data:`~kernfw.solvers.simplex_qp._numba.STATE`
    (``_state[0]``, reached as ``_st``): ``s`` (``scale``), ``qa = qᵀα``, ``ava = αᵀQα``,
    the cached FW vertex and its gap, the step counts.  A :meth:`step` is a run of
    iterations that ends early where the stopping rule's O(1) estimate holds
    (:meth:`configure_runs`); the certificate is O(1).  A subclass provides
    ``diag`` (indexable), ``_fw_vertex``, ``_v``, ``_q_at``, ``_is_the_vertex``,
    ``_single_step``, ``_refresh`` and ``_ball_shift``.
    """

    scale = _state_field("scale", float)
    qa = _state_field("qa", float)
    ava = _state_field("ava", float)
    n_fw = _state_field("n_fw", int)
    n_away = _state_field("n_away", int)
    n_drop = _state_field("n_drop", int)

    def _init_state(self, has_q, solver, negative_tol):
        """The state record of a fresh iterate; one iteration per :meth:`step` until
        :meth:`configure_runs`."""
        self._state = np.zeros(1, dtype=core.STATE)
        self._st = st = self._state[0]  # a view: the fields read and write the record
        st["scale"], st["has_q"], st["away"] = 1.0, has_q, solver == "mfw"
        st["negative_tol"], st["estimate_b"] = negative_tol, -math.inf
        self.negative_tol = negative_tol
        self.steps = 0
        self._run_length, self._max_steps = 1, math.inf
        self._shift = None  # c of the radius rule (:func:`.certificate.ball_shift`)

    def objective(self):
        """``f(α) = qᵀα − αᵀQα``."""
        return self.qa - self.ava

    def certificate(self):
        i, gap = self._fw_vertex()
        vi, ava = self._v(i), self.ava
        # O(1): a gap on a non-concave f (dᵀQd < 0) certifies nothing
        check_curvature(
            self.diag[i] - 2.0 * vi + ava, i, (self.diag[i], 2 * vi, ava), self.negative_tol
        )
        extra = {"coreset": self.active.size, "away_steps": self.n_away, "drop_steps": self.n_drop}
        rounding = 0.0  # α = e_{i*}: the gap is exactly 0
        if not self._is_the_vertex(i):
            rounding = simplex_rounding(self.n + self.steps, self._q_at(i), vi, self.qa, ava)
        return simplex_certificate(self.objective(), gap, extra, rounding, self._shift)

    def configure_runs(self, tol, length, max_steps):
        """Let each :meth:`step` take a run of up to ``length`` iterations (at most
        ``max_steps`` in all), ending early at the first iteration whose O(1) estimate
        of the stopping rule of ``tol`` holds
        (:meth:`~kernfw.fw.stopping.StoppingRule.estimate`: the gap of the cached FW
        vertex): the driver certifies after each run, so a run replaces ``length``
        single steps without stepping past the first point that may pass the test."""
        rule = self.stopping_rule(tol)
        self._shift = self._ball_shift() if rule.scale == "radius" else None
        a, b, absolute = rule.estimate(self._shift or 0.0)
        st = self._st
        st["estimate_a"], st["estimate_b"], st["estimate_absolute"] = a, b, absolute
        self._run_length, self._max_steps = max(int(length), 1), int(max_steps)

    def work_done(self, t):
        """Iterations taken (a :meth:`step` call takes a run of them)."""
        return self.steps

    def step(self, t):
        self._fw_vertex()  # cached by every step; recomputed after a refresh
        # the run ends at max_steps and at the next refresh of the scalars
        length = min(
            self._run_length,
            self._max_steps - self.steps,
            REFRESH_EVERY - self.steps % REFRESH_EVERY,
        )
        self.steps += self._run(int(max(1, length)))
        if self.steps % REFRESH_EVERY == 0:
            self._refresh()
        st = self._st
        if st["step_kind"] == core.KIND_NEGATIVE:
            raise_not_psd(float(st["curvature"]), int(st["index"]))
        return 0.0 if st["step_kind"] == core.KIND_NONE else float(st["gamma"])

    def _run(self, length):
        """Up to ``length`` iterations of :meth:`_single_step`; returns how many were taken
        (the run ends after a step without progress or where the estimate holds)."""
        for t in range(length):
            self._single_step()
            if self._st["step_kind"] in (core.KIND_NONE, core.KIND_NEGATIVE):
                return t + 1
            self._fw_vertex()  # the next vertex and its gap
            if core.estimate_met(self._state):
                return t + 1
        return length


class _ActiveSet:
    """The active set ``{i : α_i > 0}`` of the compiled core: the rows ``ITEMS`` (members,
    ``[:size]``) and ``WHERE`` (positions, −1: absent) of ``ind``, its size in the state."""

    def __init__(self, ind, st):
        self.ind, self._st = ind, st
        ind[core.WHERE] = -1

    @property
    def size(self):
        return int(self._st["size"])

    def indices(self):
        """The members (a view; arbitrary order)."""
        return self.ind[core.ITEMS, : self.size]

    def reset(self, members):
        """Make the distinct indices ``members`` the active set."""
        items, where = self.ind
        where[self.indices()] = -1
        members = np.asarray(members, dtype=np.intp)
        items[: members.size] = members
        where[members] = np.arange(members.size)
        self._st["size"] = members.size


class SimplexQPIterate(SimplexQPRuns):
    """FW / MFW for ``max_{α∈Δₙ} qᵀα − αᵀQα`` (math.md §2.3), on the compiled core.

    Maintained quantities, updated from one column per step:

    - ``α = s·β`` and ``v = Qα = s·u`` with a common scalar ``s`` (``scale``):
      the FW update ``α ← (1−γ)α + γe_i``, ``v ← (1−γ)v + γQ_{:,i}`` becomes
      ``s ← (1−γ)s``, ``β_i += γ/s``, ``u += (γ/s)Q_{:,i}`` — a single O(n)
      pass (and likewise for away steps), instead of rescaling two n-vectors;
    - the scalars ``qa = qᵀα`` and ``ava = αᵀv = αᵀQα`` (O(1) updates,
      recomputed exactly on the active set every few hundred steps);
    - the active set ``{i : α_i > 0}`` (the coreset);
    - the FW vertex ``i*`` of the next step and its gap.

    When ``Q.column_source()`` is an on-the-fly RBF kernel or a stored Gram (possibly inside
    the L2-SVM's modified kernel), a whole run of iterations is one compiled call,
    :func:`~kernfw.solvers.simplex_qp._numba.run_cached`, which evaluates the columns from
    the source's arrays into its own LRU cache (the source's ``cache_mb``); otherwise each
    iteration is a compiled plan, one ``Q.columns`` request (the operator's own cache) and
    a compiled update.

    Parameters
    ----------
    Q : KernelOperator
        The PSD matrix ``Q``; only ``diag`` and ``columns`` (or the column source) are used.
    q : ndarray of shape (n,) or None
        Linear term (None: zero, as for the L2-SVM).
    solver : {"lsfw", "mfw"}
        Plain FW or away-step MFW.
    alpha0 : ndarray of shape (n,) or None
        Warm start on the simplex; None uses the CVM initialization (§2.6).
    rng : numpy.random.Generator or None
        Picks the first CVM point (None: point 0).
    """

    def __init__(self, Q, q, solver, alpha0, rng):
        self.Q, self.q = Q, q
        n = self.n = Q.n
        self.gap_scale = simplex_scale(q)
        self._init_state(q is not None, solver, negative_curvature_tol(Q))
        self.diag = np.asarray(Q.diag(), dtype=np.float64)
        self._vec = np.zeros((4, n))  # β, u, scores, scratch
        self.beta, self.u = self._vec[core.BETA], self._vec[core.U]
        self._con = np.zeros((6, n))
        self._con[core.DIAG] = self.diag
        if q is not None:
            self._con[core.Q], self._con[core.HALF_Q] = q, 0.5 * q
            # a constant q (the MEB of an RBF kernel): argmin(s·u − q/2) = argmin(u)
            self._st["fill_scores"] = not bool(np.all(q == q[0]))
        self.active = _ActiveSet(np.empty((2, n), dtype=np.intp), self._st)
        self.columns_fetched = 0
        self._source = self._column_source(Q.column_source())
        if alpha0 is None:
            self._init_cvm(rng)
        else:
            self._init_warm(alpha0)

    # -- setup -------------------------------------------------------------------
    def _ball_shift(self):
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
            self.active.reset([a])
        else:
            self.beta[[a, b]] = 0.5
            np.add(col_a, self._column(b), out=self.u)
            self.u *= 0.5
            self.active.reset([a, b])
        self._refresh()

    def _init_warm(self, alpha0):
        """α₀ given: v = Qα₀ by one product with a stored Gram when α₀ has many nonzeros,
        else from the columns of its support, in blocks."""
        self.beta[:] = alpha0
        support = np.flatnonzero(alpha0)
        gram = self._source is not None and self._st["source"] == SOURCE_GRAM
        if gram and support.size * _WARM_PRODUCT_SHARE >= self.n:
            self.u += self.Q.matmat(alpha0)
            support = support[:0]
        for start in range(0, support.size, _WARM_BLOCK):
            block = support[start : start + _WARM_BLOCK]
            self.u += self.Q.columns(block) @ alpha0[block]
            self.columns_fetched += block.size
        self.active.reset(np.flatnonzero(alpha0))
        self._refresh()

    def _column_source(self, source):
        """The arguments ``(src, slab, slot_of, slots)`` of the compiled
        :func:`~kernfw.solvers.simplex_qp._numba.run_cached` when ``Q`` has a
        :class:`~kernfw.operators.base.ColumnSource` (an RBF kernel or a stored Gram, possibly
        inside the L2-SVM's modified kernel), else None (columns from ``Q.columns``).

        The column cache holds ``m = cache_mb / (itemsize · n)`` whole columns (at least
        one) of ``Q`` itself (the L2-SVM transform included), in the source's dtype."""
        if source is None:
            return None
        if source.sq_norms is not None:
            self._con[core.SQ_NORMS, : source.sq_norms.size] = source.sq_norms
        if source.labels is not None:
            self._con[core.LABELS], self._con[core.INV_C] = source.labels, source.inv_c
            self._st["l2svm"] = True
        return column_cache(source, self.n, self._st)

    @property
    def column_cache_info(self):
        """Dict of ``hits`` and ``misses`` of the compiled column cache (zeros when the
        columns come from ``Q.columns``)."""
        return {"hits": int(self._st["hits"]), "misses": int(self._st["misses"])}

    def _refresh(self):
        """Recompute ``qᵀα`` and ``αᵀv`` exactly; renormalize ``s`` if extreme."""
        if not 1.0 / SCALE_LIMIT < self.scale < SCALE_LIMIT:
            self.beta *= self.scale
            self.u *= self.scale
            self.scale = 1.0
        idx = self.active.indices()
        b, s = self.beta[idx], self.scale
        self.ava = s * s * float(b @ self.u[idx])
        self.qa = 0.0 if self.q is None else s * float(b @ self.q[idx])
        self._st["vertex_valid"] = False

    # -- current iterate -------------------------------------------------------------
    @property
    def alpha(self):
        """α = s·β, shape (n,) (a new array)."""
        return self.scale * self.beta

    @property
    def v(self):
        """v = Qα = s·u, shape (n,) (a new array)."""
        return self.scale * self.u

    def _v(self, i):
        return self.scale * self.u[i]

    def _q_at(self, i):
        return 0.0 if self.q is None else float(self.q[i])

    def _is_the_vertex(self, i):
        """True when ``α = e_i``: the only support point is ``i``."""
        return self.active.size == 1 and self.beta[i] > 0

    def _fw_vertex(self):
        """``i* = argmax_i g_i`` (cached until the next step) and the FW gap ``g_{i*} − αᵀg``."""
        if not self._st["vertex_valid"]:
            core.cache_vertex(self._vec, self._con, self._state)
        return int(self._st["vertex"]), float(self._st["gap"])

    def _away_vertex(self):
        """``j* = argmin_{α_j>0} g_j`` (the nearest support point of the MEB)."""
        idx = self.active.indices()
        scores = self.u if self.q is None else self.scale * self.u - 0.5 * self.q
        return int(idx[np.argmax(scores[idx])])

    # -- steps -------------------------------------------------------------------------
    def _run(self, length):
        if self._source is None:
            return super()._run(length)
        st = self._st
        fetched = st["n_fw"] + st["n_away"]
        # the whole run is one compiled call: plan, column, update, vertex, estimate
        taken = core.run_cached(
            length, self._vec, self.active.ind, self._con, self._state, *self._source
        )
        self.columns_fetched += int(st["n_fw"] + st["n_away"] - fetched)
        return taken

    def _single_step(self):
        """Plan, the column from the operator (``Q.columns``), update."""
        planned = core.plan(self._vec, self.active.ind, self._con, self._state)
        if planned == core.KIND_NEGATIVE or planned == core.KIND_NONE:
            return
        col = self.Q.columns(np.array([self._st["index"]], dtype=np.intp))[:, 0]
        if col.dtype != np.float64 or not col.flags.c_contiguous:
            col = np.ascontiguousarray(col, dtype=np.float64)
        self.columns_fetched += 1
        core.apply(col, 0.0, self._vec, self.active.ind, self._con, self._state)

    def solution(self):
        support = np.sort(self.active.indices())
        return {"alpha": self.alpha, "v": self.v, "support": support}
