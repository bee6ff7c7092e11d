r"""Online multiple kernel learning for structured outputs ([Martins2011]; math.md §4).

The model has one parameter block ``θ_k`` per group and scores
``f(x, y) = Σ_k ⟨θ_k, φ_k(x, y)⟩``.  It minimizes

.. math::  F(θ) = R(θ) + \frac1n \sum_i L_i(θ)

with a group regularizer ``R`` (:mod:`kernfw.solvers.mkl.prox`: squared ℓ2,1,
ℓ2,1, elastic MKL, sparse group lasso) and the structured hinge
``L_i = max_y [ℓ(y_i, y) + f(x_i, y)] − f(x_i, y_i)`` or the CRF loss
``L_i = (1/T) log Σ_y exp(T f(x_i, y)) − f(x_i, y_i)`` — the log-loss of the per-letter
scores ``T·f`` divided by ``T``, on the scale of the normalized hinge, for a chain of
length ``T`` with a normalized Hamming loss (``T = 1`` otherwise: the plain CRF loss;
math.md §4.6) — by regularized dual averaging ([Xiao2010]; :class:`DualAveragingIterate`,
the default) or by the online proximal algorithm of [Martins2011] (Algorithms 1 and 3,
math.md §4.2): per example a subgradient (loss-augmented decoding for the hinge,
marginals for the CRF), the prox of each term of ``R`` in sequence, and an optional
projection on a ball.

**Models.** Any :class:`~kernfw.structured.StructuredModel` with *explicit*
groups (index sets of its joint feature vector ``φ``) and the hinge, through
its oracles ``loss_augmented_decode`` / ``joint_feature``.  The node-factored
models — :class:`~kernfw.structured.MultiClass` (one position) and
:class:`~kernfw.structured.Chain` (``f = Σ_t θ_t(y_t) + Σ_t G[y_t, y_{t+1}]``) —
also take *kernel* groups on the positions (unary parts) and the CRF loss
(softmax / forward–backward marginals, :mod:`kernfw.solvers.mkl.crf`).
:class:`~kernfw.structured.Matching` is hinge-only (its partition function is a
permanent).

**Kernel groups** (math.md §4.4, §4.6): ``θ_k = Σ_{p,c} A_k[p, c] ϕ_k(x_p) ⊗ e_c`` over
training positions ``p`` and states ``c``.  A round on example ``i`` with positions
``P`` adds ``η δ`` to ``A_k[P]``, with ``δ = onehot(y_i) − onehot(ŷ)`` (hinge) or
``onehot(y_i) − μ`` (CRF marginals), and updates the group norm without a
quadratic form over the support:

.. math::  ‖θ_k + ηg‖² = ‖θ_k‖² + 2η ⟨δ, S_k⟩ + η² \operatorname{tr}(δᵀ K_k[P, P] δ),

``S_k`` (T × q) being the node scores of group ``k`` already computed for the
decoding.  The prox rescales whole groups: ``A_k = s_k C_k`` keeps the factor apart
(:class:`GroupParameters`), and the kernel blocks and scores of a round come from
:mod:`kernfw.solvers.mkl.kernel_groups` (compiled).

**Online to batch.** ``averaging`` returns the last iterate ("none"), the uniform
or the ``t``-weighted average of all iterates, or the uniform average of the
iterates of the last epoch (``"epoch"``: a group switched off for a whole epoch
is exactly zero), kept lazily (:class:`_Average`).  After each epoch the regularized
objective ``F`` of the returned predictor is recorded (one step of :func:`kernfw.fw.run`
per epoch; its loss term on ``objective_sample`` examples).
No duality gap is certified (``gap = inf``; math.md §4.5).
"""

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..._validation import check_positive
from ...fw import Certificate, FWIterate, RunBudget, run
from ...operators import KernelOperator
from ...structured import Chain, MultiClass
from ...structured.chain import viterbi_one
from ._online_numba import ROW_CHANGED, ROW_NEW, ROW_UNVISITED
from .crf import chain_marginals, softmax_marginals
from .kernel_groups import KernelGroups
from .prox import make_regularizer

__all__ = [
    "ExplicitGroup",
    "GroupParameters",
    "OnlineMKLIterate",
    "DualAveragingIterate",
    "solve_online_mkl",
    "LOSSES",
    "AVERAGING",
    "SOLVERS",
    "factored_positions",
    "default_eta0",
]

LOSSES = ("hinge", "crf")
#: the online algorithms (``solver``)
SOLVERS = ("proximal", "dual_averaging")
#: the returned predictor (``averaging``): the last iterate or an average of the iterates
AVERAGING = ("none", "uniform", "weighted", "epoch")


@dataclass
class ExplicitGroup:
    """An explicit group: the coordinates ``indices`` of the joint feature vector ``φ``.

    Attributes
    ----------
    indices : ndarray of int
        Indices into ``φ(x, y) ∈ R^D`` (groups must be disjoint).
    """

    indices: np.ndarray


# -- models: decoding, losses and gradients ------------------------------------------------
def factored_positions(model, X):
    """Positions of a node-factored model: ``(features (N, d), offsets (n + 1,))``.

    Multi-class examples are one position each; chains are their letters.
    Returns None for other models.
    """
    if isinstance(model, MultiClass):
        X = model.prepare(X)
        return X, np.arange(X.shape[0] + 1)
    if isinstance(model, Chain):
        batch = model.prepare(X)
        return batch.features, batch.offsets
    return None


