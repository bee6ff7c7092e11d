"""Data-parallel FW / MFW for the MEB and L2-SVM duals on a Dask cluster (math.md §2).

The iterates are those of :class:`~kernfw.solvers.simplex_qp.SimplexQPIterate` — the
same vertices, exact line searches, drop steps and certificate — with the
vectors ``β``, ``u`` (``α = s·β``, ``v = Qα = s·u``) split by rows over the
shards of a :class:`~kernfw.solvers.simplex_qp.distributed.ShardedRows`, as in the
distributed Frank-Wolfe (dFW) of Bellet et al. (SDM 2015), extended with away
and drop steps.  One round trip per iteration:

1. every shard proposes its local FW vertex ``argmin`` of its scores and its
   away vertex ``argmax`` over its active points, with the scalars ``u_i``,
   ``q_i``, ``Q_ii`` and the point ``x_i`` (d numbers);
2. the driver picks the global ones (ties: the smallest index, as
   ``numpy.argmin`` over all rows), takes the exact line search and the
   certificate from those scalars and the maintained ``s``, ``qᵀα``,
   ``αᵀQα`` (O(1), no communication), and chooses the step;
3. it broadcasts the chosen point and step; each shard computes its slice of
   the column ``Q_{:,j}``, updates its ``β``, ``u``, active set, and answers
   with its next proposals (step 1 of the next iteration).

The exact refresh of ``qᵀα`` and ``αᵀQα`` every few hundred steps gathers two
partial sums per shard in the same round trip.
"""

import numpy as np
import scipy.sparse as sp

from .. import _numba as core
from ..certificate import NEGATIVE_CURVATURE, ball_shift
from ..iterate import SCALE_LIMIT, SimplexQPRuns
from ..solve import SOLVERS, check_max_iter, check_tol, default_max_iter, drive

__all__ = ["ShardedSimplexQPIterate", "solve_sharded_simplex_qp"]


class _Support:
    """``{i: β_i}`` on the active set (the driver's copy)."""

    def __init__(self):
        self.beta = {}

    @property
    def size(self):
        return len(self.beta)


class _Diag:
    """``Q_ii`` of the current candidate vertices, indexable like ``diag(Q)``."""

    def __init__(self, records):
        self.records = records

    def __getitem__(self, i):
        return self.records[i].diag


