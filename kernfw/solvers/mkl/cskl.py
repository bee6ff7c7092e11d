"""Controlled-sparsity kernel learning (CSKL, [CSKL]; math.md §5).

Kernel weights ``γ`` live in the capped simplex
``Γ_t = {γ ∈ [0, 1]^p : 1ᵀγ = t}`` and minimize the convex function

.. math::  J(γ) = \\max_α\\ a(α) − c\\,Σ_j γ_j d_j(α),\\qquad d_j(α) = (y∘α)ᵀK_j(y∘α),

the optimal dual value of an SVM with kernel ``K_γ = Σ_j γ_j K_j`` (C-SVM,
ν-SVM or L2-SVM; see :mod:`kernfw.solvers.mkl.inner_svm` for ``a`` and ``c``).
By Danskin ``∇_j J = −c d_j``.  The solver alternates (Algorithm 2 of [CSKL],
math.md §5.3)

1. an SVM solve at the current ``γ`` (warm started for the L2-SVM) giving ``α``
   and all ``d_j`` in one ``per_kernel_quad`` pass;
2. the Frank-Wolfe gap of ``min_{Γ_t} J``,
   ``G = c (g_t(d) − γᵀd) ≥ J(γ) − J*`` with ``g_t(d) = max_{Γ_t} γᵀd`` —
   the stopping measure for every update rule;
3. a descent step: projected gradient (along the projection arc), reduced
   gradient or the Frank-Wolfe/LP direction, with ``τ ∈ [0, τ_max]`` chosen by
   Armijo backtracking or an exact 1-D minimization (each trial is one SVM
   solve).

``J(γ) − J* ≤ G + (inner gap)`` holds for any inexact inner solution ``α̂``
(both are recorded per outer iteration).  The measured gradient is only as
accurate as ``α̂``; when no decrease can be measured the inner tolerance is
tightened 100× (down to 1e-12), after which the run stops as "stalled".

The outer iteration is a :class:`~kernfw.fw.FWIterate` driven by the shared
loop :func:`kernfw.fw.run` (history, callbacks, stopping, warnings).
"""

import math
import warnings

import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.exceptions import ConvergenceWarning

from ..._threads import thread_limit
from ..._validation import check_positive
from ...fw import FWResult, armijo_step, run
from ...fw.capped_simplex import (
    check_t,
    project_capped_simplex,
    snap_to_box,
    sum_top_t,
    top_t_vertex,
)
from .weights import KernelWeightIterate, as_multikernel, weight_objective

__all__ = [
    "solve_cskl",
    "CSKLIterate",
    "projected_gradient_direction",
    "reduced_gradient_direction",
    "frank_wolfe_direction",
    "exact_selection",
    "SOLVERS",
    "LINE_SEARCHES",
]

#: the algorithms on the weights (``solver``), named by their step direction
SOLVERS = ("projected_gradient", "reduced_gradient", "frank_wolfe")
LINE_SEARCHES = ("armijo", "exact")

#: smallest inner tolerance the solver falls back to when a line search stalls
_INNER_TOL_FLOOR = 1e-12
#: Armijo trials per outer iteration after the first (τ down to 2⁻²⁰ τ_max)
_MAX_BACKTRACKS = 20
#: range of the first trial ``τ`` on the projection arc (the spectral step, clipped)
_ARC_TRIAL_MIN, _ARC_TRIAL_MAX = 1e-3, 1e6


# -- directions (math.md §5.3) -----------------------------------------------------------
def projected_gradient_direction(gamma, grad, t):
    """``D = Π_{Γ_t}(γ − η∇J) − γ`` with ``η = 1 / max_j |∇_j J|``; ``τ_max = 1``.

    The solver searches along the projection arc ``Π_{Γ_t}(γ − τη∇J)``, whose
    point at ``τ = 1`` is ``γ + D`` (see :meth:`CSKLIterate.path`).
    """
    scale = np.max(np.abs(grad))
    if scale == 0:
        return np.zeros_like(gamma), 1.0
    return project_capped_simplex(gamma - grad / scale, t) - gamma, 1.0


