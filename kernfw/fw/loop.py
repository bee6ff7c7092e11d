"""The Frank-Wolfe iteration driver, shared by every solver.

The driver knows nothing about SVMs.  A solver hands it an
:class:`FWIterate`: an object that can certify its current point
(:meth:`FWIterate.certificate`), take one iteration (:meth:`FWIterate.step`)
and return its solution (:meth:`FWIterate.solution`).  The driver owns the
rest: stopping on ``tol``/``max_iter``/``max_time``, the history, the
callback, keeping the best iterate and the ``ConvergenceWarning``.
"""

import math
import time
import warnings
from abc import ABC, abstractmethod

from sklearn.exceptions import ConvergenceWarning

from .result import FWResult, history_arrays
from .stopping import as_rule

__all__ = ["FWIterate", "run"]


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

    #: the scale a number ``tol`` is relative to (:class:`~kernfw.fw.stopping.StoppingRule`);
    #: a problem declares its own
    gap_scale = "absolute"

    def stopping_rule(self, tol):
        """The :class:`~kernfw.fw.stopping.StoppingRule` of ``tol`` (a number on
        :attr:`gap_scale`, or a rule as it is)."""
        return as_rule(tol, self.gap_scale)

    def work_done(self, t):
        """Work after ``t`` calls of :meth:`step`, in the unit of ``max_iter``.

        The default is ``t``.  An iterate whose step does a variable amount of
        work (e.g. a round of passes) counts it here: the run stops when it
        reaches ``max_iter`` and reports it as ``n_iter``.
        """
        return t


def _should_certify(t, check_every):
    return t % check_every == 0


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
    tol : float or StoppingRule
        The stopping rule, or its tolerance on the iterate's own scale
        (``iterate.stopping_rule(tol)``: ``gap + ρ ≤ tol·s``).
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
    rule = iterate.stopping_rule(tol)
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
            if rule.holds(cert):
                status = "converged"
                break
            if rule.at_floor(cert):
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
            f"{final.rounding:.3g}: its stopping rule ({rule}) cannot "
            "hold at this floating-point precision; the iterate is optimal up to rounding "
            "and is returned. To converge, increase tol.",
            ConvergenceWarning,
            stacklevel=3,
        )
    elif not converged and status != "callback" and rule.certifies:
        limit = f"max_iter={max_iter}" if status == "max_iter" else f"max_time={max_time}s"
        returned = "best" if keep_best else "last"
        warnings.warn(
            f"{name} stopped at {limit} with duality gap {final.gap:.3g} before its "
            f"stopping rule ({rule}) held; the {returned} iterate is "
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
