"""Block-coordinate mechanics: block sampling and weighted averaging of iterates."""

from abc import abstractmethod

import numpy as np

from .loop import FWIterate

__all__ = ["block_order", "WeightedAverage", "BlockCoordinateIterate"]

SAMPLING = ("uniform", "perm")


def block_order(n, rng, sample="uniform"):
    """Indices of the ``n`` blocks visited in one pass.

    Parameters
    ----------
    n : int
        Number of blocks.
    rng : numpy.random.Generator
        Source of randomness.
    sample : {"uniform", "perm"}
        "uniform" draws ``n`` blocks independently (BCFW as analysed);
        "perm" visits every block once in a random order.
    """
    if sample == "uniform":
        return rng.integers(0, n, size=n)
    if sample == "perm":
        return rng.permutation(n)
    raise ValueError(f"sample must be one of {SAMPLING}, got {sample!r}")


class WeightedAverage:
    """Running average ``x̄_k = (1 − ρ_k) x̄_{k−1} + ρ_k x_k`` with ``ρ_k = 2 / (k + 2)``.

    After the updates with ``x_0, …, x_k`` the average is
    ``2/((k+1)(k+2)) Σ_{t≤k} (t+1) x_t`` (so ``x̄_0 = x_0``), the weighting of
    BCFW-wavg and SSG-wavg.  Arrays are averaged in place (as float64);
    scalars are returned as floats.

    Attributes
    ----------
    k : int
        Number of updates so far.
    values : dict or None
        The current averages by name.
    """

    def __init__(self):
        self.k = 0
        self.values = None

    def update(self, **values):
        rho = 2.0 / (self.k + 2.0)
        if self.values is None:
            self.values = {name: np.array(v, dtype=float, copy=True) for name, v in values.items()}
        else:
            for name, v in values.items():
                avg = self.values[name]
                avg *= 1.0 - rho
                avg += rho * np.asarray(v)
        self.k += 1

    def __getitem__(self, name):
        value = self.values[name]
        return float(value) if value.ndim == 0 else value


class BlockCoordinateIterate(FWIterate):
    """An :class:`~kernfw.fw.loop.FWIterate` whose iteration is one pass over the blocks.

    ``step(t)`` visits ``n_blocks`` blocks in the order of :func:`block_order`
    and calls :meth:`block_step` for each; :func:`kernfw.fw.run` then counts
    passes, and its ``check_every`` is the number of passes between two full
    (certified) duality gaps.  ``self.k`` counts block steps over the whole run
    (the ``k`` of the ``2n/(k+2n)`` step and of the ``2/(k+2)`` averaging).

    Parameters
    ----------
    n_blocks : int
        Number of blocks ``n``.
    random_state : int, numpy.random.Generator or None
        Seed of the block order.
    sample : {"uniform", "perm"}
        Block sampling (see :func:`block_order`).
    """

    def __init__(self, n_blocks, random_state=None, sample="uniform"):
        if sample not in SAMPLING:
            raise ValueError(f"sample must be one of {SAMPLING}, got {sample!r}")
        self.n_blocks = int(n_blocks)
        self.rng = np.random.default_rng(random_state)
        self.sample = sample
        self.k = 0

    @abstractmethod
    def block_step(self, i):
        """Update block ``i`` (one oracle call); return the step size taken."""

    def step(self, t):
        total = 0.0
        for i in block_order(self.n_blocks, self.rng, self.sample).tolist():
            total += self.block_step(i)
            self.k += 1
        return total / max(self.n_blocks, 1)