class ShardedSimplexQPIterate(SimplexQPRuns):
    """The FW / MFW iterate of the simplex QP whose vectors live on Dask workers.

    The driver keeps the scalars of :class:`~kernfw.solvers.simplex_qp.iterate.SimplexQPRuns`
    (``s``, ``qᵀα``, ``αᵀQα``, the counts), the support ``{i: β_i}`` and the current
    candidate vertices; each iteration takes its step from the compiled core's
    :func:`~kernfw.solvers.simplex_qp._numba.choose` and
    :func:`~kernfw.solvers.simplex_qp._numba.move` on those scalars, and the move is sent
    to the shards lazily, in the round trip that brings back the next candidates.

    Parameters
    ----------
    shards : ShardedRows
        The rows, with one problem set up on every shard (see :func:`solve_sharded_simplex_qp`).
    n : int
        Number of points in the problem.
    has_q : bool
        Whether ``q ≠ 0`` (the MEB).
    solver : {"lsfw", "mfw"}
        Plain FW or away-step MFW.
    shift_range : tuple of float
        The least and the largest ``Q_ii − q_i`` (constant for a ball: the radius rule).
    first : int
        The first point of the CVM initialization.
    """

    def __init__(self, shards, n, has_q, solver, shift_range, first):
        self.shards = shards
        self.n = n
        self.has_q = has_q
        self.gap_scale = "radius" if has_q else "dual"
        self._init_state(has_q, solver, NEGATIVE_CURVATURE)
        self._shift_range = shift_range
        self.active = _Support()
        self.records = {}
        self.diag = _Diag(self.records)
        self.round_trips = 0
        self._pending = None
        self._init_cvm(first)

    def _ball_shift(self):
        return ball_shift(np.asarray(self._shift_range, dtype=np.float64), None)

    # -- communication -----------------------------------------------------------------
    def _call(self, method, *args, shards=None):
        self.round_trips += 1
        return self.shards.call(method, *args, shards=shards)

    def _vertex_record(self, j):
        """:class:`~kernfw.solvers.simplex_qp.distributed.Vertex` of point ``j`` from its shard."""
        owner = self.shards.owner(j)
        return self._call("vertex", j, shards=[owner])[0]

    def _init_cvm(self, a):
        """α₀ = ½(e_a + e_b), b the point farthest from a (math.md §2.6)."""
        rec_a = self._vertex_record(a)
        found = [r for r in self._call("farthest", rec_a) if r is not None]
        _, rec_b, col_b = max(found, key=lambda r: (r[0], -r[1].index))
        b = rec_b.index
        if b == a or rec_b.diag - 2.0 * col_b + rec_a.diag <= 0:
            self.active.beta = {a: 1.0}
            rec_b = None
        else:
            self.active.beta = {a: 0.5, b: 0.5}
        self._receive(self._call("start_state", rec_a, rec_b, self.scale), refresh=True)

    def _receive(self, answers, refresh):
        """Combine the shards' proposals (and partial sums); cache the FW vertex."""
        fws = [a[0] for a in answers if a[0] is not None]
        aways = [a[1] for a in answers if a[1] is not None]
        count = sum(a[2] for a in answers)
        if count != self.active.size:
            raise RuntimeError(
                f"the shards report {count} active points but the driver has "
                f"{self.active.size}: the distributed state is inconsistent (was a worker "
                "restarted?); no model is returned"
            )
        self._fw = min(fws, key=lambda r: (r.score, r.index))
        self._away = max(aways, key=lambda r: (r.score, -r.index)) if aways else None
        self.records.clear()
        self.records[self._fw.index] = self._fw
        if self._away is not None:
            self.records.setdefault(self._away.index, self._away)
        if refresh:
            s = self.scale
            self.ava = s * s * sum(a[3][0] for a in answers)
            self.qa = s * sum(a[3][1] for a in answers) if self.has_q else 0.0
        i, st = self._fw.index, self._st
        st["vertex"] = i
        st["gap"] = (self._fw.q - 2.0 * self._v(i)) - (self.qa - 2.0 * self.ava)

    def _flush(self):
        """Send the pending move (and refresh) and receive the next proposals."""
        if self._pending is None:
            return
        move, renorm, refresh = self._pending
        self._pending = None
        self._receive(self._call("step", move, self.scale, renorm, refresh), refresh)

    # -- SimplexQPRuns hooks ---------------------------------------------------------------
    def _v(self, i):
        return self.scale * self.records[i].u

    def _q_at(self, i):
        return float(self.records[i].q) if self.has_q else 0.0

    def _is_the_vertex(self, i):
        return self.active.size == 1 and i in self.active.beta

    def _fw_vertex(self):
        self._flush()
        return self._fw.index, float(self._st["gap"])

    def _refresh(self):
        """Ask for the exact ``qᵀα``, ``αᵀQα`` with the pending move; renormalize ``s``."""
        move, renorm, _ = self._pending or (None, None, False)
        if not 1.0 / SCALE_LIMIT < self.scale < SCALE_LIMIT:
            renorm = self.scale if renorm is None else renorm * self.scale
            for j in self.active.beta:
                self.active.beta[j] *= self.scale
            self.scale = 1.0
        self._pending = (move, renorm, True)

    def _single_step(self):
        """The compiled choice of the step (:func:`~kernfw.solvers.simplex_qp._numba.choose`)
        from the candidates, its scalars (:func:`~kernfw.solvers.simplex_qp._numba.move`)
        and the pending move of the shards."""
        i = self._fw.index
        j, away = -1, (0.0, 0.0, 0.0, 0.0)
        if self._st["away"] and self.active.size > 1:
            rec = self._away
            alpha_j = self.scale * self.active.beta[rec.index]
            j, away = rec.index, (self._v(rec.index), rec.q, rec.diag, alpha_j)
        planned = core.choose(self._state, self._v(i), self.diag[i], j, *away)
        if planned == core.KIND_NONE or planned == core.KIND_NEGATIVE:
            return
        k = int(self._st["index"])
        rec = self.records[k]
        step = core.move(self._state, self._v(k), rec.diag, rec.q)
        beta, st = self.active.beta, self._st
        if st["step_kind"] == core.KIND_FW and st["gamma"] >= 1.0:  # a full FW step: α = e_k
            self.active.beta = {k: 1.0}
            self._pending = (("reset", rec, 1.0), None, False)
            return
        beta[k] = beta.get(k, 0.0) + step
        action = "move"
        if st["step_kind"] == core.KIND_AWAY and st["gamma"] >= st["gamma_max"]:
            del beta[k]  # γ = γ_max: a drop step
            action = "drop"
        self._pending = ((action, rec, step), None, False)

    def certificate(self):
        cert = super().certificate()
        cert.extra["round_trips"] = self.round_trips
        return cert

    # -- current iterate ----------------------------------------------------------------------
    def solution(self):
        """``support`` (sorted global indices), ``alpha_support`` (α on it), ``alpha_Q_alpha``."""
        self._flush()
        support = np.array(sorted(self.active.beta), dtype=np.intp)
        alpha = np.array([self.active.beta[j] for j in support.tolist()]) * self.scale
        return {"support": support, "alpha_support": alpha, "alpha_Q_alpha": self.ava}


