"""The compiled core of the chain model: BCFW passes and oracle passes (math.md §3.5, §3.8 (ii)).

One call of :func:`chain_pass` performs a whole pass of
:class:`~kernfw.solvers.structural.iterate.BCFW` on a :class:`~kernfw.structured.Chain`
model: for every block ``i`` of the given order it computes the node scores
``θ_t(l) = U_l x_t + [t = 1] b^s_l + [t = T] b^e_l``, decodes the
loss-augmented scores by Viterbi (ties to the smallest state, as
:func:`kernfw.structured.chain.viterbi_one`), and takes the block step of
:meth:`~kernfw.solvers.structural.iterate.BCFW.block_step` with the same formulas:

    g_i = ⟨z, w⟩/n − ℓ_i + c_i L_i(ŷ)/n,   γ = clip(g_i / (‖z‖²/(λn²)), 0, 1)  (or 2n/(k+2n)),

``z = c_i A_{x_i}(s(ŷ) − s̄_i)`` (``c_i`` the word's weight, math.md §3.11; 1 without
weights; the formulas below are those of ``c_i = 1``, scaled by ``c_i`` and ``c_i²``).
``z`` is never formed: with ``ΔE = E_ŷ − Ē_i``
(T × q) and ``ΔC = C_ŷ − C̄_i`` (q × q),

    ⟨z, w⟩ = Σ_{t,l} ΔE_{tl} θ_t(l) + ⟨ΔC, G⟩,
    ‖z‖²  = Σ_{t,t'} ⟨x_t, x_t'⟩ ⟨ΔE_t, ΔE_t'⟩ + ‖ΔE_1‖² + ‖ΔE_T‖² + ‖ΔC‖²,

(the word Grams ``⟨x_t, x_t'⟩`` are computed once, :func:`word_grams``), and
the update ``U −= γ/(λn) ΔEᵀ x`` skips the zero entries of ``ΔE`` (a block's
mean labeling has few labels per position).  The node scores are dot products
over the ``d`` features, summed in any order (``fastmath`` reassociation, so
they vectorize); everything else is evaluated in the order of the model's own
block steps, which therefore give the same iterates up to rounding
(``tests/structural/test_solvers.py`` checks it).  All functions are compiled with
``cache=True``.
"""

from collections import namedtuple

import numpy as np
from numba import njit

from ...fw._steps_numba import block_standard_step, quadratic_step

__all__ = ["word_grams", "chain_pass", "chain_oracle_pass", "Chains", "ChainState"]

#: reassociation for the node-score dot products only (they vectorize)
_DOT_FLAGS = {"reassoc", "contract"}


@njit(cache=True)
def word_grams(features, offsets):
    """Gram matrices ``⟨x_t, x_t'⟩`` of every word, flattened, and their offsets.

    Parameters
    ----------
    features : ndarray (N, d)
        All positions of all words (:class:`~kernfw.structured.ChainBatch`).
    offsets : ndarray (n + 1,)
        Word ``i`` is ``features[offsets[i]:offsets[i + 1]]``.

    Returns
    -------
    grams : ndarray (Σ_i T_i²,)
        Word ``i``'s (T_i × T_i) Gram, row-major, at ``gram_offsets[i]``.
    gram_offsets : ndarray (n + 1,)
    """
    n = offsets.size - 1
    gram_offsets = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        T = offsets[i + 1] - offsets[i]
        gram_offsets[i + 1] = gram_offsets[i] + T * T
    grams = np.empty(gram_offsets[n])
    d = features.shape[1]
    for i in range(n):
        a, T, g = offsets[i], offsets[i + 1] - offsets[i], gram_offsets[i]
        for t in range(T):
            for u in range(t, T):
                acc = 0.0
                for f in range(d):
                    acc += features[a + t, f] * features[a + u, f]
                grams[g + t * T + u] = acc
                grams[g + u * T + t] = acc
    return grams, gram_offsets


@njit(cache=True)
def _workspace(offsets, q):
    """Buffers of one word: ``θ`` and back-pointers (T_max × q), ``δ`` twice (q), ``ŷ``."""
    t_max = 1
    for i in range(offsets.size - 1):
        t_max = max(t_max, offsets[i + 1] - offsets[i])
    theta = np.empty((t_max, q))
    back = np.zeros((t_max, q), dtype=np.int64)
    return theta, back, np.empty(q), np.empty(q), np.empty(t_max, dtype=np.int64)


@njit(cache=True, fastmath=_DOT_FLAGS)
def _node_scores(features, a, T, w, q, theta):
    """``θ_t(l) = U_l x_t + [t = 1] b^s_l + [t = T] b^e_l`` into ``theta[:T]``."""
    d = features.shape[1]
    qd = q * d
    for t in range(T):
        for l in range(q):
            acc = 0.0
            for f in range(d):
                acc += features[a + t, f] * w[l * d + f]
            theta[t, l] = acc
    for l in range(q):
        theta[0, l] += w[qd + l]
        theta[T - 1, l] += w[qd + q + l]


