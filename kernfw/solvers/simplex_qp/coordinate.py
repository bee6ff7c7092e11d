"""Vertex-coordinate steps: the binary L2-SVM on explicit features (math.md §2.13).

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

The certificate is the one of every L2-SVM solver (math.md §2.5): one pass of
``n`` products ``z_iᵀu`` gives ``K̃α`` exactly, and the FW gap
``2(αᵀK̃α − min_i (K̃α)_i) ≥ 0``.

The passes are plain Python over arrays (the path without numba, and the tests'
reference); :mod:`kernfw.solvers.simplex_qp._coordinate_numba` compiles the same
functions.  The scalars live in one record of dtype :data:`STATE`.
"""

import math
from typing import NamedTuple

import numpy as np

from ..._compiled import compiled_module
from ...fw import FWIterate
from ...fw.result import rounding_bound
from ...fw.steps import away_step_max, quadratic_step
from .certificate import STOP_SCALES, simplex_certificate

__all__ = [
    "STATE",
    "vertex_step",
    "dense_pass",
    "sparse_pass",
    "dense_margins",
    "sparse_margins",
    "dense_primal",
    "sparse_primal",
    "blocks_pass",
    "blocks_margins",
    "blocks_primal",
    "FeatureBlockWeights",
    "CoordinateIterate",
]

#: the scalars of the iterate: ``mass`` S = 1ᵀβ (α = β/S), ``quad`` βᵀK̃β, ``bias``
#: Σ β_i y_i (the last entry of u), ``min_margin`` the smallest (K̃α)_i read in the
#: current pass, the largest and the mean magnitude of the terms of K̃α at the last
#: certificate (the rounding bound), and the counts of away and drop steps
STATE = np.dtype(
    [
        ("mass", np.float64),
        ("quad", np.float64),
        ("bias", np.float64),
        ("min_margin", np.float64),
        ("max_magnitude", np.float64),
        ("mean_magnitude", np.float64),
        ("away_steps", np.int64),
        ("drop_steps", np.int64),
    ]
)

#: ``β``, ``u`` and the scalars are divided by ``S`` when ``S`` leaves ``[1/RESCALE, RESCALE]``
RESCALE = 2.0**32


def vertex_step(rho, margin, diag, weight):
    """Exact line search along ``e_i − α`` (math.md §2.13): the step ``γ``.

    ``D(α + γ(e_i − α)) = D(α) + γb − ½γ²c`` with slope ``b = 2(ρ − v_i)`` and
    curvature ``c = 2(K̃_ii − 2v_i + ρ)``.  ``γ ∈ [0, 1]`` is a FW step toward
    ``e_i``; a negative ``γ ∈ [−α_i/(1 − α_i), 0]`` is an away step from ``e_i``
    (a drop step at the bound).

    Parameters
    ----------
    rho : float
        ``ρ = αᵀK̃α``.
    margin : float
        ``v_i = (K̃α)_i``.
    diag : float
        ``K̃_ii``.
    weight : float
        ``α_i``.
    """
    slope = 2.0 * (rho - margin)
    curvature = 2.0 * (diag - 2.0 * margin + rho)
    if slope >= 0.0:
        return quadratic_step(slope, curvature, 1.0)
    if weight <= 0.0 or weight >= 1.0:  # no mass to move, or α = e_i: no away direction
        return 0.0
    return -quadratic_step(-slope, curvature, away_step_max(weight))


def _rescale(beta, w, state):
    """Divide ``β``, ``u`` and the scalars by ``S`` (then ``S = 1``): α is unchanged."""
    s = state[0]
    mass = s["mass"]
    for j in range(beta.shape[0]):
        beta[j] /= mass
    for k in range(w.shape[0]):
        w[k] /= mass
    s["bias"] = s["bias"] / mass
    s["quad"] = s["quad"] / (mass * mass)
    s["mass"] = 1.0


def _rescale_if_far(beta, w, state):
    """:func:`_rescale` once the mass ``S`` leaves ``[1/RESCALE, RESCALE]``."""
    mass = state[0]["mass"]
    if mass > RESCALE or mass < 1.0 / RESCALE:
        _rescale(beta, w, state)


