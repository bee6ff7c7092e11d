"""Online multiple kernel learning with the squared ℓ2,1 norm (seed 003; math.md §4).

The model has one parameter block ``θ_k`` per kernel (or per explicit
feature group) and scores ``f(x, y) = Σ_k ⟨θ_k, φ_k(x, y)⟩`` with the joint
feature ``φ_k(x, y) = e_y ⊗ ϕ_k(x)`` of multi-class classification.  It
minimizes

.. math::  F(θ) = \\frac λ2 \\Big(\\sum_k ‖θ_k‖\\Big)^2
           + \\frac1n \\sum_i \\max_y \\big[ℓ(y, y_i) + f(x_i, y) − f(x_i, y_i)\\big]

(0/1 cost ``ℓ`` by default, or any cost matrix ``ℓ(y, y') ≥ 0`` with a zero
diagonal: the structured hinge of cost-sensitive multi-class) by the
kernelized online proximal algorithm (Fobos, seed Algorithms 1 and 3;
math.md §4.2): per example a subgradient step on the
structured hinge, the prox of ``η(λ/2)‖·‖²_{2,1}`` (which shrinks whole groups,
closed form of §4.3) and an optional projection on a ball.  The kernel
weights are ``β_k = ‖θ_k‖ / Σ_l ‖θ_l‖``.

Groups are kernels (:class:`KernelGroups`: per-group coefficients of the
stored support pairs, scaled lazily, group norms maintained through kernel
values, §4.4) or explicit feature blocks (:class:`FeatureGroups`: ``θ_k``
stored as a matrix).  One epoch is one step of the shared loop
:func:`kernfw.fw.run`, whose history records the batch objective ``F`` per
epoch; this method has no certified gap (``gap = inf``, math.md §4.5).
"""

import math

import numpy as np

from ...fw import Certificate, FWIterate, run
from ...operators import KernelOperator, MultiKernel

__all__ = ["prox_squared_l1", "prox_squared_l21", "structured_hinge", "batch_objective",
           "zero_one_cost", "check_cost",
           "KernelGroups", "FeatureGroups", "OnlineMKLIterate", "solve_online_mkl",
           "initial_radius"]


# -- proximal operators (math.md §4.3) ------------------------------------------------------
def prox_squared_l1(v, tau):
    """``prox_{(τ/2)‖·‖₁²}(v) = sign(v) ⊙ (|v| − κ)^+``.

    With ``|v|`` sorted decreasingly, ``ξ = max{j : |v|_[j] > τ/(1+jτ) Σ_{r≤j} |v|_[r]}``
    survivors and threshold ``κ = τ/(1+ξτ) Σ_{r≤ξ} |v|_[r]``.  The largest
    entry always survives (``ξ ≥ 1`` unless ``v = 0``): the squared norm
    shrinks, it never zeroes everything.

    Parameters
    ----------
    v : ndarray of shape (M,)
    tau : float >= 0
        ``τ = ηλ``.
    """
    v = np.asarray(v, dtype=float)
    a = np.sort(np.abs(v))[::-1]
    csum = np.cumsum(a)
    j = np.arange(1, a.size + 1)
    thresholds = tau / (1.0 + j * tau) * csum
    survivors = np.flatnonzero(a > thresholds)
    if survivors.size == 0:
        return np.zeros_like(v)
    kappa = thresholds[survivors[-1]]
    return np.sign(v) * np.maximum(np.abs(v) - kappa, 0.0)


def prox_squared_l21(groups, tau):
    """``prox_{(τ/2)‖·‖²_{2,1}}`` of a list of group arrays ``θ̃_k`` (seed Prop. 1).

    ``b = prox_{(τ/2)‖·‖₁²}(‖θ̃_1‖, …, ‖θ̃_M‖)`` and ``θ_k = (b_k/‖θ̃_k‖) θ̃_k``
    (0 when ``‖θ̃_k‖ = 0``): whole groups are zeroed.
    """
    groups = [np.asarray(g, dtype=float) for g in groups]
    norms = np.array([np.linalg.norm(g) for g in groups])
    factors = _shrink_factors(norms, tau)
    return [c * g for c, g in zip(factors, groups)]


def _shrink_factors(norms, tau):
    """``c_k = b_k / ‖θ̃_k‖`` with ``b`` the squared-ℓ1 prox of the group norms."""
    b = prox_squared_l1(norms, tau)
    safe = np.where(norms > 0, norms, 1.0)
    return np.where(norms > 0, b / safe, 0.0)


# -- the objective ---------------------------------------------------------------------------
def zero_one_cost(n_classes):
    """The 0/1 cost matrix ``ℓ(y, y') = [y ≠ y']``."""
    return 1.0 - np.eye(n_classes)


