"""Multiple kernel learning solvers (math.md §4–§5).

- :mod:`.inner_svm` — the SVM solved for fixed kernel weights and the weight
  objective ``J(γ)`` it defines (shared by every alternating method);
- :mod:`.weights` — the alternating outer iterate and its FW gap over a weight set;
- :mod:`.cskl` — controlled-sparsity kernel learning (:func:`solve_cskl`; the geometry of
  ``Γ_t`` is :mod:`kernfw.fw.capped_simplex`);
- :mod:`.baselines` — l1-MKL, lp-MKL and the uniform average;
- :mod:`.online` — online proximal MKL ([Martins2011]).

Prediction with a learned model lives in the estimators
(:mod:`kernfw.estimators.mkl`), not here.
"""

from .baselines import solve_l1_mkl, solve_lp_mkl, solve_uniform_mkl
from .cskl import solve_cskl
from .online import solve_online_mkl

__all__ = ["solve_cskl", "solve_l1_mkl", "solve_lp_mkl", "solve_uniform_mkl", "solve_online_mkl"]
