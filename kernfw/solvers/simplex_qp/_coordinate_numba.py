"""The compiled passes of the vertex-coordinate L2-SVM solver (math.md §2.13).

A pass visits the points in a given order; at point ``i`` it reads
``(K̃α)_i = z_iᵀu/S + α_i/(C w_i)`` in O(d) (``z_i = y_i (x_i, 1)``, ``u = Σ_i β_i z_i``,
``α = β/S``; ``inv_c`` holds the diagonal terms ``1/(C w_i)``, math.md §2.14), takes
the exact line search of the dual along the vertex direction ``e_i − α``
(:func:`vertex_step`: a Frank-Wolfe step toward ``e_i``, or an away step from it,
possibly a drop step) and updates ``u`` in O(d).  The passes, the primal vector and the
margins ``K̃α`` come for dense features, CSR features and weighted column blocks
of dense features; the scalars are the named fields of :data:`STATE`.  The iterate is
:class:`kernfw.solvers.simplex_qp.coordinate.CoordinateIterate`.
"""

import numpy as np
from numba import njit

from ...fw._steps_numba import away_step_max, quadratic_step

__all__ = [
    "STATE",
    "RESCALE",
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


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def _rescale_if_far(beta, w, state):
    """:func:`_rescale` once the mass ``S`` leaves ``[1/RESCALE, RESCALE]``."""
    mass = state[0]["mass"]
    if mass > RESCALE or mass < 1.0 / RESCALE:
        _rescale(beta, w, state)


@njit(cache=True)
def _coordinate_update(i, product, yi, inv_c_i, diag_i, beta, w, state):
    """The vertex step at point ``i`` given ``product = x_iᵀw + bias`` (``inv_c_i`` the
    diagonal term ``1/(C w_i)`` of ``K̃_ii``, math.md §2.14).

    Returns ``δ``, the change of ``β_i``, and updates every scalar of ``state``; the
    caller adds ``δ y_i x_i`` to ``w``.  A step that reaches the vertex ``e_i`` first
    clears ``β`` and ``w`` (:func:`_jump`) and returns ``δ = β_i = S``.
    """
    s = state[0]
    mass = s["mass"]
    load = yi * product + beta[i] * inv_c_i  # (K̃β)_i
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


@njit(cache=True)
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


@njit(cache=True)
def dense_pass(X, y, inv_c, diag, order, beta, w, state):
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
        delta = _coordinate_update(i, product, yi, inv_c[i], diag[i], beta, w, state)
        if delta == 0.0:
            continue
        scale = delta * yi
        for k in range(d):
            w[k] += scale * X[i, k]
        _rescale_if_far(beta, w, state)


@njit(cache=True)
def sparse_pass(indptr, indices, data, y, inv_c, diag, order, beta, w, state):
    """:func:`dense_pass` on CSR features ``(indptr, indices, data)``: O(nnz(x_i)) per step."""
    for t in range(order.shape[0]):
        i = order[t]
        yi = y[i]
        product = state[0]["bias"]
        for p in range(indptr[i], indptr[i + 1]):
            product += data[p] * w[indices[p]]
        delta = _coordinate_update(i, product, yi, inv_c[i], diag[i], beta, w, state)
        if delta == 0.0:
            continue
        scale = delta * yi
        for p in range(indptr[i], indptr[i + 1]):
            w[indices[p]] += scale * data[p]
        _rescale_if_far(beta, w, state)


@njit(cache=True)
def blocks_pass(X, starts, ends, weights, y, inv_c, diag, order, beta, w, state):
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
        delta = _coordinate_update(i, product, yi, inv_c[i], diag[i], beta, w, state)
        if delta == 0.0:
            continue
        scale = delta * yi
        for r in range(starts.shape[0]):
            block_scale = scale * weights[r]
            x_r, w_r = row[starts[r] : ends[r]], w[starts[r] : ends[r]]
            for k in range(x_r.shape[0]):
                w_r[k] += block_scale * x_r[k]
        _rescale_if_far(beta, w, state)


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def _record_magnitude(i, magnitude, beta, state):
    """Track the largest and the α-weighted magnitude of the terms of ``v_i``."""
    s = state[0]
    if magnitude > s["max_magnitude"]:
        s["max_magnitude"] = magnitude
    s["mean_magnitude"] = s["mean_magnitude"] + beta[i] * magnitude / s["mass"]


@njit(cache=True)
def dense_margins(X, y, inv_c, beta, w, w_abs, state, out):
    """``out = K̃α``: ``(K̃α)_i = (y_i (x_iᵀw + bias) + β_i/(C w_i)) / S`` for every ``i``
    (``inv_c`` holds ``1/(C w_i)``, math.md §2.14).

    Also sets ``state``'s ``max_magnitude`` and ``mean_magnitude``: the largest and the
    α-weighted sum of ``(|x_i|ᵀ w_abs + S + β_i/(C w_i)) / S``, which bound the terms summed
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
        out[i] = (y[i] * product + beta[i] * inv_c[i]) / s["mass"]
        _record_magnitude(i, (spread + beta[i] * inv_c[i]) / s["mass"], beta, state)


@njit(cache=True)
def sparse_margins(indptr, indices, data, y, inv_c, beta, w, w_abs, state, out):
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
        out[i] = (y[i] * product + beta[i] * inv_c[i]) / s["mass"]
        _record_magnitude(i, (spread + beta[i] * inv_c[i]) / s["mass"], beta, state)


@njit(cache=True)
def blocks_margins(X, starts, ends, weights, y, inv_c, beta, w, w_abs, state, out):
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
        out[i] = (y[i] * product + beta[i] * inv_c[i]) / s["mass"]
        _record_magnitude(i, (spread + beta[i] * inv_c[i]) / s["mass"], beta, state)