def reduced_gradient_direction(gamma, grad):
    """The reduced-gradient direction on the box-constrained simplex (Algorithm 3 of [CSKL]).

    A free index ``μ`` (``0 < γ_μ < 1``, the one farthest from the bounds)
    carries the equality constraint; with ``r_j = ∇_jJ − ∇_μJ`` every other
    coordinate moves by ``−r_j`` unless a bound blocks it, and
    ``D_μ = −Σ_{j≠μ} D_j``.  At a vertex (no free index) the direction is
    ``e_a − e_b`` for the most promising pair ``a`` (at 0) and ``b`` (at 1).

    Returns
    -------
    D : ndarray of shape (p,)
        Zero iff the KKT conditions hold.
    tau_max : float
        Largest ``τ`` keeping ``γ + τD`` in the box.
    """
    gamma = np.asarray(gamma, dtype=float)
    grad = np.asarray(grad, dtype=float)
    free = (gamma > 0) & (gamma < 1)
    D = np.zeros_like(gamma)
    if np.any(free):
        mu = int(np.argmax(np.where(free, np.minimum(gamma, 1 - gamma), -np.inf)))
        r = grad - grad[mu]
        move = free | ((gamma == 0) & (r < 0)) | ((gamma == 1) & (r > 0))
        move[mu] = False
        D[move] = -r[move]
        D[mu] = -D.sum()
    else:
        at0, at1 = np.flatnonzero(gamma == 0), np.flatnonzero(gamma == 1)
        if at0.size == 0 or at1.size == 0:
            return D, 0.0
        a = at0[np.argmin(grad[at0])]
        b = at1[np.argmax(grad[at1])]
        if grad[a] >= grad[b]:
            return D, 0.0
        D[a], D[b] = 1.0, -1.0
    return D, _box_step_max(gamma, D)


def _box_step_max(gamma, D):
    """``τ_max = min(min_{D_j<0} γ_j/(−D_j), min_{D_j>0} (1−γ_j)/D_j)``."""
    down, up = D < 0, D > 0
    limits = np.concatenate([gamma[down] / -D[down], (1 - gamma[up]) / D[up]])
    return float(limits.min()) if limits.size else 0.0


def frank_wolfe_direction(gamma, grad, t):
    """``D = s − γ``, ``s`` the top-``t`` vertex of ``−∇J`` (the LP direction); ``τ_max = 1``."""
    return top_t_vertex(-np.asarray(grad, dtype=float), t) - gamma, 1.0


def exact_selection(gamma, d, t):
    """The ``⌈t⌉`` kernels with the largest ``γ_j`` (ties: larger ``d_j``), weights 1.

    The documented post-step of math.md §5.4 for users who need exactly
    ``⌈t⌉`` kernels (not part of the method of [CSKL]).
    """
    k = int(math.ceil(t - 1e-12))
    order = np.lexsort((-np.asarray(d, dtype=float), -np.asarray(gamma, dtype=float)))
    out = np.zeros(len(gamma))
    out[order[:k]] = 1.0
    return out


