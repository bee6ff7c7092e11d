"""The active set ``{i : α_i > 0}`` of a simplex-QP iterate (the coreset of the MEB)."""

import numpy as np

__all__ = ["ActiveSet"]


class ActiveSet:
    """The indices ``{i : α_i > 0}`` with O(1) insertion and removal.

    ``items[:size]`` holds the members in arbitrary order; ``where[i]`` is the
    position of ``i`` in ``items`` (−1 if absent).
    """

    def __init__(self, n):
        self.items = np.empty(n, dtype=np.intp)
        self.where = np.full(n, -1, dtype=np.intp)
        self.size = 0

    def indices(self):
        """The members (a view; arbitrary order)."""
        return self.items[: self.size]

    def add(self, i):
        if self.where[i] < 0:
            self.items[self.size] = i
            self.where[i] = self.size
            self.size += 1

    def extend(self, members):
        """Add the distinct indices ``members``, none of them a member yet (one
        vectorized write instead of one :meth:`add` per index)."""
        members = np.asarray(members, dtype=np.intp)
        start, stop = self.size, self.size + members.size
        self.items[start:stop] = members
        self.where[members] = np.arange(start, stop)
        self.size = stop

    def remove(self, i):
        pos = self.where[i]
        if pos >= 0:
            last = self.items[self.size - 1]
            self.items[pos] = last
            self.where[last] = pos
            self.where[i] = -1
            self.size -= 1

    def reset(self, members):
        self.where[self.indices()] = -1
        self.size = 0
        for i in members:
            self.add(int(i))
