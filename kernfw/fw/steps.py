"""Step-size rules shared by the Frank-Wolfe solvers."""

import math

__all__ = ["quadratic_step", "standard_step", "away_step_max"]


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


def away_step_max(weight):
    """Largest step ``α_j / (1 − α_j)`` along an away direction ``α − e_j``.

    Returns ``inf`` when ``α_j = 1`` (then the away direction is zero).
    """
    return math.inf if weight >= 1.0 else weight / (1.0 - weight)