# -- the outer iteration ------------------------------------------------------------------
class CSKLIterate(KernelWeightIterate):
    """State of the alternating CSKL solver: ``γ`` and the SVM solved at ``γ``.

    Parameters
    ----------
    objective : KernelWeightObjective
        ``J(γ)`` by inner SVM solves.
    t : float
        The budget of ``Γ_t``.
    solver : {"projected_gradient", "reduced_gradient", "frank_wolfe"}
        The direction of the weight step (:data:`SOLVERS`).
    line_search : {"armijo", "exact"}
    gamma0 : ndarray of shape (p,)
        A feasible start (default in :func:`solve_cskl`: ``(t/p) 1``).
    """

    def __init__(self, objective, t, solver, line_search, gamma0, tol=None):
        self.t = t
        self.solver = solver
        self.line_search = line_search
        super().__init__(objective, gamma0, tol)
        self.last_step = None
        self.last_move = None
        self.stalled = False

    def support(self, d):
        """``g_t(d)``: the sum of the ``t`` largest ``d_j`` (math.md §5.2)."""
        return sum_top_t(d, self.t)

    # -- one outer iteration ---------------------------------------------------------------
    def path(self, grad):
        """The trial points ``τ ↦ γ(τ)``, ``τ_max`` and the first-order model ``∇Jᵀ(γ(τ) − γ)``.

        Projected gradient searches along the projection arc
        ``γ(τ) = Π_{Γ_t}(γ − τη∇J)`` (``η = 1/max|∇J|``; at ``τ = 1`` this is
        the step ``γ + D`` of math.md §5.3, and backtracking stays on the faces
        the projection selects, so weights that should vanish become exactly
        0); the arc is defined for every ``τ > 0`` (``τ_max = ∞``; it ends at the
        top-``t`` vertex of ``−∇J``).  The reduced-gradient and FW directions
        search the segment ``γ + τD``, ``τ ∈ [0, τ_max]``.
        """
        gamma = self.current.gamma
        if self.solver == "projected_gradient":
            scale = float(np.max(np.abs(grad)))
            if scale == 0:
                return None

            points = {}  # the Armijo test and the trial solve read the same point

            def arc(tau):
                if tau not in points:
                    points[tau] = project_capped_simplex(gamma - (tau / scale) * grad, self.t)
                return points[tau]

            return arc, math.inf, lambda tau: float(grad @ (arc(tau) - gamma))
        if self.solver == "reduced_gradient":
            D, tau_max = reduced_gradient_direction(gamma, grad)
        else:
            D, tau_max = frank_wolfe_direction(gamma, grad, self.t)
        slope = float(grad @ D)
        if tau_max <= 0 or not slope < 0:
            return None
        return (lambda tau: gamma + tau * D), tau_max, (lambda tau: tau * slope)

    def step(self, it):
        if self.stalled:
            return 0.0
        self.follow_gap()
        ev = self.current
        grad = -self.c * ev.d
        found = self.path(grad)
        if found is None or not found[2](min(found[1], 1.0)) < 0:
            self._tighten_inner()  # no descent measurable at this accuracy
            return 0.0
        point, tau_max, first_order = found
        trials = {}
        # Armijo rejects a trial whose J exceeds J(γ): its solve may stop once that is known
        cutoff = ev.value if self.line_search == "armijo" else None

        def phi(tau):
            trials[tau] = self.objective.evaluate(
                snap_to_box(point(tau)), warm=ev.solution.state, cutoff=cutoff
            )
            return trials[tau].value

        if self.line_search == "armijo":
            tau, _ = armijo_step(
                phi,
                ev.value,
                first_order,
                self._first_trial(tau_max, grad),
                max_backtracks=_MAX_BACKTRACKS,
            )
        else:
            if not math.isfinite(tau_max):  # the arc: up to the spectral step (at least 1)
                tau_max = max(1.0, self._first_trial(tau_max, grad))
            minimize_scalar(
                phi,
                bounds=(0.0, tau_max),
                method="bounded",
                options={"xatol": 1e-4 * tau_max, "maxiter": 30},
            )
            tau = min(trials, key=lambda s: trials[s].value)
            if trials[tau].value >= ev.value:
                tau = 0.0
        if tau > 0:
            new = trials[tau]
            self.last_move = (new.gamma - ev.gamma, -self.c * new.d - grad)
            self.current = new
            self.last_step = tau
            self.settle()
        else:
            self._tighten_inner()
        return float(tau)

    def _first_trial(self, tau_max, grad):
        """First Armijo trial: the spectral step on the arc, or twice the last step on a segment.

        On the segments of the reduced-gradient and FW directions the
        accepted step is usually far below ``τ_max`` (a box limit, resp. 1 for
        FW, whose steps shrink like ``O(1/k)``), so backtracking from ``τ_max``
        every time costs many SVM solves; starting at ``2τ_{k−1}`` still lets
        steps grow.  On the projection arc (normalized: ``τ = 1`` is the step
        ``η = 1/max|∇J|`` of math.md §5.3) the first trial is the spectral
        (Barzilai–Borwein) step ``sᵀs / sᵀu`` of the last move ``s = γ_k − γ_{k−1}``,
        ``u = ∇J_k − ∇J_{k−1}`` (the inverse of the curvature of ``J`` measured
        along ``s``), in units of ``η``, clipped to ``[10⁻³, 10⁶]``; 1 on the
        first step, twice the last step when ``sᵀu ≤ 0`` (no curvature measured).
        """
        if self.solver != "projected_gradient":
            if self.last_step is not None:
                return min(tau_max, 2.0 * self.last_step)
            return tau_max
        if self.last_move is None:
            return 1.0
        s, u = self.last_move
        curvature = float(s @ u)
        if not curvature > 0:
            return min(2.0 * self.last_step, _ARC_TRIAL_MAX)
        spectral = float(s @ s) / curvature * float(np.max(np.abs(grad)))
        return min(max(spectral, _ARC_TRIAL_MIN), _ARC_TRIAL_MAX)

    def _tighten_inner(self):
        """No decrease found: solve the SVM 100× tighter, or give up at the floor.

        The gradient ``−c d(α̂)`` is only as accurate as ``α̂`` (roughly the
        square root of the inner gap), so near the optimum the measured
        direction can stop being a descent direction.
        """
        svm = self.objective.svm
        if svm.tol <= _INNER_TOL_FLOOR:
            self.stalled = True
            return
        svm.tol = max(svm.tol * 1e-2, _INNER_TOL_FLOOR)
        self.current = self.objective.evaluate(self.current.gamma, warm=self.current.solution.state)


