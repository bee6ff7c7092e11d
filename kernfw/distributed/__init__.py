"""kernfw on a Dask cluster: sharded fits (``backend="dask"``) and predictions.

The training rows are split in blocks held by Dask workers for the whole fit, and
the simplex-QP solver runs its MFW iteration with one round trip per iteration
(:mod:`kernfw.solvers.simplex_qp.distributed`).  This package is what the
estimators and users call around it: :func:`fit_l2svm_problems` and
:func:`solve_meb` (the ``backend="dask"`` fits of :class:`kernfw.L2SVC` and
:class:`kernfw.MinimumEnclosingBall`, called by their fit plan,
``FitPlan``; the fitted models are ordinary in-memory
models), :func:`decision_function` (a fitted model's predictions computed on the
cluster), :func:`get_client` and the :class:`WorkerLostError` a fit raises when a
worker holding rows is lost.
"""

from ..solvers.simplex_qp.distributed import WorkerLostError, get_client
from .fit import fit_l2svm_problems, pairwise_kernel, solve_meb
from .predict import decision_function

__all__ = [
    "WorkerLostError",
    "decision_function",
    "fit_l2svm_problems",
    "get_client",
    "pairwise_kernel",
    "solve_meb",
]
