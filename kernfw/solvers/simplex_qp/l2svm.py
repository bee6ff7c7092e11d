"""The binary L2-SVM of the core vector machine as a simplex QP (math.md §2.1).

The L2-SVM ``min ‖w‖² + b² − 2ρ + C Σ ξ_i²`` subject to ``y_i(wᵀφ(x_i) + b) ≥ ρ − ξ_i``
has the dual ``max_{α∈Δₙ} −αᵀK̃α`` with the modified kernel
``K̃_ij = y_i y_j (K_ij + 1) + δ_ij / C``: a simplex QP with ``q = 0``.  This module
holds that kernel as an operator (:class:`L2SVMKernel`, nothing ``n × n`` is
formed), the label check, :func:`solve_l2svm` and the recovery of the SVM
``(b, ρ, coefficients)`` from ``α`` (:func:`l2svm_recover`).
"""

from typing import NamedTuple

import numpy as np

from ..._validation import check_positive
from ...operators.base import KernelOperator, as_index, check_block
from ...operators.gram import index_runs
from . import _numba
from .certificate import raise_not_psd
from .coordinate import CoordinateIterate, operator_features
from .solve import SOLVERS, check_max_iter, check_tol, default_max_iter, solve_simplex_qp
from .start import check_alpha0

__all__ = [
    "L2SVMKernel",
    "L2SVM_SOLVERS",
    "check_binary_labels",
    "check_example_weights",
    "choose_l2svm_solver",
    "solve_l2svm",
    "solve_l2svm_blocks",
    "solve_l2svm_gram",
    "solve_l2svm_gram_paths",
    "GramFit",
    "GramPaths",
    "l2svm_recover",
]

#: the L2-SVM's algorithms: those of the simplex QP, the vertex-coordinate passes on
#: explicit features (``"dcd"``, math.md §2.13) and ``"auto"`` (:func:`choose_l2svm_solver`)
L2SVM_SOLVERS = ("auto", *SOLVERS, "dcd")

#: passes over the data of ``solver="dcd"`` when ``max_iter`` is None
DCD_MAX_PASSES = 1000
#: passes in a run of ``solver="dcd"`` between two certificates, at most
DCD_CHECK_EVERY = 10


def check_binary_labels(y, n):
    """Labels ``y_i ∈ {−1, +1}`` of shape (n,) as float64 (ValueError otherwise)."""
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    values = np.unique(y)
    if values.size > 2:
        raise ValueError(
            f"the binary L2-SVM needs exactly two classes, y has {values.size} "
            f"({values[:5].tolist()}{'...' if values.size > 5 else ''}); use "
            "kernfw.L2SVC for multi-class problems"
        )
    if not np.all(np.isin(values, (-1, 1))):
        raise ValueError(f"binary labels must be -1 and +1, got {values.tolist()}")
    return y.astype(np.float64)


def check_example_weights(sample_weight, n, owner="the L2-SVM's"):
    """Per-example weights ``w_i > 0`` of shape (n,) as float64, or None for ``w = 1``.

    The weighted L2-SVM (math.md §2.14) and the regression (§2.15) put ``1/(C w_i)`` on
    the diagonal of their duals, so an example of weight 0 has no place in them: the caller
    leaves it out (it does not constrain the optimum), and a zero or negative weight here
    is a ValueError naming the ``owner``'s weights.
    """
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)) or not np.all(w > 0):
        raise ValueError(
            f"{owner} weights must be positive and finite (leave examples of weight "
            "0 out of the problem: they do not constrain it)"
        )
    return w


