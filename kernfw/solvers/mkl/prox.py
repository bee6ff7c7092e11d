r"""Group regularizers of online MKL and their proximity operators (math.md §4.3, §4.6).

The parameters are groups ``θ = (θ_1, …, θ_M)``; every regularizer here is a
function of the group norms ``‖θ_k‖`` (plus, for the sparse group lasso, the
ℓ1 norm of the explicit groups).  Their proxes therefore act on a group
through one factor ``θ_k ← c_k θ_k`` (kernel groups stay kernelized), except
the ℓ1 soft threshold, which needs explicit coordinates.

========================  =============================================  =============================
``regularizer``           ``R(θ)``                                       prox sequence (Alg. 1)
========================  =============================================  =============================
``"squared_l21"``         ``λ/2 (Σ_k ‖θ_k‖)²``                            squared ℓ2,1 (§4.3)
``"l21"``                 ``λ Σ_k ‖θ_k‖``                                 group soft threshold
``"elastic"``             ``λ/2 (Σ_k ‖θ_k‖)² + λ₂/2 ‖θ‖²``                squared ℓ2,1, then ``1/(1+ηλ₂)``
``"sparse_group_lasso"``  ``λ Σ_k ‖θ_k‖ + λ₂ ‖θ_E‖₁`` (E: explicit)      ℓ1 soft threshold, then ℓ2,1
========================  =============================================  =============================

For the sparse group lasso the sequence is the exact prox of the sum; for the
elastic MKL regularizer it is the composite step of Algorithm 1 of [Martins2011]
(one prox per term with the same ``η``).
"""

import numpy as np

__all__ = [
    "prox_squared_l1",
    "prox_squared_l21",
    "squared_l21_factors",
    "group_lasso_factors",
    "soft_threshold",
    "Regularizer",
    "REGULARIZERS",
    "make_regularizer",
]

REGULARIZERS = ("squared_l21", "l21", "elastic", "sparse_group_lasso")


def prox_squared_l1(v, tau):
    """``prox_{(τ/2)‖·‖₁²}(v) = sign(v) ⊙ (|v| − κ)^+`` (math.md §4.3).

    With ``|v|`` sorted decreasingly, ``ξ = max{j : |v|_[j] > τ/(1+jτ) Σ_{r≤j} |v|_[r]}``
    survivors and threshold ``κ = τ/(1+ξτ) Σ_{r≤ξ} |v|_[r]``.  The largest
    entry always survives (``ξ ≥ 1`` unless ``v = 0``).

    Parameters
    ----------
    v : ndarray of shape (M,)
    tau : float >= 0
        ``τ = ηλ``.

    Returns
    -------
    ndarray of shape (M,)
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


def _factors(norms, new_norms):
    """``c_k = b_k / ‖θ_k‖`` (0 for a zero group)."""
    safe = np.where(norms > 0, norms, 1.0)
    return np.where(norms > 0, new_norms / safe, 0.0)


def squared_l21_factors(norms, tau):
    """Group factors of ``prox_{(τ/2)‖·‖²_{2,1}}``: ``b = prox_{(τ/2)‖·‖₁²}(norms)``, ``c = b/norms``."""
    norms = np.asarray(norms, dtype=float)
    return _factors(norms, prox_squared_l1(norms, tau))


def group_lasso_factors(norms, tau):
    """Group factors of ``prox_{τ‖·‖_{2,1}}``: ``c_k = (1 − τ/‖θ_k‖)^+``."""
    norms = np.asarray(norms, dtype=float)
    return _factors(norms, np.maximum(norms - tau, 0.0))


def prox_squared_l21(groups, tau):
    """``prox_{(τ/2)‖·‖²_{2,1}}`` of a list of group arrays ([Martins2011], Proposition 1): whole groups zeroed."""
    groups = [np.asarray(g, dtype=float) for g in groups]
    norms = np.array([np.linalg.norm(g) for g in groups])
    return [c * g for c, g in zip(squared_l21_factors(norms, tau), groups)]


def soft_threshold(v, tau):
    """``prox_{τ‖·‖₁}(v) = sign(v) ⊙ (|v| − τ)^+``."""
    v = np.asarray(v, dtype=float)
    return np.sign(v) * np.maximum(np.abs(v) - tau, 0.0)


class Regularizer:
    """A composite group regularizer ``R`` and its prox sequence (table above).

    Parameters
    ----------
    name : {"squared_l21", "l21", "elastic", "sparse_group_lasso"}
    lam : float > 0
        ``λ``, the weight of the group term.
    lam2 : float >= 0
        ``λ₂``: the ridge weight (``"elastic"``) or the ℓ1 weight
        (``"sparse_group_lasso"``); unused otherwise.
    """

    def __init__(self, name, lam, lam2=0.0):
        if name not in REGULARIZERS:
            raise ValueError(f"regularizer must be one of {REGULARIZERS}, got {name!r}")
        self.name, self.lam, self.lam2 = name, float(lam), float(lam2)

    @property
    def uses_l1(self):
        """Whether the prox needs explicit coordinates (ℓ1 on explicit groups)."""
        return self.name == "sparse_group_lasso" and self.lam2 > 0

    def value(self, norms, l1=0.0):
        """``R(θ)`` from the group norms and ``‖θ_E‖₁`` of the explicit groups."""
        norms = np.asarray(norms, dtype=float)
        s = float(norms.sum())
        if self.name == "squared_l21":
            return 0.5 * self.lam * s**2
        if self.name == "l21":
            return self.lam * s
        if self.name == "elastic":
            return 0.5 * self.lam * s**2 + 0.5 * self.lam2 * float(norms @ norms)
        return self.lam * s + self.lam2 * float(l1)

    def prox(self, groups, eta):
        """Apply ``prox_{ηR}`` in place to ``groups`` (the sequence of Algorithm 1 of [Martins2011]).

        ``groups`` provides ``norms()``, ``rescale(factors)`` and
        ``soft_threshold(tau)`` (ℓ1 on the explicit groups only).
        """
        if self.name == "sparse_group_lasso":
            if self.uses_l1:
                groups.soft_threshold(eta * self.lam2)
            groups.rescale(group_lasso_factors(groups.norms(), eta * self.lam))
        elif self.name == "l21":
            groups.rescale(group_lasso_factors(groups.norms(), eta * self.lam))
        else:
            factors = squared_l21_factors(groups.norms(), eta * self.lam)
            if self.name == "elastic":
                factors = factors / (1.0 + eta * self.lam2)
            groups.rescale(factors)


def make_regularizer(name, lam, lam2=None):
    """A :class:`Regularizer`; ``lam2=None`` means ``λ₂ = λ``."""
    if isinstance(lam, bool) or not np.isscalar(lam) or not lam > 0:
        raise ValueError(f"lam must be a positive number, got {lam!r}")
    lam2 = lam if lam2 is None else lam2
    if isinstance(lam2, bool) or not np.isscalar(lam2) or not lam2 >= 0:
        raise ValueError(f"lam2 must be a nonnegative number, got {lam2!r}")
    return Regularizer(name, lam, lam2)
