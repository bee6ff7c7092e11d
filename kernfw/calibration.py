"""Probability calibration of decision values (math.md §9).

A classifier's scores ``s(x)`` become probabilities through a map with few parameters,
fitted by maximum likelihood on scores that the model did not train on (held-out scores of
cross-validation folds):

- two classes, **Platt scaling** (math.md §9.2): ``P(y = 1 | f) = σ(a f + b)`` for the
  decision value ``f``, fitted to Platt's smoothed targets
  ``t₊ = (N₊ + 1)/(N₊ + 2)``, ``t₋ = 1/(N₋ + 2)``, or its fit through the origin
  (``b = 0``; what the estimators fit: ``P > 1/2`` where the model predicts class 1);
- ``m ≥ 3`` classes, a **multinomial fit of the scores** (math.md §9.3):
  ``P(y = k | s) = softmax(a s + b)_k``, temperature scaling (``b = 0``, the one parameter
  ``a = 1/T``; what the estimators fit: it keeps the order of the scores) or one scale and
  a bias per class (``"scale_bias"``, ``m`` free parameters).

Both are convex in their parameters; the fits minimize the negative log-likelihood by
Newton steps (exact gradient and Hessian, backtracking line search).
:func:`fit_calibration` chooses the map, :func:`calibrated_log_proba` applies it.
"""

from typing import NamedTuple

import numpy as np
from scipy.linalg import solve
from scipy.special import expit, log_expit, log_softmax, logsumexp

__all__ = [
    "Calibration",
    "CALIBRATION_MAPS",
    "platt_targets",
    "fit_platt",
    "fit_multinomial",
    "fit_calibration",
    "fit_pairwise_coupling",
    "pairwise_coupling",
    "lift_to_top",
    "calibrated_log_proba",
    "log_loss_of",
]

#: the maps :func:`fit_calibration` fits to ``m ≥ 3`` classes
CALIBRATION_MAPS = ("temperature", "scale_bias")

#: gradient tolerance of the Newton fits (the objectives are means, of order 1)
GTOL = 1e-9


class Calibration(NamedTuple):
    """A fitted calibration map ``z = a s + b`` (logits from scores).

    Attributes
    ----------
    kind : {"platt", "scale_bias", "temperature", "pairwise"}
        The map.
    scale : float or ndarray of shape (n_pairs,)
        ``a`` (``a = 1/T`` for temperature scaling; Platt's ``A`` is ``−a``; one per pair
        for ``"pairwise"``).
    bias : ndarray of shape (m,) or (n_pairs,), or float
        ``b`` (a float for Platt: Platt's ``B`` is ``−b``; zeros for temperature; one per
        pair for ``"pairwise"``).
    pairs : ndarray of shape (n_pairs, 2) or None
        The classes ``(i, j)`` of each pairwise score (``"pairwise"`` only; positive:
        class ``j``).
    """

    kind: str
    scale: object
    bias: object
    pairs: object = None


def _standardize(S):
    """``s / c`` with ``c`` the scores' mean absolute value (1 if they are all zero):
    the fits then start at a well-scaled point whatever the scale of the scores."""
    c = float(np.mean(np.abs(S)))
    return (1.0 / c) if c > 0 and np.isfinite(c) else 1.0


def platt_targets(y):
    """Platt's smoothed targets: ``(N₊ + 1)/(N₊ + 2)`` for ``y = 1``, ``1/(N₋ + 2)`` for ``y = 0``.

    Parameters
    ----------
    y : array-like of {0, 1}, shape (n,)

    Returns
    -------
    ndarray of shape (n,)
    """
    y = np.asarray(y)
    n_pos = int(np.count_nonzero(y == 1))
    n_neg = y.size - n_pos
    return np.where(y == 1, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))


