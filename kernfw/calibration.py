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
from scipy.special import expit, log_expit, log_softmax

__all__ = [
    "Calibration",
    "CALIBRATION_MAPS",
    "platt_targets",
    "fit_platt",
    "fit_multinomial",
    "fit_calibration",
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
    kind : {"platt", "scale_bias", "temperature"}
        The map.
    scale : float
        ``a`` (``a = 1/T`` for temperature scaling; Platt's ``A`` is ``−a``).
    bias : ndarray of shape (m,) or float
        ``b`` (a float for Platt: Platt's ``B`` is ``−b``; zeros for temperature).
    """

    kind: str
    scale: float
    bias: object


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


def _platt_newton_terms(params, f, t):
    """Mean cross-entropy of ``σ(a f + b)`` against the targets ``t``, its gradient and its
    Hessian (``σ(1 − σ)``-weighted moments of ``(f, 1)``, with Platt's ``1e-12`` on the
    diagonal: constant ``f`` leaves ``a`` undetermined)."""
    z = params[0] * f + params[1]
    loss = -np.mean(t * log_expit(z) + (1.0 - t) * log_expit(-z))
    p = expit(z)
    r = p - t  # dℓ/dz = σ(z) − t
    w = p * (1.0 - p)
    wf = w * f
    hess = np.array([[np.mean(wf * f), np.mean(wf)], [np.mean(wf), np.mean(w)]])
    return loss, np.array([np.mean(r * f), np.mean(r)]), hess + 1e-12 * np.eye(2)


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
    if intercept:
        prior = np.log(t.sum() / (t.size - t.sum()))
        a, b = _newton(_platt_newton_terms, np.array([1.0, prior]), (c * f, t))
    else:
        (a,), b = _newton(_platt_slope_terms, np.array([1.0]), (c * f, t)), 0.0
    return Calibration("platt", float(a * c), float(b))


def _platt_slope_terms(params, f, t):
    """:func:`_platt_newton_terms` at ``b = 0``, in ``a`` alone."""
    loss, grad, hess = _platt_newton_terms(np.array([params[0], 0.0]), f, t)
    return loss, grad[:1], hess[:1, :1]


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


def calibrated_log_proba(calibration, S):
    """Log-probabilities ``log P(y = k | s)``, shape (n, m) (two columns for a binary model).

    Parameters
    ----------
    calibration : Calibration
    S : array-like of shape (n,) or (n, m)
        Scores of the kind the map was fitted on.
    """
    Z = calibration.scale * np.asarray(S, dtype=np.float64) + calibration.bias
    if calibration.kind == "platt":
        return np.column_stack([log_expit(-Z), log_expit(Z)])
    return log_softmax(Z, axis=1)


def log_loss_of(calibration, S, y):
    """Mean negative log-likelihood of labels ``y`` under the calibrated scores ``S``."""
    logp = calibrated_log_proba(calibration, S)
    y = np.asarray(y, dtype=np.intp)
    return float(-np.mean(logp[np.arange(y.size), y]))
