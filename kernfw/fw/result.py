"""The record every solver returns."""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Certificate", "FWResult", "UNIT_ROUNDOFF", "rounding_bound"]

#: the unit roundoff ``u = 2⁻⁵³`` of float64 arithmetic
UNIT_ROUNDOFF = 2.0**-53


def rounding_bound(n_terms, magnitude):
    """``(n_terms + 4)·u·magnitude``: the rounding error bound of a computed gap.

    A sum of ``n_terms`` products whose absolute values add up to ``magnitude``
    is computed with an error of at most ``γ_{n_terms}·magnitude``
    (``γ_k = k u/(1 − k u)``, Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2002, §3.1); the ``+ 4`` covers the few operations that form
    each term.
    """
    return (n_terms + 4) * UNIT_ROUNDOFF * magnitude


@dataclass
class Certificate:
    """Objective values at one iterate.

    Attributes
    ----------
    primal : float
        Primal objective P at the primal point of the iterate (NaN if unknown).
    dual : float
        Dual objective D at the iterate (NaN for primal-only baselines).
    gap : float
        Certified gap: an upper bound of P − P* (for FW, the FW gap ``g``),
        computed as a sum of terms that are nonnegative in exact arithmetic
        (per-block FW gaps), so that it is never below ``−rounding``.
        ``inf`` when the method certifies nothing (subgradient baselines).
    rounding : float
        Bound ``ρ`` of the rounding error of ``primal``, ``dual`` and ``gap``
        (:func:`rounding_bound` of the terms they sum): the exact values at the
        iterate lie within ``ρ`` of the computed ones, so ``gap ≥ −ρ`` and
        ``P − P* ≤ gap + ρ``.  0 where a solver does not bound it.
    extra : dict
        Further scalars worth recording (e.g. ``oracle_calls``, ``radius``).
    """

    primal: float
    dual: float
    gap: float
    extra: dict = field(default_factory=dict)
    rounding: float = 0.0


@dataclass
class FWResult:
    """Outcome of a Frank-Wolfe run (or of a baseline run on the same problem).

    Attributes
    ----------
    solution : dict
        The returned iterate as named arrays (e.g. ``{"A": ..., "S": ...}``):
        the last one when converged, otherwise the iterate with the smallest
        certified gap seen.
    primal, dual, gap : float
        The certificate of ``solution``: ``dual ≤ P* ≤ primal`` and
        ``primal − P* ≤ gap``, each up to ``rounding``.
    n_iter : int
        Iterations performed (passes for block-coordinate methods).
    converged : bool
        Whether the stopping rule (``gap + rounding <= tol`` or the solver's own) held.
    status : str
        "converged", "max_iter", "max_time", "callback" or "rounding" (the gap is
        within its rounding bound, which alone breaks the stopping rule: more
        iterations cannot certify ``tol`` at this precision).
    history : dict of numpy arrays
        Equal-length arrays ``iteration``, ``time``, ``primal``, ``dual``,
        ``gap``, ``step`` plus solver-specific columns.
    time : float
        Wall-clock seconds of the run.
    rounding : float
        The rounding bound ``ρ`` of the certificate (:attr:`Certificate.rounding`):
        ``gap ≥ −ρ``, and ``converged`` asks the stopping rule of ``gap + ρ``.
    """

    solution: dict
    primal: float
    dual: float
    gap: float
    n_iter: int
    converged: bool
    status: str
    history: dict
    time: float
    rounding: float = 0.0

    def __getitem__(self, key):
        return self.solution[key]

    def __repr__(self):
        return (
            f"FWResult(status={self.status!r}, n_iter={self.n_iter}, "
            f"primal={self.primal:.6g}, dual={self.dual:.6g}, gap={self.gap:.3g})"
        )


def history_arrays(rows):
    """Turn a list of dict rows into a dict of equal-length arrays."""
    keys = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    return {k: np.array([row.get(k, np.nan) for row in rows]) for k in keys}