class _Oracle:
    """Loss, subgradient direction and decoding of a structured model on its examples.

    ``evaluate(i, w, knode)`` returns ``(loss L_i, explicit direction (D,) or None,
    δ (T, q) or None)``: the negative subgradient ``φ(x_i, y_i) − E[φ(x_i, ·)]`` of
    the explicit part and ``δ`` of the kernel part (None when the subgradient is 0).
    """

    factored = False

    def __init__(self, model, X, Y, loss):
        self.model = model
        self.X = model.prepare(X)
        self.Y = model.prepare_outputs(Y)
        self.n = len(self.Y)
        self.loss_name = loss
        if loss != "hinge":
            raise ValueError(
                f"loss={loss!r} needs a node-factored model (MultiClass or Chain); "
                f"{type(model).__name__} supports loss='hinge' only (its "
                "partition function is not tractable here)"
            )

    def evaluate(self, i, w, knode=None, need_grad=True):
        x, y = self.X[i], self.Y[i]
        y_hat = self.model.loss_augmented_decode(x, y, w)
        phi, phi_hat = self.model.joint_feature(x, y), self.model.joint_feature(x, y_hat)
        loss = self.model.loss(y, y_hat) + float(w @ (phi_hat - phi))
        if not need_grad or np.array_equal(np.asarray(y_hat), np.asarray(y)):
            return max(loss, 0.0), None, None
        return max(loss, 0.0), phi - phi_hat, None

    def predict(self, i, w, knode=None, X=None):
        return self.model.decode((self.X if X is None else X)[i], w)


class _FactoredOracle(_Oracle):
    """MultiClass and Chain: node scores (+ transitions), kernel groups and the CRF loss."""

    factored = True

    def __init__(self, model, X, Y, loss):
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        self.model = model
        self.chain = isinstance(model, Chain)
        self.X = model.prepare(X)
        if self.chain:
            self.Y = model.check_labels(self.X, Y)
            self.q = model.n_states
        else:
            self.Y = model.check_labels(Y)
            self.q = model.n_classes
        self.n = len(self.Y)
        self.loss_name = loss
        self.labels = [np.atleast_1d(np.asarray(y, dtype=np.intp)) for y in self.Y]

    def nodes(self, x, w):
        """Explicit node scores (T, q) and transitions G (q, q) (None for multi-class)."""
        if self.chain:
            theta, GT = self.model.node_scores(x, w)
            return theta, GT.T
        return (w.reshape(self.q, -1) @ x)[None, :], None

    @staticmethod
    def _score(node, G, lab):
        s = float(node[np.arange(lab.size), lab].sum())
        if G is not None and lab.size > 1:
            s += float(G[lab[:-1], lab[1:]].sum())
        return s

    def _output(self, lab):
        return lab if self.chain else int(lab[0])

    def _augmented_decode(self, node, G, lab, y):
        if self.chain:
            unit = 1.0 / lab.size if self.model.normalize else 1.0
            aug = node + unit
            aug[np.arange(lab.size), lab] -= unit
            return viterbi_one(aug, np.ascontiguousarray(G.T))
        return np.array([int(np.argmax(node[0] + self.model.cost[y]))])

    def evaluate(self, i, w, knode=None, need_grad=True):
        x, y, lab = self.X[i], self.Y[i], self.labels[i]
        node, G = self.nodes(x, w)
        if knode is not None:
            node = node + knode
        own = self._score(node, G, lab)
        if self.loss_name == "hinge":
            hat = self._augmented_decode(node, G, lab, y)
            loss = self.model.loss(y, self._output(hat)) + self._score(node, G, hat) - own
            if not need_grad or np.array_equal(hat, lab):
                return max(loss, 0.0), None, None
            mu = np.zeros((lab.size, self.q))
            mu[np.arange(lab.size), hat] = 1.0
            expected = self.model.joint_feature(x, self._output(hat))
        else:
            if self.chain:
                # per-letter scale (math.md §4.6): the CRF of the scores T·f, divided by T
                T = lab.size if self.model.normalize else 1
                mu, pairs, log_z = chain_marginals(T * node, T * G)
                stats = np.concatenate([mu.ravel(), pairs.ravel()])
                log_z /= T
            else:
                p, log_z = softmax_marginals(node[0])
                mu, stats = p[None, :], p
            loss = log_z - own
            if not need_grad:
                return loss, None, None
            expected = self.model.expand(x, stats)
        delta = -mu
        delta[np.arange(lab.size), lab] += 1.0
        return loss, self.model.joint_feature(x, y) - expected, delta

    def predict(self, i, w, knode=None, X=None):
        node, G = self.nodes((self.X if X is None else X)[i], w)
        if knode is not None:
            node = node + knode
        if self.chain:
            return viterbi_one(node, np.ascontiguousarray(G.T))
        return int(np.argmax(node[0]))


def _make_oracle(model, X, Y, loss):
    if isinstance(model, (MultiClass, Chain)):
        return _FactoredOracle(model, X, Y, loss)
    return _Oracle(model, X, Y, loss)