def check_cost(cost, n_classes):
    """A cost matrix ``ℓ[y_true, y]`` (m × m, finite, ≥ 0, zero diagonal); None → 0/1."""
    if cost is None:
        return zero_one_cost(n_classes)
    cost = np.asarray(cost, dtype=float)
    if cost.shape != (n_classes, n_classes):
        raise ValueError(f"cost must have shape ({n_classes}, {n_classes}), got {cost.shape}")
    if not np.all(np.isfinite(cost)) or np.any(cost < 0) or np.any(np.diag(cost) != 0):
        raise ValueError("cost must be finite and nonnegative with a zero diagonal")
    return cost


def structured_hinge(scores, y_idx, cost=None):
    """``L_i = max_y [ℓ(y_i, y) + f(x_i, y)] − f(x_i, y_i)``, shape (n,) (0/1 cost by default)."""
    n, m = scores.shape
    cost = zero_one_cost(m) if cost is None else cost
    rows = np.arange(n)
    aug = scores + cost[y_idx]
    return aug.max(axis=1) - scores[rows, y_idx]


def batch_objective(scores, norms, y_idx, lam, cost=None):
    """``F(θ) = (λ/2)(Σ_k ‖θ_k‖)² + (1/n) Σ_i L_i`` from the summed scores (n, m)."""
    losses = structured_hinge(scores, y_idx, cost)
    return 0.5 * lam * float(np.sum(norms)) ** 2 + float(losses.mean())


def initial_radius(lam, y_idx=None, cost=None):
    """``ϱ = sqrt(2 F(0) / λ)``, ``F(0) = (1/n) Σ_i max_y ℓ(y_i, y)`` (math.md §4.2).

    ``F(0) = 1`` for the 0/1 cost (the default when ``cost`` is None).
    """
    F0 = 1.0 if cost is None else float(np.mean(np.max(cost[y_idx], axis=1)))
    return math.sqrt(2.0 * F0 / lam)


#: a lazy scale factor below this is folded into the stored coefficients
_FOLD_SCALE = 1e-50


# -- parameter groups -----------------------------------------------------------------------
class KernelGroups:
    """Groups given by kernels: ``θ_k = Σ_i Σ_y B_k[i, y] φ_k(x_i, y)``.

    Each support pair ``s = (i_s, ŷ_s)`` contributes ``a_{k,s}`` to
    ``B_k[i_s, y_{i_s}]`` and ``−a_{k,s}`` to ``B_k[i_s, ŷ_s]``; pairs on the same
    point are merged in ``B_k`` (the same model, stored per point).  Scalings
    are lazy: ``B_k = scale_k · stored_k``, so the prox and the projection
    cost O(M).  Group norms ``‖θ_k‖²`` are maintained from kernel values
    (math.md §4.4), never recomputed from ``B``.

    Parameters
    ----------
    kernels : MultiKernel
        The ``M`` kernels on the training points.
    n_classes : int
    """

    def __init__(self, kernels, n_classes):
        self.ops = kernels.operators
        self.M, self.n, self.m = kernels.p, kernels.n, int(n_classes)
        self.stored = np.zeros((self.M, self.n, self.m))
        self.scale = np.ones(self.M)
        self.norms2 = np.zeros(self.M)
        self.self_kernel = np.array([op.diag() for op in self.ops], dtype=float)  # (M, n)
        self.in_support = np.zeros(self.n, dtype=bool)
        self.support = np.zeros(0, dtype=np.intp)

    def scores(self, i):
        """Per-group scores ``f_k(x_i, y)``, shape (M, m)."""
        S = self.support
        if S.size == 0:
            return np.zeros((self.M, self.m))
        rows = np.stack([op.columns(np.array([i]))[S, 0] for op in self.ops])   # k_k(x_s, x_i)
        return self.scale[:, None] * np.einsum("ks,ksy->ky", rows, self.stored[:, S])

    def add_pair(self, i, y, y_hat, eta, scores):
        """Subgradient step ``θ_k += η(φ_k(x_i, y) − φ_k(x_i, ŷ))`` for all groups."""
        self.norms2 += (2.0 * eta * (scores[:, y] - scores[:, y_hat])
                        + eta ** 2 * 2.0 * self.self_kernel[:, i])
        self.stored[:, i, y] += eta / self.scale
        self.stored[:, i, y_hat] -= eta / self.scale
        if not self.in_support[i]:
            self.in_support[i] = True
            self.support = np.flatnonzero(self.in_support)

    def norms(self):
        return np.sqrt(np.maximum(self.norms2, 0.0))

    def rescale(self, factors):
        """``θ_k ← c_k θ_k`` (lazily); groups scaled to 0 are reset."""
        self.scale *= factors
        self.norms2 *= factors ** 2
        tiny = (self.scale < _FOLD_SCALE) & (factors != 0)
        if np.any(tiny):                                  # fold before it underflows
            self.stored[tiny] *= self.scale[tiny, None, None]
            self.scale[tiny] = 1.0
        dead = factors == 0
        if np.any(dead):
            self.stored[dead] = 0.0
            self.scale[dead] = 1.0
            self.norms2[dead] = 0.0
            self._drop_unused()

    def _drop_unused(self):
        """Drop support points whose coefficients are 0 in every group."""
        used = np.any(self.stored[:, self.support] != 0, axis=(0, 2))
        self.in_support[self.support[~used]] = False
        self.support = self.support[used]

    def coefficients(self):
        """``(support, B)`` with ``B`` of shape (M, n_support, m), scalings applied."""
        return self.support.copy(), self.scale[:, None, None] * self.stored[:, self.support]

    def batch_scores(self):
        """Per-group scores on all training points, shape (M, n, m)."""
        support, B = self.coefficients()
        if support.size == 0:
            return np.zeros((self.M, self.n, self.m))
        return np.stack([op.columns(support) @ B[k] for k, op in enumerate(self.ops)])


