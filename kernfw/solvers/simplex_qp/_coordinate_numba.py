"""The compiled passes of the vertex-coordinate solver on explicit features (math.md §2.13).

The problem is ``max_{α∈Δ} qᵀα − αᵀQα`` with ``Q = ZZᵀ + diag(c)`` over coordinates
``k`` whose points are ``z_k = y_k (x_{r_k}, 1)``: ``r_k = rows[k]`` the row of the
features, ``y_k`` a label or sign (0 makes ``z_k = 0``), ``c_k = inv_c[k]`` a diagonal
term and ``q_k`` the linear term (math.md §2.13; the L2-SVM has ``r_k = k``, ``q = 0``,
the regression of §2.15 two signed copies of each row, a slack coordinate and ``q ≠ 0``).
A pass visits the coordinates in a given order; at ``k`` it reads
``(Qα)_k = z_kᵀu/S + α_k c_k`` in O(d) (``u = Σ_k β_k z_k``, ``α = β/S``), takes the exact
line search of ``f`` along the vertex direction ``e_k − α`` (:func:`vertex_step`: a
Frank-Wolfe step toward ``e_k``, or an away step from it, possibly a drop step) and
updates ``u`` in O(d).  The passes, the primal vector and the margins ``Qα`` come for
dense features, CSR features and weighted column blocks of dense features; the scalars
are the named fields of :data:`STATE`.  The iterate is
:class:`kernfw.solvers.simplex_qp.coordinate.VertexCoordinateIterate`.
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

#: the scalars of the iterate: ``mass`` S = 1ᵀβ (α = β/S), ``quad`` βᵀQβ, ``lin`` qᵀβ,
#: ``bias`` Σ β_k y_k (the last entry of u), ``max_gradient`` the largest gradient entry
#: g_k = q_k − 2(Qα)_k read in the current pass, the largest and the mean magnitude of the
#: terms of Qα at the last certificate (the rounding bound), and the counts of away and
#: drop steps
STATE = np.dtype(
    [
        ("mass", np.float64),
        ("quad", np.float64),
        ("lin", np.float64),
        ("bias", np.float64),
        ("max_gradient", np.float64),
        ("max_magnitude", np.float64),
        ("mean_magnitude", np.float64),
        ("away_steps", np.int64),
        ("drop_steps", np.int64),
    ]
)

#: ``β``, ``u`` and the scalars are divided by ``S`` when ``S`` leaves ``[1/RESCALE, RESCALE]``
RESCALE = 2.0**32


@njit(cache=True)
def vertex_step(rho, margin, diag, weight, gain):
    """Exact line search along ``e_i − α`` (math.md §2.13): the step ``γ``.

    ``f(α + γ(e_i − α)) = f(α) + γb − ½γ²c`` with slope ``b = 2(ρ − v_i) + q_i − qᵀα``
    and curvature ``c = 2(Q_ii − 2v_i + ρ)``.  ``γ ∈ [0, 1]`` is a FW step toward
    ``e_i``; a negative ``γ ∈ [−α_i/(1 − α_i), 0]`` is an away step from ``e_i``
    (a drop step at the bound).

    Parameters
    ----------
    rho : float
        ``ρ = αᵀQα``.
    margin : float
        ``v_i = (Qα)_i``.
    diag : float
        ``Q_ii``.
    weight : float
        ``α_i``.
    gain : float
        ``q_i − qᵀα`` (0 for the L2-SVM, ``q = 0``).
    """
    slope = 2.0 * (rho - margin) + gain
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
    s["lin"] = s["lin"] / mass
    s["quad"] = s["quad"] / (mass * mass)
    s["mass"] = 1.0


@njit(cache=True)
def _rescale_if_far(beta, w, state):
    """:func:`_rescale` once the mass ``S`` leaves ``[1/RESCALE, RESCALE]``."""
    mass = state[0]["mass"]
    if mass > RESCALE or mass < 1.0 / RESCALE:
        _rescale(beta, w, state)


@njit(cache=True)
def _coordinate_update(i, product, yi, inv_c_i, diag_i, q_i, beta, w, state):
    """The vertex step at coordinate ``i`` given ``product = x_{r_i}ᵀw + bias`` (``inv_c_i``
    the diagonal term ``c_i`` of ``Q_ii``, e.g. ``1/(C w_i)`` of the L2-SVM, math.md §2.14;
    ``q_i`` the linear term).

    Returns ``δ``, the change of ``β_i``, and updates every scalar of ``state``; the
    caller adds ``δ y_i x_{r_i}`` to ``w``.  A step that reaches the vertex ``e_i`` first
    clears ``β`` and ``w`` (:func:`_jump`) and returns ``δ = β_i = S``.
    """
    s = state[0]
    mass = s["mass"]
    load = yi * product + beta[i] * inv_c_i  # (Qβ)_i
    margin = load / mass
    if q_i - 2.0 * margin > s["max_gradient"]:
        s["max_gradient"] = q_i - 2.0 * margin
    weight = beta[i] / mass
    gamma = vertex_step(s["quad"] / (mass * mass), margin, diag_i, weight, q_i - s["lin"] / mass)
    if gamma == 0.0:
        return 0.0
    if gamma >= 1.0:
        _jump(i, yi, diag_i, q_i, beta, w, state)
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
    s["lin"] = s["lin"] + delta * q_i
    s["bias"] = s["bias"] + delta * yi
    beta[i] = 0.0 if delta == -beta[i] else beta[i] + delta
    return delta


@njit(cache=True)
def _jump(i, yi, diag_i, q_i, beta, w, state):
    """``α ← e_i`` (a FW step with ``γ = 1``), keeping ``S``: O(n + d)."""
    s = state[0]
    mass = s["mass"]
    for j in range(beta.shape[0]):
        beta[j] = 0.0
    for k in range(w.shape[0]):
        w[k] = 0.0
    beta[i] = mass
    s["bias"] = mass * yi
    s["lin"] = mass * q_i
    s["quad"] = mass * mass * diag_i


@njit(cache=True)
def dense_pass(X, rows, y, inv_c, diag, q, order, beta, w, state):
    """One pass of vertex steps over the coordinates ``order`` of dense features ``X`` (n × d).

    Coordinate ``k`` reads row ``rows[k]`` of ``X``; ``w`` (d,) and ``state[0]["bias"]``
    hold ``u = Σ_k β_k y_k (x_{r_k}, 1)``; every step costs O(d).
    """
    d = X.shape[1]
    for t in range(order.shape[0]):
        i = order[t]
        r, yi = rows[i], y[i]
        product = state[0]["bias"]
        for k in range(d):
            product += X[r, k] * w[k]
        delta = _coordinate_update(i, product, yi, inv_c[i], diag[i], q[i], beta, w, state)
        if delta == 0.0:
            continue
        scale = delta * yi
        for k in range(d):
            w[k] += scale * X[r, k]
        _rescale_if_far(beta, w, state)


@njit(cache=True)
def sparse_pass(indptr, indices, data, rows, y, inv_c, diag, q, order, beta, w, state):
    """:func:`dense_pass` on CSR features ``(indptr, indices, data)``: O(nnz(x_r)) per step."""
    for t in range(order.shape[0]):
        i = order[t]
        r, yi = rows[i], y[i]
        product = state[0]["bias"]
        for p in range(indptr[r], indptr[r + 1]):
            product += data[p] * w[indices[p]]
        delta = _coordinate_update(i, product, yi, inv_c[i], diag[i], q[i], beta, w, state)
        if delta == 0.0:
            continue
        scale = delta * yi
        for p in range(indptr[r], indptr[r + 1]):
            w[indices[p]] += scale * data[p]
        _rescale_if_far(beta, w, state)


@njit(cache=True)
def blocks_pass(X, starts, ends, weights, rows, y, inv_c, diag, q, order, beta, w, state):
    """:func:`dense_pass` on weighted column blocks of ``X`` (math.md §2.13, feature blocks).

    The features are ``x_r = (√c_1 X_{r,B_1}, …, √c_q X_{r,B_q})`` for the column ranges
    ``B_j = [starts[j], ends[j])`` and weights ``c_j = weights[j] > 0``; ``X`` itself is
    never scaled.  ``w`` holds ``c∘û`` (``û = Σ_k β_k y_k X_{r_k}`` on the blocks), so
    ``x_rᵀu = X_rᵀw`` and the step adds ``δ y_k c∘X_{r_k}`` to ``w``; columns outside the
    blocks are never read.
    """
    for t in range(order.shape[0]):
        i = order[t]
        yi = y[i]
        row = X[rows[i]]
        product = state[0]["bias"]
        for j in range(starts.shape[0]):
            x_j, w_j = row[starts[j] : ends[j]], w[starts[j] : ends[j]]
            for k in range(x_j.shape[0]):  # indices from 0: no wraparound test in the loop
                product += x_j[k] * w_j[k]
        delta = _coordinate_update(i, product, yi, inv_c[i], diag[i], q[i], beta, w, state)
        if delta == 0.0:
            continue
        scale = delta * yi
        for j in range(starts.shape[0]):
            block_scale = scale * weights[j]
            x_j, w_j = row[starts[j] : ends[j]], w[starts[j] : ends[j]]
            for k in range(x_j.shape[0]):
                w_j[k] += block_scale * x_j[k]
        _rescale_if_far(beta, w, state)


@njit(cache=True)
def dense_primal(X, rows, y, beta, w, w_abs):
    """``w = Σ_k β_k y_k x_{r_k}`` over the coordinates with ``β_k > 0`` (dense features),
    and ``w_abs = Σ_k β_k |y_k| |x_{r_k}|`` (the magnitude of its terms, for the rounding
    bound)."""
    d = X.shape[1]
    for k in range(d):
        w[k] = 0.0
        w_abs[k] = 0.0
    for i in range(rows.shape[0]):
        if beta[i] != 0.0:
            r, scale, size = rows[i], beta[i] * y[i], beta[i] * abs(y[i])
            for k in range(d):
                w[k] += scale * X[r, k]
                w_abs[k] += size * abs(X[r, k])


@njit(cache=True)
def sparse_primal(indptr, indices, data, rows, y, beta, w, w_abs):
    """:func:`dense_primal` on CSR features."""
    for k in range(w.shape[0]):
        w[k] = 0.0
        w_abs[k] = 0.0
    for i in range(rows.shape[0]):
        if beta[i] != 0.0:
            r, scale, size = rows[i], beta[i] * y[i], beta[i] * abs(y[i])
            for p in range(indptr[r], indptr[r + 1]):
                w[indices[p]] += scale * data[p]
                w_abs[indices[p]] += size * abs(data[p])


@njit(cache=True)
def blocks_primal(X, starts, ends, weights, rows, y, beta, w, w_abs):
    """:func:`dense_primal` on weighted column blocks (:func:`blocks_pass`): ``w = c∘û``
    with ``û = Σ_k β_k y_k X_{r_k}`` and ``w_abs = c∘Σ_k β_k |y_k| |X_{r_k}|`` on the
    blocks' columns."""
    for k in range(w.shape[0]):
        w[k] = 0.0
        w_abs[k] = 0.0
    for i in range(rows.shape[0]):
        if beta[i] != 0.0:
            scale, size = beta[i] * y[i], beta[i] * abs(y[i])
            row = X[rows[i]]
            for j in range(starts.shape[0]):
                x_j, w_j = row[starts[j] : ends[j]], w[starts[j] : ends[j]]
                a_j = w_abs[starts[j] : ends[j]]
                for k in range(x_j.shape[0]):
                    w_j[k] += scale * x_j[k]
                    a_j[k] += size * abs(x_j[k])
    for j in range(starts.shape[0]):
        for k in range(starts[j], ends[j]):
            w[k] *= weights[j]
            w_abs[k] *= weights[j]