def _platt_terms(a, b, F, T, W):
    """Per column ``q``: the weighted mean cross-entropy of ``σ(a_q F_q + b_q)`` against the
    targets ``T_q`` (weights ``W_q``, 0 or 1, summing to 1), its gradient in ``(a, b)`` and
    its Hessian (``σ(1 − σ)``-weighted moments of ``(f, 1)``, with Platt's ``1e-12`` on the
    diagonal: constant ``f`` leaves ``a`` undetermined)."""
    Z = a * F + b
    log_p = log_expit(Z)  # log σ(z); log σ(−z) = log σ(z) − z
    loss = -np.sum(W * (log_p - (1.0 - T) * Z), axis=0)
    P = np.exp(log_p)
    R = W * (P - T)  # dℓ/dz = σ(z) − t
    V = W * P * (1.0 - P)
    VF = V * F
    grad = np.array([np.sum(R * F, axis=0), np.sum(R, axis=0)])
    hess = np.array([np.sum(VF * F, axis=0), np.sum(VF, axis=0), np.sum(V, axis=0)])
    hess[[0, 2]] += 1e-12
    return loss, grad, hess


def _platt_direction(grad, hess, intercept):
    """The Newton direction ``−H⁻¹g`` of every column (2 × 2, or in ``a`` alone)."""
    h_aa, h_ab, h_bb = hess
    if not intercept:
        return np.array([-grad[0] / h_aa, np.zeros_like(h_aa)])
    det = h_aa * h_bb - h_ab * h_ab
    return np.array(
        [-(h_bb * grad[0] - h_ab * grad[1]) / det, -(h_aa * grad[1] - h_ab * grad[0]) / det]
    )


def _fit_platt_columns(F, T, W, intercept, max_iter=100):
    """Platt's fits of the columns of ``F`` (math.md §9.2), all at once: Newton steps with
    backtracking (Armijo fraction ``1e-4``) per column, until ``‖g‖_∞ ≤`` :data:`GTOL` or no
    step decreases its value; ``W`` (0/1 per point and column) selects each fit's points.
    Returns ``(a, b)``, arrays of shape (n_columns,)."""
    W = W / np.maximum(W.sum(axis=0), 1.0)
    a = np.ones(F.shape[1])
    b = np.zeros(F.shape[1])
    if intercept:  # Platt's start: the log-odds of the mean target
        mean = np.clip(np.sum(W * T, axis=0), 1e-12, 1.0 - 1e-12)
        b = np.log(mean / (1.0 - mean))
    value, grad, hess = _platt_terms(a, b, F, T, W)
    active = np.ones(F.shape[1], dtype=bool)
    for _ in range(max_iter):
        active &= np.max(np.abs(grad), axis=0) > GTOL
        if not active.any():
            break
        d = _platt_direction(grad, hess, intercept) * active
        slope = np.sum(grad * d, axis=0)
        step, pending = np.ones_like(a), active.copy()
        while pending.any():
            trial = _platt_terms(a + step * d[0], b + step * d[1], F, T, W)
            pending &= trial[0] > value + 1e-4 * step * slope
            step[pending] *= 0.5
            stalled = pending & (step <= 1e-10)
            active &= ~stalled
            step[stalled], pending = 0.0, pending & ~stalled
        a, b = a + step * d[0], b + step * d[1]
        value, grad, hess = _platt_terms(a, b, F, T, W)
    return a, b


def _newton(terms, x0, args, max_iter=100):
    """Minimize a smooth convex function by Newton steps with backtracking.

    ``terms(x, *args)`` returns the value, the gradient and the (positive definite)
    Hessian.  Each step solves ``H d = −g`` (:func:`scipy.linalg.solve`) and halves
    ``d`` until the value decreases by the Armijo fraction ``1e-4 · gᵀd``; the loop ends
    when ``‖g‖_∞ ≤`` :data:`GTOL` or no step decreases the value.
    """
    x = np.asarray(x0, dtype=np.float64)
    value, grad, hess = terms(x, *args)
    for _ in range(max_iter):
        if np.max(np.abs(grad)) <= GTOL:
            break
        d = solve(hess, -grad, assume_a="pos")
        slope, step = float(grad @ d), 1.0
        while step > 1e-10:
            trial = terms(x + step * d, *args)
            if trial[0] <= value + 1e-4 * step * slope:
                break
            step *= 0.5
        else:
            break
        x = x + step * d
        value, grad, hess = trial
    return x