class L2SVMKernel(KernelOperator):
    """The modified kernel ``K̃_ij = y_i y_j (K_ij + 1) + δ_ij / (C w_i)`` of the L2-SVM (§2.1).

    An operator wrapper: it answers the operator protocol from the base
    operator without forming any ``n × n`` matrix.

    Parameters
    ----------
    base : KernelOperator
        The kernel ``K`` on the training points.
    y : array-like of shape (n,)
        Labels ``y_i`` in {−1, +1}.
    C : float > 0
        Penalty ``C`` of the squared slacks.
    sample_weight : array-like of shape (n,) or None
        Per-example weights ``w_i > 0`` of the slacks, ``C Σ w_i ξ_i²`` (math.md §2.14;
        None: all 1).

    Attributes
    ----------
    inv_c : ndarray of shape (n,)
        The diagonal term ``1/(C w_i)`` of each example.

    Notes
    -----
    ``cross(X_new, idx)`` returns ``y_j (k(x, x_j) + 1)`` for ``j`` in ``idx``:
    the modified kernel of a new point taken with label +1 (and no δ term),
    so that the decision function is ``h(x) = cross(x, S) @ α_S``.
    """

    def __init__(self, base, y, C, sample_weight=None):
        if not isinstance(base, KernelOperator):
            raise TypeError(f"base must be a KernelOperator, got {type(base).__name__}")
        self.base = base
        self.y = check_binary_labels(y, base.n)
        self.C = check_positive("C", C)
        self.sample_weight = check_example_weights(sample_weight, base.n)
        self.n = base.n
        self.dtype = np.result_type(base.dtype, np.float64)
        self.inv_c = np.full(self.n, 1.0 / self.C)
        if self.sample_weight is not None:
            self.inv_c /= self.sample_weight
        self._signed_y = (-self.y[:, None], self.y[:, None])  # y_i y for y_i = −1, +1

    def column_source(self):
        """The base operator's :class:`~kernfw.operators.base.ColumnSource` with this
        kernel's labels ``y`` and diagonal terms ``1/(C w_i)``, or None when the base
        operator has none."""
        inner = self.base.column_source()
        if inner is None:
            return None
        return inner._replace(labels=self.y, inv_c=self.inv_c)

    def diag(self):
        return np.asarray(self.base.diag(), dtype=np.float64) + 1.0 + self.inv_c

    def columns(self, idx):
        idx = as_index(idx, self.n)
        out = np.add(self.base.columns(idx), 1.0, dtype=np.float64)
        if idx.size == 1:  # the solvers' case: y_i y is y or −y, one pass
            i = int(idx[0])
            out *= self._signed_y[int(self.y[i] > 0)]
            out[i, 0] += self.inv_c[i]
            return out
        out *= np.multiply.outer(self.y, self.y[idx])
        out[idx, np.arange(idx.size)] += self.inv_c[idx]
        return out

    def matmat(self, V):
        V = check_block(V, self.n)
        yV = V * (self.y if V.ndim == 1 else self.y[:, None])
        out = self.base.matmat(yV) + yV.sum(axis=0)
        out *= self.y if V.ndim == 1 else self.y[:, None]
        out += V * (self.inv_c if V.ndim == 1 else self.inv_c[:, None])
        return out

    def cross(self, X_new, idx=None):
        cols = slice(None) if idx is None else as_index(idx, self.n)
        return (self.base.cross(X_new, idx) + 1.0) * self.y[cols]

    def subset(self, idx):
        idx = as_index(idx, self.n)
        w = None if self.sample_weight is None else self.sample_weight[idx]
        return L2SVMKernel(self.base.subset(idx), self.y[idx], self.C, w)


def choose_l2svm_solver(op):
    """The algorithm of ``solver="auto"`` for the kernel operator ``op`` (math.md §2.13).

    ``"dcd"`` when ``K = XXᵀ`` comes with its features ``X`` (the linear kernel
    on explicit, dense or sparse features; low-rank features of another kernel):
    a vertex step then costs O(d), and a
    pass of ``n`` of them as much as one MFW iteration, while MFW takes about one
    iteration per support vector.  ``"mfw"`` otherwise: on a Gram matrix or a
    kernel evaluated column by column a coordinate step costs a kernel row, and
    MFW's columns serve many steps through the cache.
    """
    return "mfw" if op.features() is None else "dcd"


def _solve_coordinate(op, y, C, sample_weight, **options):
    """:func:`solve_l2svm` with ``solver="dcd"``: vertex-coordinate passes (math.md §2.13)."""
    X = operator_features(op)
    return _run_coordinate(X, None, y, C, sample_weight=sample_weight, **options)