class FeatureGroups:
    """Groups given by blocks of explicit features: ``θ_k`` is a (d_k × m) matrix.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    groups : list of index arrays or slices
        The feature columns of each group.
    n_classes : int
    """

    def __init__(self, X, groups, n_classes):
        self.blocks = [np.asarray(X[:, g], dtype=float) for g in groups]
        self.M, self.n, self.m = len(groups), X.shape[0], int(n_classes)
        self.theta = [np.zeros((B.shape[1], self.m)) for B in self.blocks]

    def scores(self, i):
        return np.stack([B[i] @ th for B, th in zip(self.blocks, self.theta)])

    def add_pair(self, i, y, y_hat, eta, scores):
        for B, th in zip(self.blocks, self.theta):
            th[:, y] += eta * B[i]
            th[:, y_hat] -= eta * B[i]

    def norms(self):
        return np.array([np.linalg.norm(th) for th in self.theta])

    def rescale(self, factors):
        for c, th in zip(factors, self.theta):
            th *= c

    def batch_scores(self):
        return np.stack([B @ th for B, th in zip(self.blocks, self.theta)])


# -- the algorithm ----------------------------------------------------------------------------
class OnlineMKLIterate(FWIterate):
    """Kernelized Fobos for ``F`` (math.md §4.2 with J = 1); one epoch per :meth:`step`.

    Parameters
    ----------
    groups : KernelGroups or FeatureGroups
    y_idx : ndarray of int, shape (n,)
    lam, eta0 : float
        ``λ`` and ``η_0`` (``η_t = η_0/√t``).
    radius : float or None
        Project on ``{‖θ‖ ≤ radius}`` after each prox (None: no projection).
    n_epochs : int
        The stopping rule: the requested number of epochs.
    rng : numpy.random.Generator
        Order of the examples (a new permutation per epoch).
    cost : ndarray of shape (m, m) or None
        ``ℓ[y_true, y]`` (None: 0/1).
    """

    def __init__(self, groups, y_idx, lam, eta0, radius, n_epochs, rng, cost=None):
        self.groups = groups
        self.y_idx = np.asarray(y_idx)
        self.lam, self.eta0, self.radius = lam, eta0, radius
        self.n_epochs = n_epochs
        self.rng = rng
        self.cost = check_cost(cost, groups.m)
        self.rounds = 0
        self.epochs = 0
        self.mistakes = 0

    def round(self, i):
        """One online round on example ``i``: decode, step, prox, project."""
        self.rounds += 1
        eta = self.eta0 / math.sqrt(self.rounds)
        y = int(self.y_idx[i])
        scores = self.groups.scores(i)
        aug = scores.sum(axis=0) + self.cost[y]
        y_hat = int(np.argmax(aug))                     # loss-augmented decoding
        if y_hat != y:
            self.groups.add_pair(i, y, y_hat, eta, scores)
            self.mistakes += 1
        norms = self.groups.norms()
        factors = _shrink_factors(norms, eta * self.lam)
        if self.radius is not None:
            total = math.sqrt(float(np.sum((factors * norms) ** 2)))
            if total > self.radius:
                factors = factors * (self.radius / total)
        self.groups.rescale(factors)
        return eta

    def step(self, t):
        self.mistakes = 0
        eta = 0.0
        for i in self.rng.permutation(self.groups.n).tolist():
            eta = self.round(i)
        self.epochs += 1
        return eta

    def objective(self):
        norms = self.groups.norms()
        return batch_objective(self.groups.batch_scores().sum(axis=0), norms, self.y_idx,
                               self.lam, self.cost)

    def certificate(self):
        norms = self.groups.norms()
        return Certificate(primal=self.objective(), dual=math.nan, gap=math.inf, extra={
            "epoch": self.epochs, "mistakes": self.mistakes,
            "active_groups": int(np.count_nonzero(norms))})

    def is_converged(self, cert, tol):
        """The stopping rule of an online method: the requested epochs are done."""
        return self.epochs >= self.n_epochs

    def solution(self):
        norms = self.groups.norms()
        total = norms.sum()
        sol = {"norms": norms, "beta": norms / total if total > 0 else np.zeros_like(norms)}
        if isinstance(self.groups, KernelGroups):
            sol["support"], sol["coef"] = self.groups.coefficients()
        else:
            sol["theta"] = [th.copy() for th in self.groups.theta]
        return sol


