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


#: a run whose best gap fell by no more than its rounding bound ρ over this many
#: certificates, while within ``STALL_FACTOR·ρ`` of 0, is at its rounding floor
STALL_CERTIFICATES = 10
STALL_FACTOR = 1e3
#: a run towards the floor (``to_floor``) past its tolerance ends when its best gap fell
#: by less than this factor over :data:`STALL_CERTIFICATES` certificates
FLOOR_DECREASE = 2.0


class _Record:
    """The history rows of a run and its best certified iterate (smallest gap)."""

    def __init__(self, iterate, keep_best):
        self.iterate, self.keep_best = iterate, keep_best
        self.start = time.perf_counter()
        self.rows, self.best = [], None

    def certify(self, t, step):
        """Certify the iterate after ``t`` steps; return its certificate and history row."""
        cert = self.iterate.certificate()
        row = {
            "iteration": self.iterate.work_done(t),
            "time": time.perf_counter() - self.start,
            "primal": cert.primal,
            "dual": cert.dual,
            "gap": cert.gap,
            "rounding": cert.rounding,
            "step": step,
        }
        row.update(cert.extra)
        self.rows.append(row)
        if self.keep_best and (self.best is None or cert.gap < self.best[1].gap):
            self.best = (self.iterate.solution(), cert)
        return cert, row

    def stalled(self, cert):
        """Whether the gap has stopped falling at its rounding floor: the best of the last
        :data:`STALL_CERTIFICATES` gaps is no more than ``ρ`` below the best before them,
        and the gap is within ``STALL_FACTOR·ρ`` (the bound ``ρ`` estimates the rounding
        of the gap's terms; their sum may round a few hundred times worse)."""
        gaps = [row["gap"] for row in self.rows]
        if cert.rounding <= 0 or len(gaps) <= STALL_CERTIFICATES:
            return False
        if abs(cert.gap) > STALL_FACTOR * cert.rounding:
            return False
        recent, before = gaps[-STALL_CERTIFICATES:], gaps[:-STALL_CERTIFICATES]
        return min(recent) >= min(before) - cert.rounding

    def slowed(self):
        """Whether the best gap fell by less than :data:`FLOOR_DECREASE` over the last
        :data:`STALL_CERTIFICATES` certificates (a run towards the floor that no longer
        gains: the block passes of a degenerate small problem can hover well above it)."""
        gaps = [row["gap"] for row in self.rows]
        if len(gaps) <= STALL_CERTIFICATES:
            return False
        recent, before = gaps[-STALL_CERTIFICATES:], gaps[:-STALL_CERTIFICATES]
        return min(recent) * FLOOR_DECREASE > min(before)


def _verdict(rule, cert, row, callback, record):
    """The status that ends the run at this certificate, or None to go on: at the
    rounding floor the run has converged if the rule is met there (always with
    ``to_floor``, whose goal the floor is, when ``gap + ρ ≤ τ·s``)."""
    if rule.holds(cert):
        return "converged"
    if rule.certifies and rule.tol > 0 and (rule.at_floor(cert) or record.stalled(cert)):
        return "converged" if rule.met(cert) else "rounding"
    if getattr(rule, "to_floor", False) and rule.met(cert) and record.slowed():
        return "converged"
    if callback is not None and callback(row):
        return "callback"
    return None


def _warn(status, rule, final, *, name, remedy, max_iter, max_time, keep_best):
    """The ``ConvergenceWarning`` of a run that ended on ``status`` before its rule held."""
    if status == "rounding":
        where = (
            "within its rounding bound"
            if abs(final.gap) <= final.rounding
            else "no longer falling, within 1000 times its rounding bound"
        )
        message = (
            f"{name} stopped with duality gap {final.gap:.3g} {where} "
            f"{final.rounding:.3g}: its stopping rule ({rule}) cannot hold at this "
            "floating-point precision; the iterate is optimal up to rounding and is "
            "returned. To converge, increase tol."
        )
    elif status in ("max_iter", "max_time") and rule.certifies:
        limit = f"max_iter={max_iter}" if status == "max_iter" else f"max_time={max_time}s"
        message = (
            f"{name} stopped at {limit} with duality gap {final.gap:.3g} before its "
            f"stopping rule ({rule}) held; the {'best' if keep_best else 'last'} iterate is "
            f"returned. To converge, {remedy}."
        )
    else:
        return
    warnings.warn(message, ConvergenceWarning, stacklevel=4)


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
    record = _Record(iterate, keep_best)
    status, step, cert = None, math.nan, None
    for t in range(int(max_iter) + 1):
        cert = None
        last = iterate.work_done(t) >= max_iter
        if t % check_every == 0 or last:
            cert, row = record.certify(t, step)
            status = _verdict(rule, cert, row, callback, record)
            if status is not None:
                break
        if last:
            status = "max_iter"
            break
        if max_time is not None and time.perf_counter() - record.start > max_time:
            status = "max_time"
            break
        step = iterate.step(t)
    status = status or "max_iter"
    if cert is None:
        cert, _ = record.certify(t, step)
    if status in ("max_iter", "max_time") and getattr(rule, "to_floor", False) and rule.met(cert):
        status = "converged"  # past tol towards the floor: the budget ends a certified run
    elapsed = time.perf_counter() - record.start

    converged = status == "converged"
    solution, final, n_iter = iterate.solution(), cert, iterate.work_done(t)
    best = record.best
    past_tol = converged and getattr(rule, "to_floor", False)  # the best of the run on
    if (past_tol or not converged) and best is not None and best[1].gap < cert.gap:
        solution, final = best
    _warn(
        status,
        rule,
        final,
        name=name,
        remedy=remedy,
        max_iter=max_iter,
        max_time=max_time,
        keep_best=keep_best,
    )
    return FWResult(
        solution=solution,
        primal=final.primal,
        dual=final.dual,
        gap=final.gap,
        n_iter=n_iter,
        converged=converged,
        status=status,
        history=history_arrays(record.rows),
        time=elapsed,
        rounding=final.rounding,
    )