def fit_platt(f, y, intercept=True):
    """Platt scaling: ``(a, b)`` maximizing the likelihood of ``σ(a f + b)`` (math.md §9.2).

    Parameters
    ----------
    f : array-like of shape (n,)
        Held-out decision values (positive: class 1).
    y : array-like of {0, 1}, shape (n,)
    intercept : bool, default=True
        Fit ``b`` (Platt's map); False fixes ``b = 0``, so that ``P(y = 1 | f) > 1/2``
        exactly when ``f > 0`` (for ``a > 0``).

    Returns
    -------
    Calibration
        ``kind="platt"``: ``P(y = 1 | f) = σ(scale·f + bias)``.
    """
    f = np.asarray(f, dtype=np.float64)
    c = _standardize(f)
    t = platt_targets(y)
    (a,), (b,) = _fit_platt_columns(c * f[:, None], t[:, None], np.ones((f.size, 1)), intercept)
    return Calibration("platt", float(a * c), float(b))


def _logits(params, S, with_bias):
    """``a S + b`` (``b = 0`` without bias)."""
    return params[0] * S + params[1:] if with_bias else params[0] * S


def _multinomial_newton_terms(params, S, y, with_bias):
    """Mean negative log-likelihood of ``softmax(a S + b)``, its gradient and Hessian.

    The Hessian is ``E[Jᵀ (diag p − p pᵀ) J]`` for the Jacobian ``J = [s, I]`` of the
    logits in ``(a, b)``.  The likelihood does not change when a constant is added to every
    ``b_k``; the term ``½(Σ_k b_k)²`` (``1 1ᵀ`` in the Hessian) picks the optimum with
    ``Σ_k b_k = 0`` and leaves the probabilities alone.
    """
    n, m = S.shape
    logp = log_softmax(_logits(params, S, with_bias), axis=1)
    rows = np.arange(n)
    loss = -np.mean(logp[rows, y])
    P = np.exp(logp)
    PS = P * S
    ps = PS.sum(axis=1)  # pᵀs per row
    grad_a = (np.sum(ps) - np.sum(S[rows, y])) / n  # dℓ/dZ = P − onehot(y)
    h_aa = (np.sum(PS * S) - np.sum(ps * ps)) / n
    if not with_bias:
        return loss, np.array([grad_a]), np.array([[h_aa]])
    shift = params[1:].sum()
    grad_b = (P.sum(axis=0) - np.bincount(y, minlength=m)) / n + shift
    H = np.empty((m + 1, m + 1))
    H[0, 0] = h_aa
    H[0, 1:] = H[1:, 0] = (PS.sum(axis=0) - P.T @ ps) / n
    H[1:, 1:] = (np.diag(P.sum(axis=0)) - P.T @ P) / n + 1.0
    return loss + 0.5 * shift**2, np.concatenate([[grad_a], grad_b]), H


def fit_multinomial(S, y, kind="scale_bias"):
    """Multinomial logistic fit of the scores: ``softmax(a S + b)`` (math.md §9.3).

    Parameters
    ----------
    S : array-like of shape (n, m)
        Held-out scores, one column per class.
    y : array-like of int, shape (n,)
        Class indices ``0 … m−1``.
    kind : {"scale_bias", "temperature"}
        ``"scale_bias"``: one scale and ``m`` biases (defined up to a common shift; the
        returned ``b`` sums to 0); ``"temperature"``: the scale alone (``b = 0``).

    Returns
    -------
    Calibration
    """
    if kind not in CALIBRATION_MAPS:
        raise ValueError(f"kind must be one of {CALIBRATION_MAPS}, got {kind!r}")
    S = np.asarray(S, dtype=np.float64)
    y = np.asarray(y, dtype=np.intp)
    c = _standardize(S)
    with_bias = kind == "scale_bias"
    x0 = np.zeros(1 + S.shape[1] if with_bias else 1)
    x0[0] = 1.0
    x = _newton(_multinomial_newton_terms, x0, (c * S, y, with_bias))
    bias = x[1:] - x[1:].mean() if with_bias else np.zeros(S.shape[1])
    return Calibration(kind, float(x[0] * c), bias)


