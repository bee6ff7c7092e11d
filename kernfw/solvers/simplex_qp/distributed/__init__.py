"""The simplex QP on a Dask cluster: the training rows sharded over the workers.

The training rows are split in blocks held by Dask workers for the whole fit
(:class:`ShardedRows`, one :class:`RowShard` actor per worker); the driver runs
the MFW iteration of :class:`~kernfw.solvers.simplex_qp.SimplexQPIterate` with one
round trip per iteration (:class:`ShardedSimplexQPIterate`,
:func:`solve_sharded_simplex_qp`).  :class:`kernfw.L2SVC` and
:class:`kernfw.MinimumEnclosingBall` use it with ``backend="dask"``, through
:mod:`kernfw.distributed`.

- :mod:`~kernfw.solvers.simplex_qp.distributed.shard` — a shard: its rows and its slice of
  the solver state (worker side);
- :mod:`~kernfw.solvers.simplex_qp.distributed.rows` — the client, the shards and lost
  workers (driver side);
- :mod:`~kernfw.solvers.simplex_qp.distributed.iterate` — the sharded iterate and
  :func:`solve_sharded_simplex_qp`.
"""

from .iterate import ShardedSimplexQPIterate, solve_sharded_simplex_qp
from .rows import ShardedRows, WorkerLostError, get_client
from .shard import RowShard, Vertex, peak_memory_mb

__all__ = [
    "RowShard",
    "ShardedRows",
    "ShardedSimplexQPIterate",
    "Vertex",
    "WorkerLostError",
    "get_client",
    "peak_memory_mb",
    "solve_sharded_simplex_qp",
]
