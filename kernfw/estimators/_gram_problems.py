"""The binary problems of an :class:`~kernfw.L2SVC` fit and of its calibration folds,
pair by pair on their kernel blocks.

With ``probability=True`` a one-vs-one fit of ``m`` classes solves its ``m(m−1)/2`` pair
problems once on all the points and once on each of the calibration folds' training
points (math.md §9.1): on digits 270 problems of a few hundred points each, where a few
milliseconds of Python set-up per solve would cost more than the solves.
:func:`fit_gram_problems` takes each problem's principal submatrix ``K_p`` once (float64,
symmetric bit for bit: from a stored Gram, or computed from the points when the kernel is
evaluated on the fly, :class:`ProblemKernels`), solves the problem on it by one compiled
call of pairwise FW (:func:`~kernfw.solvers.simplex_qp.solve_l2svm_gram`, math.md §2.3)
from the uniform start (math.md §2.6), and then solves the problem of each fold on the
fold's rows of ``K_p``, started from the full solution restricted to those rows and
renormalized: a point of the fold's simplex, whose start costs one pass over the fold's
block like the uniform one (no kernel columns are computed).  Each fold model is certified
to ``tol`` on its own problem, so the start changes where its solve begins, not what it
must reach.  The held-out decisions of a fold are one kernel block between its held-out
points and the support of all its problems (:class:`_FoldModels`).
"""

import time
from typing import NamedTuple

import numpy as np

from ..fw import FWResult
from ..operators import Gram, KernelFunction
from ..operators.gram import mirror_lower, take_block
from ..solvers.simplex_qp import solve_l2svm_gram

__all__ = ["GramProblems", "ProblemKernels", "problem_kernels", "fit_gram_problems"]


class ProblemKernels(NamedTuple):
    """How :func:`fit_gram_problems` reads the training kernel ``K``.

    Attributes
    ----------
    block : callable ``(rows, out) -> out``
        Writes ``K[rows][:, rows]`` into the float64 C-ordered ``out``, symmetric bit for
        bit.
    cross : callable ``(rows, cols) -> ndarray``
        ``K[rows][:, cols]``.
    """

    block: object
    cross: object


def problem_kernels(op):
    """The :class:`ProblemKernels` of the training operator ``op``: the blocks of its
    stored Gram (float32 or float64; a block is made symmetric bit for bit,
    :func:`~kernfw.operators.gram.mirror_lower`, as a Gram computed by BLAS products is
    symmetric only up to rounding), or the kernel of a
    :class:`~kernfw.operators.KernelFunction` evaluated on the problem's points; None for
    any other operator."""
    K = op.stored_gram()
    if type(K) is np.ndarray and K.dtype in (np.float32, np.float64):
        K = K if K.flags.c_contiguous else np.ascontiguousarray(K.T)  # (Kᵀ = K, rounded)
        return ProblemKernels(
            lambda rows, out: mirror_lower(take_block(K, rows, rows, out=out)),
            lambda rows, cols: take_block(K, rows, cols),
        )
    if type(op) is KernelFunction:
        return ProblemKernels(
            lambda rows, out: _computed_block(op, rows, out),
            lambda rows, cols: op.cross(op.X[rows], cols),
        )
    return None


def _computed_block(op, rows, out):
    """``K[rows][:, rows]`` of the on-the-fly kernel ``op`` written into ``out``: the Gram
    of those points as a fit would store it (:meth:`~kernfw.operators.Gram.from_kernel`:
    the RBF kernel by the compiled float32 tiles), made symmetric bit for bit."""
    out[...] = Gram.from_kernel(op.kernel, op.X[rows], op.dtype).stored_gram()
    return mirror_lower(out)


class GramProblems(NamedTuple):
    """What :func:`fit_gram_problems` returns.

    Attributes
    ----------
    fits : list of (ndarray, ndarray, float, FWResult)
        ``(support, coef, b, result)`` of each problem on all its points, in the problem's
        indices (as :func:`kernfw.estimators.l2svc._fit_binary`'s).
    heldout : ndarray of shape (n, n_problems) or None
        ``h_p(x_i)`` of the fold model that did not train on point ``i`` (None: no folds).
    fold_rho : ndarray of shape (n_folds, n_problems) or None
        The margins ``ρ`` of the fold models (1 where a fold's problem had one class).
    """

    fits: list
    heldout: np.ndarray
    fold_rho: np.ndarray


def _result(fit, y, seconds):
    """The :class:`~kernfw.fw.FWResult` of a :class:`GramFit` (dual ``−ρ``, primal
    ``−ρ + gap``; math.md §2.1) with its model and a one-row history."""
    support = np.flatnonzero(fit.alpha)
    dual = -fit.rho
    solution = {
        "alpha": fit.alpha,
        "support": support,
        "coef": fit.alpha[support] * y[support],
        "b": float(fit.alpha @ y),
        "rho": fit.rho,
    }
    row = {"iteration": fit.n_iter, "time": seconds, "primal": dual + fit.gap, "dual": dual}
    history = {k: np.array([v], dtype=float) for k, v in {**row, "gap": fit.gap}.items()}
    status = "converged" if fit.converged else "max_iter"
    return FWResult(solution, dual + fit.gap, dual, fit.gap, fit.n_iter, fit.converged,
                    status, history, seconds)  # fmt: skip


