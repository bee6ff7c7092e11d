"""Step-size rules shared by the Frank-Wolfe solvers.

:func:`quadratic_step`, :func:`standard_step`, :func:`block_standard_step` and
:func:`away_step_max` are plain scalar functions that the compiled backends reuse as
they are (compiled once, in :mod:`kernfw.fw._steps_numba`), so every solver takes its
steps from here.
"""

import math

__all__ = ["quadratic_step", "standard_step", "block_standard_step", "away_step_max", "armijo_step"]


def quadratic_step(slope, curvature, step_max=1.0):
    """Exact line search for a concave quadratic.

    If ``D(A + γΔ) = D(A) + γ b − ½ γ² c`` with slope ``b`` and curvature
    ``c ≥ 0``, the maximizer over ``[0, step_max]`` is ``clip(b / c, 0, step_max)``;
    when ``c = 0`` it is ``step_max`` if ``b > 0`` and 0 otherwise.

    Parameters
    ----------
    slope : float
        ``b = ⟨∇D(A), Δ⟩``.
    curvature : float
        ``c = −⟨Δ, ∇²D Δ⟩ ≥ 0``.
    step_max : float
        Largest feasible step (1 for a FW step, the away bound for away steps).
    """
    if curvature <= 0.0:
        return step_max if slope > 0.0 else 0.0
    return min(max(slope / curvature, 0.0), step_max)


def standard_step(t):
    """The agnostic step ``γ_t = 2 / (t + 2)``, ``t = 0, 1, …`` (first step 1)."""
    return 2.0 / (t + 2.0)


def block_standard_step(k, n):
    """The agnostic block step ``γ_k = 2n / (k + 2n)`` of block-coordinate FW.

    Parameters
    ----------
    k : int
        Block steps taken so far over the whole run (``k = 0, 1, …``; first step 1).
    n : int
        Number of blocks ``n``.
    """
    return 2.0 * n / (k + 2.0 * n)


def away_step_max(weight):
    """Largest step ``α_j / (1 − α_j)`` along an away direction ``α − e_j``.

    Returns ``inf`` when ``α_j = 1`` (then the away direction is zero).
    """
    return math.inf if weight >= 1.0 else weight / (1.0 - weight)


def armijo_step(
    objective, value, slope, step_max=1.0, sufficient=1e-4, shrink=0.5, max_backtracks=30
):
    """Armijo backtracking for *minimizing* ``φ(τ)`` along a descent direction or arc.

    Tries ``τ = step_max, shrink·step_max, …`` and accepts the first ``τ`` with
    ``φ(τ) ≤ φ(0) + sufficient · m(τ)``, where the first-order model is
    ``m(τ) = τ φ'(0)`` on a segment, or ``∇fᵀ(x(τ) − x)`` on a projection arc
    ``x(τ) = Π(x − τ∇f)``.  Used where ``φ`` has no closed form (each
    evaluation of CSKL's ``J(γ(τ))`` is one SVM solve, math.md §5.3).

    Parameters
    ----------
    objective : callable
        ``objective(τ) -> float``, the value ``φ(τ)``.
    value : float
        ``φ(0)``.
    slope : float or callable
        ``φ'(0)`` (≤ 0 for a descent direction), or the model ``m(τ)`` itself.
    step_max : float
        Largest feasible step.
    sufficient : float
        The Armijo constant (1e-4 in math.md §5.3).
    shrink : float in (0, 1)
        Backtracking factor.
    max_backtracks : int
        Number of trial steps after the first.

    Returns
    -------
    step : float
        The accepted ``τ``; if none is accepted, the trial with the smallest
        ``φ`` when it is below ``φ(0)``, else 0.
    step_value : float
        ``φ(step)``.
    """
    best = (0.0, value)
    tau = step_max
    for _ in range(int(max_backtracks) + 1):
        trial = objective(tau)
        model = slope(tau) if callable(slope) else tau * slope
        if trial <= value + sufficient * model:
            return tau, trial
        if trial < best[1]:
            best = (tau, trial)
        tau *= shrink
    return best
