"""cvxpy references for multiple kernel learning (math.md §4–§6).

- :func:`cskl_reference`: CSKL's optimum as the equivalent concave maximization
  ``max_α a(α) − c g_t(d(α))`` (minimax theorem, math.md §5.2) for the C-, ν-
  and L2-SVM, with ``g_t(d) = min_u t u + Σ_j (d_j − u)^+``;
- :func:`l1_mkl_reference` (``t = 1``, ``g_1 = max_j d_j``) and
  :func:`lp_mkl_reference` (``‖d‖_{p*}``, ``p* = p/(p−1)``);
- :func:`prox_squared_l1_reference`, :func:`prox_squared_l21_reference`: the
  proximal operators of math.md §4.3;
- :func:`online_mkl_reference`: the batch optimum of the online-MKL objective
  ``F(θ) = (λ/2)(Σ_k ‖θ_k‖)² + (1/n) Σ_i max_y [ℓ(y, y_i) + f(x_i, y) − f(x_i, y_i)]``
  (multi-class, 0/1 cost; math.md §4.1).

Binary problems are given as rows of a code matrix in ``{−1, 0, +1}`` (``0``:
the point is not in that problem), so one-vs-rest and one-vs-one problems
with shared kernel weights are covered; a 1-D ``y`` in ``{−1, +1}`` is one row.
Every kernel is factored ``K_j = F_j F_jᵀ`` (:func:`factor_gram`).  ``sample_weight``
(positive ``w_i``) weighs the examples' slack terms of the inner SVMs (math.md §5.8):
the boxes ``α_i ≤ C w_i`` (C-SVM) and ``α_i ≤ w_i/Σ_j w_j`` (ν-SVM), the L2-SVM's
``Σ_i α_i²/(C w_i)``; in :func:`online_mkl_reference` the loss terms, normalized by ``Σ w``.
"""

import numpy as np

from .common import factor_gram, require_cvxpy, solve_problem

__all__ = [
    "cskl_reference",
    "l1_mkl_reference",
    "lp_mkl_reference",
    "prox_squared_l1_reference",
    "prox_squared_l21_reference",
    "prox_group_reference",
    "online_mkl_reference",
    "online_mkl_objective",
]

_SVMS = ("c", "nu", "l2")


def _codes(y):
    codes = np.atleast_2d(np.asarray(y, dtype=float))
    if not np.all(np.isin(codes, (-1.0, 0.0, 1.0))):
        raise ValueError("binary codes must be in {-1, 0, +1}")
    return codes


def _svm_parts(cp, codes, svm, C, nu, w=None):
    """Variables α_r, the constraints and ``a(α)`` of the inner SVM duals (math.md §5.2, §2.1,
    with per-example weights ``w`` §5.8; None: all 1)."""
    r, n = codes.shape
    w = np.ones(n) if w is None else np.asarray(w, dtype=float)
    alphas, constraints, offset = [], [], 0
    for code in codes:
        a = cp.Variable(n)
        inside = code != 0
        constraints += [a >= 0, a[~inside] == 0] if np.any(~inside) else [a >= 0]
        if svm == "c":
            constraints += [a <= C * w, code @ a == 0]
            offset = offset + cp.sum(a)
        elif svm == "nu":
            constraints += [a <= w / w[inside].sum(), code @ a == 0, cp.sum(a) >= nu]
        else:
            constraints += [cp.sum(a) == 1]
            offset = offset - cp.square(code @ a) - cp.sum(cp.multiply(1.0 / (C * w), a**2))
        alphas.append(a)
    return alphas, constraints, offset


def _quad_forms(cp, factors, codes, alphas):
    """``d_j = Σ_r ‖F_jᵀ (y_r ∘ α_r)‖²`` as cvxpy expressions."""
    return [
        sum(cp.sum_squares(F.T @ cp.multiply(code, a)) for code, a in zip(codes, alphas))
        for F in factors
    ]


def _solve_mkl(grams, y, penalty, svm, C, nu, sample_weight=None):
    cp = require_cvxpy()
    if svm not in _SVMS:
        raise ValueError(f"svm must be one of {_SVMS}, got {svm!r}")
    codes = _codes(y)
    factors = [factor_gram(K) for K in grams]
    alphas, constraints, offset = _svm_parts(cp, codes, svm, C, nu, sample_weight)
    d = _quad_forms(cp, factors, codes, alphas)
    c = 1.0 if svm == "l2" else 0.5
    pen, extra = penalty(cp, d)
    problem = cp.Problem(cp.Maximize(offset - c * pen), constraints + extra)
    value = solve_problem(problem)
    alpha = np.array([a.value for a in alphas])
    coef = codes * alpha
    d_val = np.array([float(np.sum((F.T @ coef.T) ** 2)) for F in factors])
    return {"value": value, "alpha": alpha, "d": d_val}


