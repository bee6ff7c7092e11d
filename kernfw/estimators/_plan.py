"""The fit plan: what a fit of a kernel estimator runs, resolved once before anything is built.

A fit of :class:`~kernfw.L2SVC`, :class:`~kernfw.MinimumEnclosingBall`,
:class:`~kernfw.L2SVR` or :class:`~kernfw.MultiClassSVM` first turns its parameters and
the shape of its data into a :class:`FitPlan` (the estimator's ``_fit_plan``): the
algorithm (``solver="auto"`` resolved), the backend, the type of the kernel values, the
largest Gram matrix to precompute, the kernel approximation and the seeds.  The kernel
operator is then built from the plan and the solver run by it; nothing later asks again.
"""

from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import _num_features, _num_samples

from ..fw import SMALL_PROBLEM_MAX, StoppingRule
from ..kernels import COLUMN_GRAM_MAX_MB
from ..operators import KernelOperator
from ..solvers.simplex_qp import solve_simplex_qp

__all__ = [
    "FitPlan",
    "FLOAT32_GRAM_TOL",
    "PRECISIONS",
    "WIDE_FEATURES",
    "WIDE_GRAM_MB",
    "check_approx",
    "explicit_features",
    "gram_budget",
    "kernel_values_dtype",
    "small_problem",
    "stopping_tol",
]

#: smallest ``tol`` at which an estimator keeps the kernel values it computes from
#: features in float32 (a Gram, or the columns of an on-the-fly kernel): their
#: rounding, about 1e-7 relative, is then far below what the tolerance certifies
FLOAT32_GRAM_TOL = 1e-4

#: the ``precision`` choices of the kernel values an estimator computes from features
PRECISIONS = ("auto", "float32", "float64")

#: with at least this many features, a Gram up to ``max(WIDE_GRAM_MB, cache_size)`` MB is
#: precomputed: one BLAS-3 product beats ~n memory-bound column products (k(X, x_i) reads X)
WIDE_FEATURES = 50
#: Gram budget (MB) for wide inputs, whatever the (small) column cache
WIDE_GRAM_MB = 256.0


class FitPlan(NamedTuple):
    """What one fit runs, resolved from the parameters and the data's shape.

    Attributes
    ----------
    solver : str
        The algorithm (``solver="auto"`` resolved).
    backend : str
        ``"local"`` (this process) or ``"dask"`` (the rows sharded over a Dask cluster).
    gram_max_mb : float
        The largest Gram matrix (MB) the operator precomputes for the training points.
    cache_mb : float
        The column cache (MB) of a kernel evaluated on the fly (``cache_size``, or a
        cache of every column where the solver computes columns only where it needs them).
    dtype : type or None
        The type of the kernel values computed from features (approximated features
        ``Φ`` with ``approx``); None: that of ``X``.
    approx : str or None
        The kernel approximation (None: the exact kernel).
    n_components : int or None
        Its number of features.
    approx_seed : None, int or RandomState
        The approximation's ``random_state``.
    solver_seed : None, int or Generator
        The solver's ``random_state`` (a RandomState is drawn from once, here).
    """

    solver: str
    backend: str
    gram_max_mb: float
    cache_mb: float
    dtype: Any
    approx: Any
    n_components: Any
    approx_seed: Any
    solver_seed: Any

    # -- where the solver runs: the one branch on the backend ------------------------------
    def local_rows(self, weights):
        """The rows a fit solves on: those of positive ``weights`` (None: every row, also
        on the Dask backend, whose shards leave the rows of weight 0 out themselves)."""
        if self.backend == "dask" or weights is None or np.all(weights > 0):
            return None
        return np.flatnonzero(weights > 0)

    def solve_l2svms(self, X, op, y_enc, problems, options, weights, local):
        """``(support, coef, b, result)`` of the binary L2-SVMs ``problems`` (math.md §2.3):
        on the Dask cluster, the rows sharded over its workers, or ``local()`` in this
        process by ``local(op, [(rows, y) of each problem], weights, callback)``.
        ``options``: ``C``, ``tol``, ``max_iter``, ``callback`` and ``cache_size`` (MB per
        shard); ``weights``: the rows' weights, or None."""
        if self.backend != "dask":
            return local(op, [(p.index, p.y) for p in problems], weights, options["callback"])
        from ..distributed import fit_l2svm_problems

        seeds = {"random_state": self.solver_seed, "weights": weights}
        return fit_l2svm_problems(X, op, y_enc, problems, solver=self.solver, **options, **seeds)

    def solve_ball(self, X, op, q, options, present=None):
        """The :class:`~kernfw.fw.FWResult` of the hard ball (math.md §2.2) on ``op`` with
        ``q = diag K``: in this process, or on the Dask cluster with the rows sharded over
        its workers (``present``: 1 for the rows of positive weight, 0 for the others, or
        None).  ``options``: ``tol``, ``max_iter``, ``callback`` and ``cache_size``."""
        if self.backend == "dask":
            from ..distributed import solve_meb

            return solve_meb(
                X, op, self.solver, random_state=self.solver_seed, weights=present, **options
            )
        options = {k: v for k, v in options.items() if k != "cache_size"}
        return solve_simplex_qp(
            op, q=q, solver=self.solver, random_state=self.solver_seed, **options
        )


