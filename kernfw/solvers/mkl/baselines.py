"""MKL baselines (math.md §5.5): l1-MKL, lp-MKL and the uniform average.

- **l1-MKL** (SimpleMKL's problem) is CSKL with ``t = 1``: ``Γ_1`` is the unit
  simplex; :func:`solve_l1_mkl` calls :func:`~kernfw.solvers.mkl.cskl.solve_cskl`.
- **Uniform**: all weights 1 (``t = p``, the single point of ``Γ_p``): one SVM
  on ``Σ_j K_j``; :func:`solve_uniform_mkl`.
- **lp-MKL** (Kloft et al.), ``p ≥ 1``:
  ``min_{θ ≥ 0, ‖θ‖_p ≤ 1} J(θ)``, equivalently
  ``max_α a(α) − c ‖d(α)‖_{p*}`` with ``p* = p/(p−1)``.  Alternate an SVM
  solve with the closed-form minimizer of ``Σ_j ‖w_j‖²/θ_j`` over the
  ``p``-ball (``‖w_j‖² = θ_j² d_j``)::

      θ_j ← (θ_j² d_j)^{1/(p+1)} / (Σ_l (θ_l² d_l)^{p/(p+1)})^{1/p},   θ⁰_j = p_kernels^{−1/p},

  with the gap ``c (‖d‖_{p*} − θᵀd) ≥ J(θ) − J*``.
"""

import numpy as np

from ..._threads import thread_limit
from ..._validation import check_positive
from ...fw import run
from .cskl import solve_cskl
from .weights import KernelWeightIterate, as_multikernel, weight_objective

__all__ = ["solve_l1_mkl", "solve_uniform_mkl", "solve_lp_mkl", "lp_update", "LpMKLIterate"]


def solve_l1_mkl(kernels, y, **kwargs):
    """l1-MKL = CSKL with ``t = 1`` (keywords as :func:`~kernfw.solvers.mkl.cskl.solve_cskl`)."""
    return solve_cskl(kernels, y, 1.0, **kwargs)


def solve_uniform_mkl(kernels, y, **kwargs):
    """The uniform combination ``Σ_j K_j`` (CSKL with ``t = p``: one SVM solve, gap 0)."""
    mk = as_multikernel(kernels)
    return solve_cskl(mk, y, float(mk.p), **kwargs)


def lp_update(theta, d, p):
    """The closed-form lp-MKL weight update (math.md §5.5).

    ``θ_j ← (θ_j² d_j)^{1/(p+1)} / (Σ_l (θ_l² d_l)^{p/(p+1)})^{1/p}``: the
    minimizer of ``Σ_j ‖w_j‖² / θ_j`` over ``{θ ≥ 0, ‖θ‖_p ≤ 1}`` for fixed
    block norms ``‖w_j‖² = θ_j² d_j``.  Returns ``θ`` unchanged when all
    ``‖w_j‖`` vanish.
    """
    w2 = np.asarray(theta, dtype=float) ** 2 * np.maximum(np.asarray(d, dtype=float), 0.0)
    if not np.any(w2 > 0):
        return np.asarray(theta, dtype=float).copy()
    num = w2 ** (1.0 / (p + 1.0))
    return num / np.sum(w2 ** (p / (p + 1.0))) ** (1.0 / p)


def _dual_norm(d, p):
    """``‖d‖_{p*}`` with ``p* = p/(p−1)`` (``max`` for ``p = 1``)."""
    if p == 1:
        return float(np.max(d))
    return float(np.linalg.norm(d, ord=p / (p - 1.0)))


class LpMKLIterate(KernelWeightIterate):
    """Alternating lp-MKL: one SVM solve and one closed-form weight update per iteration.

    The weight set is ``{θ ≥ 0, ‖θ‖_p ≤ 1}``; its support function is ``‖d‖_{p*}``.
    """

    def __init__(self, objective, p, theta0, tol=None):
        self.p = p
        super().__init__(objective, theta0, tol)

    def support(self, d):
        return _dual_norm(d, self.p)

    def step(self, t):
        self.follow_gap()
        ev = self.current
        theta = lp_update(ev.gamma, ev.d, self.p)
        self.current = self.objective.evaluate(theta, warm=ev.solution.state)
        self.settle()
        return float(np.max(np.abs(theta - ev.gamma)))


def solve_lp_mkl(
    kernels,
    y,
    p=2.0,
    *,
    svm="l2",
    C=1.0,
    nu=0.5,
    problems=None,
    tol=1e-3,
    max_iter=100,
    inner_tol=None,
    callback=None,
    max_time=None,
    sample_weight=None,
):
    """lp-norm MKL by alternating SVM solves and the closed-form update (math.md §5.5).

    Parameters
    ----------
    kernels : MultiKernel or list of KernelOperator
        Base kernels (trace-normalize them first).
    y : array-like of shape (n,)
        Class labels.
    p : float >= 1
        The norm on the weights ``θ`` (``p = 1``: l1-MKL by multiplicative
        updates, slower than :func:`solve_l1_mkl`; ``p > 1``: non-sparse weights).
    svm, C, nu, problems, tol, max_iter, inner_tol, callback, max_time, sample_weight
        As :func:`~kernfw.solvers.mkl.cskl.solve_cskl` (stop when ``gap ≤ tol·|J|``).

    Returns
    -------
    FWResult
        ``primal`` = ``J(θ)``, ``dual`` = ``a(α) − c‖d(α)‖_{p*}``; ``solution``
        as :func:`~kernfw.solvers.mkl.cskl.solve_cskl` (``gamma`` holds ``θ``).
    """
    mk = as_multikernel(kernels)
    if isinstance(p, bool) or not np.isscalar(p) or not np.isfinite(p) or p < 1:
        raise ValueError(f"p must be a finite number >= 1, got {p!r}")
    p = float(p)
    tol = check_positive("tol", tol)
    with thread_limit(mk.p * mk.n**2):  # one pass over the kernels: small work, one thread
        inner = {"svm": svm, "C": C, "nu": nu, "inner_tol": inner_tol, "problems": problems}
        objective, classes = weight_objective(mk, y, tol=tol, sample_weight=sample_weight, **inner)
        iterate = LpMKLIterate(objective, p, np.full(mk.p, mk.p ** (-1 / p)), tol=tol)
        result = run(
            iterate,
            tol=tol,
            max_iter=max_iter,
            max_time=max_time,
            callback=callback,
            remedy="increase max_iter or tol",
            name=f"lp-MKL (p={p:g})",
        )
    result.solution.update(classes=classes, codes=objective.svm.codes)
    return result
