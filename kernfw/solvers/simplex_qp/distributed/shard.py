"""The sharded operator: training rows split in blocks held by Dask workers.

Each block of rows lives in one :class:`RowShard`, a Dask *actor* created on a
chosen worker: the rows are scattered to that worker once and stay there for
the whole fit, together with the shard's slice of the solver state.  The
driver (:class:`ShardedRows`) never holds a kernel column: it broadcasts the
one point ``x_j`` (``d`` numbers) whose column ``Q_{:,j}`` the step needs, and
every shard computes the slice ``Q_{rows,j}`` of its own rows with
:class:`~kernfw.operators.PairwiseKernel` (:mod:`sklearn.metrics.pairwise`).

Memory per worker: the rows (``n/W · d`` numbers), O(n/W) state vectors and an
LRU cache of column slices bounded by ``cache_size`` MB — never ``n × n``.
"""

import math
import resource
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.linalg.blas import daxpy

from ....operators.pairwise import _sq_norms

__all__ = ["RowShard", "Vertex", "peak_memory_mb"]


class ActiveMask:
    """A shard's active points ``{i : α_i > 0}`` as a mask (the driver keeps their order)."""

    def __init__(self, m):
        self.mask = np.zeros(m, dtype=bool)
        self.size = 0

    def indices(self):
        return np.flatnonzero(self.mask)

    def add(self, i):
        self.size += not self.mask[i]
        self.mask[i] = True

    def remove(self, i):
        self.size -= bool(self.mask[i])
        self.mask[i] = False

    def reset(self, members):
        self.mask[:] = False
        self.mask[members] = True
        self.size = int(self.mask.sum())


class Vertex(NamedTuple):
    """What the driver needs of one point ``i`` to take a step toward or away from it.

    Attributes
    ----------
    score : float
        The shard's selection score (``u_i`` or ``s·u_i − q_i/2``; the FW
        vertex has the smallest, the away vertex the largest).
    index : int
        Global index ``i`` (row of the training set).
    u : float
        ``u_i`` with ``v_i = (Qα)_i = s·u_i``.
    q : float
        Linear term ``q_i`` (0 for the L2-SVM).
    diag : float
        ``Q_ii``.
    x : ndarray or sparse matrix of shape (1, d)
        The point ``x_i`` (broadcast to every shard when the step moves along ``e_i``).
    y : float
        Its label ``y_i`` (±1; 0 for the MEB).
    sq : float
        ``‖x_i‖²`` (for RBF column slices).
    """

    score: float
    index: int
    u: float
    q: float
    diag: float
    x: object
    y: float
    sq: float