def solve_sharded_simplex_qp(
    shards,
    problem,
    solver="mfw",
    tol=1e-6,
    max_iter=None,
    random_state=None,
    callback=None,
    max_time=None,
    check_every=None,
    cache_size=500.0,
):
    """Maximize ``qᵀα − αᵀQα`` over the simplex by FW / MFW on a sharded operator.

    Parameters
    ----------
    shards : ShardedRows
        The training rows on the cluster.
    problem : dict
        ``members`` (class codes taking part, or None), ``positive`` (class
        labelled +1; None for the MEB), ``C`` (L2-SVM) and ``ball`` (True:
        ``Q = K``, ``q = diag(K)``; False: ``Q = K̃``, ``q = 0``).
    solver, tol, max_iter, random_state, callback, max_time, check_every
        As in :func:`kernfw.solvers.simplex_qp.solve_simplex_qp` (``tol`` is relative to
        the squared radius of the ball, to ``ρ`` for the L2-SVM; ``random_state``
        picks the first CVM point among the problem's points).
    cache_size : float
        Column-slice cache per shard (MB).

    Returns
    -------
    FWResult
        ``solution`` holds ``support`` (sorted global row indices with
        ``α_i > 0``), ``alpha_support`` (``α`` on them), ``alpha_Q_alpha``
        (``αᵀQα``) and ``v_support`` (``(Qα)_i`` on the support, computed on
        the shards for the returned ``α``).  The history gains ``round_trips``.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    tol = check_tol(tol)
    setup = shards.call(
        "begin",
        problem.get("members"),
        problem.get("positive"),
        problem.get("C"),
        bool(problem["ball"]),
        float(cache_size),
    )
    try:
        counts = np.array([s[0] for s in setup])
        n = int(counts.sum())
        if n < 1:
            raise ValueError("the problem needs at least one point")
        shift_range = (min(s[1] for s in setup), max(s[2] for s in setup))
        max_iter = check_max_iter(max_iter, default_max_iter(n))
        # the problem's point of rank r (CVM start): rank 0 unless random_state is given
        rank = 0 if random_state is None else int(np.random.default_rng(random_state).integers(n))
        first = _global_index(shards, problem, counts, rank)
        iterate = ShardedSimplexQPIterate(
            shards, n, bool(problem["ball"]), solver, shift_range, first
        )
        budget = {"max_time": max_time, "callback": callback}
        result = drive(
            iterate, tol, max_iter, check_every, solver, "distributed simplex QP", **budget
        )
        sol = result.solution
        sol["v_support"] = _support_products(shards, sol["support"], sol["alpha_support"])
        return result
    finally:
        shards.call("end")


def _global_index(shards, problem, counts, rank):
    """Global row index of the problem's point of rank ``rank``."""
    k = int(np.searchsorted(np.cumsum(counts), rank, side="right"))
    offset = rank - int(counts[:k].sum())
    return int(shards.call("problem_index", offset, shards=[k])[0])


def _support_products(shards, support, alpha):
    """``(Qα)_S`` for ``α`` supported on ``S`` (one call per shard, blocks of rows)."""
    pieces = shards.call("rows", support)
    X_S = _stack([p[1] for p in pieces if p[0].size])
    y_S = np.concatenate(shards.call("labels_of", support))
    answers = shards.call("products", support, X_S, y_S, alpha)
    out = np.empty(support.size)
    for idx, values in answers:
        out[np.searchsorted(support, idx)] = values
    return out


def _stack(blocks):
    return sp.vstack(blocks).tocsr() if sp.issparse(blocks[0]) else np.vstack(blocks)
