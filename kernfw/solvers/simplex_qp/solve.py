"""``solve_simplex_qp``: the simplex QP by FW, MFW or CVM (math.md §2.3).

Validates the problem, builds the iterate of the chosen method (the FW / MFW iterate
on the compiled core; the core vector machine for ``solver="cvm"``) and drives it with
:func:`kernfw.fw.run`.
"""

import numbers

import numpy as np

from ..._threads import one_blas_thread
from ..._validation import check_positive
from ...fw import StoppingRule, run
from ...operators.base import KernelOperator
from .cvm import CoreVectorIterate
from .dense import solve_dense_simplex_qp
from .exact import ExactIterate
from .iterate import SimplexQPIterate, SimplexQPRuns
from .start import check_alpha0

__all__ = ["solve_simplex_qp", "make_iterate", "drive", "check_tol", "check_max_iter", "SOLVERS"]

#: the algorithms (``solver``): Frank-Wolfe with exact line search, modified (away-step)
#: Frank-Wolfe, the core vector machine baseline (core-set iterations,
#: :mod:`kernfw.solvers.simplex_qp.cvm`) and the exact active-set solve of small
#: problems (:mod:`kernfw.solvers.simplex_qp.exact`)
SOLVERS = ("lsfw", "mfw", "cvm", "active_set")


def _check_choice(name, value, options):
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def check_tol(tol):
    """``tol``: a :class:`~kernfw.fw.StoppingRule` as it is, else a positive number."""
    return tol if isinstance(tol, StoppingRule) else check_positive("tol", tol)


def check_max_iter(max_iter, default):
    """``max_iter`` as an int (``default`` for None); a ValueError unless it is a
    nonnegative integer."""
    if max_iter is None:
        return int(default)
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 0:
        raise ValueError(f"max_iter must be a nonnegative integer or None, got {max_iter!r}")
    return int(max_iter)


def default_max_iter(n):
    """The iteration budget of a problem of ``n`` points when ``max_iter`` is None."""
    return max(100_000, 20 * n)


def _check_operator(Q):
    if not isinstance(Q, KernelOperator):
        raise TypeError(f"Q must be a KernelOperator, got {type(Q).__name__}")
    return Q


#: core QPs of up to this many points are solved by the exact active-set method
DENSE_CORE_MAX = 200


def _core_qp(Q_core, q_core, alpha0, tol):
    """The core QP of a CVM iteration to the absolute FW gap ``tol``, warm-started from
    ``alpha0``; returns ``(α, iterations)``.

    Up to :data:`DENSE_CORE_MAX` points it is the active-set method of
    :func:`~kernfw.solvers.simplex_qp.dense.solve_dense_simplex_qp` (exact steps on the
    stored ``Q_SS``: an ill-conditioned core, e.g. an L2-SVM at a large ``C``, costs it
    nothing, where MFW zig-zags through its whole budget), beyond that MFW.  Runs inside
    the outer :func:`solve_simplex_qp` (single-threaded BLAS already; the inputs are the
    solver's own), so it skips the validation and the thread limit."""
    if Q_core.n <= DENSE_CORE_MAX:
        q = np.zeros(Q_core.n) if q_core is None else q_core
        alpha, _, n_iter = solve_dense_simplex_qp(Q_core.dense(), q, beta0=alpha0, tol=tol)
        return alpha, n_iter
    iterate = SimplexQPIterate(Q_core, q_core, "mfw", alpha0, None)
    rule = StoppingRule(tol, "absolute")
    res = drive(iterate, rule, default_max_iter(Q_core.n), problem="CVM core QP")
    return res.solution["alpha"], res.n_iter


def drive(iterate, tol, max_iter, check_every=None, solver="mfw", problem="simplex QP", **options):
    """:func:`kernfw.fw.run` on a simplex-QP iterate of ``solver``: FW / MFW take runs of
    ``check_every`` iterations per step (None: the default, 100;
    :meth:`SimplexQPIterate.configure_runs`), certified after each; other iterates are
    certified every ``check_every`` steps.  The run is named ``"MFW (simplex QP)"`` (the
    solver and the ``problem``; ``name=`` overrides it) with the :func:`remedy` of
    ``solver`` (``remedy=`` overrides it); ``options`` go to :func:`kernfw.fw.run` (``max_time``, ``callback``)."""
    if check_every is None:
        check_every = _default_check_every(iterate.n)
    if isinstance(iterate, SimplexQPRuns):
        iterate.configure_runs(tol, check_every, max_iter)
        check_every = 1
    options.setdefault("name", f"{solver.upper()} ({problem})")
    options.setdefault("remedy", remedy(solver))
    return run(iterate, tol=tol, max_iter=int(max_iter), check_every=check_every, **options)


def remedy(solver):
    """What the ``ConvergenceWarning`` of a run of ``solver`` that stopped early suggests."""
    return "increase max_iter or tol" + ("" if solver == "mfw" else " (or use solver='mfw')")


def make_iterate(Q, q, solver, alpha0, rng, tol=None):
    """The iterate of ``solver``: CVM core-set iterations (to the outer ``tol``), the exact
    active-set solve (``alpha0`` unused), or FW / MFW."""
    if solver == "cvm":
        return CoreVectorIterate(Q, q, rng, tol, _core_qp, alpha0=alpha0)
    if solver == "active_set":
        return ExactIterate(Q, q)
    return SimplexQPIterate(Q, q, solver, alpha0, rng)


def _default_check_every(n):
    """Certify every 100 iterations at most: a certificate is O(1), but the loop's
    history row and its copy of the best iterate are O(n).  A run of steps ends
    early where the certificate may pass (:meth:`SimplexQPIterate.configure_runs`),
    so a long run does not step past the tolerance."""
    return 100


