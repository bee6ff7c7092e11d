r"""Marginals of the CRF (logistic) loss: softmax and chain forward–backward (math.md §4.6).

The CRF loss of example ``i`` is ``L_i(θ) = log Σ_y exp f(x_i, y) − f(x_i, y_i)``; its
gradient is ``E_{p_θ(y|x_i)}[φ(x_i, y)] − φ(x_i, y_i)``.  For the node-factored models
of :mod:`kernfw.structured` (``f(x, y) = Σ_t θ_t(y_t) + Σ_{t<T} G[y_t, y_{t+1}]``, one
position for multi-class) the expectation needs only

- node marginals ``μ_t(c) = p(y_t = c)`` (T × q),
- expected transition counts ``Σ_{t<T} p(y_t = a, y_{t+1} = b)`` (q × q),

computed in log space by the forward–backward recursions

.. math::  α_1 = θ_1,\quad α_t(b) = θ_t(b) + \mathrm{logsumexp}_a(α_{t−1}(a) + G_{ab}),

.. math::  β_T = 0,\quad β_t(a) = \mathrm{logsumexp}_b(G_{ab} + θ_{t+1}(b) + β_{t+1}(b)),

``log Z = logsumexp(α_T)``, ``μ_t = exp(α_t + β_t − log Z)`` and the pair marginal
``exp(α_t(a) + G_{ab} + θ_{t+1}(b) + β_{t+1}(b) − log Z)``.  One position is the softmax.
The recursion runs compiled (``kernfw.solvers._online_mkl_numba.forward_backward``) when
numba is available; :func:`chain_marginals_numpy` is the same recursion in numpy.
"""

import numpy as np
from scipy.special import logsumexp

from ..._compiled import compiled_module

__all__ = ["chain_marginals", "chain_marginals_numpy", "softmax_marginals"]


def softmax_marginals(scores):
    """``(p, log Z)`` of one multi-class example: ``p = softmax(scores)``.

    Parameters
    ----------
    scores : ndarray of shape (q,)

    Returns
    -------
    p : ndarray of shape (q,)
    log_z : float
    """
    scores = np.asarray(scores, dtype=float)
    log_z = float(logsumexp(scores))
    return np.exp(scores - log_z), log_z


def chain_marginals(theta, G):
    """Node marginals, expected transition counts and ``log Z`` of one chain.

    Parameters
    ----------
    theta : ndarray of shape (T, q)
        Node scores ``θ_t(c)`` (start/end biases included).
    G : ndarray of shape (q, q)
        Transition scores ``G[a, b]`` for ``a → b``.

    Returns
    -------
    mu : ndarray of shape (T, q)
        ``p(y_t = c)``.
    pair_counts : ndarray of shape (q, q)
        ``Σ_{t<T} p(y_t = a, y_{t+1} = b)``.
    log_z : float
        ``log Σ_y exp f(y)``.
    """
    compiled = compiled_module("kernfw.solvers._online_mkl_numba")
    if compiled is None:
        return chain_marginals_numpy(theta, G)
    theta = np.ascontiguousarray(theta, dtype=float)
    G = np.ascontiguousarray(G, dtype=float)
    mu = np.empty_like(theta)
    pairs = np.empty_like(G)
    log_z = compiled.forward_backward(theta, G, mu, pairs)
    return mu, pairs, float(log_z)


def chain_marginals_numpy(theta, G):
    """:func:`chain_marginals` in numpy (the reference of the compiled recursion)."""
    theta = np.asarray(theta, dtype=float)
    G = np.asarray(G, dtype=float)
    T, q = theta.shape
    alpha = np.empty((T, q))
    beta = np.zeros((T, q))
    alpha[0] = theta[0]
    for t in range(1, T):
        alpha[t] = theta[t] + logsumexp(alpha[t - 1][:, None] + G, axis=0)
    for t in range(T - 2, -1, -1):
        beta[t] = logsumexp(G + (theta[t + 1] + beta[t + 1])[None, :], axis=1)
    log_z = float(logsumexp(alpha[-1]))
    mu = np.exp(alpha + beta - log_z)
    pair_counts = np.zeros((q, q))
    for t in range(T - 1):
        pair_counts += np.exp(alpha[t][:, None] + G + (theta[t + 1] + beta[t + 1])[None, :] - log_z)
    return mu, pair_counts, log_z