def gram_budget(X, cache_size):
    """Largest Gram (MB) to precompute for inputs ``X`` (see :data:`WIDE_FEATURES`).

    MFW fetches about one kernel column per iteration and needs roughly as many
    iterations as there are points, so on-the-fly columns cost about ``n²``
    kernel values too, but each column is a matrix-vector product that reads
    all of ``X``.  Few features: the columns win (and need no ``n²`` memory);
    many features: the Gram, up to ``max(WIDE_GRAM_MB, cache_size)`` MB.

    Parameters
    ----------
    X : array-like of shape (n, d) or None
        Training inputs.
    cache_size : float
        The estimator's ``cache_size`` (MB).

    Returns
    -------
    float
        The largest Gram matrix (MB) to precompute.
    """
    try:
        wide = _num_features(X) >= WIDE_FEATURES
    except TypeError:  # no features to count (None, a 1-D input): validation decides
        wide = False
    return max(COLUMN_GRAM_MAX_MB, WIDE_GRAM_MB, float(cache_size)) if wide else COLUMN_GRAM_MAX_MB


def small_problem(n):
    """Whether a fit on ``n`` examples is a small problem, solved to its rounding floor
    whatever ``tol`` (``n ≤`` :data:`~kernfw.fw.SMALL_PROBLEM_MAX`; math.md §0, "Small
    problems")."""
    return n is not None and n <= SMALL_PROBLEM_MAX


def stopping_tol(tol, n):
    """The ``tol`` a fit on ``n`` examples hands its solver: ``tol`` itself, or on a small
    problem (:func:`small_problem`) the rule that runs on past ``tol`` to the rounding
    floor within the iteration budget (``StoppingRule(tol, to_floor=True)`` on the
    problem's own scale).  ``converged_`` states ``gap + ρ ≤ tol·s`` either way.

    Parameters
    ----------
    tol : float
        The estimator's ``tol`` (0 runs the whole budget, small or not).
    n : int
        The number of training examples of the solve.

    Returns
    -------
    float or StoppingRule
    """
    if tol > 0 and small_problem(n):
        return StoppingRule(float(tol), None, to_floor=True)
    return tol


def explicit_features(kernel, approx, X):
    """Whether the training kernel of a fit comes as explicit features ``K = XXᵀ``, on which
    the vertex-coordinate passes run (``solver="dcd"``, math.md §2.13), resolved before the
    operator is built.

    True for an approximation ``approx``, for ``kernel="linear"`` on sparse ``X`` or on
    fewer features than points (which :func:`kernfw.kernels.make_operator` keeps as
    features) and for a ready operator with ``features()``; False otherwise.
    """
    if isinstance(kernel, KernelOperator):
        return kernel.features() is not None
    if approx is not None:
        return True
    if not (isinstance(kernel, str) and kernel == "linear"):
        return False
    try:
        narrow = _num_features(X) < _num_samples(X)
    except (TypeError, ValueError):  # no shape to read: validation will refuse X
        narrow = False
    return sp.issparse(X) or narrow


def kernel_values_dtype(precision, tol, solver=None, backend="local", n=None):
    """The type of the kernel values a fit computes from features (None: that of ``X``).

    ``precision`` when it is not ``"auto"``; ``"auto"`` is float32 at ``tol >=``
    :data:`FLOAT32_GRAM_TOL` (its rounding is then far below the certified gap) except
    on a small problem (``n`` examples, :func:`small_problem`), solved to its rounding
    floor (by the exact solve of ``solver="active_set"``, math.md §2.16, or past ``tol``,
    :func:`stopping_tol`).  The Dask backend's shards evaluate the kernel in float64
    (``precision="float32"`` is a ValueError there): below ``FLOAT32_GRAM_TOL`` the two
    backends take the same iterates, from it on the local one solves the problem of the
    float32-rounded kernel.
    """
    if backend == "dask":
        if precision == "float32":
            raise ValueError(
                "precision='float32' runs on the local backend only: the Dask shards "
                "evaluate the kernel in float64; use backend='local' or precision='auto'"
            )
        return None
    if precision != "auto":
        return np.dtype(precision).type
    if solver == "active_set" or small_problem(n) or tol is None or tol < FLOAT32_GRAM_TOL:
        return None
    return np.float32


def check_approx(approx, kernel, backend):
    """Raise a ValueError for an ``approx`` the fit cannot run: a precomputed Gram or a
    ready operator gives no features to approximate, and the Dask shards evaluate the
    exact kernel."""
    if approx is None:
        return
    precomputed = isinstance(kernel, str) and kernel == "precomputed"
    if precomputed or isinstance(kernel, KernelOperator):
        what = "kernel='precomputed'" if precomputed else "a KernelOperator"
        raise ValueError(
            f"approx={approx!r} needs the kernel as a name or a callable on the features; "
            f"{what} gives no features to approximate (pass approx=None)"
        )
    if backend == "dask":
        raise ValueError(
            f"approx={approx!r} runs on the local backend only: the Dask shards "
            "evaluate the exact kernel; use backend='local' or approx=None"
        )