# complex: the loss-augmented Viterbi recursion (math.md §3.8), compiled
@njit(cache=True)
def _viterbi(theta, T, labels, a, unit, augment, w, q, gstart, delta, prev, back, out):  # noqa: C901
    """Viterbi on ``θ`` (+ the loss term ``[l ≠ y_t]·unit`` when ``augment``) into ``out[:T]``.

    ``δ_1 = θ_1``, ``δ_t(l) = θ_t(l) + max_{l'} (δ_{t−1}(l') + G[l', l])``;
    ties go to the smallest state.  The loss term is added as the model
    adds it (``θ + unit``, then ``− unit`` at the true state).
    """
    for l in range(q):
        v = theta[0, l]
        if augment:
            v += unit
            if l == labels[a]:
                v -= unit
        delta[l] = v
    for t in range(1, T):
        for l in range(q):
            prev[l] = delta[l]
        for l in range(q):
            best = prev[0] + w[gstart + l]
            arg = 0
            for lp in range(1, q):
                v = prev[lp] + w[gstart + lp * q + l]
                if v > best:
                    best = v
                    arg = lp
            back[t, l] = arg
            v = theta[t, l]
            if augment:
                v += unit
                if l == labels[a + t]:
                    v -= unit
            delta[l] = best + v
    state = 0
    for l in range(1, q):
        if delta[l] > delta[state]:
            state = l
    out[T - 1] = state
    for t in range(T - 1, 0, -1):
        state = back[t, state]
        out[t - 1] = state


#: the words of a chain problem as a pass reads them (fixed for a run): the
#: :class:`~kernfw.structured.ChainBatch` arrays ``features`` (N × d) and ``offsets``
#: (n + 1,), the true state of every position ``labels`` (N,), the word Grams
#: ``grams``, ``gram_offsets`` (:func:`word_grams`), where each block's statistics
#: start in the flat statistics (``stat_offsets``), the number of states ``q`` and
#: whether the Hamming loss is divided by ``T`` (``normalize``), and the words' weights
#: ``c_i`` (``weights``, math.md §3.11: block ``i``'s ``z`` and loss scale by ``c_i``)
Chains = namedtuple(
    "Chains",
    [
        "features",
        "offsets",
        "labels",
        "grams",
        "gram_offsets",
        "stat_offsets",
        "q",
        "normalize",
        "weights",
    ],
)

#: what a BCFW pass changes in place: ``w = (U, b^s, b^e, G)``, the block statistics
#: ``s̄_i = (Ē_i, C̄_i)`` flattened (``T_i·q + q²`` each), ``ℓ_i`` and the last block gap
#: ``g_i`` of every block, ``ℓ = Σ_i ℓ_i`` (1,), and the weighted averages ``w̄``, ``ℓ̄``
ChainState = namedtuple(
    "ChainState", ["w", "stats", "block_loss", "block_gaps", "ell", "avg_w", "avg_ell"]
)


@njit(cache=True)
def _direction(ch, st, i, a, T, theta, y_hat, dE, dC):
    """``ΔE = E_ŷ − Ē_i``, ``ΔC = C_ŷ − C̄_i`` into ``dE``, ``dC``; returns ``⟨z, w⟩`` and the
    number of wrong states of ``ŷ``."""
    q, stats, w = ch.q, st.stats, st.w
    e0 = ch.stat_offsets[i]
    c0 = e0 + T * q
    gstart = w.size - q * q
    wrong = 0
    zw = 0.0
    for t in range(T):
        if y_hat[t] != ch.labels[a + t]:
            wrong += 1
        for l in range(q):
            v = -stats[e0 + t * q + l]
            if l == y_hat[t]:
                v += 1.0
            dE[t, l] = v
            zw += v * theta[t, l]
    for j in range(q * q):
        dC[j] = -stats[c0 + j]
    for t in range(T - 1):
        dC[y_hat[t] * q + y_hat[t + 1]] += 1.0
    for j in range(q * q):
        zw += dC[j] * w[gstart + j]
    return zw, wrong


@njit(cache=True)
def _z_sq_norm(ch, i, T, dE, dC):
    """``‖z‖²`` from the word Gram, ``ΔE`` and ``ΔC``."""
    g0 = ch.gram_offsets[i]
    zz = 0.0
    for t in range(T):
        for u in range(T):
            acc = 0.0
            for l in range(ch.q):
                acc += dE[t, l] * dE[u, l]
            zz += ch.grams[g0 + t * T + u] * acc
    for l in range(ch.q):
        zz += dE[0, l] * dE[0, l] + dE[T - 1, l] * dE[T - 1, l]
    for j in range(ch.q * ch.q):
        zz += dC[j] * dC[j]
    return zz