def _coordinate_update(i, product, yi, inv_C, diag_i, beta, w, state):
    """The vertex step at point ``i`` given ``product = x_iᵀw + bias``.

    Returns ``δ``, the change of ``β_i``, and updates every scalar of ``state``; the
    caller adds ``δ y_i x_i`` to ``w``.  A step that reaches the vertex ``e_i`` first
    clears ``β`` and ``w`` (:func:`_jump`) and returns ``δ = β_i = S``.
    """
    s = state[0]
    mass = s["mass"]
    load = yi * product + beta[i] * inv_C  # (K̃β)_i
    margin = load / mass
    if margin < s["min_margin"]:
        s["min_margin"] = margin
    weight = beta[i] / mass
    gamma = vertex_step(s["quad"] / (mass * mass), margin, diag_i, weight)
    if gamma == 0.0:
        return 0.0
    if gamma >= 1.0:
        _jump(i, yi, diag_i, beta, w, state)
        return beta[i]
    if gamma < 0.0:
        s["away_steps"] += 1
    if gamma < 0.0 and -gamma >= away_step_max(weight):  # drop step: β_i = 0 exactly
        delta = -beta[i]
        s["drop_steps"] += 1
    else:
        delta = gamma * mass / (1.0 - gamma)
    s["quad"] = s["quad"] + delta * (2.0 * load + delta * diag_i)
    s["mass"] = mass + delta
    s["bias"] = s["bias"] + delta * yi
    beta[i] = 0.0 if delta == -beta[i] else beta[i] + delta
    return delta


def _jump(i, yi, diag_i, beta, w, state):
    """``α ← e_i`` (a FW step with ``γ = 1``), keeping ``S``: O(n + d)."""
    s = state[0]
    mass = s["mass"]
    for j in range(beta.shape[0]):
        beta[j] = 0.0
    for k in range(w.shape[0]):
        w[k] = 0.0
    beta[i] = mass
    s["bias"] = mass * yi
    s["quad"] = mass * mass * diag_i


def dense_pass(X, y, inv_C, diag, order, beta, w, state):
    """One pass of vertex steps over the points ``order`` of dense features ``X`` (n × d).

    ``w`` (d,) and ``state[0]["bias"]`` hold ``u = Σ_i β_i y_i (x_i, 1)``; every
    step costs O(d).
    """
    d = X.shape[1]
    for t in range(order.shape[0]):
        i = order[t]
        yi = y[i]
        product = state[0]["bias"]
        for k in range(d):
            product += X[i, k] * w[k]
        delta = _coordinate_update(i, product, yi, inv_C, diag[i], beta, w, state)
        if delta == 0.0:
            continue
        scale = delta * yi
        for k in range(d):
            w[k] += scale * X[i, k]
        _rescale_if_far(beta, w, state)


def sparse_pass(indptr, indices, data, y, inv_C, diag, order, beta, w, state):
    """:func:`dense_pass` on CSR features ``(indptr, indices, data)``: O(nnz(x_i)) per step."""
    for t in range(order.shape[0]):
        i = order[t]
        yi = y[i]
        product = state[0]["bias"]
        for p in range(indptr[i], indptr[i + 1]):
            product += data[p] * w[indices[p]]
        delta = _coordinate_update(i, product, yi, inv_C, diag[i], beta, w, state)
        if delta == 0.0:
            continue
        scale = delta * yi
        for p in range(indptr[i], indptr[i + 1]):
            w[indices[p]] += scale * data[p]
        _rescale_if_far(beta, w, state)


def blocks_pass(X, starts, ends, weights, y, inv_C, diag, order, beta, w, state):
    """:func:`dense_pass` on weighted column blocks of ``X`` (math.md §2.13, feature blocks).

    The features are ``x_i = (√c_1 X_{i,B_1}, …, √c_q X_{i,B_q})`` for the column ranges
    ``B_r = [starts[r], ends[r])`` and weights ``c_r = weights[r] > 0``; ``X`` itself is
    never scaled.  ``w`` holds ``c∘û`` (``û = Σ_i β_i y_i X_i`` on the blocks), so
    ``x_iᵀu = X_iᵀw`` and the step adds ``δ y_i c∘X_i`` to ``w``; columns outside the
    blocks are never read.
    """
    for t in range(order.shape[0]):
        i = order[t]
        yi = y[i]
        row = X[i]
        product = state[0]["bias"]
        for r in range(starts.shape[0]):
            x_r, w_r = row[starts[r] : ends[r]], w[starts[r] : ends[r]]
            for k in range(x_r.shape[0]):  # indices from 0: no wraparound test in the loop
                product += x_r[k] * w_r[k]
        delta = _coordinate_update(i, product, yi, inv_C, diag[i], beta, w, state)
        if delta == 0.0:
            continue
        scale = delta * yi
        for r in range(starts.shape[0]):
            block_scale = scale * weights[r]
            x_r, w_r = row[starts[r] : ends[r]], w[starts[r] : ends[r]]
            for k in range(x_r.shape[0]):
                w_r[k] += block_scale * x_r[k]
        _rescale_if_far(beta, w, state)