def _run_coordinate(
    X,
    blocks,
    y,
    C,
    tol,
    max_iter,
    alpha0,
    random_state,
    callback,
    max_time,
    check_every,
    sample_weight=None,
):
    """The passes on the features ``X`` (weighted column ``blocks`` of it, or all of it)."""
    n = X.shape[0]
    y = check_binary_labels(y, n)
    tol = check_tol(tol)
    max_iter = check_max_iter(max_iter, DCD_MAX_PASSES)
    if max_time is not None:
        max_time = check_positive("max_time", max_time)
    alpha0 = None if alpha0 is None else check_alpha0(alpha0, n)
    rng = np.random.default_rng(0 if random_state is None else random_state)
    start = 0 if random_state is None else int(rng.integers(n))
    w = check_example_weights(sample_weight, n)
    iterate = CoordinateIterate(X, y, C, alpha0, rng, start, blocks, w)
    check_every = DCD_CHECK_EVERY if check_every is None else check_every
    name = "DCD (L2-SVM vertex-coordinate passes)"
    return iterate.drive(tol, max_iter, check_every, name, max_time, callback)


def solve_l2svm(
    op,
    y,
    C,
    solver="mfw",
    tol=1e-6,
    max_iter=None,
    alpha0=None,
    random_state=None,
    callback=None,
    max_time=None,
    check_every=None,
    sample_weight=None,
):
    """Train the binary L2-SVM of CVM (math.md §2.1) as a quadratic over the simplex.

    Solves ``max_{α∈Δₙ} −αᵀK̃α`` with ``K̃ = L2SVMKernel(op, y, C, sample_weight)`` by
    :func:`solve_simplex_qp` (``q = 0``), and recovers the primal solution::

        w = Σ α_i y_i φ(x_i),  b = Σ α_i y_i,  ξ_i = α_i / (C w_i),  ρ = αᵀK̃α,
        h(x) = Σ_{i∈S} α_i y_i (k(x_i, x) + 1).

    Parameters
    ----------
    op : KernelOperator
        The kernel ``K`` on the training points (any backend; with
        :class:`~kernfw.operators.KernelFunction` no ``n × n`` matrix is formed).
    y : array-like of shape (n,)
        Labels in {−1, +1}.
    C : float > 0
        Penalty ``C`` of ``C Σ ξ_i²``.
    solver : {"auto", "mfw", "lsfw", "cvm", "active_set", "dcd"}
        The algorithms of :func:`solve_simplex_qp`, or ``"dcd"``: passes of
        vertex-coordinate steps on explicit features (math.md §2.13;
        ``max_iter`` then counts passes, None is 1000, and ``check_every`` bounds
        the passes between certificates, None is 10).  ``"auto"``:
        :func:`choose_l2svm_solver`.
    tol, max_iter, random_state, callback, max_time, check_every
        As in :func:`solve_simplex_qp`: ``tol`` is relative to ``ρ`` (the FW gap, which
        bounds the primal–dual gap of the L2-SVM, ``≤ tol·ρ``), or a
        :class:`~kernfw.fw.StoppingRule` (the radius rule needs a constant ``diag(K)``).
        ``random_state`` also orders the points of ``"dcd"``'s passes (None: a
        fixed order, ``numpy.random.default_rng(0)``).
    alpha0 : array-like of shape (n,) or None
        Warm start on the simplex, e.g. the previous ``alpha`` when only the
        kernel (weights) changed.
    sample_weight : array-like of shape (n,) or None
        Positive per-example weights ``w_i``: the slack penalty ``C Σ w_i ξ_i²`` (math.md
        §2.14; None: all 1).  An example of weight 0 does not constrain the problem:
        leave it out (a weight ``≤ 0`` is a ValueError).

    Returns
    -------
    FWResult
        ``solution`` holds ``alpha`` (n,), ``v`` (``K̃α``; ``v_i = y_i h(x_i) + α_i/(C w_i)``),
        ``support`` (sorted indices with ``α_i > 0``), ``coef`` (``α_S ⊙ y_S``:
        dual coefficients of ``h`` on the support), ``b`` and ``rho``.
        ``dual = −ρ``; ``primal = dual + gap`` is the primal objective
        ``‖w‖² + b² − 2ρ' + CΣξ²`` at ``(w, b, ξ)`` above with the feasible
        margin ``ρ' = min_i v_i``.
    """
    K_tilde = L2SVMKernel(op, y, C, sample_weight)
    if solver == "auto":
        solver = choose_l2svm_solver(op)
    options = dict(tol=tol, max_iter=max_iter, alpha0=alpha0, random_state=random_state)
    options.update(callback=callback, max_time=max_time, check_every=check_every)
    if solver == "dcd":
        result = _solve_coordinate(op, K_tilde.y, C, K_tilde.sample_weight, **options)
    else:
        result = solve_simplex_qp(K_tilde, None, solver=solver, **options)
    return _with_model(result, K_tilde.y)


