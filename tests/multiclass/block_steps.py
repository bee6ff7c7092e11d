"""The compiled block steps of block-coordinate FW, called on one block (test helpers).

Each wraps a function of :mod:`kernfw.solvers.multiclass._numba` with fresh work
arrays, so that the tests can check one step against cvxpy or a 1-D maximization.
"""

import numpy as np

from kernfw.solvers.multiclass import _numba
from kernfw.solvers.multiclass._lmo import loss_code


def fw_block_step(loss, g, alpha, yi, q, gamma_std=None):
    """The FW block step: ``(γ, δ = γ(u_i − α_i))`` with the exact block line search, or
    the fixed step ``gamma_std``."""
    m = g.shape[0]
    kind, k, rho, r = loss_code(loss, m)
    spec = _numba.BlockSpec(
        np.zeros((1, m)), np.zeros(1, dtype=np.intp), np.zeros(1), 1.0, 0.0, kind, k, rho, r,
        _numba.FW, 1, gamma_std is not None, 1, False, np.zeros((0, m)),
    )  # fmt: skip
    a, beta, delta = np.empty(m), np.empty(m), np.empty(m)
    idx = np.zeros(max(r, 1), dtype=np.int64)
    gamma_std = 0.0 if gamma_std is None else float(gamma_std)
    gamma = _numba._fw_block(g, alpha, np.int64(yi), float(q), spec, gamma_std, a, idx, beta, delta)
    return gamma, delta


def exact_block_step(g, alpha, yi, q):
    """The exact block step of the max / structured hinge: ``(½‖δ‖₁, δ, θ)`` (``θ`` NaN
    when the block is left alone or ``q = 0``)."""
    m = g.shape[0]
    b, D, delta, out = np.empty(m), np.empty(m), np.empty(m), np.full(2, np.nan)
    step = _numba._exact_block(g, alpha, np.int64(yi), float(q), b, D, delta, out)
    return step, delta, out[_numba.MULTIPLIER]


def polytope_block_step(code, g, alpha, yi, q, buffers=None):
    """The exact block step of the other built-in losses: ``(½‖δ‖₁, δ, block gap)``."""
    kind, k, rho, r = code
    m = g.shape[0]
    buffers = _numba.block_qp_buffers(m) if buffers is None else buffers
    idx = np.zeros(max(r, 1), dtype=np.int64)
    a, beta, delta = np.empty(m), np.empty(m), np.empty(m)
    step, gap = _numba._block_qp(
        g, alpha, np.int64(yi), float(q), kind, k, rho, r, idx, a, beta, delta, buffers
    )
    return step, delta, gap
