"""The kernel operator a sweep shares between its fits and workers.

The operator of the estimator's kernel is built once, its Gram matrices
written block by block into memory (memory-mapped files for a parallel sweep:
:func:`~kernfw.operators.materialize`),
and sent to the workers as a "shell" (the operator with its matrices taken out,
:meth:`~kernfw.operators.KernelOperator.detach_arrays`) plus the matrices, one
argument each: joblib's process backend sends a memmap by file name, Dask
scatters each argument once; a worker puts them back with
:meth:`~kernfw.operators.KernelOperator.attach_arrays`.  The sweep never looks
inside an operator: it only uses the operator protocol.
"""

import contextlib
import os
import shutil
import tempfile

import numpy as np

from ..estimators._base import accepts_kernel_operator
from ..kernels import GRAM_MAX_MB, make_operator
from ..operators import KernelOperator, materialize

__all__ = ["shared_operator", "MemmapFolder", "allocate_in_memory", "KERNEL_PARAMS"]

#: parameters that change the kernel itself: sweeping one of them rules out a shared operator
KERNEL_PARAMS = ("kernel", "gamma", "degree", "coef0", "normalization")


class MemmapFolder:
    """A temporary folder of ``.npy`` memory maps (in /dev/shm when it exists)."""

    def __init__(self):
        shm = "/dev/shm"
        base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
        self.path = tempfile.mkdtemp(prefix="kernfw-sweep-", dir=base)
        self.count = 0

    def allocate(self, shape, dtype):
        self.count += 1
        filename = os.path.join(self.path, f"gram{self.count}.npy")
        return np.lib.format.open_memmap(filename, mode="w+", shape=shape, dtype=dtype)

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)


def allocate_in_memory(shape, dtype):
    """An uninitialized in-memory array (the serial sweep's ``allocate``)."""
    return np.empty(shape, dtype=dtype)


def _kernel_params(estimator):
    """The ``make_operator`` arguments among the estimator's parameters."""
    params = estimator.get_params(deep=False)
    return {k: params[k] for k in KERNEL_PARAMS[1:] if k in params}


def _uses_operator(estimator, X, param):
    """Whether the sweep builds the kernel operator itself (kernel spec, not precomputed)."""
    if not accepts_kernel_operator(estimator):
        return False  # only kernfw estimators accept kernel=<KernelOperator>
    if param in KERNEL_PARAMS:
        return False  # every value has its own kernel
    if estimator.get_params(deep=False).get("approx") is not None:
        return False  # every fit fits its own approximation (kernel_approx_), O(n·m) memory
    kernel = estimator.get_params(deep=False)["kernel"]
    if isinstance(kernel, KernelOperator):
        return True
    if isinstance(kernel, str) and kernel == "precomputed":
        return False
    if isinstance(kernel, (list, tuple)) and all(k == "precomputed" for k in kernel):
        return False
    return hasattr(X, "shape") and not isinstance(X, (list, tuple))


def _build_operator(estimator, X, allocate):
    """The estimator's kernel operator, its Gram matrices in ``allocate``d memory.

    Serial and parallel sweeps build the matrices the same way (only the
    memory differs), so their numbers agree exactly.
    """
    kernel = estimator.get_params(deep=False)["kernel"]
    if isinstance(kernel, KernelOperator):
        return kernel
    op = make_operator(X, kernel, gram_max_mb=0, **_kernel_params(estimator))
    return materialize(op, allocate, GRAM_MAX_MB)


def _without_kernel(estimator):
    """A copy of the estimator's parameters with ``kernel=None``.

    The workers set ``kernel=<operator>`` themselves; sending an estimator
    that holds an operator would pickle (and ``clone`` would deep-copy) its
    Gram matrices once per task.
    """
    params = estimator.get_params(deep=False)
    params["kernel"] = None
    return type(estimator)(**params)


@contextlib.contextmanager
def shared_operator(estimator, X, param, parallel):
    """``(template, shell, grams)`` for the workers; removes the memory maps after.

    ``template`` is the estimator to clone in the workers (without its kernel
    when the sweep shares an operator), ``shell`` the operator without its
    Gram matrices and ``grams`` those matrices (memory-mapped when
    ``parallel``).  Without a shared operator: ``(estimator, None, [])``.
    """
    if not _uses_operator(estimator, X, param):
        yield estimator, None, []
        return
    folder = MemmapFolder() if parallel else None
    try:
        allocate = folder.allocate if folder is not None else allocate_in_memory
        operator = _build_operator(estimator, X, allocate)
        grams = []
        shell = operator.detach_arrays(grams) if parallel else operator
        del operator
        yield _without_kernel(estimator), shell, grams
    finally:
        if folder is not None:
            folder.cleanup()
