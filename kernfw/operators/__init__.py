"""Kernel operators: the one interface every solver talks to."""

from .base import ArraySlot, KernelOperator
from .combination import KernelStack, MultiKernel
from .features import Features
from .function import KernelFunction
from .gram import Gram, materialize
from .lowrank import LowRankFeatures, fit_lowrank
from .normalized import Normalized, normalize
from .pairwise import PairwiseKernel

__all__ = [
    "KernelOperator",
    "ArraySlot",
    "Gram",
    "Features",
    "KernelFunction",
    "LowRankFeatures",
    "fit_lowrank",
    "MultiKernel",
    "KernelStack",
    "Normalized",
    "PairwiseKernel",
    "normalize",
    "materialize",
]

#: the backends, as the ``kernfw`` command lists them
BACKENDS = {
    "Gram": "precomputed dense Gram matrix (float64/float32 kept)",
    "Features": "explicit dense or scipy.sparse features; K = X X^T never formed",
    "KernelFunction": "kernel evaluated on the fly with an LRU column cache (MB-bounded)",
    "LowRankFeatures": "Nystroem / random features Phi of a kernel, K ~ Phi Phi^T never formed",
    "MultiKernel": "weighted sum of kernel operators; per-kernel quadratic forms",
}
