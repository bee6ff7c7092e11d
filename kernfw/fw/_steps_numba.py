"""The step rules of :mod:`kernfw.fw.steps`, compiled by numba as they are.

The compiled backends (the simplex-QP steps, the multi-class block passes, the chain
passes) call these instead of re-deriving a step inline, so the numpy path and the
compiled path take their steps from the same source.  The rules are also registered
with :func:`numba.extending.register_jitable`: a pure-Python kernel compiled as it is
(e.g. :func:`kernfw.solvers._block_kernels.pairwise_steps`) may call the Python names
of :mod:`kernfw.fw.steps` directly.  Importing this module needs :mod:`numba`; the
compiled backends load it through :func:`kernfw._compiled.compiled_module`.
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
