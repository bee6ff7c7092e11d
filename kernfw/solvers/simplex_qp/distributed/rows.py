"""The driver's side of the sharded rows: the Dask client, the shards, lost workers.

:class:`ShardedRows` splits the training rows in contiguous blocks and creates one
:class:`~kernfw.solvers.simplex_qp.distributed.shard.RowShard` actor per block on a
chosen worker; :meth:`ShardedRows.call` calls a method of every shard at once and
turns a lost worker into :class:`WorkerLostError`.
"""

import numpy as np

from .shard import RowShard

__all__ = ["ShardedRows", "WorkerLostError", "get_client"]

#: seconds between liveness checks of the shard workers while waiting for an answer
LIVENESS_POLL = 2.0


class WorkerLostError(RuntimeError):
    """A Dask worker holding training rows was lost (or its actor vanished) during a fit.

    The solver state of those rows is gone, so no model is returned: refit
    (kernfw scatters the rows again on the workers that are alive).
    """


def get_client(client=None):
    """The Dask client to use: ``client`` (a Client or a scheduler address), else the
    current default client, else a client of the scheduler in Dask's configuration
    (``scheduler-address``, e.g. env ``DASK_SCHEDULER_ADDRESS``).

    Parameters
    ----------
    client : distributed.Client, str or None
        A client, a scheduler address such as ``"tcp://scheduler:8786"``, or None.

    Returns
    -------
    distributed.Client

    Raises
    ------
    ValueError
        If there is no client and no configured scheduler address.
    """
    try:
        import dask
        from distributed import Client, default_client
    except ImportError as exc:  # pragma: no cover - dask is a test dependency
        raise ImportError(
            "backend='dask' needs dask.distributed: pip install 'dask[distributed]'"
        ) from exc
    if isinstance(client, Client):
        return client
    if isinstance(client, str):
        return Client(client)
    if client is not None:
        raise TypeError(
            f"client must be a distributed.Client, a scheduler address or None, "
            f"got {type(client).__name__}"
        )
    try:
        return default_client()
    except ValueError:
        address = dask.config.get("scheduler-address", None)
        if address:
            return Client(address)
    raise ValueError(
        "backend='dask' found no Dask cluster: create a distributed.Client first "
        "(Client('tcp://scheduler:8786') for an existing cluster, or "
        "Client(LocalCluster()) on this machine), or set the scheduler address in "
        "Dask's configuration (DASK_SCHEDULER_ADDRESS)"
    )


def _is_connection_error(exc):
    from distributed.comm.core import CommClosedError

    return isinstance(exc, (CommClosedError, OSError, EOFError, ConnectionError))


#: seconds a sharded fit waits for a worker to register before it gives up
WORKER_WAIT = 10.0