def dense_primal(X, y, beta, w, w_abs):
    """``w = Σ_i β_i y_i x_i`` over the points with ``β_i > 0`` (dense features), and
    ``w_abs = Σ_i β_i |x_i|`` (the magnitude of its terms, for the rounding bound)."""
    d = X.shape[1]
    for k in range(d):
        w[k] = 0.0
        w_abs[k] = 0.0
    for i in range(X.shape[0]):
        if beta[i] != 0.0:
            scale = beta[i] * y[i]
            for k in range(d):
                w[k] += scale * X[i, k]
                w_abs[k] += beta[i] * abs(X[i, k])


def sparse_primal(indptr, indices, data, y, beta, w, w_abs):
    """:func:`dense_primal` on CSR features."""
    for k in range(w.shape[0]):
        w[k] = 0.0
        w_abs[k] = 0.0
    for i in range(indptr.shape[0] - 1):
        if beta[i] != 0.0:
            scale = beta[i] * y[i]
            for p in range(indptr[i], indptr[i + 1]):
                w[indices[p]] += scale * data[p]
                w_abs[indices[p]] += beta[i] * abs(data[p])


def blocks_primal(X, starts, ends, weights, y, beta, w, w_abs):
    """:func:`dense_primal` on weighted column blocks (:func:`blocks_pass`): ``w = c∘û``
    with ``û = Σ_i β_i y_i X_i`` and ``w_abs = c∘Σ_i β_i |X_i|`` on the blocks' columns."""
    for k in range(w.shape[0]):
        w[k] = 0.0
        w_abs[k] = 0.0
    for i in range(X.shape[0]):
        if beta[i] != 0.0:
            scale = beta[i] * y[i]
            row = X[i]
            for r in range(starts.shape[0]):
                x_r, w_r = row[starts[r] : ends[r]], w[starts[r] : ends[r]]
                a_r = w_abs[starts[r] : ends[r]]
                for k in range(x_r.shape[0]):
                    w_r[k] += scale * x_r[k]
                    a_r[k] += beta[i] * abs(x_r[k])
    for r in range(starts.shape[0]):
        for k in range(starts[r], ends[r]):
            w[k] *= weights[r]
            w_abs[k] *= weights[r]


def _record_magnitude(i, magnitude, beta, state):
    """Track the largest and the α-weighted magnitude of the terms of ``v_i``."""
    s = state[0]
    if magnitude > s["max_magnitude"]:
        s["max_magnitude"] = magnitude
    s["mean_magnitude"] = s["mean_magnitude"] + beta[i] * magnitude / s["mass"]


def dense_margins(X, y, inv_C, beta, w, w_abs, state, out):
    """``out = K̃α``: ``(K̃α)_i = (y_i (x_iᵀw + bias) + β_i/C) / S`` for every ``i``.

    Also sets ``state``'s ``max_magnitude`` and ``mean_magnitude``: the largest and the
    α-weighted sum of ``(|x_i|ᵀ w_abs + S + β_i/C) / S``, which bound the terms summed
    (through ``w``) into each ``v_i``.
    """
    s = state[0]
    s["max_magnitude"] = 0.0
    s["mean_magnitude"] = 0.0
    d = X.shape[1]
    for i in range(X.shape[0]):
        product = s["bias"]
        spread = s["mass"]
        for k in range(d):
            product += X[i, k] * w[k]
            spread += abs(X[i, k]) * w_abs[k]
        out[i] = (y[i] * product + beta[i] * inv_C) / s["mass"]
        _record_magnitude(i, (spread + beta[i] * inv_C) / s["mass"], beta, state)


def sparse_margins(indptr, indices, data, y, inv_C, beta, w, w_abs, state, out):
    """:func:`dense_margins` on CSR features."""
    s = state[0]
    s["max_magnitude"] = 0.0
    s["mean_magnitude"] = 0.0
    for i in range(indptr.shape[0] - 1):
        product = s["bias"]
        spread = s["mass"]
        for p in range(indptr[i], indptr[i + 1]):
            product += data[p] * w[indices[p]]
            spread += abs(data[p]) * w_abs[indices[p]]
        out[i] = (y[i] * product + beta[i] * inv_C) / s["mass"]
        _record_magnitude(i, (spread + beta[i] * inv_C) / s["mass"], beta, state)


