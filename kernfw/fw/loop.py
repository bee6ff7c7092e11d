"""The Frank-Wolfe iteration driver, shared by every solver.

The driver knows nothing about SVMs.  A solver hands it an
:class:`FWIterate`: an object that can certify its current point
(:meth:`FWIterate.certificate`), take one iteration (:meth:`FWIterate.step`)
and return its solution (:meth:`FWIterate.solution`).  The driver owns the
rest: stopping on ``tol``/``max_iter``/``max_time``, the history, the
callback, keeping the best iterate and the ``ConvergenceWarning``.
"""

import dataclasses
import math
import time
import warnings
from abc import ABC, abstractmethod

from sklearn.exceptions import ConvergenceWarning

from .result import FWResult, history_arrays

__all__ = ["FWIterate", "RelativeGapRule", "run"]


class FWIterate(ABC):
    """One solver's state, driven by :func:`run`.

    Subclasses keep their iterate (dual variables and whatever they maintain
    incrementally, e.g. the score matrix).
    """

    @abstractmethod
    def certificate(self):
        """:class:`~kernfw.fw.result.Certificate` of the current iterate."""

    @abstractmethod
    def step(self, t):
        """Perform iteration ``t`` (0-based); return the step size taken."""

    @abstractmethod
    def solution(self):
        """The current iterate as a dict of arrays (copies: the run goes on)."""

    def is_converged(self, cert, tol):
        """The stopping rule; the default is ``gap + ρ <= tol``: the certified gap
        holds whatever its rounding (``ρ = cert.rounding``)."""
        return cert.gap + cert.rounding <= tol

    def stopping_rule(self, tol):
        """The rule of :meth:`is_converged` in words, for the ``ConvergenceWarning``."""
        return f"gap + rounding <= tol={tol:.3g}"

    def work_done(self, t):
        """Work after ``t`` calls of :meth:`step`, in the unit of ``max_iter``.

        The default is ``t``.  An iterate whose step does a variable amount of
        work (e.g. a round of passes) counts it here: the run stops when it
        reaches ``max_iter`` and reports it as ``n_iter``.
        """
        return t


class RelativeGapRule:
    """Mixin of an :class:`FWIterate` whose ``tol`` is the certified relative gap.

    Stops when ``P − D + ρ ≤ tol·|P|`` (``ρ`` the certificate's rounding bound):
    the primal value ``P`` is then certified within a fraction ``tol`` of the
    optimum (``P − P* ≤ P − D + ρ``), whatever the scale of the data or of the
    regularization.
    """

    def is_converged(self, cert, tol):
        return cert.gap + cert.rounding <= tol * abs(cert.primal)

    def stopping_rule(self, tol):
        return f"gap + rounding <= tol*|P| with tol={tol:.3g}"


def _should_certify(t, check_every):
    return t % check_every == 0


def _at_rounding_floor(iterate, cert, tol):
    """Whether more iterations cannot certify ``tol`` at this precision.

    True when the gap is already within its rounding bound ``ρ`` (``|gap| ≤ ρ``: the
    iterate is optimal up to rounding) and ``ρ`` alone breaks the stopping rule (the
    rule fails at ``gap = 0``).  ``tol = 0`` asks for ``max_iter`` iterations and is
    never at the floor.
    """
    if not (tol > 0 and cert.rounding > 0 and abs(cert.gap) <= cert.rounding):
        return False
    return not iterate.is_converged(dataclasses.replace(cert, gap=0.0), tol)


def run(
    iterate,
    *,
    tol,
    max_iter,
    max_time=None,
    check_every=1,
    callback=None,
    keep_best=True,
    remedy="increase max_iter or tol",
    name="Frank-Wolfe",
):
    """Drive ``iterate`` until its stopping rule holds or a budget runs out.

    Parameters
    ----------
    iterate : FWIterate
        The solver state.
    tol : float
        Tolerance passed to ``iterate.is_converged`` (default rule: gap + ρ ≤ tol).
    max_iter : int
        Maximum number of iterations (``step`` calls).
    max_time : float or None
        Wall-clock budget in seconds.
    check_every : int
        Certify (and test for convergence) every ``check_every`` iterations
        (passes, for the block-coordinate solvers).
    callback : callable or None
        ``callback(info) -> bool`` after each certificate; ``info`` is the
        history row (``iteration``, ``time``, ``primal``, ``dual``, ``gap``,
        ``rounding``, ``step``, ...). Returning True stops the run.
    keep_best : bool
        If the run does not converge, return the iterate with the smallest
        certified gap seen instead of the last one.
    remedy : str
        Advice appended to the ``ConvergenceWarning``.
    name : str
        Solver name used in the warning.

    Returns
    -------
    FWResult
    """
    if not tol >= 0:
        raise ValueError(f"tol must be >= 0, got {tol}")
    if int(max_iter) < 0:
        raise ValueError(f"max_iter must be >= 0, got {max_iter}")
    check_every = max(int(check_every), 1)
    start = time.perf_counter()
    rows, best = [], None
    status, step, t = "max_iter", math.nan, 0

    def certify(t):
        nonlocal best
        cert = iterate.certificate()
        row = {
            "iteration": iterate.work_done(t),
            "time": time.perf_counter() - start,
            "primal": cert.primal,
            "dual": cert.dual,
            "gap": cert.gap,
            "rounding": cert.rounding,
            "step": step,
        }
        row.update(cert.extra)
        rows.append(row)
        if keep_best and (best is None or cert.gap < best[1].gap):
            best = (iterate.solution(), cert, t)
        return cert, row

    cert = None
    for t in range(int(max_iter) + 1):
        cert = None
        last = iterate.work_done(t) >= max_iter
        if _should_certify(t, check_every) or last:
            cert, row = certify(t)
            if iterate.is_converged(cert, tol):
                status = "converged"
                break
            if _at_rounding_floor(iterate, cert, tol):
                status = "rounding"
                break
            if callback is not None and callback(row):
                status = "callback"
                break
        if last:
            break
        if max_time is not None and time.perf_counter() - start > max_time:
            status = "max_time"
            break
        step = iterate.step(t)
    if cert is None:
        cert, _ = certify(t)
    elapsed = time.perf_counter() - start

    converged = status == "converged"
    solution, final, n_iter = iterate.solution(), cert, iterate.work_done(t)
    if not converged and keep_best and best is not None and best[1].gap < cert.gap:
        solution, final = best[0], best[1]
    if status == "rounding":
        warnings.warn(
            f"{name} stopped with duality gap {final.gap:.3g} within its rounding bound "
            f"{final.rounding:.3g}: its stopping rule ({iterate.stopping_rule(tol)}) cannot "
            "hold at this floating-point precision; the iterate is optimal up to rounding "
            "and is returned. To converge, increase tol.",
            ConvergenceWarning,
            stacklevel=3,
        )
    elif not converged and status != "callback":
        limit = f"max_iter={max_iter}" if status == "max_iter" else f"max_time={max_time}s"
        returned = "best" if keep_best else "last"
        warnings.warn(
            f"{name} stopped at {limit} with duality gap {final.gap:.3g} before its "
            f"stopping rule ({iterate.stopping_rule(tol)}) held; the {returned} iterate is "
            f"returned. To converge, {remedy}.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return FWResult(
        solution=solution,
        primal=final.primal,
        dual=final.dual,
        gap=final.gap,
        n_iter=n_iter,
        converged=converged,
        status=status,
        history=history_arrays(rows),
        time=elapsed,
        rounding=final.rounding,
    )
