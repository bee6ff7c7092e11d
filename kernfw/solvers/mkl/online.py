r"""Online proximal multiple kernel learning for structured outputs ([Martins2011]; math.md §4).

The model has one parameter block ``θ_k`` per group and scores
``f(x, y) = Σ_k ⟨θ_k, φ_k(x, y)⟩``.  It minimizes

.. math::  F(θ) = R(θ) + \frac1n \sum_i L_i(θ)

with a group regularizer ``R`` (:mod:`kernfw.solvers.mkl.prox`: squared ℓ2,1,
ℓ2,1, elastic MKL, sparse group lasso) and the structured hinge
``L_i = max_y [ℓ(y_i, y) + f(x_i, y)] − f(x_i, y_i)`` or the CRF loss
``L_i = log Σ_y exp f(x_i, y) − f(x_i, y_i)``, by the online proximal algorithm of
[Martins2011] (Algorithms 1 and 3, math.md §4.2): per example a subgradient step
(loss-augmented decoding for the hinge, marginals for the CRF), the prox of each
term of ``R`` in sequence, and an optional projection on a ball.

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
decoding.  The prox rescales whole groups.

**Online to batch.** ``averaging`` returns the last iterate ("none"), the uniform
or the ``t``-weighted average of all iterates, or the uniform average of the
iterates of the last epoch (``"epoch"``: a group switched off for a whole epoch
is exactly zero).  After each epoch the regularized objective ``F`` of the
returned predictor is recorded (one step of :func:`kernfw.fw.run` per epoch).
No duality gap is certified (``gap = inf``; math.md §4.5).
"""

import math
from dataclasses import dataclass

import numpy as np