@njit(cache=True)
def _record_margin(i, product, spread, y, inv_c, beta, state, out):
    """``out[i] = (Qα)_i`` from ``product = x_{r_i}ᵀw + bias`` and the magnitude ``spread``
    of its terms; tracks the largest and the α-weighted magnitude of the terms of ``v_i``."""
    s = state[0]
    out[i] = (y[i] * product + beta[i] * inv_c[i]) / s["mass"]
    magnitude = (abs(y[i]) * spread + beta[i] * inv_c[i]) / s["mass"]
    if magnitude > s["max_magnitude"]:
        s["max_magnitude"] = magnitude
    s["mean_magnitude"] = s["mean_magnitude"] + beta[i] * magnitude / s["mass"]


@njit(cache=True)
def dense_margins(X, rows, y, inv_c, beta, w, w_abs, state, out):
    """``out = Qα``: ``(Qα)_k = (y_k (x_{r_k}ᵀw + bias) + β_k c_k) / S`` for every coordinate
    ``k`` (``inv_c`` holds ``c_k``, e.g. ``1/(C w_k)``, math.md §2.14).

    Also sets ``state``'s ``max_magnitude`` and ``mean_magnitude``: the largest and the
    α-weighted sum of ``(|y_k| (|x_{r_k}|ᵀ w_abs + S) + β_k c_k) / S``, which bound the terms
    summed (through ``w``) into each ``v_k``.
    """
    s = state[0]
    s["max_magnitude"] = 0.0
    s["mean_magnitude"] = 0.0
    d = X.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        product = s["bias"]
        spread = s["mass"]
        for k in range(d):
            product += X[r, k] * w[k]
            spread += abs(X[r, k]) * w_abs[k]
        _record_margin(i, product, spread, y, inv_c, beta, state, out)


