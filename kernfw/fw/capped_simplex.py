"""The capped simplex ``Γ_t = {γ ∈ [0, 1]^M : 1ᵀγ = t}`` of CSKL (math.md §5.2–§5.3).

Three small pieces of geometry the kernel-weight updates need:

- :func:`top_t_vertex` — the linear maximization oracle ``argmax_{γ∈Γ_t} γᵀd``
  (weight 1 on the ``⌊t⌋`` largest ``d_j``, ``t − ⌊t⌋`` on the next one);
- :func:`sum_top_t` — its value ``g_t(d) = max_{γ∈Γ_t} γᵀd``;
- :func:`project_capped_simplex` — the Euclidean projection ``Π_{Γ_t}``.

>>> import numpy as np
>>> top_t_vertex(np.array([0.5, 3.0, 2.0, 1.0]), 2.5)
array([0. , 1. , 1. , 0.5])
>>> float(sum_top_t(np.array([0.5, 3.0, 2.0, 1.0]), 2.5))
5.5
>>> project_capped_simplex(np.array([2.0, 0.3, 0.1]), 1.5)
array([1.  , 0.35, 0.15])
"""

import math
import numbers

import numpy as np

__all__ = ["check_t", "top_t_vertex", "sum_top_t", "project_capped_simplex", "snap_to_box"]

#: entries of γ within this distance of 0 or 1 are snapped onto the bound
SNAP = 1e-12


def check_t(t, n_kernels):
    """Validate the CSKL budget ``t ∈ (0, M]`` for ``M = n_kernels`` kernels."""
    if isinstance(t, bool) or not isinstance(t, numbers.Real) or not np.isfinite(t):
        raise TypeError(f"t must be a real number, got {t!r}")
    if n_kernels < 1:
        raise ValueError(f"need at least one kernel, got {n_kernels}")
    if not 0 < t <= n_kernels:
        raise ValueError(
            f"t must lie in (0, p] = (0, {n_kernels}] for p = {n_kernels} kernels, got {t}"
        )
    return float(t)


def _split_t(t, m):
    """``(⌊t⌋, t − ⌊t⌋)`` with the fractional part rounded away below 1e-12."""
    whole = math.floor(t + SNAP)
    frac = t - whole
    if frac < SNAP or whole >= m:
        frac = 0.0
    return min(whole, m), frac


def top_t_vertex(d, t):
    """The vertex ``s = argmax_{γ∈Γ_t} γᵀd`` (math.md §5.2).

    Parameters
    ----------
    d : ndarray of shape (M,)
        Scores ``d_j`` (for CSKL ``d_j = αᵀYK_jYα``, i.e. minus the gradient).
    t : float in (0, M]
        The budget.

    Returns
    -------
    s : ndarray of shape (M,)
        1 on the ``⌊t⌋`` largest ``d_j``, ``t − ⌊t⌋`` on the next one, 0
        elsewhere; ties go to the smaller index (stable sort, math.md §0).
    """
    d = np.asarray(d, dtype=float)
    whole, frac = _split_t(t, d.size)
    order = np.argsort(-d, kind="stable")
    s = np.zeros_like(d)
    s[order[:whole]] = 1.0
    if frac > 0:
        s[order[whole]] = frac
    return s


def sum_top_t(d, t):
    """``g_t(d) = max_{γ∈Γ_t} γᵀd = Σ_{j≤⌊t⌋} d_[j] + (t − ⌊t⌋) d_[⌊t⌋+1]`` (the
    value of :func:`top_t_vertex`, from the sorted ``d``)."""
    d = np.asarray(d, dtype=float)
    whole, frac = _split_t(t, d.size)
    top = np.sort(d)[::-1]
    total = float(top[:whole].sum())
    return total + frac * float(top[whole]) if frac > 0 else total


def project_capped_simplex(v, t):
    """Euclidean projection of ``v`` onto ``Γ_t`` (math.md §5.3).

    ``Π(v) = clip(v − θ, 0, 1)`` where ``θ`` solves
    ``φ(θ) = Σ_j clip(v_j − θ, 0, 1) = t``.  ``φ`` is nonincreasing and
    piecewise linear with breakpoints ``{v_j, v_j − 1}``: evaluate it at the
    sorted breakpoints, find the segment where it crosses ``t`` and
    interpolate.

    Parameters
    ----------
    v : ndarray of shape (M,)
    t : float in (0, M]

    Returns
    -------
    ndarray of shape (M,)
    """
    v = np.asarray(v, dtype=float)
    m = v.size
    if not 0 < t <= m:
        raise ValueError(f"t must lie in (0, {m}], got {t}")
    breaks = np.concatenate((v, v - 1.0))
    breaks.sort()  # increasing θ (ties: equal φ)
    phi = _clip_unit(v - breaks[:, None]).sum(axis=1)  # nonincreasing
    k = int(np.searchsorted(-phi, -t, side="right")) - 1  # last breakpoint with φ ≥ t
    if k >= breaks.size - 1:
        theta = breaks[-1]
    else:
        lo, hi = phi[k], phi[k + 1]
        frac = 0.0 if lo == hi else (lo - t) / (lo - hi)
        theta = breaks[k] + frac * (breaks[k + 1] - breaks[k])
    return _clip_unit(v - theta)


def _clip_unit(x):
    """``clip(x, 0, 1)`` in place on the new array ``x`` (two ufunc calls: on the few
    weights of CSKL, ``np.clip``'s own dispatch would cost more than the clipping)."""
    np.maximum(x, 0.0, out=x)
    return np.minimum(x, 1.0, out=x)


def snap_to_box(gamma, tol=SNAP):
    """Set entries within ``tol`` of 0 or 1 exactly to 0 or 1 (math.md §5.3)."""
    gamma = np.array(gamma, dtype=float)
    gamma[gamma < tol] = 0.0
    gamma[gamma > 1.0 - tol] = 1.0
    return gamma