def cskl_reference(grams, y, t, svm="c", C=1.0, nu=0.5, sample_weight=None):
    """CSKL optimum ``J* = max_α a(α) − c g_t(d(α))`` (math.md §5.2, §6).

    Parameters
    ----------
    grams : sequence of ndarray (n, n)
        The (normalized) base kernels.
    y : ndarray (n,) in {−1, +1} or (r, n) in {−1, 0, +1}
        Binary problems sharing the kernel weights.
    t : float
        Budget of the capped simplex.
    svm : {"c", "nu", "l2"}
    C, nu : float
    sample_weight : ndarray (n,) or None
        Positive weights of the examples' slack terms (module docstring).

    Returns
    -------
    dict with ``value`` (J*), ``alpha`` (r, n) and ``d`` (p,) at the optimum.
    """

    def penalty(cp, d):
        u = cp.Variable()
        return t * u + sum(cp.pos(dj - u) for dj in d), []

    return _solve_mkl(grams, y, penalty, svm, C, nu, sample_weight)


def l1_mkl_reference(grams, y, svm="c", C=1.0, nu=0.5, sample_weight=None):
    """l1-MKL (SimpleMKL's problem): ``max_α a(α) − c max_j d_j(α)``."""

    def penalty(cp, d):
        return cp.max(cp.hstack(d)), []

    return _solve_mkl(grams, y, penalty, svm, C, nu, sample_weight)


def lp_mkl_reference(grams, y, p, svm="c", C=1.0, nu=0.5, sample_weight=None):
    """lp-MKL (Kloft et al.): ``max_α a(α) − c ‖d(α)‖_{p*}``, ``p* = p/(p−1)`` (math.md §5.5).

    An auxiliary ``u ≥ d`` keeps the problem DCP (the norm is nondecreasing on
    the nonnegative orthant).
    """
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    dual_p = np.inf if p == 1 else p / (p - 1.0)

    def penalty(cp, d):
        u = cp.Variable(len(d))
        return cp.norm(u, dual_p), [u >= cp.hstack(d)]

    return _solve_mkl(grams, y, penalty, svm, C, nu, sample_weight)


def prox_squared_l1_reference(v, tau):
    """``argmin_u ½‖u − v‖² + (τ/2)‖u‖₁²`` by cvxpy."""
    cp = require_cvxpy()
    v = np.asarray(v, dtype=float)
    u = cp.Variable(v.size)
    solve_problem(
        cp.Problem(cp.Minimize(0.5 * cp.sum_squares(u - v) + 0.5 * tau * cp.square(cp.norm1(u))))
    )
    return u.value


def prox_squared_l21_reference(groups, tau):
    """``argmin_θ ½ Σ_k ‖θ_k − v_k‖² + (τ/2)(Σ_k ‖θ_k‖)²`` for a list of group arrays ``v_k``."""
    cp = require_cvxpy()
    groups = [np.asarray(g, dtype=float).ravel() for g in groups]
    thetas = [cp.Variable(g.size) for g in groups]
    fit = sum(cp.sum_squares(th - g) for th, g in zip(thetas, groups))
    norms = sum(cp.norm(th, 2) for th in thetas)
    solve_problem(cp.Problem(cp.Minimize(0.5 * fit + 0.5 * tau * cp.square(norms))))
    return [th.value for th in thetas]