from ..._validation import check_positive
from ...fw import Certificate, FWIterate, run
from ...operators import KernelOperator
from ...structured import Chain, MultiClass
from ...structured.chain import viterbi_one
from .crf import chain_marginals, softmax_marginals
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
                mu, pairs, log_z = chain_marginals(node, G)
                stats = np.concatenate([mu.ravel(), pairs.ravel()])
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

    Groups are numbered explicit first, then kernel.  Kernel group ``k`` keeps
    coefficients ``A_k`` (N positions × q states); its norm ``‖θ_k‖`` is
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
    """

    def __init__(self, D, explicit, kernels, q):
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
        self.ops = list(kernels)
        self.Me, self.Mk = len(self.idx), len(self.ops)
        self.M = self.Me + self.Mk
        if self.M == 0:
            raise ValueError("empty group list: online MKL needs at least one group")
        N = self.ops[0].n if self.ops else 0
        self.q = q
        self.A = np.zeros((self.Mk, N, q))
        self.knorms2 = np.zeros(self.Mk)
        self.in_support = np.zeros(N, dtype=bool)
        self.support = np.zeros(0, dtype=np.intp)

    # -- what the regularizers need ------------------------------------------------------
    def norms(self):
        explicit = [float(np.linalg.norm(self.w[g])) for g in self.idx]
        return np.concatenate([explicit, np.sqrt(np.maximum(self.knorms2, 0.0))])

    def l1(self):
        """``‖θ_E‖₁`` over the explicit groups."""
        return float(np.abs(self.w[self.covered]).sum())

    def rescale(self, factors):
        """``θ_k ← c_k θ_k``; a kernel group scaled to 0 drops its coefficients."""
        factors = np.asarray(factors, dtype=float)
        for c, g in zip(factors[: self.Me], self.idx):
            if c != 1.0:
                self.w[g] *= c
        kf = factors[self.Me :]
        S = self.support
        for k in np.flatnonzero(kf != 1.0):
            self.A[k, S] *= kf[k]
        self.knorms2 *= kf**2
        if np.any(kf == 0) and S.size:
            used = np.any(self.A[:, S] != 0, axis=(0, 2))
            self.in_support[S[~used]] = False
            self.support = S[used]

    def soft_threshold(self, tau):
        """ℓ1 prox on the explicit coordinates (kernel groups have no coordinates)."""
        v = self.w[self.covered]
        self.w[self.covered] = np.sign(v) * np.maximum(np.abs(v) - tau, 0.0)

    # -- a round -----------------------------------------------------------------------------
    def kernel_nodes(self, P, coef=None, support=None):
        """Node scores ``S_k`` (Mk, T, q) of the kernel groups at positions ``P`` and ``K_k[P, P]``.

        ``coef`` (N, q) with ``support``: one coefficient matrix for every group
        (dual averaging) instead of the groups' own ``A_k``.
        """
        T = P.size
        S = self.support if support is None else support
        nodes = np.zeros((self.Mk, T, self.q))
        blocks = np.empty((self.Mk, T, T))
        for k, op in enumerate(self.ops):
            cols = op.columns(P)  # (N, T)
            blocks[k] = cols[P]
            if S.size:
                nodes[k] = cols[S].T @ (self.A[k, S] if coef is None else coef[S])
        return nodes, blocks

    @staticmethod
    def norm_increment(eta, delta, nodes, blocks):
        """``2η⟨δ, S_k⟩ + η² tr(δᵀ K_k[P, P] δ)`` for every kernel group (math.md §4.4)."""
        inner = np.einsum("tc,ktc->k", delta, nodes)
        sq = np.einsum("ktc,tc->k", blocks @ delta, delta)
        return 2.0 * eta * inner + eta**2 * sq

    def step(self, eta, direction, P=None, delta=None, nodes=None, blocks=None):
        """``θ ← θ + η g``: explicit ``w += η·direction`` (on the groups), kernel ``A[P] += η δ``."""
        if direction is not None and self.Me:
            self.w[self.covered] += eta * direction[self.covered]
        if delta is None or not self.Mk:
            return
        rows = np.any(delta != 0, axis=1)
        if not np.any(rows):
            return
        self.knorms2 += self.norm_increment(eta, delta, nodes, blocks)
        Pn = P[rows]
        self.A[:, Pn] += eta * delta[rows][None]
        new = Pn[~self.in_support[Pn]]
        if new.size:
            self.in_support[new] = True
            self.support = np.flatnonzero(self.in_support)

    # -- snapshots ---------------------------------------------------------------------------
    def snapshot(self):
        return {"w": self.w.copy(), "A": self.A.copy()}


class _Average:
    """Running average of ``(w, A)``: uniform, ``t``-weighted, or uniform over one epoch.

    ``θ̄ ← θ̄ + ρ_t (θ_t − θ̄)`` with ``ρ_t = 1/t`` (uniform) or ``2/(t+1)``
    (weights ∝ t); ``t`` restarts at each epoch for ``"epoch"``.  Kernel rows are
    updated on every position that has been in a support since the restart.
    """

    def __init__(self, params, kind):
        self.params, self.kind = params, kind
        self.w = np.zeros_like(params.w)
        self.A = np.zeros_like(params.A)
        self.rows = np.zeros(params.A.shape[1], dtype=bool)
        self.count = 0

    def restart(self):
        if self.kind == "epoch":
            self.count = 0

    def update(self):
        self.count += 1
        p = self.params
        if self.count == 1:
            self.w[:] = p.w
            self.A[:] = 0.0
            self.rows[:] = False
            self.rows[p.support] = True
            self.A[:, p.support] = p.A[:, p.support]
            return
        rho = 2.0 / (self.count + 1) if self.kind == "weighted" else 1.0 / self.count
        self.w += rho * (p.w - self.w)
        self.rows[p.support] = True
        R = np.flatnonzero(self.rows)
        if R.size:
            self.A[:, R] += rho * (p.A[:, R] - self.A[:, R])


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
    max_iter : int
        Epochs.
    rng : numpy.random.Generator
        Order of the examples (a new permutation per epoch).
    averaging : {"none", "uniform", "weighted", "epoch"}
    """

    def __init__(
        self, oracle, params, offsets, regularizer, eta0, radius, max_iter, rng, averaging
    ):
        self.oracle, self.params, self.offsets = oracle, params, offsets
        self.reg, self.eta0, self.radius = regularizer, eta0, radius
        self.max_iter, self.rng = max_iter, rng
        self.avg = None if averaging == "none" else _Average(params, averaging)
        self.rounds = self.epochs = self.mistakes = 0
        self.norm_path = []

    def _positions(self, i):
        return np.arange(self.offsets[i], self.offsets[i + 1])

    def round(self, i):
        """One online round on example ``i``: decode, step, prox in sequence, project."""
        self.rounds += 1
        eta = self.eta0 / math.sqrt(self.rounds)
        p = self.params
        P = nodes = blocks = None
        knode = None
        if p.Mk:
            P = self._positions(i)
            nodes, blocks = p.kernel_nodes(P)
            knode = nodes.sum(axis=0)
        _, direction, delta = self.oracle.evaluate(i, p.w, knode)
        if direction is not None or delta is not None:
            p.step(eta, direction, P, delta, nodes, blocks)
            self.mistakes += 1
        self.reg.prox(p, eta)
        if self.radius is not None:
            total = float(np.linalg.norm(p.norms()))
            if total > self.radius:
                p.rescale(np.full(p.M, self.radius / total))
        if self.avg is not None:
            self.avg.update()
        return eta

    def step(self, t):
        self.mistakes = 0
        if self.avg is not None:
            self.avg.restart()
        eta = 0.0
        for i in self.rng.permutation(self.oracle.n).tolist():
            eta = self.round(i)
        self.epochs += 1
        return eta

    # -- the returned predictor ------------------------------------------------------------
    def predictor(self):
        """``(w, A, support, group norms)`` of the returned predictor (average or last)."""
        p = self.params
        if self.avg is None:
            return p.w.copy(), p.A[:, p.support].copy(), p.support.copy(), p.norms()
        support = np.flatnonzero(np.any(self.avg.A != 0, axis=(0, 2)))
        A = self.avg.A[:, support]
        explicit = [float(np.linalg.norm(self.avg.w[g])) for g in p.idx]
        kernel = [
            math.sqrt(max(float(np.sum(A[k] * (op.subset(support).dense() @ A[k]))), 0.0))
            if support.size
            else 0.0
            for k, op in enumerate(p.ops)
        ]
        return self.avg.w.copy(), A, support, np.array(explicit + kernel)

    def kernel_scores(self, A, support):
        """Kernel node scores of the predictor on all training positions, (N, q)."""
        p = self.params
        out = np.zeros((p.A.shape[1], p.q))
        for k, op in enumerate(p.ops):
            if support.size:
                out += op.columns(support) @ A[k]
        return out

    def objective(self, predictor=None):
        """``F = R(θ) + (1/n) Σ_i L_i(θ)`` of the returned predictor."""
        w, A, support, norms = self.predictor() if predictor is None else predictor
        scores = self.kernel_scores(A, support) if self.params.Mk else None
        total = 0.0
        for i in range(self.oracle.n):
            knode = None if scores is None else scores[self.offsets[i] : self.offsets[i + 1]]
            total += self.oracle.evaluate(i, w, knode, need_grad=False)[0]
        l1 = float(np.abs(w[self.params.covered]).sum())
        return self.reg.value(norms, l1) + total / self.oracle.n

    def certificate(self):
        pred = self.predictor()
        self.norm_path.append(pred[3])
        return Certificate(
            primal=self.objective(pred),
            dual=math.nan,
            gap=math.inf,
            extra={
                "epoch": self.epochs,
                "mistakes": self.mistakes,
                "active_groups": int(np.count_nonzero(pred[3])),
            },
        )

    def is_converged(self, cert, tol):
        """The stopping rule of an online method: the requested epochs are done."""
        return self.epochs >= self.max_iter

    def solution(self):
        w, A, support, norms = self.predictor()
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
    one coefficient matrix ``B`` (N × q) for ``G`` (every group's gradient has the
    same coefficients ``δ``); ``‖G_k‖`` is kept by the identity of math.md §4.4 and
    ``θ_k = s_k G_k``.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        p = self.params
        self.G = np.zeros_like(p.w)
        self.B = np.zeros((p.A.shape[1], p.q))
        self.B_rows = np.zeros(p.A.shape[1], dtype=bool)
        self.B_support = np.zeros(0, dtype=np.intp)
        self.G_norms2 = np.zeros(p.Mk)
        self.scales = np.zeros(p.Mk)

    def round(self, i):
        self.rounds += 1
        t = self.rounds
        p = self.params
        P = nodes = blocks = knode = None
        if p.Mk:
            P = self._positions(i)
            nodes, blocks = p.kernel_nodes(P, self.B, self.B_support)
            knode = np.einsum("k,ktc->tc", self.scales, nodes)
        _, direction, delta = self.oracle.evaluate(i, p.w, knode)
        if direction is not None and p.Me:
            self.G[p.covered] += direction[p.covered]
        if delta is not None and p.Mk and np.any(delta != 0):
            self.G_norms2 += p.norm_increment(1.0, delta, nodes, blocks)
            rows = np.any(delta != 0, axis=1)
            self.B[P[rows]] += delta[rows]
            if not np.all(self.B_rows[P[rows]]):
                self.B_rows[P[rows]] = True
                self.B_support = np.flatnonzero(self.B_rows)
        if direction is not None or delta is not None:
            self.mistakes += 1
        # θ = prox_{cR}(G·η0/√t) with c = η0·√t, on the group container
        scale, c = self.eta0 / math.sqrt(t), self.eta0 * math.sqrt(t)
        S = self.B_support
        p.w[:] = scale * self.G
        p.A[:, S] = scale * self.B[S][None]
        p.in_support[:] = self.B_rows
        p.support = S
        p.knorms2 = scale**2 * self.G_norms2
        before = np.sqrt(np.maximum(p.knorms2, 0.0))
        self.reg.prox(p, c)
        if self.radius is not None:
            total = float(np.linalg.norm(p.norms()))
            if total > self.radius:
                p.rescale(np.full(p.M, self.radius / total))
        after = np.sqrt(np.maximum(p.knorms2, 0.0))
        self.scales = scale * np.where(before > 0, after / np.where(before > 0, before, 1), 0.0)
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
    eta0=1.0,
    max_iter=10,
    radius=None,
    averaging="epoch",
    solver="proximal",
    random_state=None,
    callback=None,
    max_time=None,
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
    eta0 : float > 0
        ``η_t = η_0/√t`` (t counts rounds over all epochs).
    max_iter : int >= 1
        Epochs (random order per epoch).
    radius : None, "auto" or float > 0
        Ball projection after the prox; "auto" is ``ϱ = sqrt(2F(0)/λ)`` for the
        squared regularizers and ``F(0)/λ`` for the ℓ2,1 ones (both contain
        the optimum).
    averaging : {"none", "uniform", "weighted", "epoch"}
        The returned predictor (module docstring).
    solver : {"proximal", "dual_averaging"}
        The online proximal step of [Martins2011] (Alg. 1: subgradient step, then the
        proxes) or regularized dual averaging (:class:`DualAveragingIterate`:
        the proxes applied to the running gradient sum, sparser).
    random_state : int, Generator or None
    callback, max_time
        As :func:`kernfw.fw.run`.

    Returns
    -------
    FWResult
        ``primal`` = ``F`` of the returned predictor after the last epoch
        (``gap = inf``, ``converged = False``: nothing is certified).
        ``solution`` holds ``w`` (explicit parameters over ``φ``), ``coef``
        (Mk, n_support, q) and ``support`` (training positions) of the kernel
        groups, ``norms``, ``beta`` (``‖θ_k‖/Σ‖θ_l‖``) and ``norm_path``
        (epochs + 1, M).  The history has ``primal`` (F), ``mistakes`` and
        ``active_groups`` per epoch (row 0: ``θ = 0``).
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if averaging not in AVERAGING:
        raise ValueError(f"averaging must be one of {AVERAGING}, got {averaging!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    lam = check_positive("lam", lam)
    eta0 = check_positive("eta0", eta0)
    if isinstance(max_iter, bool) or int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer (epochs), got {max_iter!r}")
    reg = make_regularizer(regularizer, lam, lam2)
    model.initialize(X, Y)
    oracle = _make_oracle(model, X, Y, loss)
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
        model.size_joint_feature, explicit, kernels, oracle.q if oracle.factored else 1
    )
    cls = OnlineMKLIterate if solver == "proximal" else DualAveragingIterate
    iterate = cls(
        oracle,
        params,
        offsets,
        reg,
        eta0,
        None,
        int(max_iter),
        np.random.default_rng(random_state),
        averaging,
    )
    radius = _radius(radius, iterate, reg)
    iterate.radius = radius
    result = run(
        iterate,
        tol=0.0,
        max_iter=int(max_iter),
        max_time=max_time,
        callback=callback,
        keep_best=False,
        name="online MKL",
    )
    result.converged = False  # the epochs are done; nothing is certified
    if result.status == "converged":
        result.status = "max_iter"
    result.solution["radius"] = radius
    return result


def _radius(radius, iterate, reg):
    if radius is None:
        return None
    if isinstance(radius, str):
        if radius != "auto":
            raise ValueError(f"radius must be None, 'auto' or a positive number, got {radius!r}")
        F0 = iterate.objective()  # θ = 0: F(0) = mean loss at zero
        if reg.kind in ("squared_l21", "elastic"):
            return math.sqrt(2.0 * F0 / reg.lam)
        return F0 / reg.lam
    if isinstance(radius, bool) or not np.isscalar(radius) or not radius > 0:
        raise ValueError(f"radius must be None, 'auto' or a positive number, got {radius!r}")
    return float(radius)
