"""Vertex-coordinate steps on explicit features: the L2-SVM and the regression (math.md §2.13).

On explicit features ``x_i`` (the linear kernel, or low-rank features of another
kernel) the modified kernel of the L2-SVM is ``K̃ = ZZᵀ + I/C`` with
``z_i = y_i (x_i, 1)`` (math.md §2.1), and the solver can keep the primal vector
``u = Σ_i β_i z_i`` instead of the ``n`` values ``K̃α``.  A pass visits the points
in a random order; at point ``i`` it reads ``(K̃α)_i = z_iᵀu/S + α_i/C`` in O(d),
takes the exact line search of the dual along the vertex direction ``e_i − α``
(a Frank-Wolfe step toward ``e_i``, or an away step from it, possibly a drop
step) and updates ``u`` in O(d).  ``α = β/S`` is stored unnormalized
(``S = 1ᵀβ``), so a step that rescales all of ``α`` changes one entry of ``β``.
These steps are the dual coordinate descent of liblinear [Hsieh2008] on the
equivalent cone problem ``min_{β≥0} ½βᵀK̃β − 1ᵀβ``, with the simplex's exact line
search (math.md §2.13).

The same passes take a linear term: :class:`VertexCoordinateIterate` solves
``max_{α∈Δ} qᵀα − αᵀQα`` with ``Q = ZZᵀ + diag(c)`` over coordinates that may share
a row of the features (the signed copies and the slack of the regression, math.md
§2.15); :class:`CoordinateIterate` is the L2-SVM (``q = 0``, one coordinate per row).

The certificate is the one of every simplex QP (math.md §2.5): one pass of
products ``z_kᵀu`` gives ``Qα`` exactly, and the FW gap
``max_k g_k − αᵀg ≥ 0`` with ``g = q − 2Qα`` (for the L2-SVM ``2(αᵀK̃α − min_i (K̃α)_i)``).

The passes run compiled (:mod:`kernfw.solvers.simplex_qp._coordinate_numba`); the
scalars live in one record of its dtype ``STATE``.
"""

import math
from typing import NamedTuple

import numpy as np

from ...fw import FWIterate, run
from ...fw.result import rounding_bound
from . import _coordinate_numba as passes
from .certificate import simplex_certificate

__all__ = [
    "FeatureBlockWeights",
    "VertexCoordinateIterate",
    "CoordinateIterate",
    "operator_features",
]


def _row_sq_norms(X, sparse):
    if sparse:
        return np.bincount(
            np.repeat(np.arange(X.shape[0]), np.diff(X.indptr)),
            weights=np.square(X.data, dtype=np.float64),
            minlength=X.shape[0],
        )
    return np.einsum("ij,ij->i", X, X, dtype=np.float64)


