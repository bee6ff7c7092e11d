"""The entry point of the multi-category SVM solvers (math.md §1): :func:`solve_multiclass`."""

from ...fw import run
from .iterate import BlockFW, FullBatchFW
from .pg import solve_multiclass_subgradient
from .problem import MulticlassDual

__all__ = ["solve_multiclass", "SOLVERS"]

SOLVERS = ("lsfw", "stdfw", "bcfw", "pg")


def solve_multiclass(
    op,
    y,
    *,
    loss="max_hinge",
    lam=1e-2,
    smoothing=0.0,
    solver="lsfw",
    n_classes=None,
    A_init=None,
    S_init=None,
    tol=1e-3,
    max_iter=1000,
    max_time=None,
    check_every=1,
    callback=None,
    random_state=None,
    sample="uniform",
    keep_best=True,
    shrinking=True,
    block_step="auto",
    inner_steps=5,
    averaging=False,
    shrink_classes=False,
    name=None,
    remedy=None,
    weights=None,
):
    """Train a multi-category SVM by dual Frank-Wolfe (math.md §1).

    Parameters
    ----------
    op : KernelOperator
        Gram matrix ``K`` of the training points.
    y : array-like of int, shape (n,)
        Class indices.
    loss : str or MulticlassLoss
        See :mod:`kernfw.losses`.
    lam : float
        ``λ > 0``.
    smoothing : float
        Moreau smoothing ``σ ≥ 0``.
    solver : {"lsfw", "stdfw", "bcfw", "pg"}
        ``"lsfw"``: FW with the exact closed-form line search (§1.7, §1.10);
        ``"stdfw"``: the same with the step ``2/(t+2)``; ``"bcfw"``: block-coordinate FW
        (:class:`~kernfw.solvers.multiclass.BlockFW`, §1.13; a built-in loss); ``"pg"``:
        the projected-subgradient baseline of §1.11.
    n_classes : int or None
        Number of classes ``m`` (default ``max(y) + 1``).
    A_init : ndarray of shape (m, n) or None
        Warm start: a feasible dual point (e.g. a previous solution; the
        feasible set does not depend on ``λ`` or ``σ``).
    S_init : ndarray of shape (n, m) or None
        The scores ``K A_initᵀ/(λn)`` of ``A_init`` when the caller knows them (e.g. from
        a model on a superset of the points): the start then needs no product with ``K``.
    tol : float or StoppingRule
        Stop when the certified gap (plus its rounding bound) is at most ``tol·|P|``;
        a :class:`~kernfw.fw.StoppingRule` for another scale (e.g. an absolute gap).
    max_iter : int
        Iterations (passes over the data for ``"bcfw"``, also with
        ``check_every="auto"``, whose rounds of passes end when ``max_iter``
        passes are spent; ``n_iter`` counts the passes).
    max_time : float or None
        Wall-clock budget (s).
    check_every : int or "auto"
        Certify every ``check_every`` iterations (passes for ``"bcfw"``).
        "auto" (:class:`~kernfw.MultiClassSVM`'s default): every iteration
        for the full-batch solvers; for
        ``"bcfw"`` a certificate ends each round of passes, a round lasting
        until the gap estimate of its last pass may pass the tolerance or has
        fallen by ``ROUND_DECREASE`` since the last certificate (at most
        ``ROUND_PASSES`` passes; :class:`BlockFW`, ``adaptive``).
    callback : callable or None
        ``callback(row) -> bool`` on every certificate (see :func:`kernfw.fw.run`).
    random_state : int, Generator or None
        Block order of ``"bcfw"``.
    sample : {"uniform", "perm"}
        Block sampling of ``"bcfw"``.
    keep_best : bool
        Return the iterate with the smallest gap if the run does not converge.
    shrinking : bool
        Active-set passes of ``"bcfw"``: between two certificates only blocks
        that are not block-optimal are visited (see :class:`BlockFW`).
    block_step : {"auto", "fw", "pairwise", "exact"}
        The block step of ``"bcfw"`` (see :class:`BlockFW`): "auto" solves the
        block sub-problem exactly for every built-in loss (math.md §1.13–§1.14)
        and takes a FW step with exact line search for other losses.
    inner_steps : int
        Pairwise steps per block visit (``block_step="pairwise"``).
    averaging : bool
        ``"bcfw"`` only: certify and return the weighted average of the
        iterates (BCFW-wavg).
    shrink_classes : bool
        ``"bcfw"`` with ``shrinking`` and exact block steps of the max /
        structured hinge: also leave the inactive classes of each block out
        until the next certificate
        (:class:`~kernfw.MultiClassSVM` turns it on with ``shrinking``: fastest
        in ``docs/benchmarks/multiclass.md`` (d)).
    name, remedy : str or None
        The solver's name and the advice of the ``ConvergenceWarning`` (default: those
        of :class:`~kernfw.MultiClassSVM`; an estimator that calls this solver names
        itself and its own parameters).
    weights : array-like of shape (n,) or None
        Per-example weights ``v_i ≥ 0`` of the loss terms (math.md §1.15): the problem
        ``λ/2 ‖W‖² + (1/n) Σ_i v_i Φ_i``.  ``A_init`` and the returned ``A`` and ``S``
        are in its variables ``α_i`` (zero weight: ``α_i = 0``).

    Returns
    -------
    FWResult
        ``solution["A"]`` is the dual ``A`` (m × n; ``dual_coef_``),
        ``solution["S"]`` the training scores ``S = K Aᵀ/(λn)`` (n × m).
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    problem = MulticlassDual(op, y, loss, lam, smoothing, n_classes, weights)
    adaptive = check_every == "auto"
    if adaptive:
        check_every = 1
    if solver == "pg":
        result = solve_multiclass_subgradient(
            problem,
            A_init=A_init,
            S_init=S_init,
            tol=tol,
            max_iter=max_iter,
            max_time=max_time,
            check_every=check_every,
            callback=callback,
        )
        result.solution = problem.original(result.solution)
        return result
    At, S = problem.start(A_init, S_init)
    rule = "standard" if solver == "stdfw" else "line_search"
    if solver == "bcfw":
        iterate = BlockFW(
            problem,
            At,
            S,
            rule="line_search",
            random_state=random_state,
            sample=sample,
            block_step=block_step,
            inner_steps=inner_steps,
            shrinking=shrinking,
            averaging=averaging,
            shrink_classes=shrink_classes,
            adaptive=adaptive,
            tol=tol,
            max_passes=max_iter if adaptive else None,
        )
    else:
        iterate = FullBatchFW(problem, At, S, rule=rule)
    remedy = remedy or (
        "increase max_iter (or max_time), loosen tol, use a smaller C (a larger "
        "lam), or use smoothing > 0"
    )
    result = run(
        iterate,
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        check_every=check_every,
        callback=callback,
        keep_best=keep_best,
        remedy=remedy,
        name=name or f"MultiClassSVM solver={solver!r}",
    )
    result.solution = problem.original(result.solution)
    return result