# -- the solver ---------------------------------------------------------------------------
def _start(gamma0, t, p):
    if gamma0 is None:
        return np.full(p, t / p)
    gamma0 = np.asarray(gamma0, dtype=float)
    if (
        gamma0.shape != (p,)
        or np.any(gamma0 < -1e-12)
        or np.any(gamma0 > 1 + 1e-12)
        or abs(gamma0.sum() - t) > 1e-8
    ):
        raise ValueError(f"gamma0 must lie in the capped simplex Γ_t (p={p}, t={t})")
    return snap_to_box(gamma0)


def solve_cskl(
    kernels,
    y,
    t=1.0,
    *,
    svm="l2",
    C=1.0,
    nu=0.5,
    problems=None,
    solver="projected_gradient",
    line_search="armijo",
    exact=False,
    tol=1e-3,
    max_iter=100,
    inner_tol=None,
    gamma0=None,
    callback=None,
    max_time=None,
    sample_weight=None,
):
    """Controlled-sparsity kernel learning by alternating SVM solves and weight updates.

    Solves ``min_{γ∈Γ_t} J(γ)`` (math.md §5.2–§5.3) for trace-normalized kernels.

    Parameters
    ----------
    kernels : MultiKernel or list of KernelOperator
        The base kernels ``K_1 … K_p`` on the training points (normalize them
        first, e.g. ``make_operator(X, specs, normalization="trace")``).
    y : array-like of shape (n,)
        Class labels (two or more classes).
    t : float in (0, p]
        Budget: ``1ᵀγ = t``, ``0 ≤ γ ≤ 1``.  ``t = 1`` is l1-MKL (SimpleMKL),
        ``t = p`` the uniform sum.  At least ``⌈t⌉`` kernels get weight.
    svm : {"l2", "c", "nu"}
        Inner SVM: kernfw's L2-SVM (Frank-Wolfe, warm started), libsvm's C-SVM or ν-SVM.
    C, nu : float
        Their parameters.
    problems : list of (classes, index, y) or None
        Binary problems sharing ``γ`` (``d`` and ``J`` are summed), e.g. from
        :func:`kernfw.estimators._multiclass_decomposition.binary_problems`;
        None is one-vs-rest.  One-vs-one pairs need ``svm="c"``.
    solver : {"projected_gradient", "reduced_gradient", "frank_wolfe"}
        The algorithm, by the direction of its weight step (math.md §5.3).  Projected gradient backtracks along
        the projection arc ``Π_{Γ_t}(γ − τη∇J)`` (its ``τ = 1`` point is §5.3's
        ``γ + D``), which sets vanishing weights exactly to 0.
    line_search : {"armijo", "exact"}
        Armijo backtracking from ``τ_max`` (constant 1e-4) or bounded Brent
        minimization of ``J(γ + τD)``.
    exact : bool
        After convergence keep the ``⌈t⌉`` largest weights, set them to 1, the
        others to 0, and retrain (math.md §5.4).  The certificate then refers
        to ``Γ_{⌈t⌉}``.
    tol : float
        Relative tolerance on the certified gap: stop when ``G + ε ≤ tol·|J(γ)|``
        (``ε`` the inner solve's certified gap).
    max_iter : int
        Outer iterations (what ``n_iter`` counts).
    inner_tol : float or None
        Inner SVM tolerance ``ε₀``: the floor of the inner tolerance, which follows
        the outer gap (:class:`~kernfw.solvers.mkl.weights.KernelWeightIterate`) and is
        tightened automatically when a line search finds no decrease.  Given, the
        final solve is at ``ε₀``; None (``ε₀ = min(1e-6, tol/100)``): the final solve
        is as loose as the stopping rule on ``G + ε`` allows.
    gamma0 : array-like or None
        Start in ``Γ_t`` (default ``(t/p) 1``).
    callback : callable or None
        ``callback(row) -> bool`` per outer iteration (see :func:`kernfw.fw.run`).
    max_time : float or None
        Wall-clock budget (s).
    sample_weight : array-like of shape (n,) or None
        Positive per-example weights ``w_i`` of the inner SVMs' slack terms (math.md
        §5.8): ``J`` is the weighted SVM's optimal dual value.  None: all 1; leave
        examples of weight 0 out.

    Returns
    -------
    FWResult
        ``primal`` = ``J(γ)``, ``dual`` = the concave objective
        ``a(α) − c g_t(d(α))`` at the same ``α``, ``gap`` = ``G``.
        ``solution`` holds ``gamma``, ``d``, ``coef`` (r, n) (``y∘α`` per binary
        problem), ``intercept`` (r,), ``svm`` (the inner
        :class:`~kernfw.solvers.mkl.inner_svm.SVMSolution`), ``classes``, ``codes``
        and, with ``exact=True``, ``gamma_relaxed`` (the weights before
        rounding).  The history has ``n_kernels``, ``inner_gap`` and
        ``svm_solves`` per outer iteration.

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw.kernels import make_operator
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 4)); y = np.where(X[:, 0] > 0, 1, -1)
    >>> specs = [("rbf", {"gamma": 0.5, "columns": [j]}) for j in range(4)]
    >>> K = make_operator(X, specs, normalization="trace")
    >>> res = solve_cskl(K, y, t=1.0, svm="c", C=10.0, tol=1e-4)
    >>> int(np.argmax(res["gamma"]))
    0
    """
    mk = as_multikernel(kernels)
    p = mk.p
    t = check_t(t, p)
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if line_search not in LINE_SEARCHES:
        raise ValueError(f"line_search must be one of {LINE_SEARCHES}, got {line_search!r}")
    tol = check_positive("tol", tol)
    with thread_limit(p * mk.n**2):  # one pass over the kernels: small work, one thread
        inner = {"svm": svm, "C": C, "nu": nu, "inner_tol": inner_tol, "problems": problems}
        objective, classes = weight_objective(mk, y, tol=tol, sample_weight=sample_weight, **inner)
        iterate = CSKLIterate(objective, t, solver, line_search, _start(gamma0, t, p), tol=tol)
        result = run(
            iterate,
            tol=tol,
            max_iter=max_iter,
            max_time=max_time,
            callback=_stop_when_stalled(iterate, callback),
            remedy="increase max_iter or tol (or use solver='projected_gradient')",
            name=f"CSKL ({solver})",
        )
        _warn_if_stalled(iterate, result, tol)
        if exact:
            result = _retrain_exact(iterate, result, tol)
    result.solution.update(classes=classes, codes=objective.svm.codes)
    return result


