"""Predictions of a fitted model computed on the Dask cluster, block by block."""

import numpy as np

from ..solvers.simplex_qp.distributed.rows import get_client

__all__ = ["decision_function"]


def _blocks(n, rows):
    return [(lo, min(lo + rows, n)) for lo in range(0, n, rows)]


def decision_function(estimator, X, method="decision_function", rows=100_000, client=None):
    """``estimator.<method>(X)`` for a large ``X``, computed on the cluster.

    The fitted model (support vectors and coefficients: small) is scattered to
    every worker once; ``X`` is cut in blocks of ``rows`` rows, each block
    scored by one task, and the answers are concatenated in order.

    Parameters
    ----------
    estimator : fitted estimator
        E.g. a fitted :class:`~kernfw.L2SVC` or :class:`~kernfw.MinimumEnclosingBall`.
    X : array-like or dask.array.Array of shape (n, d)
        Inputs; a Dask array is scored chunk by chunk where its blocks live.
    method : str
        The method to call: "decision_function", "predict", "score_samples", ...
    rows : int
        Rows per task (ignored for a Dask array: its row chunks are used).
    client : distributed.Client, str or None
        See :func:`~kernfw.distributed.get_client`.

    Returns
    -------
    ndarray
        What ``getattr(estimator, method)(X)`` returns.
    """
    client = get_client(client)
    if not hasattr(estimator, method):
        raise ValueError(f"{type(estimator).__name__} has no method {method!r}")
    model = client.scatter(estimator, broadcast=True, hash=False)

    def score(model, block):
        return getattr(model, method)(block)

    if hasattr(X, "to_delayed"):  # a dask array: one task per row chunk
        import dask

        if X.ndim != 2 or X.numblocks[1] != 1:
            raise ValueError(
                "a dask array X must be 2-D with one chunk along its features, "
                f"got chunks {X.chunks}"
            )
        parts = client.compute(
            [dask.delayed(score)(model, block) for block in X.to_delayed()[:, 0]]
        )
    else:
        n = X.shape[0]
        parts = [
            client.submit(score, model, X[lo:hi], pure=False) for lo, hi in _blocks(n, int(rows))
        ]
    return np.concatenate(client.gather(parts))
