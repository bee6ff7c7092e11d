"""How many threads a piece of work gets.

A small dense computation (a Gram matrix of a thousand points) finishes in a few
milliseconds on one core; spread over BLAS or numba threads it pays their start-up
and, on a busy machine, waits for the slowest thread.  :func:`thread_limit` runs
small work on one thread and leaves large work to the libraries' own thread
counts.  It changes thread pools for the duration of the block only (through
:mod:`threadpoolctl`), never the user's environment variables.
"""

import contextlib
import contextvars
import functools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import ThreadpoolController

__all__ = ["thread_limit", "one_blas_thread", "available_threads", "in_ranges", "SMALL_WORK"]

#: multiply-adds below which work runs on one thread (up to about half a second on one
#: core: the Gram of 10,000 points in 20 dimensions; a second thread saves at most half
#: of that, and on a busy machine it loses time waiting for the other thread)
SMALL_WORK = 1e9


#: the thread count :func:`available_threads` reports inside a :func:`thread_limit` block
_outer = contextvars.ContextVar("kernfw_outer_threads", default=None)


@functools.lru_cache(maxsize=1)
def _blas_pools():
    """The process's BLAS thread pools (threadpoolctl's controllers of the BLAS libraries),
    found once: finding them reads the process's memory map, milliseconds per call."""
    return [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]


@contextlib.contextmanager
def one_blas_thread():
    """Run the block with every BLAS pool on one thread, then restore their counts.

    Sets the pools directly (threadpoolctl's ``LibController.set_num_threads``):
    :meth:`threadpoolctl.ThreadpoolController.limit` first gathers every library's
    description, several times the cost of the setting itself on a fit of a few
    milliseconds.
    """
    pools = _blas_pools()
    counts = [lib.num_threads for lib in pools]
    try:
        for lib in pools:
            lib.set_num_threads(1)
        yield
    finally:
        for lib, count in zip(pools, counts):
            lib.set_num_threads(count)


@contextlib.contextmanager
def thread_limit(work):
    """Run the block on one BLAS thread when ``work`` is small.

    Parameters
    ----------
    work : float
        Multiply-adds (or comparable operations) of the block.

    Yields
    ------
    bool
        Whether the block may use several threads: False for small work (then
        BLAS is limited to one thread and compiled code should take its serial
        variant), True otherwise (thread counts untouched).  A small block inside
        another small block leaves the limit as it is (setting and restoring the
        pools costs microseconds).
    """
    if work >= SMALL_WORK:
        yield True
        return
    if _outer.get() is not None:  # inside a one-thread block: BLAS is limited already
        yield False
        return
    token = _outer.set(available_threads())  # what the block's own threads may use
    try:
        with one_blas_thread():
            yield False
    finally:
        _outer.reset(token)


def available_threads():
    """Threads a computation of kernfw's own may use now: the BLAS pools' thread count,
    which follows the environment (``OMP_NUM_THREADS``, …) and a joblib worker's limits,
    taken before the innermost :func:`thread_limit` (that limit keeps small BLAS
    products on one thread, not independent compiled work); 1 when no BLAS pool is
    found."""
    outer = _outer.get()
    if outer is not None:
        return outer
    counts = [lib.num_threads for lib in _blas_pools()]
    return max(counts, default=1)


@functools.lru_cache(maxsize=4)
def _pool(threads, pid):
    """A pool of ``threads`` worker threads kept for the process ``pid`` (a forked child,
    which inherits the pool object but not its threads, gets its own)."""
    return ThreadPoolExecutor(threads, thread_name_prefix="kernfw")


def in_ranges(func, n, threads):
    """``[func(lo, hi), …]`` over contiguous ranges that cover ``0 … n − 1``, in order.

    The ranges run in ``threads`` threads of a pool kept for the process: ``func`` must
    release the GIL (compiled with ``nogil=True``) for them to run side by side, and
    the ranges must be independent (rows of an output each range writes alone).  One
    thread (``threads <= 1``, or ``n < 2``) calls ``func(0, n)`` in the caller's thread.

    Parameters
    ----------
    func : callable ``(lo, hi) -> object``
    n : int
        Items (rows, problems) to split.
    threads : int
        Ranges, hence threads.

    Returns
    -------
    list
        ``func``'s results, range by range.
    """
    threads = max(1, min(int(threads), n))
    if threads == 1:
        return [func(0, n)]
    bounds = np.linspace(0, n, threads + 1).astype(int)
    return list(_pool(threads, os.getpid()).map(func, bounds[:-1], bounds[1:]))