class VertexCoordinateIterate(FWIterate):
    """Vertex-coordinate steps on ``max_{α∈Δ} qᵀα − αᵀQα``, ``Q = ZZᵀ + diag(c)`` (math.md §2.13).

    Coordinate ``k`` has the point ``z_k = y_k (x_{r_k}, 1)``: the row ``r_k`` of the
    features, a label or sign ``y_k`` (0: ``z_k = 0``, the slack of math.md §2.15), the
    diagonal term ``c_k ≥ 0`` and the linear term ``q_k``.  A :meth:`step` is a run of
    passes (vertex steps over the active coordinates in a random order, :meth:`_shrink`)
    that ends when the passes' estimate of the stopping rule holds or after
    ``check_every`` passes; :meth:`work_done` counts passes.

    Parameters
    ----------
    X : ndarray of shape (n, d) or scipy.sparse.csr_matrix
        The features ``x_r`` (float32 or float64; CSR in canonical format).
    rows : ndarray of int64, shape (m,)
        ``r_k``, the row of each of the ``m`` coordinates.
    y : ndarray of shape (m,)
        ``y_k`` (float64).
    inv_c : ndarray of shape (m,)
        ``c_k ≥ 0`` (float64).
    q : ndarray of shape (m,)
        ``q_k`` (float64).
    alpha0 : ndarray of shape (m,) or None
        Warm start on the simplex; None starts at the vertex ``e_a``.
    rng : numpy.random.Generator
        The order of the coordinates in each pass.
    start : int
        The cold start's vertex ``a``.
    blocks : FeatureBlockWeights or None
        Weighted column blocks of a dense ``X``: the features are then
        ``x_r = (√c_1 X_{r,B_1}, …)``
        (:func:`~kernfw.solvers.simplex_qp._coordinate_numba.blocks_pass`), read without
        scaling ``X``.
    """

    #: ``tol`` is relative to the dual value ``|D| = |f(α)|`` (math.md §2.5)
    gap_scale = "dual"

    def __init__(self, X, rows, y, inv_c, q, alpha0, rng, start=0, blocks=None):
        self.sparse = not isinstance(X, np.ndarray)
        if blocks is not None and self.sparse:
            raise ValueError("weighted column blocks need dense features")
        self.X = X
        self.blocks = blocks
        self.rows = np.ascontiguousarray(rows, dtype=np.int64)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.inv_c = np.ascontiguousarray(inv_c, dtype=np.float64)
        self.q = np.ascontiguousarray(q, dtype=np.float64)
        self.n, self.d = self.rows.shape[0], X.shape[1]
        self.rng = rng
        self.passes = 0
        self.run_length = 1
        self.max_passes = math.inf
        self._estimate = (0.0, -math.inf, False)  # never met until configure_runs
        if blocks is not None:
            self._pass, self._margins = passes.blocks_pass, passes.blocks_margins
            self._primal = passes.blocks_primal
            sq_norms = blocks.sq_norms
        else:
            self._pass = passes.sparse_pass if self.sparse else passes.dense_pass
            self._margins = passes.sparse_margins if self.sparse else passes.dense_margins
            self._primal = passes.sparse_primal if self.sparse else passes.dense_primal
            sq_norms = _row_sq_norms(X, self.sparse)
        self.diag = self.y**2 * (sq_norms[self.rows] + 1.0) + self.inv_c  # Q_kk
        self.state = np.zeros(1, dtype=passes.STATE)
        self.beta = np.zeros(self.n)
        if alpha0 is None:
            self.beta[int(start)] = 1.0
        else:
            self.beta[:] = alpha0
        self.w = np.zeros(self.d)
        self.w_abs = np.zeros(self.d)
        self._refresh()
        self.v = np.empty(self.n)
        self._v_current = False
        self.active = np.arange(self.n)  # the coordinates a pass visits (:meth:`_shrink`)

    def _args(self):
        if self.sparse:
            return (self.X.indptr, self.X.indices, self.X.data, self.rows)
        if self.blocks is not None:
            return (self.X, self.blocks.starts, self.blocks.ends, self.blocks.weights, self.rows)
        return (self.X, self.rows)

    def _primal_sq_norm(self):
        """``‖u_w‖²`` of the primal part of ``u`` from ``w``: ``wᵀw``, or ``Σ_r ‖w_{B_r}‖²/c_r``
        on weighted blocks (``w = c∘û``, ``u = √c∘û``)."""
        if self.blocks is None:
            return float(self.w @ self.w)
        b = self.blocks
        return sum(
            float(self.w[s:e] @ self.w[s:e]) / c for s, e, c in zip(b.starts, b.ends, b.weights)
        )

    def _refresh(self):
        """``u = Σ β_k z_k``, ``S``, ``qᵀβ`` and ``βᵀQβ = ‖u‖² + Σ β_k² c_k`` recomputed from
        ``β`` (the passes' incremental updates drift by rounding)."""
        s = self.state[0]
        self._primal(*self._args(), self.y, self.beta, self.w, self.w_abs)
        s["bias"] = self.beta @ self.y
        s["mass"] = self.beta.sum()
        s["lin"] = self.beta @ self.q
        s["quad"] = self._primal_sq_norm() + s["bias"] ** 2 + (self.beta * self.inv_c) @ self.beta

    def configure_runs(self, tol, check_every, max_passes):
        """Runs of at most ``check_every`` passes, ended early by the estimate of the rule of
        ``tol`` (:meth:`~kernfw.fw.stopping.StoppingRule.estimate`), and never past
        ``max_passes`` in all."""
        rule = self.stopping_rule(tol)
        if rule.scale == "radius":
            raise ValueError("solver='dcd' stops on the dual or an absolute gap, not the radius")
        self._estimate = rule.estimate()
        self.run_length = max(int(check_every), 1)
        self.max_passes = max_passes

    def _estimate_met(self):
        """The stopping rule on the last pass's estimate ``max g_k − (qᵀα − 2ρ)`` of the FW
        gap, the maximum over the ``g_k`` read during the pass (math.md §2.13)."""
        s = self.state[0]
        rho = s["quad"] / s["mass"] ** 2
        f = s["lin"] / s["mass"] - rho
        a, b, _ = self._estimate
        return s["max_gradient"] - (f - rho) <= a * abs(f) + b

    def _shrink(self):
        """The coordinates the next passes visit (shrinking, math.md §2.13).

        With the margins ``v`` of a certificate at hand (``g = q − 2v``, the FW gap
        ``G = max_k g_k − αᵀg``): the support (``β_k > 0``) and the coordinates with
        ``g_k > αᵀg − G``.  A coordinate off the support with ``g_k ≤ αᵀg`` takes no
        step (slope ``≤ 0`` and no mass to move away); the slack, the gap, keeps those
        whose gradient may rise above ``αᵀg`` before the next certificate, which reads
        every coordinate and decides.
        """
        if not self._v_current:
            return
        g = self.q - 2.0 * self.v
        ag = float(self.beta @ g) / self.state[0]["mass"]
        threshold = 2.0 * ag - float(g.max())
        self.active = np.flatnonzero((self.beta > 0.0) | (g > threshold))

    def step(self, t):
        self._shrink()
        for _ in range(min(self.run_length, self.max_passes - self.passes)):
            self.state[0]["max_gradient"] = -math.inf
            order = self.rng.permutation(self.active)
            self._pass(
                *self._args(),
                self.y,
                self.inv_c,
                self.diag,
                self.q,
                order,
                self.beta,
                self.w,
                self.state,
            )
            self.passes += 1
            if self._estimate_met():
                break
        self._v_current = False
        return math.nan

    def work_done(self, t):
        return self.passes

    def drive(self, tol, max_passes, check_every, name, max_time=None, callback=None):
        """:func:`kernfw.fw.run` on this iterate: runs of at most ``check_every`` passes,
        ``max_passes`` in all, certified after each run (:meth:`configure_runs`); the run
        is called ``name`` in its warnings."""
        self.configure_runs(tol, check_every, int(max_passes))
        return run(
            self,
            tol=tol,
            max_iter=int(max_passes),
            check_every=1,
            max_time=max_time,
            callback=callback,
            remedy="increase max_iter or tol",
            name=name,
        )

    def _current_margins(self):
        if not self._v_current:
            self._refresh()
            self._margins(
                *self._args(), self.y, self.inv_c, self.beta, self.w, self.w_abs, self.state, self.v
            )
            self._v_current = True
        return self.v

    def _extra(self):
        s = self.state[0]
        return {
            "coreset": int(np.count_nonzero(self.beta)),
            "active": int(self.active.shape[0]),
            "away_steps": int(s["away_steps"]),
            "drop_steps": int(s["drop_steps"]),
        }

    def certificate(self):
        v = self._current_margins()
        s = self.state[0]
        alpha = self.beta / s["mass"]
        rho = float(alpha @ v)
        qa = float(alpha @ self.q)
        g = self.q - 2.0 * v
        i_star = int(np.argmax(g))
        gap = float(g[i_star]) - (qa - 2.0 * rho)
        # u sums n terms and v_k = z_kᵀu/S + α_k c_k d + 2 more; ρ = αᵀv another n: the gap
        # errs by at most γ_{2n+d}·(2(max + mean magnitude of those terms) + |q_k*| + α·|q|)
        magnitude = 2.0 * (s["max_magnitude"] + s["mean_magnitude"])
        magnitude += abs(float(self.q[i_star])) + float(alpha @ np.abs(self.q))
        rounding = rounding_bound(2 * self.n + self.d, magnitude)
        return simplex_certificate(qa - rho, gap, self._extra(), rounding)

    def solution(self):
        v = self._current_margins()
        alpha = self.beta / self.state[0]["mass"]
        return {"alpha": alpha, "v": v.copy(), "support": np.flatnonzero(alpha > 0.0)}