def l2svm_recover(alpha_S, v_S, y_S):
    """The L2-SVM from the simplex QP's solution on its support ``S`` (math.md §2.1).

    Parameters
    ----------
    alpha_S, v_S, y_S : ndarray of shape (n_S,)
        ``α``, ``v = K̃α`` and the labels on the support.

    Returns
    -------
    dict
        ``b = Σ α_i y_i``, ``rho`` ``ρ = αᵀK̃α`` and ``coef`` ``α_S ⊙ y_S`` (the dual
        coefficients of ``h(x) = Σ_{i∈S} coef_i (k(x_i, x) + 1)``).
    """
    return {"b": float(alpha_S @ y_S), "rho": float(alpha_S @ v_S), "coef": alpha_S * y_S}


def _with_model(result, y):
    """``result`` with the L2-SVM of its solution (:func:`l2svm_recover`) in ``solution``."""
    sol = result.solution
    S = sol["support"]
    sol.update(l2svm_recover(sol["alpha"][S], sol["v"][S], y[S]))
    return result


def solve_l2svm_blocks(
    X,
    blocks,
    y,
    C,
    tol=1e-6,
    max_iter=None,
    alpha0=None,
    random_state=None,
    check_every=None,
    callback=None,
    sample_weight=None,
):
    """The binary L2-SVM on weighted column blocks of ``X`` by vertex-coordinate passes.

    The kernel is ``K = Σ_r c_r X_{:,B_r} X_{:,B_r}ᵀ`` (math.md §2.13, feature blocks):
    the linear kernel of the features ``x_i = (√c_1 X_{i,B_1}, …)``, read from ``X``
    without scaling or copying it (a combination of approximated kernels with weights
    ``c``, as inside CSKL and lp-MKL).  The result is that of :func:`solve_l2svm` with
    ``solver="dcd"`` on those features.

    Parameters
    ----------
    X : ndarray of shape (n, M)
        Dense features (float32 or float64, C-contiguous).
    blocks : FeatureBlockWeights
        The column ranges ``B_r``, their weights ``c_r > 0`` and ``‖x_i‖²``.
    y, C, tol, max_iter, alpha0, random_state, check_every, callback, sample_weight
        As :func:`solve_l2svm` with ``solver="dcd"``.

    Returns
    -------
    FWResult
        As :func:`solve_l2svm`.
    """
    X = np.ascontiguousarray(X)
    if X.ndim != 2 or X.dtype not in (np.float32, np.float64):
        raise ValueError(f"X must be a 2-D float32 or float64 array, got {X.dtype} {X.shape}")
    if np.any(np.asarray(blocks.weights) <= 0):
        raise ValueError("block weights must be positive (leave zero-weight blocks out)")
    y = check_binary_labels(y, X.shape[0])
    result = _run_coordinate(
        X,
        blocks,
        y,
        C,
        tol,
        max_iter,
        alpha0,
        random_state,
        callback,
        None,
        check_every,
        sample_weight,
    )
    return _with_model(result, y)


