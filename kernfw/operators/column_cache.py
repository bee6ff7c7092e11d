"""The one least-recently-used cache of kernel columns.

A slab of ``rows`` columns (``n`` values each, allocated at the first store) with its
bookkeeping in arrays (:func:`kernfw.operators._columns_numba.cache_row`): the compiled
solver steps use the same arrays and function (:func:`~kernfw.operators._columns_numba.cached_column`),
and :class:`~kernfw.operators.KernelFunction` and the sharded simplex-QP iterate use
this class.
"""

from collections import OrderedDict

import numpy as np

from ._columns_numba import COUNTS, cache_rows

__all__ = ["ColumnCache"]


class ColumnCache:
    """Up to ``rows`` columns of length ``n`` of ``dtype``, the least recently used evicted.

    Attributes
    ----------
    slab : ndarray of shape (rows, n) or None
        The columns (None until the first store, or when ``rows`` is 0).
    slot_of : ndarray of int64, shape (n,)
        The slab row of each column, −1 when it is not held.
    slots : ndarray of int64, shape (2, rows)
        The column held in each row and its last use.
    counts : ndarray of dtype ``COUNTS``, shape (1,)
        ``clock``, ``rows_used``, ``hits`` and ``misses``.
    """

    def __init__(self, n, rows, dtype):
        self.n, self.rows, self.dtype = n, int(min(rows, n)), np.dtype(dtype)
        self.slab = None
        self.clear()

    def clear(self):
        """Forget every column and reset the counters."""
        self.slot_of = np.full(self.n, -1, dtype=np.int64)
        self.slots = np.zeros((2, self.rows), dtype=np.int64)
        self.counts = np.zeros(1, dtype=COUNTS)

    @property
    def hits(self):
        return int(self.counts[0]["hits"])

    @property
    def misses(self):
        return int(self.counts[0]["misses"])

    def __len__(self):
        return int(self.counts[0]["rows_used"])

    def __contains__(self, j):
        return self.slot_of[j] >= 0

    def lookup(self, idx):
        """The slab rows of the columns ``idx`` (−1: missing), each counted as a hit or a
        miss; the held ones become the most recently used."""
        idx = np.asarray(idx, dtype=np.int64)
        return cache_rows(self.counts, idx, self.slot_of, self.slots, True, False)

    def store(self, idx, cols):
        """Keep the columns ``cols[:, p]`` of ``idx`` (evicting the least recently used)."""
        if self.rows == 0:
            return
        if self.slab is None:  # once: a slab that grows would page-fault on every column
            self.slab = np.empty((self.rows, self.n), dtype=self.dtype)
        idx = np.asarray(idx, dtype=np.int64)
        rows = cache_rows(self.counts, idx, self.slot_of, self.slots, False, True)
        for p, r in enumerate(rows.tolist()):
            self.slab[r] = cols[:, p]

    def ordered(self):
        """``{column: its row of the slab}``, least recently used first."""
        used = np.arange(len(self))
        order = used[np.argsort(self.slots[1, used], kind="stable")]
        return OrderedDict((int(self.slots[0, r]), self.slab[r]) for r in order)

    def __getstate__(self):
        """A pickled cache is an empty one."""
        return ColumnCache(self.n, self.rows, self.dtype).__dict__
