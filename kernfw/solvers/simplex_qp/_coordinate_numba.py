"""Compiled (numba) passes of the vertex-coordinate L2-SVM solver (math.md §2.13).

The functions of :mod:`kernfw.solvers.simplex_qp.coordinate`, compiled as they
are (the plain-Python path runs the same source, so both take the same
iterates); the scalars are the named fields of
:data:`kernfw.solvers.simplex_qp.coordinate.STATE`.
"""

from numba import njit
from numba.extending import register_jitable

from ...fw import _steps_numba  # noqa: F401  (registers the step rules the passes call)
from . import coordinate

__all__ = [
    "dense_pass",
    "sparse_pass",
    "dense_margins",
    "sparse_margins",
    "dense_primal",
    "sparse_primal",
    "blocks_pass",
    "blocks_margins",
    "blocks_primal",
]

for _helper in (
    coordinate.vertex_step,
    coordinate._rescale,
    coordinate._rescale_if_far,
    coordinate._coordinate_update,
    coordinate._jump,
    coordinate._record_magnitude,
):
    register_jitable(_helper)
del _helper

dense_pass = njit(cache=True)(coordinate.dense_pass)
sparse_pass = njit(cache=True)(coordinate.sparse_pass)
dense_margins = njit(cache=True)(coordinate.dense_margins)
sparse_margins = njit(cache=True)(coordinate.sparse_margins)
dense_primal = njit(cache=True)(coordinate.dense_primal)
sparse_primal = njit(cache=True)(coordinate.sparse_primal)
blocks_pass = njit(cache=True)(coordinate.blocks_pass)
blocks_margins = njit(cache=True)(coordinate.blocks_margins)
blocks_primal = njit(cache=True)(coordinate.blocks_primal)