# -- the parameters --------------------------------------------------------------------------
class GroupParameters:
    """``θ`` split into explicit groups (a vector ``w`` over ``φ``) and kernel groups.

    Groups are numbered explicit first, then kernel.  Kernel group ``k`` has the
    coefficients ``A_k = s_k C_k`` (support slots × q states, :mod:`.kernel_groups`):
    a stored array ``C_k`` and a factor ``s_k``, so that the prox and the projection,
    which rescale whole groups, cost O(1) per group.  With ``shared=True`` every group
    reads one stored array ``C`` (dual averaging: ``A_k = s_k B``).  ``‖θ_k‖`` is
    maintained by the identity of the module docstring.

    Parameters
    ----------
    D : int
        Length of ``φ``.
    explicit : list of ndarray of int
        Disjoint index sets into ``φ``.
    kernels : list of KernelOperator
        Kernel groups on the N training positions.
    q : int
        States per position (classes for multi-class).
    shared : bool, default=False
        One stored coefficient array for all kernel groups.
    """

    #: a stored array is folded into its factor when the factor falls below this (kept
    #: moderate: the lazy average subtracts terms up to 1/MIN_SCALE times its value)
    MIN_SCALE = 1e-3

    def __init__(self, D, explicit, kernels, q, shared=False):
        self.idx = [np.asarray(g, dtype=np.intp) for g in explicit]
        self.w = np.zeros(D)
        self.covered = np.zeros(D, dtype=bool)
        for g in self.idx:
            if g.size == 0 or g.min() < 0 or g.max() >= D:
                raise ValueError(
                    f"explicit groups must be non-empty index sets into the joint "
                    f"feature vector of length {D}"
                )
            if np.any(self.covered[g]):
                raise ValueError("explicit groups must be disjoint")
            self.covered[g] = True
        self.groups = KernelGroups(kernels) if kernels else None
        self.Me, self.Mk = len(self.idx), len(kernels)
        self.M = self.Me + self.Mk
        if self.M == 0:
            raise ValueError("empty group list: online MKL needs at least one group")
        N = self.groups.N if self.Mk else 0
        self.q, self.shared = q, shared
        if shared and self.Mk:  # by state when the compiled table passes read it
            self.C = self.groups.zeros(q)[None]
        else:
            self.C = np.zeros((1 if shared else self.Mk, N, q))
        self.scales = np.ones(self.Mk)
        self.knorms2 = np.zeros(self.Mk)
        self.touched = [[] for _ in range(self.C.shape[0])]  # slots written since a reset
        self.average = None  # an _Average kept in step with the factors, if any

    @property
    def n_support(self):
        return self.groups.n_support if self.Mk else 0

    # -- what the regularizers need ------------------------------------------------------
    def norms(self):
        explicit = [float(np.linalg.norm(self.w[g])) for g in self.idx]
        return np.concatenate([explicit, np.sqrt(np.maximum(self.knorms2, 0.0))])

    def l1(self):
        """``‖θ_E‖₁`` over the explicit groups."""
        return float(np.abs(self.w[self.covered]).sum())

    def rescale(self, factors):
        """``θ_k ← c_k θ_k``: explicit coordinates, kernel factors ``s_k``."""
        factors = np.asarray(factors, dtype=float)
        for c, g in zip(factors[: self.Me], self.idx):
            if c != 1.0:
                self.w[g] *= c
        kf = factors[self.Me :]
        self.scales *= kf
        self.knorms2 *= kf**2
        if self.shared:
            return
        for k in np.flatnonzero(self.scales < self.MIN_SCALE):
            self._fold(k)

    def _fold(self, k):
        """``C_k ← s_k C_k``, ``s_k ← 1`` (θ_k unchanged); a zero group forgets its slots."""
        s = self.scales[k]
        if self.average is not None:
            self.average.fold(k, s)
        if s == 0.0:
            if self.touched[k]:
                rows = np.concatenate(self.touched[k])
                self.C[k, rows] = 0.0
            self.touched[k] = []
        elif self.touched[k]:
            rows = np.unique(np.concatenate(self.touched[k]))
            self.C[k, rows] *= s
            self.touched[k] = [rows]
        self.scales[k] = 1.0

    def soft_threshold(self, tau):
        """ℓ1 prox on the explicit coordinates (kernel groups have no coordinates)."""
        v = self.w[self.covered]
        self.w[self.covered] = np.sign(v) * np.maximum(np.abs(v) - tau, 0.0)

    # -- a round -----------------------------------------------------------------------------
    def kernel_nodes(self, K):
        """``(Σ_k S_k, S)``: node scores of the kernel groups from the blocks ``K`` (Mk, T, n_S).

        ``S`` (Mk, T, q) are the per-group scores (None with shared coefficients).
        """
        if self.shared:
            return K.combined(self.scales, self.C[0]), None
        nodes = K.nodes(self.C)
        nodes *= self.scales[:, None, None]
        return nodes.sum(axis=0), nodes

    @staticmethod
    def norm_increment(eta, delta, inner, square_blocks):
        """``2η⟨δ, S_k⟩ + η² tr(δᵀ K_k[P, P] δ)`` for every kernel group (math.md §4.4)."""
        sq = np.einsum("ktc,tc->k", square_blocks @ delta, delta)
        return 2.0 * eta * inner + eta**2 * sq

    def step(self, eta, direction, P=None, delta=None, nodes=None):
        """``θ ← θ + η g``: explicit ``w += η·direction`` (on the groups), kernel ``A[P] += η δ``."""
        if direction is not None and self.Me:
            self.w[self.covered] += eta * direction[self.covered]
        if delta is None or not self.Mk:
            return
        rows = np.any(delta != 0, axis=1)
        if not np.any(rows):
            return
        inner = np.einsum("tc,ktc->k", delta, nodes)
        self.knorms2 += self.norm_increment(eta, delta, inner, self.groups.block(P, P))
        slots = self.groups.add(P[rows])
        increment = eta * delta[rows]
        for k in range(self.Mk):
            self.C[k, slots] += increment / self.scales[k]
            self.touched[k].append(slots)
            if len(self.touched[k]) > 4096:
                self.touched[k] = [np.unique(np.concatenate(self.touched[k]))]
        if self.average is not None:
            self.average.add(slots, increment[None] / self.scales[:, None, None])

    def coefficients(self):
        """True coefficients ``A_k`` of the support: (Mk, n_S, q), or
        :class:`SharedCoefficients` with shared storage."""
        ns = self.n_support
        if self.shared:
            return SharedCoefficients(self.scales.copy(), self.C[0, :ns].copy(order="K"))
        return self.scales[:, None, None] * self.C[:, :ns]


class SharedCoefficients(NamedTuple):
    """Kernel coefficients ``A_k = scales[k] · B`` shared by all groups (dual averaging)."""

    scales: np.ndarray
    B: np.ndarray

    def expand(self):
        """``A`` as an array (Mk, n_S, q)."""
        return self.scales[:, None, None] * self.B[None]


class AveragedCoefficients(NamedTuple):
    """Kernel coefficients ``A_k[j] = scales[k] B[j] + weights[j, k] D[j]`` (the epoch
    average of dual averaging, :class:`_EpochAverage`)."""

    scales: np.ndarray
    B: np.ndarray
    weights: np.ndarray
    D: np.ndarray

    def expand(self):
        """``A`` as an array (Mk, n_S, q)."""
        return self.scales[:, None, None] * self.B[None] + self.weights.T[:, :, None] * self.D[None]