class GramFit(NamedTuple):
    """The solution of :func:`solve_l2svm_gram`: ``alpha`` (n,) on the simplex, its FW
    ``gap`` (the certified primal–dual gap, ``≥ 0``), ``rho = αᵀK̃α``, the iterations
    ``n_iter`` and whether the stopping rule was met (``converged``)."""

    alpha: np.ndarray
    gap: float
    rho: float
    n_iter: int
    converged: bool


def solve_l2svm_gram(K, y, C, alpha0=None, tol=1e-6, max_iter=None):
    """The binary L2-SVM (math.md §2.1) on a stored Gram by compiled pairwise FW steps.

    One compiled call (:func:`kernfw.solvers.simplex_qp._numba.solve_problems`, the
    pairwise steps of math.md §2.3) and no Python object per iteration or certificate:
    for the many small problems of a grid search (one-vs-one pairs × folds × ``C``),
    where :func:`solve_l2svm`'s fixed set-up would cost more than the iterations.

    Parameters
    ----------
    K : ndarray of shape (n, n), float64, C-contiguous
        The kernel on the problem's points, symmetric bit for bit (a principal
        submatrix of such a matrix is).
    y : ndarray of shape (n,)
        Labels in {−1, +1}.
    C : float > 0
        Penalty of ``C Σ ξ_i²``.
    alpha0 : ndarray of shape (n,) or None
        Start on the simplex (the solution at a neighbouring ``C``: math.md §7.1); None
        is the uniform start ``α = 1/n``, the optimum's limit as ``C → 0`` (math.md §2.6).
    tol : float > 0
        The rule of :func:`solve_l2svm`: ``gap + rounding ≤ tol·ρ``.
    max_iter : int or None
        Pairwise steps allowed (None: :func:`solve_l2svm`'s default budget).

    Returns
    -------
    GramFit
    """
    n = K.shape[0]
    if K.shape != (n, n) or K.dtype != np.float64 or not K.flags.c_contiguous:
        raise ValueError(f"K must be a C-contiguous float64 (n, n) array, got {K.dtype} {K.shape}")
    labels = np.asarray(y, dtype=np.float64)
    if labels.shape != (n,) or not np.all(np.abs(labels) == 1.0):
        labels = check_binary_labels(y, n)  # its error (or mixed ±1 of another type)
    C, tol = check_positive("C", C), check_positive("tol", tol)
    alpha = np.full((1, n), 1.0 / n) if alpha0 is None else check_alpha0(alpha0, n)[None].copy()
    budget = check_max_iter(max_iter, default_max_iter(n))
    inv_c = np.full(n, 1.0 / C)
    gaps, quads, n_iter, status, index = _numba.solve_problems(
        K, labels[None], inv_c, alpha, tol, budget
    )
    if status[0] == _numba.STATUS_NOT_PSD:
        raise_not_psd(float("nan"), int(index[0]))
    converged = bool(status[0] == _numba.STATUS_CONVERGED)
    return GramFit(alpha[0], max(float(gaps[0]), 0.0), float(quads[0]), int(n_iter[0]), converged)


class GramPaths(NamedTuple):
    """The solutions of :func:`solve_l2svm_gram_paths`, fit ``(k, p)`` being problem ``p``
    at ``Cs[k]``: ``alpha`` (one array of shape (c, m_p) per problem), and arrays of shape
    (c, P): the FW ``gap`` (the certified primal–dual gap), ``rho = αᵀK̃α``, the
    iterations ``n_iter`` and whether the stopping rule was met (``converged``)."""

    alpha: list
    gap: np.ndarray
    rho: np.ndarray
    n_iter: np.ndarray
    converged: np.ndarray


def _path_starts(starts, sizes):
    """``(start, has_start)`` of :func:`~._numba.solve_paths`: the problems' candidate
    starts one after the other (zeros where None), validated on each problem's simplex."""
    start = np.zeros(int(np.sum(sizes)))
    has_start = np.zeros(len(sizes), dtype=np.bool_)
    if starts is None:
        return start, has_start
    if len(starts) != len(sizes):
        raise ValueError(
            f"starts must give one entry per problem ({len(sizes)}), got {len(starts)}"
        )
    at = 0
    for p, (alpha0, m) in enumerate(zip(starts, sizes)):
        if alpha0 is not None:
            start[at : at + m] = check_alpha0(alpha0, m)
            has_start[p] = True
        at += m
    return start, has_start


