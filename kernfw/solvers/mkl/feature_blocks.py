"""Base kernels given as explicit features side by side: ``K_γ`` without copies (math.md §5.7).

When every base kernel is explicit dense features, ``K_j = Φ_j Φ_jᵀ`` (approximated
kernels, ``approx=``), the weighted kernel is the linear kernel of the concatenation
``[√γ_1 Φ_1, …, √γ_p Φ_p]``.  :class:`FeatureBlocks` stores ``Φ = [Φ_1 … Φ_p]`` (n × M,
``M = Σ_j m_j``) once, when the objective is built; an inner L2-SVM solve at ``γ`` reads
the blocks with ``γ_j > 0`` and their weights
(:func:`~kernfw.solvers.simplex_qp.solve_l2svm_blocks`: the weights scale the primal
vector, not ``Φ``), so no weighted copy of the features is made per solve and blocks of
weight 0 cost nothing.  The quadratic forms ``d_j = ‖Φ_jᵀ v‖²`` of the gradient are one
pass over the support rows of ``Φ``, summed in float64.
"""

import numpy as np

from ..simplex_qp._coordinate_numba import blocks_primal
from ..simplex_qp.coordinate import FeatureBlockWeights

__all__ = ["FeatureBlocks", "WeightedFeatureBlocks"]


def _dense_features(op):
    """The dense features ``Φ`` of ``op`` (:meth:`~kernfw.operators.KernelOperator.features`),
    else None."""
    X = op.features()
    return X if isinstance(X, np.ndarray) else None


class WeightedFeatureBlocks:
    """``K_γ = Σ_j γ_j Φ_j Φ_jᵀ``: the shared ``Φ`` and the blocks with ``γ_j > 0``.

    Attributes
    ----------
    features : ndarray of shape (n, M)
        ``Φ`` (shared with :class:`FeatureBlocks`, never written).
    blocks : FeatureBlockWeights
        The column ranges of the kernels with ``γ_j > 0``, their weights and
        ``‖x_i‖² = Σ_j γ_j ‖Φ_{j,i}‖²``.
    n : int
    """

    def __init__(self, features, blocks):
        self.features = features
        self.blocks = blocks
        self.n = features.shape[0]


class FeatureBlocks:
    """The base kernels ``K_j = Φ_j Φ_jᵀ`` as the column blocks of one matrix ``Φ``.

    Parameters
    ----------
    operators : sequence of KernelOperator
        Kernels whose features are dense (:meth:`of` checks it).

    Attributes
    ----------
    features : ndarray of shape (n, M)
        ``Φ = [Φ_1 … Φ_p]`` (the common dtype of the blocks).
    starts, ends : ndarray of int64, shape (p,)
        Block ``j`` is the columns ``[starts[j], ends[j])``.
    sq_norms : ndarray of shape (n, p)
        ``‖Φ_{j,i}‖²`` (the diagonals ``K_j[i, i]``), float64.
    """

    def __init__(self, operators):
        mats = [_dense_features(op) for op in operators]
        dtype = np.result_type(*[m.dtype for m in mats])
        widths = np.array([m.shape[1] for m in mats], dtype=np.int64)
        self.ends = np.cumsum(widths)
        self.starts = self.ends - widths
        n = mats[0].shape[0]
        self.features = np.empty((n, int(widths.sum())), dtype=dtype)
        self.sq_norms = np.empty((n, len(mats)))
        for j, m in enumerate(mats):
            block = self.features[:, self.starts[j] : self.ends[j]]
            block[...] = m
            self.sq_norms[:, j] = np.einsum("ij,ij->i", block, block, dtype=np.float64)
        self.n, self.p = n, len(mats)

    @classmethod
    def of(cls, kernels):
        """The blocks of the MultiKernel ``kernels`` when every kernel is dense explicit
        features, else None."""
        if any(_dense_features(op) is None for op in kernels.operators):
            return None
        return cls(kernels.operators)

    def weighted(self, gamma):
        """``K_γ`` as :class:`WeightedFeatureBlocks` (the blocks with ``γ_j > 0``)."""
        gamma = np.asarray(gamma, dtype=np.float64)
        active = np.flatnonzero(gamma > 0)
        weights = np.ascontiguousarray(gamma[active])
        blocks = FeatureBlockWeights(
            starts=np.ascontiguousarray(self.starts[active]),
            ends=np.ascontiguousarray(self.ends[active]),
            weights=weights,
            sq_norms=self.sq_norms[:, active] @ weights,
        )
        return WeightedFeatureBlocks(self.features, blocks)

    def quad_forms(self, coef):
        """``d_j = Σ_r ‖Φ_jᵀ v_r‖²`` for the rows ``v_r`` of ``coef`` (r, n), shape (p,).

        ``Φᵀ v`` is summed in float64 over the rows with ``v_i ≠ 0`` (:func:`blocks_primal
        <kernfw.solvers.simplex_qp._coordinate_numba.blocks_primal>` with unit weights).
        """
        ones = np.ones(self.p)
        rows, unit = np.arange(self.n), np.ones(self.n)
        total = np.zeros(self.features.shape[1])
        u = np.empty_like(total)
        u_abs = np.empty_like(total)
        for v in np.asarray(coef, dtype=np.float64):
            blocks_primal(self.features, self.starts, self.ends, ones, rows, unit, v, u, u_abs)
            total += u * u
        return np.add.reduceat(total, self.starts) if total.size else np.zeros(self.p)
