"""Multi-category SVMs with mdos losses by dual Frank-Wolfe ([Tajima2021]; math.md §1).

- :mod:`~kernfw.solvers.multiclass.problem`: the dual of §1.4 (smoothed as in §1.10),
  its closed-form LMO and certificate (:class:`MulticlassDual`);
- :mod:`~kernfw.solvers.multiclass.iterate`: the full-batch FW iterate
  (:class:`FullBatchFW`: LSFW, StdFW) and block-coordinate FW (:class:`BlockFW`, §1.13);
- :mod:`~kernfw.solvers.multiclass._numba`: the compiled passes of :class:`BlockFW`,
  with the closed-form LMO (``_lmo``) and the block sub-problems (``_block_qp``) it compiles;
- :mod:`~kernfw.solvers.multiclass.pg`: the projected-subgradient baseline (§1.11);
- :mod:`~kernfw.solvers.multiclass.solve`: :func:`solve_multiclass`, the entry point.
"""

from .iterate import BLOCK_STEPS, BlockFW, FullBatchFW
from .pg import solve_multiclass_subgradient
from .problem import MulticlassDual, inner
from .solve import SOLVERS, solve_multiclass

__all__ = [
    "MulticlassDual",
    "FullBatchFW",
    "BlockFW",
    "solve_multiclass",
    "solve_multiclass_subgradient",
    "SOLVERS",
    "BLOCK_STEPS",
    "inner",
]