class _EpochAverage:
    r"""The uniform average of the iterates of the current epoch under dual averaging,
    with its group norms (math.md §4.8).

    The iterates are ``θ_k(t) = s_k(t) B(t)`` (shared coefficients).  A position is
    updated at most once per epoch (its example is visited once), by ``Δ_j`` at round
    ``r_j``, so the sum of the epoch's ``m`` iterates has coefficients

    .. math::  U_k = Γ_k B − g_k ∘ Δ,\qquad Γ_k = Σ_{t≤m} s_k(t),\quad g_k(j) = Γ_k(r_j − 1),

    and ``θ̄_k = U_k / m``.  Its norm is kept without a quadratic form over the
    support: a round that adds ``D`` to ``B`` and then sets the factor to ``s`` does

    .. math::  ⟨U, B⟩ \mathrel{+}= ⟨U, D⟩ = Γ⟨B, D⟩ − ⟨g ∘ Δ, D⟩,\qquad
               ‖U‖² \mathrel{+}= 2s⟨U, B⟩ + s²‖B‖²,\qquad ⟨U, B⟩ \mathrel{+}= s‖B‖²

    per group (``‖B‖²_k`` is the iterate's ``‖G_k‖²``, an array updated in place).
    """

    def __init__(self, params, B_norms2):
        self.params, self.B_norms2 = params, B_norms2
        Mk, N, q = params.Mk, params.C.shape[1], params.q
        self.w = np.zeros_like(params.w)
        self.Delta = params.groups.zeros(q)
        self.g = np.zeros((N, Mk))
        self.kinds = np.full(N, ROW_UNVISITED, dtype=np.int8)  # Δ_j = 0, = B_j, other
        self.start = 0  # support size at the start of the epoch
        self.visited = []  # slots updated in this epoch
        self.gamma = np.zeros(Mk)
        self.UB = np.zeros(Mk)  # ⟨U_k, B⟩
        self.UU = np.zeros(Mk)  # ‖U_k‖²
        self.count = 0

    def restart(self):
        if self.visited:
            rows = np.concatenate(self.visited)
            self.Delta[rows] = 0.0
            self.g[rows] = 0.0
            self.kinds[rows] = ROW_UNVISITED
        self.visited = []
        self.start = self.params.n_support
        self.gamma[:] = 0.0
        self.UB[:] = 0.0
        self.UU[:] = 0.0
        self.count = 0

    def inner(self, K, delta):
        """Before ``B`` gets ``D`` (``δ`` at the round's positions, blocks ``K``): returns
        ``⟨B, D⟩_k`` and adds ``⟨U, D⟩ = Γ⟨B, D⟩ − ⟨g ∘ Δ, D⟩`` to ``⟨U, B⟩``."""
        p = self.params
        BD, ED = K.inner_pair(delta, p.C[0], self.g, self.Delta, self.kinds)
        self.UB += self.gamma * BD - ED
        return BD

    def add(self, slots, increments):
        """A round adds ``increments[0]`` (T', q) to ``B`` at ``slots`` (visited once)."""
        self.Delta[slots] = increments[0]
        self.g[slots] = self.gamma
        # a slot new in this epoch had B_j = 0 before: now B_j = Δ_j exactly
        self.kinds[slots] = np.where(slots >= self.start, ROW_NEW, ROW_CHANGED)
        self.visited.append(slots)

    def update(self):
        """Add the current iterate ``θ_t = s B`` (after the round's prox)."""
        self.count += 1
        p = self.params
        self.w += (p.w - self.w) / self.count
        s = p.scales
        self.UU += 2.0 * s * self.UB + s**2 * self.B_norms2
        self.UB += s * self.B_norms2
        self.gamma += s

    def coefficients(self):
        """``Ā_k = (Γ_k B − g_k ∘ Δ)/m`` of the support, as :class:`AveragedCoefficients`."""
        p = self.params
        ns, m = p.n_support, max(self.count, 1)
        return AveragedCoefficients(
            self.gamma / m,
            p.C[0, :ns].copy(order="K"),
            -self.g[:ns] / m,
            self.Delta[:ns].copy(order="K"),
        )

    def kernel_norms(self):
        """``‖θ̄_k‖ = ‖U_k‖ / m``."""
        return np.sqrt(np.maximum(self.UU, 0.0)) / max(self.count, 1)


class _Average:
    r"""Weighted average ``θ̄ = Σ_t ω_t θ_t / Σ_t ω_t`` of the iterates, kept lazily.

    ``ω_t = 1`` ("uniform", and "epoch": restarted every epoch) or ``ω_t = t``
    ("weighted").  Explicit coordinates are averaged directly.  A kernel group with
    ``A_k(t) = s_k(t) C_k(t)``, whose stored ``C_k`` changes only where a round adds
    ``Δ_r`` (the round's positions), has

    .. math::  Σ_{t'≤t} ω_{t'} A_k(t') = Γ_k(t)\, C_k(t) − E_k(t),\qquad
               Γ_k(t) = Σ_{t'≤t} ω_{t'} s_k(t'),\quad E_k = Σ_r Γ_k(r−1)\, Δ_r,

    so a round costs O(Mk·T·q) instead of a pass over the support.  Before a factor is
    folded into ``C_k`` (``C_k ← s C_k``, also ``s = 0``: a zero group's reset) the sum
    is written into ``E_k`` alone (:meth:`fold`).
    """

    def __init__(self, params, averaging):
        self.params, self.averaging = params, averaging
        self.w = np.zeros_like(params.w)
        Mk, N, q = params.Mk, params.C.shape[1], params.q
        self.E = np.zeros((Mk, N, q))
        self.gamma = np.zeros(Mk)
        self.weight = 0.0
        self.count = 0

    def restart(self):
        if self.averaging == "epoch":
            self.count = 0
            self.weight = 0.0
            self.gamma[:] = 0.0
            self.E[:, : self.params.n_support] = 0.0

    def add(self, slots, increments):
        """A round adds ``increments[k]`` (T', q) to the stored ``C_k`` at ``slots``."""
        self.E[:, slots] += self.gamma[:, None, None] * increments

    def fold(self, k, s):
        """Before ``C_k`` changes to ``s C_k``: write the running sum ``Γ_k C_k − E_k`` into
        ``E_k`` alone (``Γ_k ← 0``), which keeps ``Γ_k C_k`` and ``E_k`` of the size of the
        sum (no cancellation)."""
        p = self.params
        if p.touched[k]:
            rows = np.concatenate(p.touched[k])
            self.E[k, rows] -= self.gamma[k] * p.C[k, rows]
        self.gamma[k] = 0.0

    def update(self):
        """Add the current iterate ``θ_t`` with its weight ``ω_t``."""
        self.count += 1
        omega = float(self.count) if self.averaging == "weighted" else 1.0
        self.weight += omega
        p = self.params
        self.w += (omega / self.weight) * (p.w - self.w)
        self.gamma += omega * p.scales

    def coefficients(self):
        """Averaged kernel coefficients ``Ā_k`` of the support, (Mk, n_S, q)."""
        p = self.params
        ns = p.n_support
        C = p.C[:, :ns] if not p.shared else p.C[[0] * p.Mk, :ns]
        return (self.gamma[:, None, None] * C - self.E[:, :ns]) / self.weight


