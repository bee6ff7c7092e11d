"""Data-parallel Frank-Wolfe on a Dask cluster (``backend="dask"``).

The training rows are split in blocks held by Dask workers for the whole fit
(:class:`ShardedRows`, one :class:`RowShard` actor per worker); the driver
runs the MFW iteration of :mod:`kernfw.solvers.meb` with one round trip per
iteration (:func:`solve_sharded_simplex_qp`).  :class:`kernfw.L2SVC` and
:class:`kernfw.MinimumEnclosingBall` use it with ``backend="dask"``; the
fitted models are ordinary in-memory models.
"""

from .mfw import (
    ShardedSimplexQPIterate,
    fit_l2svm_problems,
    pairwise_kernel,
    solve_meb,
    solve_sharded_simplex_qp,
)
from .predict import decision_function
from .shard import RowShard, ShardedRows, Vertex, WorkerLostError, get_client

__all__ = [
    "RowShard",
    "ShardedRows",
    "ShardedSimplexQPIterate",
    "Vertex",
    "WorkerLostError",
    "decision_function",
    "fit_l2svm_problems",
    "get_client",
    "pairwise_kernel",
    "solve_meb",
    "solve_sharded_simplex_qp",
]