def fit_calibration(S, y, kind="temperature"):
    """The calibration map of held-out scores ``S`` and labels ``y``.

    Parameters
    ----------
    S : array-like of shape (n,) or (n, m)
        Decision values of a binary model (positive: class 1), or one score per class.
    y : array-like of int, shape (n,)
        Class indices.
    kind : {"temperature", "scale_bias"}
        ``"temperature"``: a scale only (two classes: Platt's fit with ``b = 0``), which
        keeps the order of the scores, so the most probable class is the one of largest
        score (math.md §9.4); ``"scale_bias"``: a scale and biases (two classes:
        Platt's map).

    Returns
    -------
    Calibration
    """
    if kind not in CALIBRATION_MAPS:
        raise ValueError(f"kind must be one of {CALIBRATION_MAPS}, got {kind!r}")
    S = np.asarray(S)
    if S.ndim == 1:
        return fit_platt(S, y, intercept=kind == "scale_bias")
    return fit_multinomial(S, y, kind)


#: the pairwise probabilities are kept in ``[MIN_PAIR_PROB, 1 − MIN_PAIR_PROB]`` (libsvm's)
MIN_PAIR_PROB = 1e-7


def fit_pairwise_coupling(H, y, pairs):
    """Platt's map of each one-vs-one machine, for :func:`pairwise_coupling` (math.md §9.5).

    Parameters
    ----------
    H : array-like of shape (n, n_pairs)
        Held-out decision values of the pair machines (column ``q`` positive for class
        ``pairs[q][1]``).
    y : array-like of int, shape (n,)
        Class indices.
    pairs : sequence of (i, j)
        The classes of each column.

    Returns
    -------
    Calibration
        ``kind="pairwise"``: ``r_ji = P(y = j | y ∈ {i, j}, h) = σ(scale_q h_q + bias_q)``,
        fitted by :func:`fit_platt` on the points of classes ``i`` and ``j``.
    """
    H, y = np.asarray(H, dtype=np.float64), np.asarray(y, dtype=np.intp)
    pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
    W = (y[:, None] == pairs[:, 0]) | (y[:, None] == pairs[:, 1])  # each pair's points
    positive = y[:, None] == pairs[:, 1]
    n_pos, n_neg = positive.sum(axis=0), (W & ~positive).sum(axis=0)
    T = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))  # Platt's
    # each pair's points first in its column: the fits read max_q |pair q| rows, not n
    order = np.argsort(~W, axis=0, kind="stable")[: max(int(W.sum(axis=0).max()), 1)]
    F, T, W = (np.take_along_axis(M, order, axis=0) for M in (H, T, W))
    scale = np.array([_standardize(F[W[:, q], q]) for q in range(len(pairs))])
    a, b = _fit_platt_columns(scale * F, T, W.astype(np.float64), intercept=True)
    both = (n_pos > 0) & (n_neg > 0)  # else r = 1/2
    return Calibration("pairwise", np.where(both, a * scale, 0.0), np.where(both, b, 0.0), pairs)


