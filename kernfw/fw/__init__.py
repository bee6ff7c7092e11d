"""Shared Frank-Wolfe machinery: the iteration driver, step rules, block sampling, the capped simplex."""

from .block import BlockCoordinateIterate, WeightedAverage, block_order
from .loop import FWIterate, run
from .result import Certificate, FWResult
from .steps import armijo_step, away_step_max, block_standard_step, quadratic_step, standard_step
from .stopping import SMALL_PROBLEM_MAX, RunBudget, StoppingRule, as_rule

__all__ = [
    "FWIterate",
    "StoppingRule",
    "SMALL_PROBLEM_MAX",
    "RunBudget",
    "as_rule",
    "run",
    "Certificate",
    "FWResult",
    "quadratic_step",
    "standard_step",
    "block_standard_step",
    "away_step_max",
    "armijo_step",
    "block_order",
    "WeightedAverage",
    "BlockCoordinateIterate",
]