def peak_memory_mb():
    """Peak resident memory of this process (MB): ``VmHWM`` of ``/proc/self/status``
    (Linux; unlike ``getrusage``, not inherited from the parent across ``exec``),
    else ``getrusage``'s ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _Problem:
    """One shard's slice of a simplex QP ``max qᵀα − αᵀQα`` (MEB or L2-SVM).

    Rows ``rows`` (local positions) of the shard take part; ``index`` are their
    global indices.  State: ``β`` and ``u`` with ``α = s·β``, ``v = s·u`` (the
    common scale ``s`` lives on the driver), the local active set, and an LRU
    cache of column slices ``Q_{rows,j}`` keyed by the global ``j``.
    """

    def __init__(self, shard, rows, y, C, ball, cache_size):
        self.shard = shard
        X = shard.X
        self.all_rows = rows.size == X.shape[0]
        self.X = X if self.all_rows else X[rows]
        self.sq = shard.sq if self.all_rows or shard.sq is None else shard.sq[rows]
        self.rows = rows
        self.index = shard.start + rows
        self.y = y
        # the diagonal term 1/(C w_i) of the L2-SVM (math.md §2.14)
        self.inv_c = None if C is None else np.full(rows.size, 1.0 / C)
        if self.inv_c is not None and shard.weights is not None:
            self.inv_c /= shard.weights[rows]
        base_diag = np.asarray(shard.kernel.diag(self.X), dtype=np.float64)
        if ball:  # MEB: Q = K, q = diag(K)
            self.diag = base_diag
            self.q = base_diag
            self.half_q = 0.5 * base_diag
        else:  # L2-SVM: Q = K̃, q = 0
            self.diag = base_diag + 1.0 + self.inv_c
            self.q = self.half_q = None
        m = rows.size
        self.beta = np.zeros(m)
        self.u = np.zeros(m)
        self.scores = None if self.q is None else np.empty(m)
        self.active = ActiveMask(m)
        self.max_cached = int(cache_size * 2**20 // max(8 * m, 1))
        self.cache = OrderedDict()

    # -- columns ---------------------------------------------------------------------
    def local(self, j):
        """Local position of the global index ``j`` (−1 if not in this slice)."""
        pos = int(np.searchsorted(self.index, j))
        return pos if pos < self.index.size and self.index[pos] == j else -1

    def column(self, vertex):
        """``Q_{rows,j}`` for the broadcast vertex ``j`` (cached, never modified)."""
        j = vertex.index
        col = self.cache.get(j)
        if col is not None:
            self.cache.move_to_end(j)
            return col
        # k(x_j, X_rows) as KernelFunction computes a column (same operand order)
        k = self.shard.kernel.block(
            vertex.x, self.X, None if self.sq is None else np.array([vertex.sq]), self.sq
        )
        k = np.asarray(k.toarray() if sp.issparse(k) else k, dtype=np.float64)[0]
        if self.y is None:
            col = k
        else:  # K̃_ij = y_i y_j (K_ij + 1) + δ_ij / (C w_i)
            col = np.add(k, 1.0)
            col *= self.y if vertex.y > 0 else -self.y
            pos = self.local(j)
            if pos >= 0:
                col[pos] += self.inv_c[pos]
        if self.max_cached > 0:
            if len(self.cache) >= self.max_cached:
                self.cache.popitem(last=False)
            self.cache[j] = col
        return col

    # -- proposals -------------------------------------------------------------------
    def vertex(self, pos, score):
        """:class:`Vertex` of local position ``pos``."""
        row = self.shard.rows_local(self.rows[pos])
        return Vertex(
            float(score),
            int(self.index[pos]),
            float(self.u[pos]),
            0.0 if self.q is None else float(self.q[pos]),
            float(self.diag[pos]),
            row[0],
            0.0 if self.y is None else float(self.y[pos]),
            row[1],
        )

    def proposals(self, scale):
        """The local FW vertex (smallest score) and away vertex (largest score among
        the active points), as in :class:`~kernfw.solvers.simplex_qp.SimplexQPIterate`."""
        if self.q is None:
            s = self.u
        else:
            np.multiply(self.u, scale, out=self.scores)
            self.scores -= self.half_q
            s = self.scores
        if s.size == 0:
            return None, None
        i = int(np.argmin(s))
        fw = self.vertex(i, s[i])
        away = None
        idx = self.active.indices()
        if idx.size:
            j = int(idx[np.argmax(s[idx])])
            away = self.vertex(j, s[j])
        return fw, away

    def sums(self):
        """Partial sums ``Σ_A β_i u_i`` and ``Σ_A β_i q_i`` over the local active set."""
        idx = self.active.indices()
        b = self.beta[idx]
        return float(b @ self.u[idx]), (0.0 if self.q is None else float(b @ self.q[idx]))


class RowShard:
    """A block of training rows and its slice of the solver state (a Dask actor).

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (m, d)
        The rows ``x_start, …, x_{start+m−1}``.
    start : int
        Global index of the first row.
    kernel : PairwiseKernel
        The kernel ``k``.
    labels : ndarray of shape (m,) or None
        Encoded class labels of the rows (classification), or None.
    weights : ndarray of shape (m,) or None
        Nonnegative weights of the rows (None: all 1); rows of weight 0 take part in no
        problem.
    """

    def __init__(self, X, start, kernel, labels=None, weights=None):
        if isinstance(X, np.ndarray) and not (X.flags.aligned and X.flags.c_contiguous):
            # a block unpickled from a network frame can be unaligned: numpy's
            # matrix products then skip BLAS (several times slower); copy it once
            X = np.require(X, requirements=["A", "C"])
        self.X = X
        self.start = int(start)
        self.kernel = kernel
        self.labels = labels
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        self.sq = _sq_norms(X) if isinstance(X, np.ndarray) and X.dtype == np.float64 else None
        self.problem = None

    def rows_local(self, pos):
        """``(x, ‖x‖²)`` of local row ``pos``; ``x`` of shape (1, d)."""
        x = self.X[pos : pos + 1]
        sq = 0.0 if self.sq is None else float(self.sq[pos])
        return (x.copy() if isinstance(x, np.ndarray) else x), sq

    def rows(self, index):
        """``(global indices, X rows)`` of those of ``index`` held by this shard."""
        index = np.asarray(index, dtype=np.intp)
        mine = index[(index >= self.start) & (index < self.start + self.X.shape[0])]
        return mine, self.X[mine - self.start]

    def status(self):
        """``(rows held, peak resident memory of the worker process in MB)``."""
        return self.X.shape[0], peak_memory_mb()

    # -- a problem -------------------------------------------------------------------
    def begin(self, members, positive, C, ball, cache_size):
        """Set up this shard's slice of one problem.

        Parameters
        ----------
        members : sequence of int or None
            Class codes whose rows take part (None: every row).
        positive : int or None
            Class code labelled +1 (the others −1); None for the MEB.
        C : float or None
            L2-SVM penalty (None for the MEB).
        ball : bool
            MEB (``Q = K``, ``q = diag K``) or L2-SVM (``Q = K̃``, ``q = 0``).
        cache_size : float
            Column-slice cache (MB).

        Returns
        -------
        tuple
            ``(rows in the problem, min and max of diag(Q) − q)``.
        """
        if members is None:
            rows = np.arange(self.X.shape[0])
        else:
            rows = np.flatnonzero(np.isin(self.labels, members))
        if self.weights is not None:  # rows of weight 0 are out (math.md §2.14)
            rows = rows[self.weights[rows] > 0]
        y = None if positive is None else np.where(self.labels[rows] == positive, 1.0, -1.0)
        p = self.problem = _Problem(self, rows, y, C, ball, cache_size)
        if rows.size == 0:
            return 0, math.inf, -math.inf
        shift = p.diag - (0.0 if p.q is None else p.q)
        return rows.size, float(shift.min()), float(shift.max())

    def end(self):
        """Drop the problem's state (the rows stay)."""
        self.problem = None

    def vertex(self, j):
        """:class:`Vertex` of global index ``j`` (None if not held here)."""
        p = self.problem
        pos = p.local(j)
        return None if pos < 0 else p.vertex(pos, 0.0)

    def problem_index(self, rank):
        """Global index of the problem's local point of rank ``rank``."""
        return int(self.problem.index[rank])

    def labels_of(self, index):
        """``y_i`` (±1; 0 for the MEB) of the rows of sorted ``index`` held here."""
        p = self.problem
        index = np.asarray(index, dtype=np.intp)
        local = np.searchsorted(p.index, index[np.isin(index, p.index)])
        return np.zeros(local.size) if p.y is None else p.y[local]

    def farthest(self, a):
        """Column of vertex ``a``; the local ``b = argmax Q_bb − 2 Q_ba`` and ``Q_ba``
        (the CVM initialization, math.md §2.6)."""
        p = self.problem
        if p.index.size == 0:
            return None
        col = p.column(a)
        value = p.diag - 2.0 * col
        b = int(np.argmax(value))
        return float(value[b]), p.vertex(b, value[b]), float(col[b])

    def start_state(self, a, b, scale):
        """``α₀ = e_a`` (``b`` None) or ``½(e_a + e_b)``; returns as :meth:`step`."""
        p = self.problem
        col_a = p.column(a)
        if b is None:
            p.u[:] = col_a
            members = [(a.index, 1.0)]
        else:
            np.add(col_a, p.column(b), out=p.u)
            p.u *= 0.5
            members = [(a.index, 0.5), (b.index, 0.5)]
        for j, weight in members:
            pos = p.local(j)
            if pos >= 0:
                p.beta[pos] = weight
                p.active.add(pos)
        return self._report(scale, True)

    def step(self, move, scale, renorm, refresh):
        """Apply the driver's step and return the next local proposals.

        Parameters
        ----------
        move : tuple or None
            ``("move", vertex, t)``: ``β_j += t``, ``u += t·Q_{:,j}`` (``t < 0``
            for an away step); ``("drop", vertex, t)``: the same, then ``β_j = 0``
            and ``j`` leaves the active set; ``("reset", vertex, 1)``: ``α = e_j``.
            None: no move (a zero step).
        scale : float
            The driver's scale ``s`` after the step (and renormalization).
        renorm : float or None
            Multiply ``β`` and ``u`` by this (the driver reset ``s`` to 1).
        refresh : bool
            Also return the partial sums of :meth:`_Problem.sums`.

        Returns
        -------
        tuple
            ``(FW vertex, away vertex, local active count, sums or None)``.
        """
        p = self.problem
        if move is not None and p.index.size:
            action, vertex, t = move
            col = p.column(vertex)
            pos = p.local(vertex.index)
            if action == "reset":
                p.beta[p.active.indices()] = 0.0
                p.u[:] = col
                p.active.reset([pos] if pos >= 0 else [])
                if pos >= 0:
                    p.beta[pos] = 1.0
            else:
                if pos >= 0:
                    p.beta[pos] += t
                daxpy(col, p.u, a=t)
                if pos >= 0 and action == "drop":
                    p.beta[pos] = 0.0
                    p.active.remove(pos)
                elif pos >= 0:
                    p.active.add(pos)
        if renorm is not None:
            p.beta *= renorm
            p.u *= renorm
        return self._report(scale, refresh)

    def _report(self, scale, refresh):
        p = self.problem
        fw, away = p.proposals(scale)
        return fw, away, p.active.size, (p.sums() if refresh else None)

    def products(self, index, X_S, y_S, weights, block=256):
        """``(Qα)_i`` for the rows ``i`` of ``index`` held here, ``α`` supported on ``index``.

        ``X_S``, ``y_S`` and ``weights`` (``α_S``) describe the support; used
        once at the end of a fit, computed in blocks of ``block`` rows.
        """
        p = self.problem
        index = np.asarray(index, dtype=np.intp)
        mine = np.flatnonzero(np.isin(index, p.index))
        out = np.empty(mine.size)
        signed = weights if p.y is None else weights * y_S
        for lo in range(0, mine.size, block):
            rows = mine[lo : lo + block]
            local = np.searchsorted(p.index, index[rows])
            K = self.kernel(p.X[local], X_S)
            K = np.asarray(K.toarray() if sp.issparse(K) else K, dtype=np.float64)
            if p.y is None:
                out[lo : lo + block] = K @ signed
            else:
                out[lo : lo + block] = p.y[local] * ((K + 1.0) @ signed)
                out[lo : lo + block] += weights[rows] * p.inv_c[local]
        return index[mine], out