def prox_group_reference(groups, kind, tau, tau2=0.0):
    """``argmin_z ½ Σ_k ‖z_k − v_k‖² + P(z)`` by cvxpy, for the group penalties of online MKL.

    ``P`` is ``(τ/2)(Σ‖z_k‖)²`` ("squared_l21"), ``τ Σ‖z_k‖`` ("l21"),
    ``(τ₂/2)‖z‖²`` ("ridge"), ``τ₂‖z‖₁`` ("l1") or ``τ Σ‖z_k‖ + τ₂‖z‖₁``
    ("sparse_group_lasso") (math.md §4.3, §4.6).
    """
    cp = require_cvxpy()
    groups = [np.asarray(g, dtype=float).ravel() for g in groups]
    zs = [cp.Variable(g.size) for g in groups]
    fit = 0.5 * sum(cp.sum_squares(z - g) for z, g in zip(zs, groups))
    l21 = sum(cp.norm(z, 2) for z in zs)
    l1 = sum(cp.norm1(z) for z in zs)
    ridge = sum(cp.sum_squares(z) for z in zs)
    penalty = {
        "squared_l21": lambda: 0.5 * tau * cp.square(l21),
        "l21": lambda: tau * l21,
        "ridge": lambda: 0.5 * tau2 * ridge,
        "l1": lambda: tau2 * l1,
        "sparse_group_lasso": lambda: tau * l21 + tau2 * l1,
    }[kind]()
    solve_problem(cp.Problem(cp.Minimize(fit + penalty)))
    return [z.value for z in zs]


def online_mkl_objective(group_scores, norms, y_idx, lam, cost=None, sample_weight=None):
    """``F = (λ/2)(Σ_k ‖θ_k‖)² + (1/n) Σ_i max_y [ℓ(y_i, y) + f(x_i, y) − f(x_i, y_i)]``.

    Parameters
    ----------
    group_scores : ndarray (M, n, m) or (n, m)
        Scores ``f_k(x_i, y)`` per group (or already summed).
    norms : ndarray (M,)
        Group norms ``‖θ_k‖``.
    y_idx : ndarray of int (n,)
        Class indices.
    lam : float
        ``λ``.
    cost : ndarray (m, m) or None
        ``ℓ[y_true, y]`` (None: 0/1).
    sample_weight : ndarray (n,) or None
        Weights ``w_i`` of the loss terms: the mean becomes ``Σ_i w_i L_i / Σ_i w_i``.
    """
    S = np.asarray(group_scores, dtype=float)
    S = S.sum(axis=0) if S.ndim == 3 else S
    n, m = S.shape
    cost = 1.0 - np.eye(m) if cost is None else np.asarray(cost, dtype=float)
    rows = np.arange(n)
    aug = S + cost[y_idx]
    losses = aug.max(axis=1) - S[rows, y_idx]
    return 0.5 * lam * float(np.sum(norms)) ** 2 + float(np.average(losses, weights=sample_weight))


def online_mkl_reference(grams, y_idx, lam, n_classes=None, cost=None, sample_weight=None):
    """Batch optimum of the online-MKL objective ``F`` (math.md §4.1, §6).

    Group ``k`` has parameters ``Θ_k`` (r_k × m) in the factor coordinates of
    ``K_k = F_k F_kᵀ``; ``f(x_i, y) = Σ_k F_k[i] Θ_k[:, y]``; ``cost`` is
    ``ℓ[y_true, y]`` (None: 0/1); ``sample_weight`` the weights ``w_i`` of the loss terms
    (``Σ_i w_i L_i / Σ_i w_i``; None: the mean).

    Returns
    -------
    dict with ``value`` (F*), ``norms`` (‖θ_k‖) and ``beta`` (``‖θ_k‖ / Σ_l ‖θ_l‖``).
    """
    cp = require_cvxpy()
    y_idx = np.asarray(y_idx)
    n = y_idx.size
    m = int(y_idx.max()) + 1 if n_classes is None else int(n_classes)
    factors = [factor_gram(K) for K in grams]
    thetas = [cp.Variable((F.shape[1], m)) for F in factors]
    scores = sum(F @ th for F, th in zip(factors, thetas))
    onehot = np.eye(m)[y_idx]
    own = cp.sum(cp.multiply(scores, onehot), axis=1)
    cost = 1.0 - np.eye(m) if cost is None else np.asarray(cost, dtype=float)
    aug = scores + cost[y_idx]
    losses = cp.max(aug, axis=1) - own
    u = cp.Variable()
    norms = [cp.norm(th, "fro") for th in thetas]
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    problem = cp.Problem(
        cp.Minimize(0.5 * lam * cp.square(u) + (w / w.sum()) @ losses), [u >= sum(norms)]
    )
    value = solve_problem(problem)
    nv = np.array([float(np.linalg.norm(th.value)) for th in thetas])
    total = nv.sum()
    return {
        "value": value,
        "norms": nv,
        "beta": nv / total if total > 0 else np.full(nv.size, 1.0 / nv.size),
    }