def _fold_start(alpha, rows):
    """The full solution ``α`` restricted to ``rows`` and renormalized onto the simplex
    (uniform when it has no mass there)."""
    start = alpha[rows]
    total = start.sum()
    return start / total if total > 0 else np.full(rows.size, 1.0 / rows.size)


def fit_gram_problems(kernels, labels, problems, C, tol, max_iter, folds=None):
    """Solve the binary problems on their kernel blocks, and those of the folds.

    Parameters
    ----------
    kernels : ProblemKernels
        The training kernel (:func:`problem_kernels`).
    labels : ndarray of int, shape (n,)
        The class index of each training point.
    problems : list of BinaryProblem
        The fit's problems (``index`` into the ``n`` points, ``y`` in {−1, +1}).
    C, tol, max_iter
        As :func:`~kernfw.solvers.simplex_qp.solve_l2svm_gram`.
    folds : list of (ndarray, ndarray) or None
        The calibration folds' ``(train, val)`` rows (None: the full fits only).

    Returns
    -------
    GramProblems
    """
    folds, n = folds or [], labels.size
    size = max(p.index.size for p in problems)
    block, sub = np.empty(size * size), np.empty(size * size)
    fold_models = [_FoldModels(train, n, len(problems)) for train, _ in folds]
    fits = []
    for q, p in enumerate(problems):
        m = p.index.size
        K_p = kernels.block(p.index, block[: m * m].reshape(m, m))
        begin = time.perf_counter()
        fit = solve_l2svm_gram(K_p, p.y, C, tol=tol, max_iter=max_iter)
        result = _result(fit, p.y, time.perf_counter() - begin)
        sol = result.solution
        fits.append((sol["support"], sol["coef"], sol["b"], result))
        for model in fold_models:
            model.fit(q, p, K_p, fit.alpha, sub, (C, tol, max_iter))
    if not folds:
        return GramProblems(fits, None, None)
    heldout = np.zeros((n, len(problems)))
    members = _class_problems(labels, problems)
    for model, (_, val) in zip(fold_models, folds):
        heldout[val] = model.decision(kernels.cross, val, labels, members)
    return GramProblems(fits, heldout, np.array([model.rho for model in fold_models]))


class _FoldModels:
    """The binary models of one calibration fold (training rows ``train`` of ``n``):
    their coefficients on all ``n`` points (zero off the fold's support), biases and
    margins, filled problem by problem (:meth:`fit`)."""

    def __init__(self, train, n, n_problems):
        self.in_train = np.zeros(n, dtype=bool)
        self.in_train[train] = True
        self.coef = np.zeros((n, n_problems))
        self.bias = np.zeros(n_problems)
        self.rho = np.ones(n_problems)

    def fit(self, q, p, K_p, alpha, sub, options):
        """Fit problem ``q`` (``p``) on the fold's rows of its block ``K_p`` from the full
        solution ``α``; a problem left with one class decides for it (``ρ = 1``)."""
        rows = np.flatnonzero(self.in_train[p.index])  # the fold's rows of K_p
        y = p.y[rows]
        if rows.size == 0 or np.all(y == y[0]):
            self.bias[q] = np.sign(y.sum()) if rows.size else 0.0
            return
        C, tol, max_iter = options
        k = rows.size
        K_f = take_block(K_p, rows, rows, out=sub[: k * k].reshape(k, k))
        fit = solve_l2svm_gram(K_f, y, C, _fold_start(alpha, rows), tol=tol, max_iter=max_iter)
        self.coef[p.index[rows], q] = fit.alpha * y  # coef = α ⊙ y (math.md §2.1)
        self.bias[q] = fit.alpha @ y
        self.rho[q] = fit.rho

    def decision(self, cross, val, labels, members):
        """``h_q(x_i) = Σ_j coef_jq k(x_j, x_i) + b_q`` on the held-out points ``val``: one
        kernel block against the support, ordered by class, whose columns of class ``c``
        multiply only the coefficients of the problems ``members[c]`` that class enters."""
        support = np.flatnonzero(np.any(self.coef != 0, axis=1))
        support = support[np.argsort(labels[support], kind="stable")]
        K = np.asarray(cross(val, support), dtype=np.float64)
        bounds = np.searchsorted(labels[support], np.arange(len(members) + 1))
        out = np.tile(self.bias, (val.size, 1))
        for c, problems in enumerate(members):
            lo, hi = bounds[c], bounds[c + 1]
            if hi > lo:
                out[:, problems] += K[:, lo:hi] @ self.coef[support[lo:hi]][:, problems]
        return out


def _class_problems(labels, problems):
    """Per class, the indices of the problems its points enter."""
    enters = np.zeros((labels.max() + 1, len(problems)), dtype=bool)
    for q, p in enumerate(problems):
        enters[np.unique(labels[p.index]), q] = True
    return [np.flatnonzero(row) for row in enters]
