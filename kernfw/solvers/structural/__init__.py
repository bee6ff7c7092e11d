"""Structural SVMs by Frank-Wolfe on the dual ([LacosteJulien2013]; math.md §3).

- :mod:`~kernfw.solvers.structural.problem` — :class:`StructuredProblem`: the n-slack
  problem (§3.1), its oracle passes, dual and certified gap (§3.2–§3.3);
- :mod:`~kernfw.solvers.structural.iterate` — :class:`BatchFW` (§3.4) and :class:`BCFW`
  (§3.5, with weighted averaging);
- :mod:`~kernfw.solvers.structural._numba` — the compiled chain core (Viterbi oracle
  passes and whole BCFW passes of a :class:`~kernfw.structured.Chain` model);
- :mod:`~kernfw.solvers.structural.cutting_plane` — :class:`CuttingPlane`, the 1-slack
  cutting plane of SVMstruct (§3.10);
- :mod:`~kernfw.solvers.structural.subgradient` — :class:`StructuralSSG`, the
  stochastic subgradient baseline (§3.6);
- :mod:`~kernfw.solvers.structural.solve` — the ``solve_structural_*`` entry points.
"""

from .cutting_plane import CuttingPlane
from .iterate import BCFW, STEPS, BatchFW
from .problem import StructuredProblem
from .solve import (
    AVERAGING,
    solve_structural_bcfw,
    solve_structural_cutting_plane,
    solve_structural_fw,
    solve_structural_ssg,
)
from .subgradient import StructuralSSG

__all__ = [
    "StructuredProblem",
    "BatchFW",
    "BCFW",
    "CuttingPlane",
    "StructuralSSG",
    "solve_structural_fw",
    "solve_structural_bcfw",
    "solve_structural_cutting_plane",
    "solve_structural_ssg",
    "AVERAGING",
    "STEPS",
]