def _stop_when_stalled(iterate, callback):
    """The loop callback: the user's, and stop once the line search has stalled."""

    def stop(row):
        user = bool(callback(row)) if callback is not None else False
        return user or iterate.stalled

    return stop


def _warn_if_stalled(iterate, result, tol):
    if iterate.stalled and not result.converged:
        result.status = "stalled"
        warnings.warn(
            f"CSKL stalled with gap {result.gap:.3g} > tol·|J| = {tol * abs(result.primal):.3g}: "
            "no decrease of J could be measured along the direction even with the inner SVM "
            "solved to 1e-12 (the inner accuracy bounds the attainable gap); the best "
            "iterate is returned. Use a larger tol.",
            ConvergenceWarning,
            stacklevel=3,
        )


def _retrain_exact(iterate, result, tol):
    """The ``exact=True`` post-step: ⌈t⌉ kernels at weight 1, SVM retrained.

    The rounded weights are a heuristic point of ``Γ_⌈t⌉``, not its optimum: the
    result is ``converged`` only if their own gap ``G ≤ tol·|J|`` over ``Γ_⌈t⌉``
    (otherwise a :class:`ConvergenceWarning` says so).
    """
    relaxed = result.solution
    gamma = exact_selection(relaxed["gamma"], relaxed["d"], iterate.t)
    iterate.objective.svm.tol = min(iterate.objective.svm.tol, iterate.inner_tol)
    iterate.current = iterate.objective.evaluate(gamma, warm=relaxed["svm"].state)
    iterate.t = float(gamma.sum())  # the gap of the retrained weights is over Γ_⌈t⌉
    cert = iterate.certificate()
    G, value = cert.gap, cert.primal
    solution = iterate.solution()
    solution["gamma_relaxed"] = relaxed["gamma"]
    converged = bool(result.converged and iterate.stopping_rule(tol).holds(cert))
    status = result.status if converged or not result.converged else "exact_rounding"
    if result.converged and not converged:
        warnings.warn(
            f"CSKL exact=True: the rounded weights ({int(gamma.sum())} kernels at 1) have gap "
            f"{G:.3g} > tol·|J| = {tol * abs(value):.3g} over Γ_⌈t⌉ (the rounding is a "
            "heuristic post-step, not an optimum); converged_ is False. The relaxed solution "
            "converged: use exact=False for a certified model.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return FWResult(
        solution=solution,
        primal=value,
        dual=cert.dual,
        gap=G,
        n_iter=result.n_iter,
        converged=converged,
        status=status,
        history=result.history,
        time=result.time,
        rounding=cert.rounding,
    )
