"""Scalar kernels of the multi-category losses, written once.

Plain Python on scalars and preallocated arrays that
:mod:`kernfw.solvers.multiclass._numba` compiles with ``numba.njit`` (the tests call
some of them as they are).

The built-in losses reach these kernels as a code (:func:`loss_code`: a code and the
weights ``ρ``); :func:`loss_vertex` is their closed-form LMO (math.md §1.3).  The exact
block steps of the losses other than the hinge are in :mod:`kernfw.solvers.multiclass._block_qp`.
"""

import numpy as np

from ...losses import (
    MaxHinge,
    StructuredHinge,
    TopKHinge,
    Usunier,
    WeightedTopKHinge,
    WeightedUsunier,
)

__all__ = [
    "loss_code",
    "top_entries",
    "hinge_vertex",
    "loss_vertex",
    "OPTIMAL_RTOL",
    "MAX_HINGE",
    "TOPK",
    "USUNIER",
    "WEIGHTED_TOPK",
    "WEIGHTED_USUNIER",
]

#: loss codes understood by :func:`loss_vertex`
MAX_HINGE, TOPK, USUNIER, WEIGHTED_TOPK, WEIGHTED_USUNIER = range(5)

_CODES = {
    MaxHinge: MAX_HINGE,
    StructuredHinge: MAX_HINGE,
    TopKHinge: TOPK,
    Usunier: USUNIER,
    WeightedTopKHinge: WEIGHTED_TOPK,
    WeightedUsunier: WEIGHTED_USUNIER,
}

#: a block whose FW gap is at most this times ``1 + Φ_i`` is optimal (``SHRINK_RTOL`` of
#: :mod:`kernfw.solvers.multiclass`)
OPTIMAL_RTOL = 1e-12


def loss_code(loss, n_classes):
    """``(code, k, ρ, r)`` describing a built-in loss to :func:`loss_vertex`, or None.

    ``r`` is the number of sorted positions the LMO needs (``ρ_j = 0`` for
    ``j > r``): 1 for the hinge, ``k`` for the unweighted losses, the last
    positive weight's position for the weighted ones.  Subclasses of the
    built-in losses (which may override the LMO) get None.
    """
    code = _CODES.get(type(loss))
    if code is None:
        return None
    rho = np.ascontiguousarray(loss.rho(n_classes), dtype=np.float64)
    k = getattr(loss, "k", 1)
    r = int(np.flatnonzero(rho > 0)[-1]) + 1
    return code, int(k), rho, r


# -- the closed-form LMO of the built-in losses (math.md §1.3) ------------------------------


def top_entries(a, r, idx):
    """The ``r`` largest entries of ``a``, decreasing, ties to the smaller index, into ``idx``.

    Insertion into a sorted list of length ``r``: ``O(m·r)``, no allocation.
    """
    m = a.shape[0]
    count = 0
    for j in range(m):
        v = a[j]
        if count == r and not v > a[idx[r - 1]]:
            continue
        pos = count if count < r else r - 1
        while pos > 0 and v > a[idx[pos - 1]]:
            pos -= 1
        last = count if count < r else r - 1
        for q in range(last, pos, -1):
            idx[q] = idx[q - 1]
        idx[pos] = j
        if count < r:
            count += 1


def hinge_vertex(a, beta):
    """The LMO of the max / structured hinge into ``beta``: ``e_j`` at the first
    ``j ∈ argmax_j a_j`` if ``a_j > 0``, else 0 (:func:`loss_vertex` of ``MAX_HINGE``)."""
    top = 0
    for j in range(a.shape[0]):
        beta[j] = 0.0
        if a[j] > a[top]:
            top = j
    if a[top] > 0:
        beta[top] = 1.0


# complex: the closed-form vertex of each loss (math.md §1.3), one compiled dispatch
def loss_vertex(a, loss, k, rho, r, idx, beta):  # noqa: C901
    """``β* ∈ argmax_{β ∈ B} ⟨β, a⟩`` into ``beta`` (the ``lmo_row`` of each loss)."""
    if loss == MAX_HINGE:
        hinge_vertex(a, beta)
        return
    for j in range(beta.shape[0]):
        beta[j] = 0.0
    top_entries(a, r, idx)
    if loss == TOPK:
        total = 0.0
        for q in range(k):
            total += a[idx[q]]
        if total > 0:
            for q in range(k):
                beta[idx[q]] = 1.0 / k
    elif loss == USUNIER:
        for q in range(k):
            if a[idx[q]] > 0:
                beta[idx[q]] = 1.0 / k
    elif loss == WEIGHTED_TOPK:
        total = 0.0
        for q in range(r):
            total += a[idx[q]] * rho[q]
        if total > 0:
            for q in range(r):
                beta[idx[q]] = rho[q]
    else:  # WEIGHTED_USUNIER
        for q in range(r):
            if a[idx[q]] > 0:
                beta[idx[q]] = rho[q]