def blocks_margins(X, starts, ends, weights, y, inv_C, beta, w, w_abs, state, out):
    """:func:`dense_margins` on weighted column blocks (:func:`blocks_pass`, ``w = c∘û``,
    ``w_abs`` from :func:`blocks_primal`)."""
    s = state[0]
    s["max_magnitude"] = 0.0
    s["mean_magnitude"] = 0.0
    for i in range(X.shape[0]):
        product = s["bias"]
        spread = s["mass"]
        row = X[i]
        for r in range(starts.shape[0]):
            x_r, w_r = row[starts[r] : ends[r]], w[starts[r] : ends[r]]
            a_r = w_abs[starts[r] : ends[r]]
            for k in range(x_r.shape[0]):
                product += x_r[k] * w_r[k]
                spread += abs(x_r[k]) * a_r[k]
        out[i] = (y[i] * product + beta[i] * inv_C) / s["mass"]
        _record_magnitude(i, (spread + beta[i] * inv_C) / s["mass"], beta, state)


def _row_sq_norms(X, sparse):
    if sparse:
        return np.bincount(
            np.repeat(np.arange(X.shape[0]), np.diff(X.indptr)),
            weights=np.square(X.data, dtype=np.float64),
            minlength=X.shape[0],
        )
    return np.einsum("ij,ij->i", X, X, dtype=np.float64)