def pairwise_coupling(R):
    """Class probabilities from pairwise ones (Wu, Lin & Weng 2004, method 2; math.md §9.5).

    ``p`` minimizes ``Σ_i Σ_{j≠i} (r_ji p_i − r_ij p_j)²`` on ``Σ p = 1``: the linear
    system ``[[Q, 1], [1ᵀ, 0]] [p; μ] = [0; 1]`` with ``Q_ii = Σ_{j≠i} r_ji²`` and
    ``Q_ij = −r_ji r_ij``, solved for every row at once.

    Parameters
    ----------
    R : ndarray of shape (n, m, m)
        ``R[:, i, j] = r_ij = P(y = i | y ∈ {i, j})`` (``r_ij + r_ji = 1``; the diagonal is
        not read).

    Returns
    -------
    ndarray of shape (n, m)
        Rows on the simplex.
    """
    n, m, _ = R.shape
    Rt = np.swapaxes(R, 1, 2)  # Rt[:, i, j] = r_ji
    A = np.zeros((n, m + 1, m + 1))
    Q = A[:, :m, :m]
    Q[...] = -Rt * R
    diag = np.arange(m)
    Q[:, diag, diag] = np.einsum("nij,nij->ni", Rt, Rt) - Rt[:, diag, diag] ** 2
    A[:, :m, m] = A[:, m, :m] = 1.0
    b = np.zeros((n, m + 1, 1))
    b[:, m] = 1.0
    p = np.linalg.solve(A, b)[:, :m, 0]
    np.maximum(p, 0.0, out=p)  # (nonnegative in exact arithmetic)
    return p / p.sum(axis=1, keepdims=True)


def lift_to_top(log_p, winners):
    """Log-probabilities whose class ``winners[r]`` is the most probable of row ``r``.

    Where another class ranks first (or ties first with a lower index), the winner's
    probability is raised just above the row's largest and the row renormalized (math.md
    §9.5): the coupled probabilities then agree with the vote that ``predict`` reads.

    Parameters
    ----------
    log_p : ndarray of shape (n, m)
        Log-probabilities (rows sum to 1 in probability).
    winners : ndarray of int, shape (n,)
        The class of each row that must come first.

    Returns
    -------
    ndarray of shape (n, m)
    """
    rows = np.arange(log_p.shape[0])
    top = log_p.max(axis=1)
    behind = np.argmax(log_p, axis=1) != winners  # (a tie goes to the first class)
    if not behind.any():
        return log_p
    out = log_p.copy()
    out[rows[behind], winners[behind]] = top[behind] + 1e-9
    return out - logsumexp(out, axis=1, keepdims=True)


def _pairwise_log_proba(calibration, H):
    """``log p`` of :func:`pairwise_coupling` of the calibrated pair machines."""
    H = np.atleast_2d(np.asarray(H, dtype=np.float64))
    pairs = calibration.pairs
    m = int(pairs.max()) + 1
    r = expit(calibration.scale * H + calibration.bias)  # P(y = j | i or j)
    np.clip(r, MIN_PAIR_PROB, 1.0 - MIN_PAIR_PROB, out=r)
    R = np.full((H.shape[0], m, m), 0.5)
    R[:, pairs[:, 1], pairs[:, 0]] = r
    R[:, pairs[:, 0], pairs[:, 1]] = 1.0 - r
    with np.errstate(divide="ignore"):
        return np.log(pairwise_coupling(R))


def calibrated_log_proba(calibration, S):
    """Log-probabilities ``log P(y = k | s)``, shape (n, m) (two columns for a binary model).

    Parameters
    ----------
    calibration : Calibration
    S : array-like of shape (n,), (n, m) or (n, n_pairs)
        Scores of the kind the map was fitted on (the pair machines' decisions for
        ``"pairwise"``).
    """
    if calibration.kind == "pairwise":
        return _pairwise_log_proba(calibration, S)
    Z = calibration.scale * np.asarray(S, dtype=np.float64) + calibration.bias
    if calibration.kind == "platt":
        return np.column_stack([log_expit(-Z), log_expit(Z)])
    return log_softmax(Z, axis=1)


def log_loss_of(calibration, S, y):
    """Mean negative log-likelihood of labels ``y`` under the calibrated scores ``S``."""
    logp = calibrated_log_proba(calibration, S)
    y = np.asarray(y, dtype=np.intp)
    return float(-np.mean(logp[np.arange(y.size), y]))
