"""Starts handed along the RBF family: a path's first fit from its neighbour's solution.

In a search whose kernels are the RBF family read into this process's memory
(:mod:`kernfw.model_selection.evaluate`), the paths run in the order of ``γ``, and the
first fit of a path on a fold may start from the solution of the path before it, at the
same ``C`` on the same fold: the kernels of neighbouring ``γ`` are close, and so are their solutions (math.md
§7.2; the fit still takes the uniform start when its objective is lower, and certifies
its own problem).  The tasks run in threads of one process; a task waits until the path
before it has finished on its fold, which the order of the tasks makes short or nothing.
Each path's source is fixed (the path before it), so the search's results do not depend
on the number of workers.
"""

import threading

__all__ = ["PathStarts"]


class PathStarts:
    """Per path and fold, the binary problems' solutions at the path's first ``C``,
    handed from each path to the next on the same fold (path ``p`` starts from path
    ``p − 1``).  Shared by the threads of one search."""

    def __init__(self):
        self._found = {}
        self._changed = threading.Condition()

    def put(self, path, fold, alpha):
        """Record the solutions ``alpha`` (list of arrays; None: none, e.g. after a failed
        fit) of ``path`` on ``fold``."""
        with self._changed:
            self._found[(path, fold)] = alpha
            self._changed.notify_all()

    def get(self, path, fold):
        """The start of ``path`` on ``fold``: what path ``path − 1`` recorded there,
        waiting until it has (None for the first path)."""
        if path == 0:
            return None
        key = (path - 1, fold)
        with self._changed:
            self._changed.wait_for(lambda: key in self._found)
            return self._found[key]