class CoordinateIterate(FWIterate):
    """Vertex-coordinate steps on the L2-SVM dual over explicit features (math.md §2.13).

    A :meth:`step` is a run of passes (vertex steps over the active points in a
    random order, :meth:`_shrink`) that ends when the passes' estimate of the
    stopping rule holds or after ``check_every`` passes; :meth:`work_done` counts
    passes.

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
    stop : {"gap", "relative"}
        The stopping rule (math.md §2.5).
    rng : numpy.random.Generator
        The order of the points in each pass (and ``a`` of the cold start).
    start : int
        The cold start's vertex ``a``.
    module : module or None
        The compiled passes (:mod:`~kernfw.solvers.simplex_qp._coordinate_numba`), or
        None for the plain-Python ones of this module.
    blocks : FeatureBlockWeights or None
        Weighted column blocks of a dense ``X``: the features are then
        ``x_i = (√c_1 X_{i,B_1}, …)`` (:func:`blocks_pass`), read without scaling ``X``.
    """

    def __init__(self, X, y, C, alpha0, stop, rng, start=0, module=None, blocks=None):
        self.sparse = not isinstance(X, np.ndarray)
        if blocks is not None and self.sparse:
            raise ValueError("weighted column blocks need dense features")
        self.X = X
        self.blocks = blocks
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.n, self.d = X.shape
        self.inv_C = 1.0 / float(C)
        self.stop, self.gap_scale = stop, STOP_SCALES[stop]
        self.rng = rng
        self.passes = 0
        self.run_length = 1
        self.max_passes = math.inf
        self.tol = 0.0
        funcs = module if module is not None else _PYTHON
        if blocks is not None:
            self._pass, self._margins = funcs.blocks_pass, funcs.blocks_margins
            self._primal = funcs.blocks_primal
            sq_norms = blocks.sq_norms
        else:
            self._pass = funcs.sparse_pass if self.sparse else funcs.dense_pass
            self._margins = funcs.sparse_margins if self.sparse else funcs.dense_margins
            self._primal = funcs.sparse_primal if self.sparse else funcs.dense_primal
            sq_norms = _row_sq_norms(X, self.sparse)
        self.diag = sq_norms + 1.0 + self.inv_C  # K̃_ii
        self.state = np.zeros(1, dtype=STATE)
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
        self.active = np.arange(self.n)  # the points a pass visits (:meth:`_shrink`)

    def _args(self):
        if self.sparse:
            return (self.X.indptr, self.X.indices, self.X.data)
        if self.blocks is not None:
            return (self.X, self.blocks.starts, self.blocks.ends, self.blocks.weights)
        return (self.X,)

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
        """``u = Σ β_i z_i``, ``S`` and ``βᵀK̃β = ‖u‖² + ‖β‖²/C`` recomputed from ``β``
        (the passes' incremental updates drift by rounding)."""
        s = self.state[0]
        self._primal(*self._args(), self.y, self.beta, self.w, self.w_abs)
        s["bias"] = self.beta @ self.y
        s["mass"] = self.beta.sum()
        s["quad"] = self._primal_sq_norm() + s["bias"] ** 2 + self.inv_C * (self.beta @ self.beta)

    def configure_runs(self, tol, check_every, max_passes):
        """Runs of at most ``check_every`` passes, ended early by the estimate of ``tol``,
        and never past ``max_passes`` in all."""
        self.tol = float(tol)
        self.run_length = max(int(check_every), 1)
        self.max_passes = max_passes

    def _estimate_met(self):
        """The stopping rule on the last pass's estimate ``2(ρ − min v_i)`` (math.md §2.13)."""
        s = self.state[0]
        rho = s["quad"] / s["mass"] ** 2
        estimate = 2.0 * (rho - s["min_margin"])
        return estimate <= (self.tol * rho if self.stop == "relative" else self.tol)

    def _shrink(self):
        """The points the next passes visit (shrinking, math.md §2.13).

        With the margins ``v`` of a certificate at hand: the support (``β_i > 0``) and
        the points with ``v_i < ρ + (ρ − min_j v_j)``.  A point off the support with
        ``v_i ≥ ρ`` takes no step (``γ ≤ 0`` and no mass to move away); the slack,
        half the gap, keeps those whose margin may fall below ``ρ`` before the next
        certificate, which reads every point and decides.
        """
        if not self._v_current:
            return
        v = self.v
        rho = float(self.beta @ v) / self.state[0]["mass"]
        threshold = 2.0 * rho - float(v.min())
        self.active = np.flatnonzero((self.beta > 0.0) | (v < threshold))

    def step(self, t):
        self._shrink()
        for _ in range(min(self.run_length, self.max_passes - self.passes)):
            self.state[0]["min_margin"] = math.inf
            order = self.rng.permutation(self.active)
            self._pass(
                *self._args(), self.y, self.inv_C, self.diag, order, self.beta, self.w, self.state
            )
            self.passes += 1
            if self._estimate_met():
                break
        self._v_current = False
        return math.nan

    def work_done(self, t):
        return self.passes

    def _current_margins(self):
        if not self._v_current:
            self._refresh()
            self._margins(
                *self._args(), self.y, self.inv_C, self.beta, self.w, self.w_abs, self.state, self.v
            )
            self._v_current = True
        return self.v

    def certificate(self):
        v = self._current_margins()
        s = self.state[0]
        alpha = self.beta / s["mass"]
        rho = float(alpha @ v)
        i_star = int(np.argmin(v))
        gap = 2.0 * (rho - float(v[i_star]))
        # u sums n terms and v_i = z_iᵀu/S + α_i/C d + 2 more; ρ = αᵀv another n: the gap
        # 2(ρ − v_i*) errs by at most γ_{2n+d}·2(max + mean magnitude of those terms)
        magnitude = 2.0 * (s["max_magnitude"] + s["mean_magnitude"])
        rounding = rounding_bound(2 * self.n + self.d, magnitude)
        extra = {
            "coreset": int(np.count_nonzero(self.beta)),
            "active": int(self.active.shape[0]),
            "away_steps": int(s["away_steps"]),
            "drop_steps": int(s["drop_steps"]),
        }
        return simplex_certificate(-rho, gap, self.stop, 0.0, extra, rounding)

    def solution(self):
        v = self._current_margins()
        alpha = self.beta / self.state[0]["mass"]
        return {"alpha": alpha, "v": v.copy(), "support": np.flatnonzero(alpha > 0.0)}


class FeatureBlockWeights(NamedTuple):
    """Weighted column blocks of a dense feature matrix ``X`` (:func:`blocks_pass`).

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


class _PythonPasses:
    """The passes of this module, uncompiled (the path without numba)."""

    dense_pass = staticmethod(dense_pass)
    sparse_pass = staticmethod(sparse_pass)
    dense_margins = staticmethod(dense_margins)
    sparse_margins = staticmethod(sparse_margins)
    dense_primal = staticmethod(dense_primal)
    sparse_primal = staticmethod(sparse_primal)
    blocks_pass = staticmethod(blocks_pass)
    blocks_margins = staticmethod(blocks_margins)
    blocks_primal = staticmethod(blocks_primal)


_PYTHON = _PythonPasses


def coordinate_module():
    """The compiled passes when :func:`kernfw._compiled.compiled_module` allows them, else None."""
    return compiled_module("kernfw.solvers.simplex_qp._coordinate_numba")