class OnlineMKLIterate(FWIterate):
    """Online proximal MKL (math.md §4.2, §4.6); one epoch per :meth:`step`.

    Parameters
    ----------
    oracle : _Oracle
        The model's decoding, losses and gradients on the training examples.
    params : GroupParameters
        ``θ`` (explicit and kernel groups).
    offsets : ndarray of int or None
        Positions of example ``i``: ``offsets[i]:offsets[i+1]`` (factored models).
    regularizer : Regularizer
    eta0 : float
        ``η_t = η_0/√t``.
    radius : float or None
        Project on ``{‖θ‖ ≤ radius}`` after the prox.
    rng : numpy.random.Generator
        Order of the examples (a new permutation per epoch).
    averaging : {"none", "uniform", "weighted", "epoch"}
    objective_sample : ndarray of int or None
        Examples on which the per-epoch objective is evaluated (None: all visited).
    weights : ndarray of shape (n,) or None
        Weights ``v_i`` of the examples' loss terms, mean 1 over the visited examples
        (math.md §4.9): a round on example ``i`` steps along ``v_i`` times its
        subgradient.  None: all 1.
    examples : ndarray of int or None
        The examples an epoch visits (those of positive weight); None: all ``n``.
    """

    #: positions whose products with the support are computed in one matrix product
    PREFETCH_POSITIONS = 256
    #: support rows per block of the quadratic forms of an average's norms (Mk blocks of
    #: NORM_ROWS × n_S values at once)
    NORM_ROWS = 32

    def __init__(self, oracle, params, offsets, regularizer, eta0, radius, rng, averaging,
                 objective_sample=None, weights=None, examples=None):  # fmt: skip
        self.oracle, self.params, self.offsets = oracle, params, offsets
        self.weights, self.examples = weights, examples
        self.reg, self.eta0, self.radius, self.rng = regularizer, eta0, radius, rng
        self.avg = None if averaging == "none" else self._make_average(averaging)
        params.average = self.avg
        self.sample = objective_sample
        self.rounds = self.epochs = self.mistakes = 0
        self.norm_path = []

    def _make_average(self, averaging):
        return _Average(self.params, averaging)

    def _positions(self, i):
        return np.arange(self.offsets[i], self.offsets[i + 1])

    def _project(self):
        p = self.params
        if self.radius is not None:
            total = float(np.linalg.norm(p.norms()))
            if total > self.radius:
                p.rescale(np.full(p.M, self.radius / total))

    def gradient(self, i, w, knode=None):
        """``(L_i, direction, δ)`` of :meth:`_Oracle.evaluate`, the negative subgradient
        (``direction``, ``δ``) scaled by the example's weight ``v_i`` (math.md §4.9)."""
        loss, direction, delta = self.oracle.evaluate(i, w, knode)
        if self.weights is None:
            return loss, direction, delta
        v = float(self.weights[i])
        return (
            loss,
            None if direction is None else v * direction,
            None if delta is None else v * delta,
        )

    def round(self, i):
        """One online round on example ``i``: decode, step, prox in sequence, project."""
        self.rounds += 1
        eta = self.eta0 / math.sqrt(self.rounds)
        p = self.params
        P = nodes = knode = None
        if p.Mk:
            P = self._positions(i)
            knode, nodes = p.kernel_nodes(p.groups.at(P))
        _, direction, delta = self.gradient(i, p.w, knode)
        if direction is not None or delta is not None:
            p.step(eta, direction, P, delta, nodes)
            self.mistakes += 1
        self.reg.prox(p, eta)
        self._project()
        if self.avg is not None:
            self.avg.update()
        return eta

    def step(self, t):
        self.mistakes = 0
        if self.avg is not None:
            self.avg.restart()
        eta = 0.0
        if self.examples is None:
            order = self.rng.permutation(self.oracle.n)
        else:  # the examples of positive weight, as the data without the others
            order = self.examples[self.rng.permutation(self.examples.size)]
        ahead = 0
        for r, i in enumerate(order.tolist()):
            if self.params.Mk and r == ahead:
                ahead = self._prefetch(order, r)
            eta = self.round(i)
        self.epochs += 1
        return eta

    def _prefetch(self, order, r):
        """Products of the positions of the next examples with the support (one matrix
        product for about ``PREFETCH_POSITIONS`` positions); returns where to prefetch next."""
        off = self.offsets
        ends = np.cumsum(off[order[r:] + 1] - off[order[r:]])
        stop = r + int(np.searchsorted(ends, self.PREFETCH_POSITIONS)) + 1
        chunk = order[r:stop]
        self.params.groups.prefetch(np.concatenate([np.arange(off[i], off[i + 1]) for i in chunk]))
        return stop

    # -- the returned predictor ------------------------------------------------------------
    def predictor(self):
        """``(w, coefficients (Mk, n_S, q), group norms)`` of the returned predictor."""
        p = self.params
        if self.avg is None:
            return p.w.copy(), (p.coefficients() if p.Mk else None), p.norms()
        A = self.avg.coefficients() if p.Mk else None
        explicit = [float(np.linalg.norm(self.avg.w[g])) for g in p.idx]
        if isinstance(self.avg, _EpochAverage):
            knorms = self.avg.kernel_norms()
        else:
            knorms = self._kernel_norms(A)
        return self.avg.w.copy(), A, np.concatenate([explicit, knorms])

    def _kernel_norms(self, A):
        """``‖θ_k‖ = sqrt(tr(A_kᵀ K_k[S, S] A_k))`` by blocks of the support."""
        p = self.params
        sq = np.zeros(p.Mk)
        if not p.Mk:
            return sq
        support = p.groups.support
        for lo in range(0, support.size, self.NORM_ROWS):
            rows = slice(lo, lo + self.NORM_ROWS)
            nodes = p.groups.at(support[rows]).nodes(A)
            sq += np.einsum("ktc,ktc->k", A[:, rows], nodes)
        return np.sqrt(np.maximum(sq, 0.0))

    def kernel_scores(self, A, positions):
        """Kernel node scores ``Σ_k K_k[positions, S] A_k`` of a predictor, (len, q)."""
        p = self.params
        out = np.zeros((positions.size, p.q))
        for lo in range(0, positions.size, self.PREFETCH_POSITIONS):
            rows = slice(lo, lo + self.PREFETCH_POSITIONS)
            p.groups.prefetch(positions[rows])  # their products in the kept buffer
            K = p.groups.at(positions[rows])
            if isinstance(A, SharedCoefficients):
                out[rows] = K.combined(A.scales, A.B)
            elif isinstance(A, AveragedCoefficients):
                out[rows] = K.averaged_combined(A.scales, A.B, A.weights, A.D)
            else:
                out[rows] = K.nodes(A).sum(axis=0)
        return out

    def objective(self, predictor=None):
        """``F = R(θ) + (1/n) Σ_i L_i(θ)`` of the returned predictor (the loss term on the
        examples of ``objective_sample``); with weights ``R(θ) + Σ_i v_i L_i(θ) / Σ_i v_i``
        over the visited examples (math.md §4.9)."""
        w, A, norms = self.predictor() if predictor is None else predictor
        examples = self.sample
        if examples is None:
            examples = np.arange(self.oracle.n) if self.examples is None else self.examples
        v = np.ones(examples.size) if self.weights is None else self.weights[examples]
        losses = np.empty(examples.size)
        if self.params.Mk and self.params.n_support:
            off = self.offsets
            positions = np.concatenate([np.arange(off[i], off[i + 1]) for i in examples])
            scores = self.kernel_scores(A, positions)
            starts = np.concatenate([[0], np.cumsum(off[examples + 1] - off[examples])])
            for j, i in enumerate(examples.tolist()):
                knode = scores[starts[j] : starts[j + 1]]
                losses[j] = self.oracle.evaluate(i, w, knode, need_grad=False)[0]
        else:
            for j, i in enumerate(examples.tolist()):
                losses[j] = self.oracle.evaluate(i, w, None, need_grad=False)[0]
        l1 = float(np.abs(w[self.params.covered]).sum())
        if self.weights is None:
            loss = sum(losses.tolist()) / examples.size
        else:
            loss = float(v @ losses) / float(v.sum())
        return self.reg.value(norms, l1) + loss

    def certificate(self):
        pred = self.predictor()
        self.norm_path.append(pred[2])
        return Certificate(
            primal=self.objective(pred),
            dual=math.nan,
            gap=math.inf,
            extra={
                "epoch": self.epochs,
                "mistakes": self.mistakes,
                "active_groups": int(np.count_nonzero(pred[2])),
                "iterate_active_groups": int(np.count_nonzero(self.params.norms())),
            },
        )

    def stopping_rule(self, tol):
        """An online method certifies nothing: it runs its epochs."""
        return RunBudget()

    def solution(self):
        w, A, norms = self.predictor()
        p = self.params
        if p.Mk:
            A = A.expand() if isinstance(A, (SharedCoefficients, AveragedCoefficients)) else A
            used = np.flatnonzero(np.any(A != 0, axis=(0, 2)))
            support, A = p.groups.support[used], A[:, used]
            order = np.argsort(support, kind="stable")
            support, A = support[order], A[:, order]
        else:
            support, A = np.zeros(0, dtype=np.intp), np.zeros((0, 0, p.q))
        total = norms.sum()
        return {
            "w": w,
            "coef": A,
            "support": support,
            "norms": norms,
            "beta": norms / total if total > 0 else np.zeros_like(norms),
            "norm_path": np.array(self.norm_path),
        }