@njit(cache=True)
def sparse_margins(indptr, indices, data, rows, y, inv_c, beta, w, w_abs, state, out):
    """:func:`dense_margins` on CSR features."""
    s = state[0]
    s["max_magnitude"] = 0.0
    s["mean_magnitude"] = 0.0
    for i in range(rows.shape[0]):
        r = rows[i]
        product = s["bias"]
        spread = s["mass"]
        for p in range(indptr[r], indptr[r + 1]):
            product += data[p] * w[indices[p]]
            spread += abs(data[p]) * w_abs[indices[p]]
        _record_margin(i, product, spread, y, inv_c, beta, state, out)


@njit(cache=True)
def blocks_margins(X, starts, ends, weights, rows, y, inv_c, beta, w, w_abs, state, out):
    """:func:`dense_margins` on weighted column blocks (:func:`blocks_pass`, ``w = c∘û``,
    ``w_abs`` from :func:`blocks_primal`)."""
    s = state[0]
    s["max_magnitude"] = 0.0
    s["mean_magnitude"] = 0.0
    for i in range(rows.shape[0]):
        product = s["bias"]
        spread = s["mass"]
        row = X[rows[i]]
        for j in range(starts.shape[0]):
            x_j, w_j = row[starts[j] : ends[j]], w[starts[j] : ends[j]]
            a_j = w_abs[starts[j] : ends[j]]
            for k in range(x_j.shape[0]):
                product += x_j[k] * w_j[k]
                spread += abs(x_j[k]) * a_j[k]
        _record_margin(i, product, spread, y, inv_c, beta, state, out)