def solve_simplex_qp(
    Q,
    q=None,
    solver="mfw",
    tol=1e-6,
    max_iter=None,
    alpha0=None,
    random_state=None,
    callback=None,
    max_time=None,
    check_every=None,
):
    """Maximize ``f(α) = qᵀα − αᵀQα`` over the unit simplex by FW or MFW (math.md §2.3).

    Parameters
    ----------
    Q : KernelOperator
        The PSD matrix ``Q`` (for the MEB the Gram matrix ``K``; for the L2-SVM
        :class:`~kernfw.solvers.simplex_qp.L2SVMKernel`).  The solver uses only
        ``Q.diag()`` and ``Q.columns(idx)`` (one column per iteration, two at the
        start); a warm start fetches the columns of its support once.
    q : array-like of shape (n,) or None
        Linear term ``q`` (None means 0; the MEB uses ``q = diag(Q)``).
    solver : {"mfw", "lsfw", "cvm", "active_set"}
        "mfw": Frank-Wolfe with away steps and drop steps (linear
        convergence); "lsfw": plain Frank-Wolfe toward ``i* = argmax g``.
        Both use the exact line search and run compiled (numba).  "cvm": the core
        vector machine baseline
        (:class:`~kernfw.solvers.simplex_qp.CoreVectorIterate`): each iteration adds
        the FW vertex to the core set and re-solves the QP on the core set by
        MFW; an iteration is then a core-set iteration.  "active_set": the active-set
        method on the stored ``Q`` (small problems, math.md §2.16;
        :class:`~kernfw.solvers.simplex_qp.exact.ExactIterate`), to optimality
        whatever ``tol``; an iteration is an active-set iteration.
    tol : float > 0 or StoppingRule
        Tolerance of the stopping rule ``gap + rounding ≤ tol·s`` (math.md §2.5) on the
        problem's scale ``s``: the squared radius ``r² = f(α) + c`` of a ball when ``q`` is
        given (the (1+ε) rule of CVM with ``ε = tol``, requiring ``diag(Q) − q = c·1``
        constant, as for the MEB), the dual value ``|f(α)|`` when ``q = 0`` (the
        L2-SVM: ``gap ≤ tol·αᵀQα``); a :class:`~kernfw.fw.StoppingRule` for another
        scale (e.g. ``StoppingRule(tol, "absolute")``: FW gap ``≤ tol``).
    max_iter : int or None
        Iteration budget (None: ``max(100000, 20 n)``).
    alpha0 : array-like of shape (n,) or None
        Warm start on the simplex (e.g. the previous solution when only the
        kernel changed).  None: CVM initialization ``α₀ = ½(e_a + e_b)`` with
        ``b`` the point farthest from ``a`` (math.md §2.6).
    random_state : int, numpy.random.Generator or None
        None starts the CVM initialization at point 0; otherwise at a random point.
    callback : callable or None
        ``callback(row) -> bool`` after each certificate (see :func:`kernfw.fw.run`).
    max_time : float or None
        Wall-clock budget in seconds.
    check_every : int or None
        Certify at least every ``check_every`` iterations (None: 100; CVM: 1).
        FW and MFW take runs of ``check_every`` iterations that end early at the
        first iteration whose O(1) gap estimate meets the stopping rule, so a
        run never steps past the tolerance; the certificate after each run (with
        its history row and the copy of the best iterate, both O(n)) decides.

    Returns
    -------
    FWResult
        ``solution`` holds ``alpha`` (α, shape (n,)), ``v`` (Qα), ``support``
        (sorted indices with ``α_i > 0``: the coreset).  ``dual`` is ``f(α)``,
        ``gap`` the FW gap, ``primal = dual + gap`` (for the MEB the exact
        primal ``max_i ‖z_i − c‖²`` of the current centre).  The history has
        columns ``coreset``, ``away_steps``, ``drop_steps`` (and ``radius2``,
        ``delta`` for the radius rule).

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw.operators import Gram
    >>> Z = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.5]])
    >>> op = Gram(Z @ Z.T)
    >>> res = solve_simplex_qp(op, q=op.diag(), tol=1e-10)
    >>> round(res.dual, 6)      # r² of the smallest ball: radius 1 around (1, 0)
    1.0
    """
    Q = _check_operator(Q)
    n = Q.n
    if n < 1:
        raise ValueError("the problem needs at least one point")
    _check_choice("solver", solver, SOLVERS)
    tol = check_tol(tol)
    if q is not None:
        q = np.asarray(q, dtype=np.float64).ravel()
        if q.shape != (n,) or not np.all(np.isfinite(q)):
            raise ValueError(f"q must be a finite array of shape ({n},), got shape {q.shape}")
    max_iter = check_max_iter(max_iter, default_max_iter(n))
    if max_time is not None:
        max_time = check_positive("max_time", max_time)
    if check_every is None:
        check_every = 1 if solver in ("cvm", "active_set") else _default_check_every(n)
    rng = None if random_state is None else np.random.default_rng(random_state)
    alpha0 = None if alpha0 is None else check_alpha0(alpha0, n)
    # one column per iteration is memory-bound O(n d) work: BLAS threads only
    # contend (and libsvm, the usual peer, is single-threaded as well)
    with one_blas_thread():
        iterate = make_iterate(Q, q, solver, alpha0, rng, tol)
        budget = {"max_time": max_time, "callback": callback}
        return drive(iterate, tol, max_iter, check_every, solver, **budget)
