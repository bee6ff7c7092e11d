"""Model selection with the work of the fits shared: :class:`KernelGridSearchCV`.

A grid search over ``C`` (or ``lam``) and the kernel's parameters computes one kernel
per kernel setting on all rows, fits each fold on its rows of it, and follows ``C``
with warm starts (:mod:`kernfw.model_selection.evaluate`).
"""

from .search import KernelGridSearchCV

__all__ = ["KernelGridSearchCV"]