def solve_online_mkl(kernels, y, lam=1e-2, eta0=1.0, n_epochs=10, radius=None, groups=None,
               cost=None, random_state=None, callback=None, max_time=None):
    """Online MKL: kernelized Fobos with the prox of the squared ℓ2,1 norm (math.md §4).

    Parameters
    ----------
    kernels : MultiKernel, list of KernelOperator, or ndarray of shape (n, d)
        The groups: kernels on the training points, or explicit features
        split into column blocks by ``groups``.
    y : array-like of shape (n,)
        Class labels (two or more).
    lam : float > 0
        ``λ``.
    eta0 : float > 0
        Learning rate ``η_t = η_0 / √t`` (t counts rounds over all epochs).
    n_epochs : int >= 1
        Passes over the data (random order per pass).
    radius : None, "auto" or float > 0
        Ball projection after each prox: None (none), "auto"
        (``ϱ = sqrt(2F(0)/λ)``, ``= sqrt(2/λ)`` for the 0/1 cost, which contains
        the optimum) or a radius.
    groups : list of index arrays or slices, or None
        Column blocks when ``kernels`` is a feature matrix.
    cost : array-like of shape (m, m) or None
        Cost ``ℓ[y_true, y]`` of the structured hinge (classes in sorted
        order, zero diagonal); None is the 0/1 cost.
    random_state : int, Generator or None
        Order of the examples.
    callback, max_time
        As :func:`kernfw.fw.run`.

    Returns
    -------
    FWResult
        ``primal`` = batch objective ``F`` after the last epoch (``gap = inf``:
        no certificate).  ``solution`` holds ``beta`` (kernel weights
        ``‖θ_k‖/Σ‖θ_l‖``), ``norms`` and either ``support`` with ``coef``
        (M, n_support, m) — ``f_k(x, y) = Σ_s coef[k, s, y] k_k(x_s, x)`` — or
        ``theta`` (list of (d_k, m)) for feature groups; plus ``classes``.  The
        history has one row per epoch (row 0: ``θ = 0``) with ``mistakes`` and
        ``active_groups``.
    """
    y = np.asarray(y)
    classes, y_idx = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"need at least two classes; y has {classes.size} class"
                         f"{'es' if classes.size != 1 else ''}")
    model = _make_groups(kernels, groups, classes.size, y.shape[0])
    for name, value in (("lam", lam), ("eta0", eta0)):
        if isinstance(value, bool) or not np.isscalar(value) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    if isinstance(n_epochs, bool) or int(n_epochs) != n_epochs or n_epochs < 1:
        raise ValueError(f"n_epochs must be a positive integer, got {n_epochs!r}")
    if isinstance(radius, str):
        if radius != "auto":
            raise ValueError(f"radius must be None, 'auto' or a positive number, got {radius!r}")
        radius = initial_radius(lam, y_idx, check_cost(cost, classes.size))
    elif radius is not None and not radius > 0:
        raise ValueError(f"radius must be None, 'auto' or a positive number, got {radius!r}")
    iterate = OnlineMKLIterate(model, y_idx, float(lam), float(eta0), radius, int(n_epochs),
                               np.random.default_rng(random_state), cost)
    result = run(iterate, tol=0.0, max_iter=int(n_epochs), max_time=max_time,
                 callback=callback, keep_best=False, name="online MKL")
    result.solution["classes"] = classes
    return result


def _make_groups(kernels, groups, n_classes, n):
    if groups is not None:
        X = np.asarray(kernels, dtype=float)
        if X.ndim != 2 or X.shape[0] != n:
            raise ValueError(f"feature groups need X of shape ({n}, d), got {X.shape}")
        groups = list(groups)
        if not groups:
            raise ValueError("empty list of feature groups")
        return FeatureGroups(X, groups, n_classes)
    if isinstance(kernels, KernelOperator) and not isinstance(kernels, MultiKernel):
        kernels = [kernels]
    if not isinstance(kernels, MultiKernel):
        kernels = list(kernels)
        if not kernels:
            raise ValueError("empty kernel list: online MKL needs p >= 1 kernels")
        kernels = MultiKernel(kernels)
    if kernels.n != n:
        raise ValueError(f"y has {n} labels but the kernels are on {kernels.n} points")
    return KernelGroups(kernels, n_classes)
