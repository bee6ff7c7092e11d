"""Whether a Gram matrix is symmetric bit for bit (shared by the compiled solvers).

Plain Python compiled by the compiled backends that read kernel columns as rows of a
C-ordered ``K`` (:mod:`kernfw.solvers.multiclass._numba`,
:mod:`kernfw.solvers.simplex_qp._columns_numba`).
"""

__all__ = ["exactly_symmetric"]


def exactly_symmetric(K):
    """Whether ``K[i, j] == K[j, i]`` for all ``i, j`` (bit for bit): then the rows of a
    C-ordered ``K`` are its columns, read contiguously.  Stops at the first mismatch."""
    n = K.shape[0]
    for i in range(n):
        for j in range(i):
            if K[i, j] != K[j, i]:
                return False
    return True
