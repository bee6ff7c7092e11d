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
The recursion runs compiled (:func:`kernfw.solvers.mkl._online_numba.forward_backward`).
"""

import numpy as np
from scipy.special import logsumexp

from ._online_numba import forward_backward

__all__ = ["chain_marginals", "softmax_marginals"]


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
    theta = np.ascontiguousarray(theta, dtype=float)
    G = np.ascontiguousarray(G, dtype=float)
    mu = np.empty_like(theta)
    pairs = np.empty_like(G)
    log_z = forward_backward(theta, G, mu, pairs)
    return mu, pairs, float(log_z)
