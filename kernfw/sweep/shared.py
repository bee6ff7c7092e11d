"""The kernel operator a sweep shares between its fits and workers.

The operator of the estimator's kernel is built once, its Gram matrices
written block by block into memory (memory-mapped files for a parallel sweep),
and sent to the workers as a "shell" (the operator with its matrices taken out)
plus the matrices, one argument each: joblib's process backend sends a memmap
by file name, Dask scatters each argument once.

Everything that looks inside a composite operator is :func:`_map_grams`, the
one place that knows how operator trees are built; the rest of the sweep only
uses the :class:`~kernfw.operators.KernelOperator` protocol.
"""

import contextlib
import copy
import os
import shutil
import tempfile

import numpy as np

from ..estimators._base import accepts_kernel_operator
from ..kernels import GRAM_MAX_MB, make_operator
from ..operators import Gram, KernelFunction, KernelOperator, MultiKernel, Normalized

__all__ = ["shared_operator", "detach_grams", "attach_grams", "materialize", "MemmapFolder",
           "allocate_in_memory", "KERNEL_PARAMS"]

#: parameters that change the kernel itself: sweeping one of them rules out a shared operator
KERNEL_PARAMS = ("kernel", "gamma", "degree", "coef0", "normalization")


def _map_grams(op, leaf):
    """A copy of the operator tree ``op`` with every leaf replaced by ``leaf(op)``.

    Leaves are :class:`Gram` and :class:`KernelFunction` operators (``leaf``
    returns them unchanged or a replacement); :class:`Normalized` and
    :class:`MultiKernel` are copied around their mapped children, and a
    ``Normalized`` that keeps its training operator for statistics keeps the
    mapped one.  Leaves map to the same object when they are the same object,
    so a matrix shared by two nodes stays shared.
    """
    memo = {}

    def visit(node):
        if id(node) in memo:
            return memo[id(node)]
        if isinstance(node, Normalized):
            out = copy.copy(node)
            out.base = visit(node.base)
            train = node._stats.get("train")
            if train is not None:
                out._stats = dict(node._stats, train=visit(train))
        elif isinstance(node, MultiKernel):
            out = copy.copy(node)
            out.operators = [visit(o) for o in node.operators]
        elif isinstance(node, (Gram, KernelFunction)):
            out = leaf(node)
        else:
            out = node
        memo[id(node)] = out
        return out

    return visit(op)


class _GramSlot:
    """Placeholder for the Gram matrix number ``index`` of a detached operator."""

    def __init__(self, index):
        self.index = index


def detach_grams(op, grams):
    """``op`` with its Gram matrices moved to the list ``grams`` (the "shell").

    Every ``Gram``'s matrix is replaced by a :class:`_GramSlot` naming its
    position in ``grams``; a matrix shared by several operators is stored once.
    """
    seen = {}

    def leaf(node):
        if not isinstance(node, Gram):
            return node
        key = id(node.K)
        if key not in seen:
            seen[key] = len(grams)
            grams.append(node.K)
        shell = copy.copy(node)
        shell.K = _GramSlot(seen[key])
        return shell

    return _map_grams(op, leaf)


def attach_grams(shell, grams):
    """Inverse of :func:`detach_grams`: the operator with the matrices put back (a copy)."""
    def leaf(node):
        if isinstance(node, Gram) and isinstance(node.K, _GramSlot):
            node = copy.copy(node)
            node.K = grams[node.K.index]
        return node

    return _map_grams(shell, leaf)


def _gram_fits(op):
    n, itemsize = op.n, np.dtype(op.dtype).itemsize
    return n * n * itemsize / 2**20 <= GRAM_MAX_MB


def _fill_gram(K, kernel, X, block):
    """Write ``k(X, X)`` into ``K`` by row blocks: each block computes the
    columns right of its start and mirrors them, so ``K`` is exactly
    symmetric, and the diagonal is set to the exact ``k(x, x)``."""
    n = K.shape[0]
    for start in range(0, n, block):
        stop = min(start + block, n)
        B = kernel(X[start:stop], X[start:])
        width = stop - start
        square = np.triu(B[:, :width])  # the diagonal block: keep its upper triangle
        B[:, :width] = square + np.triu(square, 1).T
        K[start:stop, start:] = B
        K[start:, start:stop] = B.T
    np.fill_diagonal(K, kernel.diag(X))
    return K


def materialize(op, allocate):
    """Replace on-the-fly kernels that would be Gram matrices by Grams in ``allocate``d memory.

    ``op`` comes from ``make_operator(..., gram_max_mb=0)``, so every kernel is
    still a :class:`KernelFunction`; those whose n × n matrix fits the
    ``make_operator`` budget become :class:`Gram` operators written block by
    block into ``allocate((n, n), dtype)`` (a memory map for a parallel
    sweep), so the matrix is never held twice.
    """
    def leaf(node):
        if isinstance(node, KernelFunction) and _gram_fits(node):
            K = _fill_gram(allocate((node.n, node.n), node.dtype), node.kernel, node.X,
                           node.batch_size)
            return Gram(K, kernel=node.kernel, X=node.X, check=False)
        return node

    return _map_grams(op, leaf)


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
    return materialize(op, allocate)


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
        shell = detach_grams(operator, grams) if parallel else operator
        del operator
        yield _without_kernel(estimator), shell, grams
    finally:
        if folder is not None:
            folder.cleanup()