class DualAveragingIterate(OnlineMKLIterate):
    r"""Regularized dual averaging (Xiao, 2010) for the same ``F``: one epoch per :meth:`step`.

    With the running sum of negative subgradients ``G_t = −Σ_{s≤t} g_s``,

    .. math::

        θ_{t+1} = \operatorname{argmin}_θ\ ⟨−G_t/t, θ⟩ + R(θ) + \frac{1}{2η_0\sqrt t}‖θ‖²
                = \mathrm{prox}_{η_0\sqrt t\,R}\big(η_0 G_t/\sqrt t\big),

    the same prox sequence as the proximal method, applied to the averaged
    gradient: a group is zero while ``‖G_{t,k}‖/t`` stays below the threshold of
    ``R`` (``λ`` for ℓ2,1, the batch optimality condition), instead of being
    revived by every example whose own gradient exceeds it.  Kernel groups share
    one coefficient matrix ``B`` (support × q) for ``G`` (every group's gradient has
    the same coefficients ``δ``), so ``θ_k = s_k B`` and a round needs one combined
    score ``Σ_k s_k K_k[P, S] B`` (:mod:`.kernel_groups`); ``‖G_k‖`` is kept by the
    identity of math.md §4.4.
    """

    def __init__(self, oracle, params, *args, **kwargs):
        self.G = np.zeros_like(params.w)
        self.G_norms2 = np.zeros(params.Mk)
        super().__init__(oracle, params, *args, **kwargs)

    def _make_average(self, averaging):
        if averaging == "epoch" and self.params.Mk:
            return _EpochAverage(self.params, self.G_norms2)
        return super()._make_average(averaging)

    def round(self, i):
        self.rounds += 1
        t = self.rounds
        p = self.params
        P = knode = K = None
        if p.Mk:
            P = self._positions(i)
            K = p.groups.at(P)
            knode, _ = p.kernel_nodes(K)
        _, direction, delta = self.gradient(i, p.w, knode)
        if direction is not None and p.Me:
            self.G[p.covered] += direction[p.covered]
        if delta is not None and p.Mk and np.any(delta != 0):
            if isinstance(self.avg, _EpochAverage):
                inner = self.avg.inner(K, delta)
            else:
                inner = K.shared_inner(delta, p.C[0])
            self.G_norms2 += p.norm_increment(1.0, delta, inner, p.groups.block(P, P))
            rows = np.any(delta != 0, axis=1)
            slots = p.groups.add(P[rows])
            p.C[0, slots] += delta[rows]
            if self.avg is not None:
                self.avg.add(slots, delta[rows][None])
        if direction is not None or delta is not None:
            self.mistakes += 1
        # θ = prox_{cR}(G·η0/√t) with c = η0·√t: set θ to the scaled sum, then the proxes
        scale, c = self.eta0 / math.sqrt(t), self.eta0 * math.sqrt(t)
        p.w[:] = scale * self.G
        p.scales[:] = scale
        p.knorms2 = scale**2 * self.G_norms2
        self.reg.prox(p, c)
        self._project()
        if self.avg is not None:
            self.avg.update()
        return scale


