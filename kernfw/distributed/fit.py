"""The estimators' entry points to the sharded simplex QP (``backend="dask"``).

The L2-SVMs of :class:`~kernfw.L2SVC` and the ball of
:class:`~kernfw.MinimumEnclosingBall` on a Dask cluster: the training points ``X``
are scattered to the workers (:class:`~kernfw.solvers.simplex_qp.distributed.ShardedRows`)
with the kernel of the estimator's operator, and
:func:`~kernfw.solvers.simplex_qp.distributed.solve_sharded_simplex_qp` solves each
problem on them.
"""

import numpy as np

from ..operators import Features, PairwiseKernel
from ..solvers.simplex_qp import l2svm_recover
from ..solvers.simplex_qp.distributed import ShardedRows, solve_sharded_simplex_qp

__all__ = ["pairwise_kernel", "fit_l2svm_problems", "solve_meb"]


def pairwise_kernel(op):
    """The :class:`~kernfw.operators.PairwiseKernel` behind a training operator.

    Parameters
    ----------
    op : KernelOperator
        The operator an estimator built for its training points.

    Returns
    -------
    PairwiseKernel

    Raises
    ------
    ValueError
        For kernels that are not a function of two points (precomputed Gram
        matrices, ready operators), which cannot be evaluated shard by shard.
    """
    kernel = getattr(op, "kernel", None)
    if isinstance(kernel, PairwiseKernel):
        return kernel
    if isinstance(op, Features):
        return PairwiseKernel("linear")
    raise ValueError(
        "backend='dask' evaluates the kernel on the workers' rows, so it needs a kernel "
        "given by name or callable (e.g. 'rbf'), not kernel='precomputed' or a ready "
        f"KernelOperator (got {type(op).__name__})"
    )


def _solver_options(solver, tol, max_iter, callback, random_state, cache_size):
    """The keyword arguments of :func:`solve_sharded_simplex_qp` every problem shares."""
    return {
        "solver": solver,
        "tol": tol,
        "max_iter": max_iter,
        "callback": callback,
        "random_state": random_state,
        "cache_size": cache_size,
    }


def fit_l2svm_problems(
    X,
    op,
    y_enc,
    problems,
    C,
    solver,
    tol,
    max_iter,
    callback=None,
    cache_size=500.0,
    client=None,
    random_state=None,
    weights=None,
):
    """Train the binary L2-SVMs of :class:`~kernfw.L2SVC` on the Dask cluster.

    The rows are scattered once; the problems (one-vs-one pairs, one-vs-rest or
    one binary problem) are solved one after the other on the same shards.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n, d)
        Validated training points.
    op : KernelOperator
        The estimator's training operator (only its kernel ``k`` is used).
    y_enc : ndarray of int of shape (n,)
        Encoded labels.
    problems : list of BinaryProblem
        ``(classes, index, y)`` of every binary problem (one-vs-one pairs
        ``(i, j)``: rows of both classes, ``j`` positive; one-vs-rest ``(k,)``:
        every row, ``k`` positive).
    C, solver, tol, max_iter, callback, random_state
        As :func:`kernfw.solvers.simplex_qp.solve_l2svm`.
    cache_size : float
        Column-slice cache per shard (MB).
    client : distributed.Client, str or None
        See :func:`~kernfw.distributed.get_client`.
    weights : ndarray of shape (n,) or None
        Nonnegative per-example weights (math.md §2.14; None: all 1); the problems'
        ``index`` leave out the rows of weight 0, and so do the shards.

    Returns
    -------
    list of tuple
        ``(support, coef, b, result)`` per problem, ``support`` indexing the
        problem's rows, as the single-process ``_fit_binary``.
    """
    kernel = pairwise_kernel(op)
    options = _solver_options(solver, tol, max_iter, callback, random_state, cache_size)
    fits = []
    labels = np.asarray(y_enc)
    with ShardedRows(X, kernel, labels=labels, client=client, weights=weights) as shards:
        for classes, idx, _ in problems:
            members = None if len(classes) == 1 or idx.size == y_enc.size else list(classes)
            spec = {"members": members, "positive": classes[-1], "C": C, "ball": False}
            result = solve_sharded_simplex_qp(shards, spec, **options)
            sol = result.solution
            support = sol["support"]
            y_S = np.where(y_enc[support] == classes[-1], 1.0, -1.0)
            sol.update(l2svm_recover(sol["alpha_support"], sol["v_support"], y_S))
            fits.append((np.searchsorted(idx, support), sol["coef"], sol["b"], result))
    return fits


def solve_meb(
    X,
    op,
    solver,
    tol,
    max_iter,
    callback=None,
    cache_size=500.0,
    random_state=None,
    client=None,
    weights=None,
):
    """The minimum enclosing ball of :class:`~kernfw.MinimumEnclosingBall` on the cluster.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n, d)
        Validated training points.
    op : KernelOperator
        The estimator's training operator (only its kernel ``k`` is used).
    solver, tol, max_iter, callback, random_state
        As :func:`kernfw.solvers.simplex_qp.solve_simplex_qp` (``tol`` a number is the
        radius factor ε; a :class:`~kernfw.fw.StoppingRule` for another scale).
    cache_size : float
        Column-slice cache per shard (MB).
    client : distributed.Client, str or None
        See :func:`~kernfw.distributed.get_client`.
    weights : ndarray of shape (n,) or None
        Nonnegative weights of the points: those of weight 0 are left out (the other
        weights do not change the hard ball, math.md §2.14).

    Returns
    -------
    FWResult
        As :func:`~kernfw.solvers.simplex_qp.solve_simplex_qp`; ``solution["alpha"]``
        has shape (n,), ``solution["v"]`` holds ``(Kα)_i`` on the support
        (NaN elsewhere: the other entries stay on the workers).
    """
    options = _solver_options(solver, tol, max_iter, callback, random_state, cache_size)
    with ShardedRows(X, pairwise_kernel(op), client=client, weights=weights) as shards:
        result = solve_sharded_simplex_qp(shards, {"ball": True}, **options)
    sol = result.solution
    n = X.shape[0]
    sol["alpha"] = np.zeros(n)
    sol["alpha"][sol["support"]] = sol["alpha_support"]
    sol["v"] = np.full(n, np.nan)
    sol["v"][sol["support"]] = sol["v_support"]
    return result
