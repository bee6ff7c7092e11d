"""Stopping rules: when a certified duality gap is small enough (math.md §0, §2.5).

Every solver of kernfw stops on one rule, ``gap + ρ ≤ τ·s``: the certified gap plus its
rounding bound ``ρ`` (the gap holds whatever its rounding) within a tolerance ``τ`` of a
scale ``s`` that the problem declares.  :class:`StoppingRule` is that rule; the driver
(:func:`kernfw.fw.run`) tests it on each certificate, and a compiled core tests its
:meth:`StoppingRule.estimate` between certificates.

A problem of at most :data:`SMALL_PROBLEM_MAX` examples is solved to its rounding floor
whatever ``tol`` (math.md §0, "Small problems"): exactly, where a family has an exact
method (the simplex QPs, math.md §2.16), otherwise by a rule with ``to_floor`` that runs on
past ``tol`` to the floor within the iteration budget.
"""

import dataclasses
import math
import numbers

__all__ = ["SCALES", "SMALL_PROBLEM_MAX", "StoppingRule", "RunBudget", "as_rule"]

#: what ``tol`` is relative to: the primal value ``|P|``, the dual value ``|D|``, the
#: squared radius of a ball (``tol`` the radius factor ε of the (1+ε) rule) or nothing
#: (``tol`` an absolute gap)
SCALES = ("primal", "dual", "radius", "absolute")

#: problems of at most this many examples are solved to their rounding floor, whatever
#: ``tol``: they are cheap to solve to the end, and an optimum up to rounding does not
#: depend on the path to it (a fit with integer weights is then the fit on repeated rows,
#: to rounding; math.md §0)
SMALL_PROBLEM_MAX = 64


@dataclasses.dataclass(frozen=True)
class StoppingRule:
    """Stop when ``gap + ρ ≤ τ·s``: the certified gap within ``tol`` of a scale ``s``.

    Parameters
    ----------
    tol : float
        The tolerance ``tol ≥ 0``; 0 runs the whole budget (see :meth:`at_floor`).
    scale : {"primal", "dual", "radius", "absolute"} or None
        What ``s`` is: ``|P|`` or ``|D|`` of the certificate (a relative gap, whatever
        the scale of the data or of the regularization); for ``"radius"`` the squared
        radius ``r²`` of a ball (``cert.extra["radius2"]``) with ``τ = (1 + tol)² − 1``,
        so that the radius is within a factor ``1 + tol`` of the optimum; for
        ``"absolute"`` ``s = 1`` and ``τ = tol``.  None: the problem's own scale
        (:func:`as_rule` fills it in).
    to_floor : bool
        Run on past ``tol`` to the rounding floor (the rule of small problems,
        :data:`SMALL_PROBLEM_MAX`): the run ends converged at the floor (:meth:`at_floor`,
        or a gap that no longer falls) or with its budget, provided ``gap + ρ ≤ τ·s``
        (:meth:`met`); the certificate is the same as without it.
    """

    tol: float
    scale: str = "primal"
    to_floor: bool = False

    #: whether meeting the rule certifies the returned model
    certifies = True

    def __post_init__(self):
        if not self.tol >= 0:
            raise ValueError(f"tol must be >= 0, got {self.tol}")
        if self.scale is not None and self.scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES} or None, got {self.scale!r}")

    @property
    def factor(self):
        """``τ``: ``tol``, or ``(1 + tol)² − 1`` for the radius rule."""
        return (1.0 + self.tol) ** 2 - 1.0 if self.scale == "radius" else float(self.tol)

    def size(self, cert):
        """``s`` of the certificate ``cert``."""
        if self.scale == "primal":
            return abs(cert.primal)
        if self.scale == "dual":
            return abs(cert.dual)
        if self.scale == "radius":
            return max(cert.extra["radius2"], 0.0)
        return 1.0

    def met(self, cert):
        """Whether ``gap + ρ ≤ τ·s`` on the certificate ``cert`` (what ``converged_``
        states)."""
        return cert.gap + cert.rounding <= self.factor * self.size(cert)

    def holds(self, cert):
        """Whether the run may end converged at ``cert`` before the floor: :meth:`met`,
        and never with ``to_floor`` (which ends at the floor, :meth:`at_floor`)."""
        return not self.to_floor and self.met(cert)

    def goal(self, cert):
        """The gap the run aims at: ``τ·s``, or 0 with ``to_floor``."""
        return 0.0 if self.to_floor else self.factor * self.size(cert)

    def at_floor(self, cert):
        """Whether more iterations cannot lower the gap at this precision.

        True when the gap is within its rounding bound (``|gap| ≤ ρ``: optimal up to
        rounding) and, without ``to_floor``, ``ρ`` alone breaks the rule (with it, the
        floor is the goal).  ``tol = 0`` asks for the whole budget and is never at the
        floor.
        """
        if not (self.tol > 0 and cert.rounding > 0 and abs(cert.gap) <= cert.rounding):
            return False
        return self.to_floor or cert.rounding > self.factor * self.size(cert)

    def estimate(self, shift=0.0):
        """Coefficients ``(a, b, absolute)`` of the rule's O(1) form ``gap ≤ a·f + b``
        (``a·|f| + b`` when ``absolute``) in the objective ``f`` a compiled core keeps.

        A core ends a run of steps early when it holds; the certificate decides.  For a
        relative rule ``f`` is the scale itself; for the radius rule ``r² = f + shift``
        (``shift`` the problem's ``diag(Q) − q``, math.md §2.3).  With ``to_floor`` the
        estimate is ``gap ≤ 0``: a run of steps ends with its own budget.
        """
        if self.to_floor:
            return 0.0, 0.0, False
        if self.scale == "absolute":
            return 0.0, float(self.tol), False
        if self.scale == "radius":
            return self.factor, self.factor * float(shift), False
        return float(self.tol), 0.0, True

    def __str__(self):
        if self.to_floor:
            return f"{dataclasses.replace(self, to_floor=False)}, run on to the rounding floor"
        if self.scale == "absolute":
            return f"gap + rounding <= tol={self.tol:.3g}"
        if self.scale == "radius":
            return f"radius within a factor 1 + tol={self.tol:.3g} of the optimum"
        symbol = "|P|" if self.scale == "primal" else "|D|"
        return f"gap + rounding <= tol*{symbol} with tol={self.tol:.3g}"


@dataclasses.dataclass(frozen=True)
class RunBudget:
    """The rule of a method that certifies nothing (an online method, a baseline): it
    never holds, the run ends with its budget, and the driver does not warn."""

    certifies = False

    def holds(self, cert):
        return False

    def met(self, cert):
        return False

    def at_floor(self, cert):
        return False

    def __str__(self):
        return "none: the method runs its whole budget"


def as_rule(tol, scale):
    """``tol`` as a :class:`StoppingRule`: a rule as it is, a number on ``scale``.

    Parameters
    ----------
    tol : float or StoppingRule
        A solver's ``tol`` argument.
    scale : str
        The problem's own scale (:data:`SCALES`), used when ``tol`` is a number or a
        rule without a scale.
    """
    if isinstance(tol, StoppingRule):
        return tol if tol.scale is not None else dataclasses.replace(tol, scale=scale)
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or math.isnan(tol):
        raise ValueError(f"tol must be a number >= 0 or a StoppingRule, got {tol!r}")
    return StoppingRule(float(tol), scale)