def solve_online_mkl(
    model,
    X,
    Y,
    groups,
    *,
    loss="hinge",
    regularizer="squared_l21",
    lam=1e-2,
    lam2=None,
    eta0="auto",
    max_iter=10,
    radius=None,
    averaging="epoch",
    solver="dual_averaging",
    objective_sample=None,
    random_state=None,
    callback=None,
    max_time=None,
    sample_weight=None,
):
    """Online proximal MKL over a structured model (math.md §4.2, §4.6).

    Parameters
    ----------
    model : StructuredModel
        The output space (``MultiClass``, ``Chain``, ``Matching``, ...);
        :meth:`~kernfw.structured.StructuredModel.initialize` is called on ``(X, Y)``.
    X, Y : sequences
        Training inputs and outputs, as the model takes them.
    groups : list of ExplicitGroup or KernelOperator
        The groups ``θ_k``: explicit index sets into ``φ`` and kernel groups
        (operators on the training positions of :func:`factored_positions`;
        MultiClass and Chain only).  Returned quantities list explicit groups
        first, then kernel groups, each in the given order.
    loss : {"hinge", "crf"}
        Structured hinge (loss-augmented decoding) or CRF (marginals).
    regularizer : {"squared_l21", "l21", "elastic", "sparse_group_lasso"}
        ``R`` (see :mod:`kernfw.solvers.mkl.prox`).
    lam : float > 0
        ``λ``.
    lam2 : float >= 0 or None
        ``λ₂`` of ``"elastic"`` / ``"sparse_group_lasso"`` (None: ``λ``).
    eta0 : float > 0 or "auto"
        ``η_t = η_0/√t`` (t counts rounds over all epochs); "auto" is
        :func:`default_eta0` (math.md §4.7): ``s·3/(λ√n)`` for dual averaging on a
        ``MultiClass`` model, ``s`` otherwise, ``s`` the loss's scale (1 for the hinge,
        ``1 + log(q − 1)`` for the CRF over ``q`` states).
    max_iter : int >= 1
        Epochs (random order per epoch).
    radius : None, "auto" or float > 0
        Ball projection after the prox; "auto" is ``ϱ = sqrt(2F(0)/λ)`` for the
        squared regularizers and ``F(0)/λ`` for the ℓ2,1 ones (both contain
        the optimum).
    averaging : {"none", "uniform", "weighted", "epoch"}
        The returned predictor (module docstring): "none" the last iterate, else an
        average of the iterates.
    solver : {"dual_averaging", "proximal"}
        Regularized dual averaging (:class:`DualAveragingIterate`, [Xiao2010]: the
        proxes applied to the running gradient sum; groups without signal stay
        exactly zero) or the online proximal step of [Martins2011] (Alg. 1:
        subgradient step, then the proxes).
    objective_sample : int or None
        Evaluate the per-epoch objective on a fixed random subset of this many
        examples (drawn once; None: on all examples).
    random_state : int, Generator or None
    callback, max_time
        As :func:`kernfw.fw.run`.
    sample_weight : array-like of shape (n,) or None
        Weights ``w_i ≥ 0`` of the examples' loss terms (math.md §4.9): the objective is
        ``R(θ) + Σ_i w_i L_i(θ) / Σ_i w_i`` and a round on example ``i`` steps along
        ``v_i = n₊ w_i / Σ_j w_j`` times its subgradient (``n₊`` the examples of positive
        weight, the only ones an epoch visits: an example of weight 0 is the example
        removed, with the same ``random_state`` the same run).  None: all 1.

    Returns
    -------
    FWResult
        ``primal`` = ``F`` of the returned predictor after the last epoch
        (``gap = inf``, ``converged = False``: nothing is certified).
        ``solution`` holds ``w`` (explicit parameters over ``φ``), ``coef``
        (Mk, n_support, q) and ``support`` (training positions) of the kernel
        groups, ``norms``, ``beta`` (``‖θ_k‖/Σ‖θ_l‖``) and ``norm_path``
        (epochs + 1, M), ``radius`` and ``eta0`` (the ``η₀`` used).  The history has
        ``primal`` (F), ``mistakes``, ``active_groups`` (of the returned predictor) and
        ``iterate_active_groups`` (of the last iterate) per epoch (row 0: ``θ = 0``).
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if averaging not in AVERAGING:
        raise ValueError(f"averaging must be one of {AVERAGING}, got {averaging!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    lam = check_positive("lam", lam)
    if isinstance(max_iter, bool) or int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer (epochs), got {max_iter!r}")
    reg = make_regularizer(regularizer, lam, lam2)
    model.initialize(X, Y)
    oracle = _make_oracle(model, X, Y, loss)
    weights, examples = _example_weights(sample_weight, oracle.n)
    n_visited = oracle.n if examples is None else examples.size
    if isinstance(eta0, str):
        if eta0 != "auto":
            raise ValueError(f"eta0 must be a positive number or 'auto', got {eta0!r}")
        grows = solver == "dual_averaging" and isinstance(model, MultiClass)
        eta0 = default_eta0(
            loss, oracle.q if oracle.factored else 2, lam if grows else None, n_visited
        )
    eta0 = check_positive("eta0", eta0)
    groups = list(groups)
    explicit = [g.indices for g in groups if isinstance(g, ExplicitGroup)]
    kernels = [g for g in groups if isinstance(g, KernelOperator)]
    if len(explicit) + len(kernels) != len(groups):
        raise TypeError("groups must be ExplicitGroup or KernelOperator instances")
    offsets = None
    if kernels:
        if not oracle.factored:
            raise ValueError(
                f"kernel groups need a node-factored model (MultiClass or Chain), "
                f"got {type(model).__name__}"
            )
        offsets = factored_positions(model, X)[1]
        for op in kernels:
            if op.n != offsets[-1]:
                raise ValueError(
                    f"kernel groups must be on the {offsets[-1]} training "
                    f"positions, got an operator on {op.n} points"
                )
    params = GroupParameters(
        model.size_joint_feature,
        explicit,
        kernels,
        oracle.q if oracle.factored else 1,
        shared=solver == "dual_averaging",
    )
    rng = np.random.default_rng(random_state)
    cls = OnlineMKLIterate if solver == "proximal" else DualAveragingIterate
    sample = _objective_sample(objective_sample, n_visited, rng, examples)
    args = (oracle, params, offsets, reg, eta0, None, rng, averaging, sample)
    iterate = cls(*args, weights=weights, examples=examples)
    iterate.radius = radius = _radius(radius, iterate, reg)
    budget = {"max_iter": int(max_iter), "max_time": max_time, "callback": callback}
    result = run(iterate, tol=0.0, keep_best=False, name="online MKL", **budget)
    result.solution["radius"] = radius
    result.solution["eta0"] = eta0
    return result


#: ``τ = η₀λ√n`` of ``eta0="auto"`` for multi-class dual averaging and the hinge: after the
#: first epoch the regularizer's weight λ is this many times the proximal weight ``1/(η₀√t)``
EPOCH_TAU = 3.0


def default_eta0(loss, n_states, lam=None, n_examples=None):
    """``η₀`` of ``eta0="auto"`` (math.md §4.7).

    The loss sets a scale ``s``: 1 for the hinge, ``1 + log(q − 1)`` for the CRF over ``q``
    states (the per-letter score at which the CRF is as sure of a state as the logistic
    loss at the hinge's margin 1).  Without ``lam`` (the proximal method, and chains or
    other structured outputs) ``η₀ = s``.  With ``lam`` (multi-class dual averaging)
    ``η₀ = s·τ/(λ√n)``, ``τ`` = :data:`EPOCH_TAU`: the iterate ``prox_{η₀√t R}(η₀G_t/√t)``
    weighs the regularizer against the proximal term by ``η₀λ√t``, which the rule sets to
    ``s·τ`` after the first epoch whatever ``n`` and ``λ`` (with ``λ = 1/(C n)`` the step
    grows as ``C√n``): the iterate reaches the scale of the regularized optimum, and a
    group's threshold rises towards the leading groups' averaged gradients, so kernels that
    carry less signal are exactly zero.

    Parameters
    ----------
    loss : {"hinge", "crf"}
    n_states : int
        ``q``.
    lam : float > 0 or None
        ``λ``; None: the loss's scale alone.
    n_examples : int or None
        ``n``, the rounds of one epoch (used with ``lam``).

    Returns
    -------
    float
    """
    scale = 1.0 if loss == "hinge" else 1.0 + math.log(max(int(n_states), 2) - 1)
    if lam is None:
        return scale
    return scale * EPOCH_TAU / (float(lam) * math.sqrt(max(int(n_examples), 1)))


def _example_weights(sample_weight, n):
    """``(v, examples)``: the loss weights ``v_i = n₊ w_i / Σ_j w_j`` (mean 1 over the ``n₊``
    examples of positive weight; None when every ``w_i`` is 1) and those examples (None
    when every weight is positive), from ``sample_weight`` (finite, ``≥ 0``, not all 0)."""
    if sample_weight is None:
        return None, None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise ValueError("sample_weight must be finite, nonnegative and not all zero")
    examples = np.flatnonzero(w > 0)
    v = w * (examples.size / w.sum())
    return (None if np.all(v[examples] == 1.0) else v), (None if examples.size == n else examples)


def _objective_sample(size, n, rng, examples=None):
    """The examples of the per-epoch objective: all (None, or ``size >= n``) or a fixed
    random subset of ``size`` of the ``n`` visited ones (``examples``, None: ``0 … n−1``)."""
    if size is None:
        return None
    if isinstance(size, bool) or int(size) != size or size < 1:
        raise ValueError(f"objective_sample must be None or a positive integer, got {size!r}")
    if size >= n:
        return None
    sample = np.sort(rng.choice(n, size=int(size), replace=False))
    return sample if examples is None else examples[sample]


def _radius(radius, iterate, reg):
    if radius is None:
        return None
    if isinstance(radius, str):
        if radius != "auto":
            raise ValueError(f"radius must be None, 'auto' or a positive number, got {radius!r}")
        F0 = iterate.objective()  # θ = 0: F(0) = mean loss at zero
        if reg.name in ("squared_l21", "elastic"):
            return math.sqrt(2.0 * F0 / reg.lam)
        return F0 / reg.lam
    if isinstance(radius, bool) or not np.isscalar(radius) or not radius > 0:
        raise ValueError(f"radius must be None, 'auto' or a positive number, got {radius!r}")
    return float(radius)