class ShardedRows:
    """Training rows split in contiguous blocks, one :class:`RowShard` actor per worker.

    The rows are scattered once; the actors keep them (and each problem's
    solver slice) until :meth:`close`.  Use as a context manager.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n, d)
        Training points (validated).
    kernel : PairwiseKernel
        The kernel ``k``.
    labels : ndarray of int of shape (n,) or None
        Encoded class labels (classification).
    weights : ndarray of shape (n,) or None
        Nonnegative per-example weights (math.md §2.14; None: all 1): the rows of weight
        0 take part in no problem, the others weigh their slacks.
    client : distributed.Client, str or None
        See :func:`get_client`.
    n_shards : int or None
        Number of blocks (None: one per worker; at most ``n``).

    Attributes
    ----------
    bounds : ndarray of int
        Block ``k`` holds rows ``bounds[k]:bounds[k+1]``.
    workers : list of str
        The worker address of each block.
    """

    def __init__(self, X, kernel, labels=None, client=None, n_shards=None, weights=None):
        self.client = get_client(client)
        workers = sorted(self.client.scheduler_info()["workers"])
        if not workers:  # workers (re)starting: give them a moment to register
            try:
                self.client.wait_for_workers(1, timeout=WORKER_WAIT)
            except (TimeoutError, OSError):
                pass
            workers = sorted(self.client.scheduler_info()["workers"])
        if not workers:
            raise ValueError(f"the Dask cluster has no workers (waited {WORKER_WAIT:g} s)")
        n = X.shape[0]
        count = len(workers) if n_shards is None else int(n_shards)
        if count < 1:
            raise ValueError(f"n_shards must be >= 1, got {n_shards!r}")
        count = min(count, n)
        self.bounds = np.linspace(0, n, count + 1).round().astype(np.intp)
        self.workers = [workers[k % len(workers)] for k in range(count)]
        self.n = n
        self._futures = []
        try:
            for k, worker in enumerate(self.workers):
                lo, hi = self.bounds[k], self.bounds[k + 1]
                data = self.client.scatter(
                    [
                        X[lo:hi],
                        None if labels is None else labels[lo:hi],
                        None if weights is None else weights[lo:hi],
                    ],
                    workers=[worker],
                    hash=False,
                )
                self._futures.append(
                    self.client.submit(
                        RowShard,
                        data[0],
                        int(lo),
                        kernel,
                        data[1],
                        data[2],
                        workers=[worker],
                        allow_other_workers=False,
                        actor=True,
                        pure=False,
                    )
                )
            self.actors = [f.result() for f in self._futures]
        except Exception:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Release the actors (their rows and state leave the workers' memory)."""
        for f in self._futures:
            f.release()
        self._futures = []
        self.actors = []

    def owner(self, j):
        """Block holding global row ``j``."""
        return int(np.searchsorted(self.bounds, j, side="right") - 1)

    def call(self, method, *args, shards=None):
        """Call ``method(*args)`` on every shard (or those in ``shards``) at once.

        Parameters
        ----------
        method : str
            A :class:`RowShard` method.
        *args
            Its arguments (the same for every shard).
        shards : sequence of int or None
            The blocks to call (None: all).

        Returns
        -------
        list
            The answers, in the order of the shards.

        Raises
        ------
        WorkerLostError
            If a worker holding a shard left the cluster or its actor is gone.
        """
        ids = range(len(self.actors)) if shards is None else shards
        try:
            futures = [getattr(self.actors[k], method)(*args) for k in ids]
            return [self._wait(f) for f in futures]
        except WorkerLostError:
            raise
        except Exception as exc:
            lost = self.lost_workers()
            if lost or _is_connection_error(exc) or "actor" in str(exc).lower():
                raise WorkerLostError(
                    self._lost_message(lost, f"{type(exc).__name__}: {exc}")
                ) from exc
            raise

    def _wait(self, future):
        """The answer of an actor call; every ``LIVENESS_POLL`` seconds of waiting,
        check that the shard workers are alive (a killed worker's call would only
        fail at a connection timeout)."""
        while True:
            try:
                return future.result(timeout=LIVENESS_POLL)
            except TimeoutError:
                if self.lost_workers():
                    raise WorkerLostError(
                        self._lost_message(self.lost_workers(), "no answer")
                    ) from None

    def _lost_message(self, lost, cause):
        where = (
            ", ".join(
                f"{w} (rows {self.bounds[k]}:{self.bounds[k + 1]})"
                for k, w in enumerate(self.workers)
                if w in lost
            )
            or "unknown"
        )
        return (
            f"a Dask worker holding training rows was lost during the fit (lost: {where}; "
            f"{cause}). Its part of the solver state is gone, so no model was produced; "
            "fit again (the rows are scattered anew on the live workers)."
        )

    def lost_workers(self):
        """Addresses of shard workers that are no longer in the cluster."""
        try:
            alive = set(self.client.scheduler_info()["workers"])
        except Exception:  # noqa: BLE001 - the scheduler itself is unreachable
            return set(self.workers)
        return set(self.workers) - alive