def solve_l2svm_gram_paths(K, points, labels, Cs, tol=1e-6, max_iter=None, starts=None):
    """Binary L2-SVMs (math.md §2.1) on principal submatrices of one stored Gram, each along
    a path of ``C``, in one compiled call.

    Problem ``p`` is the L2-SVM on the points ``points[p]`` (indices of ``K``) with labels
    ``labels[p]``; it is solved at each ``C`` of the increasing ``Cs``, each fit from the
    solution at the previous ``C`` (math.md §7.1) and the first from the uniform
    ``α = 1/m`` (§2.6) or from ``starts[p]`` when that point's objective is lower, by the
    pairwise FW steps of :func:`solve_l2svm_gram`
    (:func:`kernfw.solvers.simplex_qp._numba.solve_paths`).  No submatrix is copied: the
    rows of ``K`` are read along the runs of consecutive indices of ``points[p]``
    (:func:`index_runs`), so points in long runs (a class's rows, in a Gram ordered by
    class) are read as contiguous memory.

    Parameters
    ----------
    K : ndarray of shape (N, N), float32 or float64, C-contiguous
        The kernel, symmetric bit for bit (float32 values are read as they are, the
        arithmetic is float64).
    points : sequence of ndarray of int
        Each problem's points (distinct indices of ``K``).
    labels : sequence of ndarray of float
        Their labels in {−1, +1}.
    Cs : sequence of float
        Increasing penalties ``C > 0``.
    tol : float > 0
        The rule of :func:`solve_l2svm`: ``gap + rounding ≤ tol·ρ``.
    max_iter : int or None
        Pairwise steps allowed per fit (None: :func:`solve_l2svm`'s default budget of
        each problem's size).
    starts : sequence of (ndarray or None) or None
        Per problem, a candidate start for the first ``C`` (a point of the simplex of
        the problem's size, e.g. its solution at that ``C`` for a neighbouring ``γ``,
        math.md §7.2), taken when its ``αᵀQα`` is lower than the uniform point's.

    Returns
    -------
    GramPaths
    """
    N = K.shape[0]
    if K.shape != (N, N) or K.dtype not in (np.float32, np.float64) or not K.flags.c_contiguous:
        raise ValueError(
            f"K must be a C-contiguous float32 or float64 (n, n) array, got {K.dtype} {K.shape}"
        )
    Cs = np.array([check_positive("C", C) for C in Cs], dtype=np.float64)
    if np.any(np.diff(Cs) < 0):
        raise ValueError("Cs must be increasing")
    tol = check_positive("tol", tol)
    sizes = np.array([np.size(p) for p in points], dtype=np.int64)
    glob = np.concatenate(points).astype(np.int64, copy=False)
    if np.any(sizes == 0) or glob.min() < 0 or glob.max() >= N:
        raise ValueError(f"each problem needs points that index K (0 … {N - 1})")
    Y = np.concatenate(labels).astype(np.float64, copy=False)
    if Y.shape != glob.shape or not np.all(np.abs(Y) == 1.0):
        raise ValueError("binary labels must be -1 and +1, one per point")
    ends = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    runs, run_ends = index_runs(glob, ends)
    budget = np.array([check_max_iter(max_iter, default_max_iter(m)) for m in sizes])
    start, has_start = _path_starts(starts, sizes)
    A, gaps, quads, n_iter, status, index = _numba.solve_paths(
        K, glob, Y, runs, ends, run_ends, Cs, tol, budget.astype(np.int64), start, has_start
    )
    if np.any(status == _numba.STATUS_NOT_PSD):
        raise_not_psd(float("nan"), int(index[status == _numba.STATUS_NOT_PSD][0]))
    alpha = [A[:, lo:hi] for lo, hi in zip(ends[:-1], ends[1:])]
    converged = status == _numba.STATUS_CONVERGED
    return GramPaths(alpha, np.maximum(gaps, 0.0), quads, n_iter, converged)