@njit(cache=True)
def _move(ch, st, i, a, T, gamma, c, dE, dC):
    """``w −= c·z`` (``c = γ/(λn)``; the zero entries of ``ΔE`` skipped) and
    ``s̄_i += γ (s(ŷ) − s̄_i)``."""
    q, w, stats, features = ch.q, st.w, st.stats, ch.features
    d = features.shape[1]
    qd = q * d
    gstart = qd + 2 * q
    e0 = ch.stat_offsets[i]
    c0 = e0 + T * q
    for t in range(T):
        for l in range(q):
            coef = c * dE[t, l]
            if coef != 0.0:
                for f in range(d):
                    w[l * d + f] -= coef * features[a + t, f]
    for l in range(q):
        w[qd + l] -= c * dE[0, l]
        w[qd + q + l] -= c * dE[T - 1, l]
        for t in range(T):
            stats[e0 + t * q + l] += gamma * dE[t, l]
    for j in range(q * q):
        w[gstart + j] -= c * dC[j]
        stats[c0 + j] += gamma * dC[j]


@njit(cache=True)
def chain_pass(order, ch, st, lam, standard, k0, averaging, avg_k0):
    """One BCFW pass over the blocks ``order`` (in place); returns ``Σ γ``.

    Parameters
    ----------
    order : ndarray of int
        Blocks ``i`` in visiting order.
    ch : Chains
        The words.
    st : ChainState
        The iterate, updated in place.
    lam : float
        ``λ``.
    standard : bool
        Step ``2n/(k + 2n)`` instead of the exact block line search.
    k0 : int
        Block steps taken before this pass (``k`` of the first one).
    averaging : bool
        Update the weighted averages ``w̄``, ``ℓ̄`` (``ρ = 2/(k̄ + 2)``).
    avg_k0 : int
        Averaging updates before this pass.
    """
    offsets, q, w = ch.offsets, ch.q, st.w
    n = offsets.size - 1
    gstart = q * ch.features.shape[1] + 2 * q
    theta, back, delta, prev, y_hat = _workspace(offsets, q)
    dE = np.empty((theta.shape[0], q))
    dC = np.empty(q * q)
    total = 0.0
    for s in range(order.size):
        i = order[s]
        a = offsets[i]
        T = offsets[i + 1] - a
        unit = 1.0 / T if ch.normalize else 1.0
        _node_scores(ch.features, a, T, w, q, theta)
        _viterbi(theta, T, ch.labels, a, unit, True, w, q, gstart, delta, prev, back, y_hat)
        zw, wrong = _direction(ch, st, i, a, T, theta, y_hat, dE, dC)
        ci = ch.weights[i]  # z = c_i A_{x_i}(s(ŷ) − s̄_i) (§3.11)
        loss_s = ci * wrong * unit / n
        gap = ci * zw / n - st.block_loss[i] + loss_s
        if standard:
            gamma = block_standard_step(k0 + s, n)
        else:
            zz = ci * ci * _z_sq_norm(ch, i, T, dE, dC)
            gamma = quadratic_step(gap, zz / (lam * n * n), 1.0)
        if gamma > 0.0:
            _move(ch, st, i, a, T, gamma, gamma * ci / (lam * n), dE, dC)
            delta_loss = gamma * (loss_s - st.block_loss[i])
            st.block_loss[i] += delta_loss
            st.ell[0] += delta_loss
        st.block_gaps[i] = gap
        if averaging:
            rho = 2.0 / (avg_k0 + s + 2.0)
            for j in range(w.size):
                st.avg_w[j] = st.avg_w[j] * (1.0 - rho) + rho * w[j]
            st.avg_ell[0] = st.avg_ell[0] * (1.0 - rho) + rho * st.ell[0]
        total += gamma
    return total


@njit(cache=True)
def chain_oracle_pass(features, offsets, labels, w, q, normalize, augment, out_labels):
    """Viterbi decoding of every word at ``w`` (loss-augmented when ``augment``).

    Writes the decoded states of every position into ``out_labels`` (N,) and
    returns ``Σ_i L_i(ŷ_i)`` (0 when not ``augment``).
    """
    n = offsets.size - 1
    gstart = q * features.shape[1] + 2 * q
    theta, back, delta, prev, y_hat = _workspace(offsets, q)
    loss = 0.0
    for i in range(n):
        a = offsets[i]
        T = offsets[i + 1] - a
        unit = 1.0 / T if normalize else 1.0
        _node_scores(features, a, T, w, q, theta)
        _viterbi(theta, T, labels, a, unit, augment, w, q, gstart, delta, prev, back, y_hat)
        wrong = 0
        for t in range(T):
            out_labels[a + t] = y_hat[t]
            if augment and y_hat[t] != labels[a + t]:
                wrong += 1
        loss += wrong * unit
    return loss
