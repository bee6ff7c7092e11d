"""The structural SVM solvers' entry points (math.md §3).

Each builds the :class:`~kernfw.solvers.structural.problem.StructuredProblem` and drives
its iterate with :func:`kernfw.fw.run`; ``tol`` is relative to ``|P|`` (or a
:class:`~kernfw.fw.StoppingRule`).  The pairwise (linearly convergent) BCFW of §3.9 for
multi-class is the multi-class dual solver :func:`kernfw.solvers.multiclass.solve_multiclass`
(§3.7: the two problems are equal).
"""

from ...fw import run
from .cutting_plane import CuttingPlane
from .iterate import BCFW, BatchFW
from .problem import StructuredProblem
from .subgradient import StructuralSSG

__all__ = [
    "AVERAGING",
    "solve_structural_fw",
    "solve_structural_bcfw",
    "solve_structural_cutting_plane",
    "solve_structural_ssg",
]

#: the returned iterate of the block solvers: the last one or the weighted average
AVERAGING = ("none", "weighted")


def check_averaging(averaging):
    """Whether ``averaging`` (one of :data:`AVERAGING`, ``ValueError`` otherwise) averages."""
    if not isinstance(averaging, str) or averaging not in AVERAGING:
        raise ValueError(f"averaging must be one of {AVERAGING}, got {averaging!r}")
    return averaging == "weighted"


def check_every_passes(check_every):
    """``check_every`` as an int ≥ 1 (``ValueError`` otherwise)."""
    if int(check_every) < 1:
        raise ValueError(f"check_every must be >= 1, got {check_every}")
    return int(check_every)


def _run(iterate, method, remedy, *, check_every=1, keep_best=True, **budget):
    """:func:`kernfw.fw.run` of a structural-SVM iterate, named ``structural SVM <method>``
    (``remedy``: what the non-convergence warning suggests; ``budget``: ``tol``,
    ``max_iter``, ``max_time``, ``callback``)."""
    return run(
        iterate,
        check_every=check_every,
        keep_best=keep_best,
        remedy=remedy,
        name=f"structural SVM {method}",
        **budget,
    )


def solve_structural_fw(
    model,
    X,
    Y,
    lam,
    *,
    step="line_search",
    max_iter=50,
    tol=1e-3,
    max_time=None,
    callback=None,
    sample_weight=None,
):
    """Batch Frank-Wolfe for the structural SVM (paper Algorithm 2, math.md §3.4).

    Parameters
    ----------
    model : StructuredModel
        Joint features, loss and oracles.
    X, Y : sequences
        Training inputs and outputs.
    lam : float
        ``λ``.
    step : {"line_search", "standard"}
        Exact line search or ``2/(t+2)``.
    max_iter : int
        Iterations (each is one oracle pass over the data).
    tol : float or StoppingRule
        Stop when the duality gap ``P − D ≤ tol·|P|`` (checked every iteration).
    max_time : float or None
        Wall-clock budget (s).
    callback : callable or None
        ``callback(row) -> bool`` on each history row.
    sample_weight : array-like of shape (n,) or None
        Weights ``c_i ≥ 0`` of the examples' loss terms (math.md §3.11); None: all 1.

    Returns
    -------
    FWResult
        ``solution["w"]``; history columns ``oracle_calls`` and ``pass``.
    """
    return _run(
        BatchFW(StructuredProblem(model, X, Y, lam, sample_weight), step=step),
        "batch FW",
        "increase max_iter, loosen tol, or use the BCFW or the cutting plane",
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        callback=callback,
    )