class CoordinateIterate(VertexCoordinateIterate):
    """Vertex-coordinate steps on the L2-SVM dual over explicit features (math.md §2.13).

    :class:`VertexCoordinateIterate` with one coordinate per point (``r_i = i``), the
    labels ``y_i``, the diagonal terms ``1/(C w_i)`` and no linear term (``q = 0``):
    the dual ``max_{α∈Δₙ} −αᵀK̃α``.

    Parameters
    ----------
    X : ndarray of shape (n, d) or scipy.sparse.csr_matrix
        The features ``x_i`` (float32 or float64; CSR in canonical format).
    y : ndarray of shape (n,)
        Labels ``y_i ∈ {−1, +1}`` (float64).
    C : float
        Penalty ``C`` of the squared slacks.
    alpha0 : ndarray of shape (n,) or None
        Warm start on the simplex; None starts at the vertex ``e_a``.
    rng : numpy.random.Generator
        The order of the points in each pass (and ``a`` of the cold start).
    start : int
        The cold start's vertex ``a``.
    blocks : FeatureBlockWeights or None
        Weighted column blocks of a dense ``X`` (see :class:`VertexCoordinateIterate`).
    sample_weight : ndarray of shape (n,) or None
        Positive per-example weights ``w_i`` of the slacks: the diagonal term of
        ``K̃_ii`` is ``1/(C w_i)`` (math.md §2.14; None: ``1/C``).
    """

    def __init__(self, X, y, C, alpha0, rng, start=0, blocks=None, sample_weight=None):
        n = X.shape[0]
        inv_c = np.full(n, 1.0 / float(C))  # 1/(C w_i)
        if sample_weight is not None:
            inv_c /= sample_weight
        rows = np.arange(n)
        super().__init__(X, rows, y, inv_c, np.zeros(n), alpha0, rng, start, blocks)


def operator_features(op):
    """The explicit features ``X`` of the operator ``op`` (``K = XXᵀ``,
    :meth:`~kernfw.operators.KernelOperator.features`) that the passes run on; a
    ValueError when it has none."""
    X = op.features()
    if X is None:
        raise ValueError(
            "solver='dcd' needs explicit features (the linear kernel on X, or low-rank "
            f"features); got a {type(op).__name__} without them: use solver='mfw'"
        )
    return X


class FeatureBlockWeights(NamedTuple):
    """Weighted column blocks of a dense feature matrix ``X``
    (:func:`~kernfw.solvers.simplex_qp._coordinate_numba.blocks_pass`).

    Attributes
    ----------
    starts, ends : ndarray of int64, shape (q,)
        The column ranges ``B_r = [starts[r], ends[r])`` read (disjoint, increasing).
    weights : ndarray of float64, shape (q,)
        Their weights ``c_r > 0``: the features are ``√c_r X_{i,B_r}``.
    sq_norms : ndarray of float64, shape (n,)
        ``‖x_i‖² = Σ_r c_r ‖X_{i,B_r}‖²``.
    """

    starts: np.ndarray
    ends: np.ndarray
    weights: np.ndarray
    sq_norms: np.ndarray
