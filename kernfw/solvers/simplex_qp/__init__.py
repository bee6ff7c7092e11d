"""The simplex QP ``max_{α∈Δₙ} qᵀα − αᵀQα``: minimum enclosing ball and L2-SVM (math.md §2).

One concave quadratic over the unit simplex covers both problems (math.md §2.3):
the minimum enclosing ball of the points with Gram matrix ``Q`` (``q = diag(Q)``)
and the L2-SVM of the core vector machine (``Q`` the modified kernel ``K̃``,
``q = 0``, math.md §2.1).  The modules, from the bottom up:

- :mod:`~kernfw.solvers.simplex_qp.dense` — small dense simplex QPs solved exactly by an
  active-set method (the cutting-plane solver's restricted problem);
- :mod:`~kernfw.solvers.simplex_qp.certificate` — the certificate and the scale of the
  stopping rule;
- :mod:`~kernfw.solvers.simplex_qp.start` — the CVM initialization and the warm start;
- :mod:`~kernfw.solvers.simplex_qp._numba` — the compiled core of the FW / MFW steps
  (the kernel columns it needs come from :mod:`kernfw.operators._columns_numba`);
- :mod:`~kernfw.solvers.simplex_qp.iterate` — the FW / MFW iterate, one kernel column per
  iteration;
- :mod:`~kernfw.solvers.simplex_qp.cvm` — the core vector machine baseline (core-set
  iterations);
- :mod:`~kernfw.solvers.simplex_qp.solve` — :func:`solve_simplex_qp`;
- :mod:`~kernfw.solvers.simplex_qp.soft_ball` — the ν-soft ball on the capped simplex
  (:func:`solve_soft_ball`);
- :mod:`~kernfw.solvers.simplex_qp.coordinate` — simplex QPs on explicit features (the
  L2-SVM, the regression) by passes of vertex-coordinate steps (``_coordinate_numba``:
  the compiled passes);
- :mod:`~kernfw.solvers.simplex_qp.l2svm` — the modified kernel :class:`L2SVMKernel` and
  :func:`solve_l2svm`;
- :mod:`~kernfw.solvers.simplex_qp.screening` — safe sample screening of the L2-SVM along
  ``C`` and the screened fit (:func:`solve_l2svm_screened`);
- :mod:`~kernfw.solvers.simplex_qp.l2svr` — the L2-loss support vector regression on the
  simplex of its ``2n`` signed points and a slack vertex (:func:`solve_l2svr`; MFW, or
  the vertex-coordinate passes on features, :class:`L2SVRCoordinateIterate`);
- :mod:`~kernfw.solvers.simplex_qp.distributed` — the iterate with its rows sharded over
  Dask workers.
"""

from .coordinate import CoordinateIterate, VertexCoordinateIterate
from .cvm import CoreVectorIterate
from .dense import simplex_fw_gap, solve_dense_simplex_qp
from .iterate import SimplexQPIterate
from .l2svm import (
    L2SVM_SOLVERS,
    GramFit,
    GramPaths,
    L2SVMKernel,
    check_binary_labels,
    choose_l2svm_solver,
    l2svm_recover,
    solve_l2svm,
    solve_l2svm_blocks,
    solve_l2svm_gram,
    solve_l2svm_gram_paths,
)
from .l2svr import (
    L2SVR_SOLVERS,
    L2SVRCoordinateIterate,
    L2SVRKernel,
    l2svr_recover,
    solve_l2svr,
)
from .screening import PathStart, screen_l2svm, solve_l2svm_screened
from .soft_ball import solve_soft_ball
from .solve import SOLVERS, solve_simplex_qp

__all__ = [
    "solve_simplex_qp",
    "solve_dense_simplex_qp",
    "simplex_fw_gap",
    "solve_soft_ball",
    "solve_l2svm",
    "solve_l2svm_blocks",
    "solve_l2svm_gram",
    "solve_l2svm_gram_paths",
    "GramFit",
    "GramPaths",
    "l2svm_recover",
    "solve_l2svm_screened",
    "screen_l2svm",
    "PathStart",
    "solve_l2svr",
    "l2svr_recover",
    "L2SVRKernel",
    "L2SVR_SOLVERS",
    "L2SVRCoordinateIterate",
    "L2SVMKernel",
    "check_binary_labels",
    "SimplexQPIterate",
    "CoreVectorIterate",
    "CoordinateIterate",
    "VertexCoordinateIterate",
    "L2SVM_SOLVERS",
    "choose_l2svm_solver",
    "SOLVERS",
]