def solve_structural_bcfw(
    model,
    X,
    Y,
    lam,
    *,
    averaging="weighted",
    step="line_search",
    sample="uniform",
    max_iter=50,
    tol=1e-3,
    check_every=5,
    random_state=None,
    max_time=None,
    callback=None,
    sample_weight=None,
):
    """Block-coordinate Frank-Wolfe for the structural SVM (Algorithm 4, math.md §3.5).

    One oracle call per block step; a pass is ``n`` block steps.  The total
    duality gap (one extra oracle pass) is computed every ``check_every``
    passes and stops the run when ``≤ tol·|P|``.

    Parameters
    ----------
    model, X, Y, lam
        As in :func:`solve_structural_fw`.
    averaging : {"weighted", "none"}
        "weighted" (BCFW-wavg): certify and return the weighted average ``w̄``;
        "none": the last iterate.
    step : {"line_search", "standard"}
        Exact block line search or ``2n/(k+2n)``.
    sample : {"uniform", "perm"}
        Blocks drawn uniformly at random, or a random permutation per pass.
    max_iter : int
        Budget in passes.
    tol : float or StoppingRule
        Stop when the duality gap ``≤ tol·|P|``.
    check_every : int
        Passes between two duality-gap computations.
    random_state : int, Generator or None
        Seed of the block order.
    max_time, callback
        As in :func:`kernfw.fw.run`.
    sample_weight
        As in :func:`solve_structural_fw`.

    Returns
    -------
    FWResult
        ``solution`` has ``w`` (the averaged one with ``averaging``), ``w_last``,
        ``ell`` and ``block_gaps``; history columns ``oracle_calls`` and ``pass``
        (oracle calls of the optimization, gap passes excluded).
    """
    iterate = BCFW(
        StructuredProblem(model, X, Y, lam, sample_weight),
        averaging=check_averaging(averaging),
        step=step,
        sample=sample,
        random_state=random_state,
    )
    return _run(
        iterate,
        "BCFW",
        "increase max_iter, loosen tol, use a larger lam, or use the cutting plane",
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        check_every=check_every_passes(check_every),
        callback=callback,
    )


def solve_structural_cutting_plane(
    model, X, Y, lam, *, max_iter=200, tol=1e-3, max_time=None, callback=None, sample_weight=None
):
    """1-slack cutting plane (SVMstruct, math.md §3.10) for the structural SVM, certified.

    Parameters
    ----------
    model, X, Y, lam
        As in :func:`solve_structural_fw`.
    max_iter : int
        Iterations; each is one oracle pass (one new cut) and one restricted QP,
        solved to a gap relative to the certified one
        (:meth:`~kernfw.solvers.structural.cutting_plane.CuttingPlane.restricted_rule`).
    tol : float or StoppingRule
        Stop when the duality gap ``P(w) − D(β) ≤ tol·|P(w)|`` (the n-slack gap of
        math.md §3.3, computed every iteration from the pass that makes the cut).
    max_time, callback, sample_weight
        As in :func:`solve_structural_fw`.

    Returns
    -------
    FWResult
        ``solution["w"]``, ``["beta"]`` (weights of the cuts); history columns
        ``oracle_calls``, ``pass`` and ``cuts`` (working-set size).
    """
    return _run(
        CuttingPlane(StructuredProblem(model, X, Y, lam, sample_weight)),
        "cutting plane",
        "increase max_iter or loosen tol",
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        callback=callback,
    )


def solve_structural_ssg(
    model,
    X,
    Y,
    lam,
    *,
    averaging="weighted",
    project=False,
    sample="uniform",
    max_iter=50,
    check_every=5,
    random_state=None,
    max_time=None,
    callback=None,
    sample_weight=None,
):
    """SSG / SSG-wavg baseline for the structural SVM (math.md §3.6).

    Parameters
    ----------
    model, X, Y, lam
        As in :func:`solve_structural_fw`.
    averaging : {"weighted", "none"}
        "weighted" (SSG-wavg): the weighted average of the iterates; "none":
        the last iterate.
    project : bool
        Project on ``‖w‖ ≤ sqrt(P(0)/λ)``.
    max_iter : int
        Passes (``n`` stochastic steps each); the run always uses them all.
    check_every : int
        Passes between two primal evaluations (one oracle pass each).
    sample, random_state, max_time, callback, sample_weight
        As in :func:`solve_structural_bcfw`.

    Returns
    -------
    FWResult
        ``solution["w"]``; ``primal`` is ``P(w)`` as the FW solvers report it,
        ``gap`` is inf (not certified); history columns ``oracle_calls``, ``pass``.
    """
    check_every = check_every_passes(check_every)
    iterate = StructuralSSG(
        StructuredProblem(model, X, Y, lam, sample_weight),
        averaging=check_averaging(averaging),
        project=project,
        sample=sample,
        random_state=random_state,
    )
    return _run(
        iterate,
        "SSG",
        "increase max_iter or tol",
        tol=0.0,
        max_iter=max_iter,
        max_time=max_time,
        check_every=check_every,
        callback=callback,
        keep_best=False,
    )
