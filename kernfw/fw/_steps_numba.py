"""The step rules of :mod:`kernfw.fw.steps`, compiled by numba as they are.

The compiled cores (the simplex-QP steps, the multi-class block passes, the chain
passes) call these instead of re-deriving a step inline, so every loop takes its steps
from the one source.  The rules are also registered with
:func:`numba.extending.register_jitable`: plain Python compiled as it is (e.g. the block
sub-problems of :mod:`kernfw.solvers.multiclass._block_qp`) may call the Python names of
:mod:`kernfw.fw.steps` directly.
"""

from numba import njit
from numba.extending import register_jitable

from . import steps

__all__ = ["quadratic_step", "standard_step", "block_standard_step", "away_step_max"]

#: the exact line search of a concave quadratic, :func:`kernfw.fw.steps.quadratic_step`
quadratic_step = njit(cache=True)(steps.quadratic_step)
#: the agnostic step 2/(t + 2), :func:`kernfw.fw.steps.standard_step`
standard_step = njit(cache=True)(steps.standard_step)
#: the agnostic block step 2n/(k + 2n), :func:`kernfw.fw.steps.block_standard_step`
block_standard_step = njit(cache=True)(steps.block_standard_step)
#: the away bound α_j/(1 − α_j), :func:`kernfw.fw.steps.away_step_max`
away_step_max = njit(cache=True)(steps.away_step_max)

for _rule in (
    steps.quadratic_step,
    steps.standard_step,
    steps.block_standard_step,
    steps.away_step_max,
):
    register_jitable(_rule)
del _rule
