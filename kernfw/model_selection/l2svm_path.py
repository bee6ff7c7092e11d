"""The L2SVC path of one fold through the solver's warm-start hook.

:class:`~kernfw.L2SVC` has no ``warm_start``; its solvers have a start ``alpha0`` on
the simplex.  Along ``C`` the scaled start of [Chu2015] is, on the simplex, the
previous solution itself (math.md §7.1), so each binary problem of the fold
(one-vs-one, one-vs-rest or DDAG, as the estimator splits it) follows ``C`` upwards
from its solution at the previous ``C``, in one loop (:func:`follow_c`).

On a shared kernel stored as a float32 or float64 Gram, symmetric bit for bit (what the
search builds for the RBF kernel, :class:`kernfw.operators.rbf_family.RBFFamily`),
with ``solver="auto"``, each problem's kernel is its principal submatrix, taken once
for the whole path, and each fit is one compiled call of pairwise FW
(:func:`~kernfw.solvers.simplex_qp.solve_l2svm_gram`): no Python object per
iteration or certificate, which for a one-vs-one fit of 10 classes (45 small
problems) is most of the time.  The first ``C`` of a path starts from the uniform
``α = 1/n`` (math.md §2.6).  On any other operator or solver each fit is
:func:`~kernfw.solvers.simplex_qp.solve_l2svm_screened` on the problem's rows of the
operator: the points the previous solution proves are not support vectors at the new
``C`` are left out of the fit, and the certificate is taken on the full problem (safe
sample screening, math.md §2.17).

The fold's models are scored on rows of the search's data through the shared kernel
(:class:`RowModel`): the test rows' kernel values against the support vectors are
read from it, not recomputed.
"""

import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets

from ..estimators._base import solver_seed
from ..estimators._multiclass_decomposition import binary_problems, combine_decisions
from ..estimators.l2svc import L2SVC, l2svm_fit_solver
from ..operators.gram import block_times, index_runs, take_block
from ..solvers.simplex_qp import (
    GramFit,
    PathStart,
    solve_l2svm_gram_paths,
    solve_l2svm_screened,
)

__all__ = ["applies", "RowModel", "follow_c", "fit_l2svc_path"]

#: on a stored Gram, the problems' points are read from it in place when their runs of
#: consecutive indices are this long on average, else from a copy of the fold's block
LONG_RUN = 16


#: the L2SVC parameters this path honours (the kernel's through the shared operator); a
#: path whose estimator sets any other parameter away from its default (probabilities,
#: another decision shape, a parameter added later) is fitted by the estimator itself
HONOURED = frozenset(
    {"C", "kernel", "gamma", "degree", "coef0", "n_components", "solver", "tol", "max_iter",
     "cache_size", "multi_class", "n_jobs", "verbose", "random_state"}
)  # fmt: skip


def applies(estimator, path, shared, fit_params):
    """Whether a path of ``estimator`` runs here: an L2SVC on the local backend with an
    exact kernel shared by the search, ``C`` as the path, no fit parameters, and every
    parameter outside :data:`HONOURED` at its default."""
    if not (type(estimator) is L2SVC and shared and path == "C" and not fit_params):
        return False
    params, defaults = estimator.get_params(deep=False), L2SVC().get_params(deep=False)
    others = {k for k in params if k not in HONOURED} | {"backend", "approx"}
    try:
        return all(params[k] == defaults[k] for k in others)
    except (KeyError, ValueError, TypeError):  # an unknown or array-valued parameter
        return False


class RowModel(ClassifierMixin, BaseEstimator):
    """The L2-SVMs of one fold, predicting rows of the search's data given by index.

    ``X`` of :meth:`decision_function` and :meth:`predict` is a column of row indices
    into the data the shared kernel ``operator`` was computed on; the decision is
    L2SVC's, ``h_p(x) = Σ_i dual_coef_[p, i] (k(x_i, x) + 1)`` combined over the
    problems as the estimator combines them.  ``blocks`` (``(lo, hi, problems)``: the
    columns ``lo:hi`` enter only those problems, as a class's training rows enter only
    its one-vs-one problems) restricts the products to the blocks of ``dual_coef`` that
    may be nonzero; None multiplies all of it.
    """

    def __init__(self, operator=None, classes=None, problems=None, support=None,
                 dual_coef=None, multi_class="ovo", blocks=None):  # fmt: skip
        self.operator = operator
        self.classes = classes
        self.problems = problems
        self.support = support
        self.dual_coef = dual_coef
        self.multi_class = multi_class
        self.blocks = blocks

    @property
    def classes_(self):
        return self.classes

    def decision_function(self, X):
        rows = np.asarray(X, dtype=np.intp).ravel()
        known = getattr(self, "known_", None)  # the scores computed with the whole path's
        if known is not None and known[0].shape == rows.shape and np.array_equal(known[0], rows):
            return known[1]
        K = (
            self.operator.block(rows, self.support)
            if self.support.size
            else np.zeros((rows.size, 0))
        )
        coef = self.dual_coef
        decision = np.tile(coef.sum(axis=1), (rows.size, 1))  # Σ coef (k + 1): the "+ 1"
        blocks = [(0, coef.shape[1], slice(None))] if self.blocks is None else self.blocks
        for lo, hi, problems in blocks:
            decision[:, problems] += K[:, lo:hi] @ coef[problems, lo:hi].T
        scores = combine_decisions(decision, self.problems, self.classes.size, self.multi_class)
        return scores

    def predict(self, X):
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes[(scores > 0).astype(int)]
        return self.classes[np.argmax(scores, axis=1)]

    def score(self, X, y, sample_weight=None):
        """The accuracy on the rows ``X`` (the search's default score): the fraction of
        ``y`` predicted, as ``accuracy_score`` computes it for the labels the fold's
        targets already passed, without its checks (once per fit of the search)."""
        if sample_weight is not None:
            return super().score(X, y, sample_weight=sample_weight)
        return float(np.mean(self.predict(X) == np.asarray(y).ravel()))


class _FoldBlocks:
    """The shared operator's blocks ``K[rows, columns]`` for the models of one fold, each
    computed once: the models of a path (one per ``C``) score the same rows (test, and
    train with ``return_train_score``) against the same columns (the fold's training
    rows).  ``rows`` are rows of the search's data, ``columns`` indices of the operator,
    whose index of data row ``i`` is ``position[i]`` (None: ``i``)."""

    def __init__(self, operator, position=None):
        self.operator = operator
        self.position = position
        self._blocks = []

    def block(self, rows, cols):
        for r, c, K in self._blocks:
            if c is cols and r.shape == rows.shape and np.array_equal(r, rows):
                return K
        at = rows if self.position is None else self.position[rows]
        K = self.operator.block(at, cols)
        self._blocks.append((rows, cols, K))
        return K


def _layout(train, y_enc, problems):
    """``(columns, position, blocks)`` of the fold's models: the training rows ordered by
    class, the column of each training position, and per class its columns ``lo:hi``
    with the problems that class enters (:class:`RowModel`'s ``blocks``)."""
    order = np.argsort(y_enc, kind="stable")
    position = np.empty(order.size, dtype=np.intp)
    position[order] = np.arange(order.size)
    counts = np.bincount(y_enc)
    bounds = np.r_[0, np.cumsum(counts)]
    members = [set(np.unique(y_enc[p.index]).tolist()) for p in problems]
    blocks = [
        (int(bounds[c]), int(bounds[c + 1]), np.array([k for k, m in enumerate(members) if c in m]))
        for c in range(counts.size)
    ]
    return train[order], position, blocks


def _model(operator, layout, classes, problems, fits, multi_class):
    """The :class:`RowModel` of the fold's solutions (:class:`GramFit`, one per problem):
    one column per training row (zero where ``α_i = 0``), in the fold's layout."""
    columns, position, blocks = layout
    dual_coef = np.zeros((len(problems), columns.size))
    for k, (p, f) in enumerate(zip(problems, fits)):
        dual_coef[k, position[p.index]] = f.alpha * p.y  # coef = α ⊙ y
    pairs = [p.classes for p in problems]
    return RowModel(operator, classes, pairs, columns, dual_coef, multi_class, blocks)


def _certificate(fits):
    """The fit's certificate: the sum of its problems' gaps certifies the sum of their
    objectives."""
    return {
        "duality_gap": float(sum(f.gap for f in fits)),
        "n_iter": float(sum(f.n_iter for f in fits)),
        "converged": float(all(f.converged for f in fits)),
    }


def follow_c(solve, Cs):
    """The one loop along ``C`` of one binary problem: each fit started from the
    solution at the previous ``C`` (math.md §7.1), the first from ``solve``'s cold start.

    Parameters
    ----------
    solve : callable ``(C, start) -> (GramFit, start)``
        The problem's solver: the fit at ``C`` from ``start`` (None: its cold start) and
        the start it gives the next ``C``.
    Cs : sequence of float
        Increasing ``C``.

    Returns
    -------
    list of (GramFit, float)
        Each fit and its seconds.
    """
    fits, start = [], None
    for C in Cs:
        begin = time.perf_counter()
        fit, start = solve(C, start)
        fits.append((fit, time.perf_counter() - begin))
    return fits


def _stored_gram(operator):
    """The operator's matrix when it stores a float32 or float64 Gram, C-ordered and
    symmetric bit for bit (what :func:`~kernfw.solvers.simplex_qp.solve_l2svm_gram_paths`
    takes), else None."""
    K = operator.stored_gram(by_columns=True)
    if type(K) is not np.ndarray or K.dtype not in (np.float32, np.float64):
        return None
    return K if K.flags.c_contiguous else None


def _gram_layout(K, index, y_enc, n_classes, multi_class):
    """The fold's training rows for :func:`_gram_paths`: ``(columns, classes, problems,
    points, source)``.

    ``columns`` are the rows' indices of ``K`` (``index``) ordered by class, then by
    index, ``classes`` their class codes; ``problems`` the binary problems on that order;
    ``points`` each problem's indices of ``source``: ``K`` itself when the problems' points lie in long runs of
    consecutive indices (a Gram ordered by class), else the fold's block
    ``K[columns][:, columns]``, copied once (the runs are then a class's rows)."""
    order = np.lexsort((index, y_enc))
    columns, y_sorted = index[order], y_enc[order]
    problems = binary_problems(y_sorted, n_classes, multi_class)
    points = [columns[p.index] for p in problems]
    sizes = [p.index.size for p in problems]
    runs, _ = index_runs(np.concatenate(points), np.r_[0, np.cumsum(sizes)])
    if runs.shape[0] * LONG_RUN > sum(sizes):
        block = take_block(K, columns, columns)
        return columns, y_sorted, problems, [p.index for p in problems], block
    return columns, y_sorted, problems, points, K


def _gram_paths(K, index, y_enc, n_classes, Cs, params, start=None):
    """The fold's binary problems along ``Cs`` in one compiled call
    (:func:`solve_l2svm_gram_paths`) on the stored Gram ``K`` (its rows ``index``):
    ``(columns, classes, problems, fits, seconds)`` (:func:`_gram_layout`), ``fits`` a
    :class:`GramPaths`.  ``start``: per problem, a candidate start of its first fit (used
    when every size matches)."""
    columns, classes, problems, points, source = _gram_layout(
        K, index, y_enc, n_classes, params["multi_class"]
    )
    if start is not None and [np.size(a) for a in start] != [p.index.size for p in problems]:
        start = None
    begin = time.perf_counter()
    fits = solve_l2svm_gram_paths(
        source, points, [p.y for p in problems], Cs, tol=params["tol"],
        max_iter=params["max_iter"], starts=start,
    )  # fmt: skip
    return columns, classes, problems, fits, time.perf_counter() - begin


def _coefficients(layout, fits):
    """``dual_coef = α ⊙ y`` of every problem at every ``C`` of the path, shape
    (c, P, columns): zero where a column is not a problem's point."""
    columns, _, problems = layout
    coef = np.zeros((fits.gap.shape[0], len(problems), columns.size))
    for k, p in enumerate(problems):
        coef[:, k, p.index] = fits.alpha[k] * p.y
    return coef


def _class_blocks(layout, n_classes):
    """``(lo, hi, problems)`` per class: its columns ``lo:hi`` and the problems they
    enter (:class:`RowModel`'s ``blocks``)."""
    _, codes, problems = layout
    bounds = np.searchsorted(codes, np.arange(n_classes + 1))
    return [
        (int(bounds[c]), int(bounds[c + 1]),
         np.array([k for k, p in enumerate(problems) if len(p.classes) == 1 or c in p.classes]))
        for c in range(n_classes)
    ]  # fmt: skip


def _path_scores(K, test_index, layout, coef, blocks, multi_class):
    """The decisions ``h_p`` on the test rows of every problem at every ``C`` of the
    path (``coef``: :func:`_coefficients`), combined into scores: shape (c, n_test) or
    (c, n_test, n_classes).  One product per class block of the columns (``blocks``,
    :func:`_class_blocks`: a class's columns enter only its problems), read off ``K`` in
    place (:func:`~kernfw.operators.gram.block_times`: the block of the test rows is
    never formed)."""
    columns, _, problems = layout
    decision = np.repeat(coef.sum(axis=2)[:, None, :], test_index.size, axis=1)  # the "+ 1"
    for lo, hi, ks in blocks:
        W = coef[:, ks, lo:hi].reshape(-1, hi - lo)  # (c·|ks|, hi − lo)
        part = block_times(K, test_index, columns[lo:hi], W)
        part = part.reshape(test_index.size, coef.shape[0], len(ks))
        decision[:, :, ks] += part.transpose(1, 0, 2)
    flat = decision.reshape(-1, len(problems))
    scores = combine_decisions(flat, [p.classes for p in problems], len(blocks), multi_class)
    return scores.reshape(coef.shape[0], test_index.size, *scores.shape[1:])


def _operator_solvers(operator, train, problems, params):
    """Per problem, its fits by :func:`solve_l2svm_screened` on its rows of the operator,
    started (and screened) from the :class:`PathStart` of the previous ``C``."""
    fold = operator.subset(train)
    method = l2svm_fit_solver(params["solver"], "local", fold, None, None)
    options = {"solver": method, "tol": params["tol"], "max_iter": params["max_iter"],
               "random_state": solver_seed(params["random_state"])}  # fmt: skip

    def solver(op, y):
        def solve(C, start):
            res = solve_l2svm_screened(op, y, C, start=start, **options)
            alpha = np.asarray(res.solution["alpha"], dtype=np.float64)
            fit = GramFit(alpha, float(res.gap), float(res.solution["rho"]), int(res.n_iter),
                          bool(res.converged))  # fmt: skip
            return fit, PathStart.of(res, C)

        return solve

    ops = [fold if p.index.size == fold.n else fold.subset(p.index) for p in problems]
    return [solver(op, p.y) for op, p in zip(ops, problems)]


def fit_l2svc_path(estimator, operator, train, y, steps, test=None, position=None, start=None,
                   first=None):  # fmt: skip
    """Fit the binary problems of one fold along ``C``, each warm-started.

    Parameters
    ----------
    estimator : L2SVC
        The path's parameters (``C`` is set per step).
    operator : KernelOperator
        The shared kernel on all rows of the search's data.
    train : ndarray of int
        The fold's training rows.
    y : ndarray
        All targets.
    steps : list of (int, dict)
        ``(candidate index, {"C": value})`` in path order (increasing ``C``).
    test : ndarray of int or None
        The fold's test rows: on a stored Gram, their decisions at every ``C`` are
        computed with the path (the models answer them without a product).
    position : ndarray of int or None
        The operator's index of each data row (the search may order the rows of the
        shared kernel by class: :func:`kernfw.model_selection.evaluate.evaluate_grid`);
        None: the data's order.
    start : list of ndarray or None
        On a stored Gram, per binary problem of the fold, a candidate start of its first
        fit: its solution at the same ``C`` for a neighbouring ``γ`` (math.md §7.2), taken
        when its objective is lower than the uniform point's.
    first : dict or None
        On a stored Gram, receives ``"alpha"``: each problem's solution at the first ``C``
        (the ``start`` of a neighbouring path on the same fold).

    Yields
    ------
    (int, RowModel, float, dict)
        The candidate index, its fold model, its fit time and certificate.
    """
    auto = estimator.get_params(deep=False)["solver"] == "auto"
    K = _stored_gram(operator) if auto else None
    if K is not None:
        rows = (train, test, position)
        yield from _gram_path(estimator, operator, K, rows, y, steps, start, first)
        return
    params = estimator.get_params(deep=False)
    check_classification_targets(y[train])
    classes, y_enc = np.unique(y[train], return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"L2SVC needs at least 2 classes; got 1 class ({classes[0]!r})")
    problems = binary_problems(y_enc, classes.size, params["multi_class"])
    solvers = _operator_solvers(operator, train, problems, params)
    paths = [follow_c(solve, [step["C"] for _, step in steps]) for solve in solvers]
    layout, blocks = _layout(train, y_enc, problems), _FoldBlocks(operator)
    for k, (index, _) in enumerate(steps):
        fits = [path[k][0] for path in paths]
        fit_time = sum(path[k][1] for path in paths)
        model = _model(blocks, layout, classes, problems, fits, params["multi_class"])
        yield index, model, fit_time, _certificate(fits)


def _gram_path(estimator, operator, K, rows, y, steps, start=None, first=None):
    """:func:`fit_l2svc_path` on the stored Gram ``K`` of ``operator``: every problem
    and ``C`` in one compiled call (:func:`_gram_paths`), the test rows' scores of every
    ``C`` in a few products (:func:`_path_scores`).  A fit's time is the call's, shared
    among the ``C`` in proportion to their iterations."""
    train, test, position = rows
    params = estimator.get_params(deep=False)
    check_classification_targets(y[train])
    classes, y_enc = np.unique(y[train], return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"L2SVC needs at least 2 classes; got 1 class ({classes[0]!r})")
    index = train if position is None else position[train]
    Cs = [step["C"] for _, step in steps]
    columns, codes, problems, fits, seconds = _gram_paths(
        K, index, y_enc, classes.size, Cs, params, start
    )
    if first is not None:
        first["alpha"] = [alpha[0] for alpha in fits.alpha]
    layout = (columns, codes, problems)
    n_iter = fits.n_iter.sum(axis=1)
    share = n_iter / n_iter.sum() if n_iter.sum() else np.full(len(Cs), 1.0 / len(Cs))
    coef, scores = _coefficients(layout, fits), None
    blocks, pairs = _class_blocks(layout, classes.size), [p.classes for p in problems]
    if test is not None:
        test_index = test if position is None else position[test]
        scores = _path_scores(K, test_index, layout, coef, blocks, params["multi_class"])
    rows = _FoldBlocks(operator, position)
    for k, (index, _) in enumerate(steps):
        model = RowModel(rows, classes, pairs, columns, coef[k], params["multi_class"], blocks)
        if scores is not None:
            model.known_ = (test, scores[k])
        cert = {"duality_gap": float(fits.gap[k].sum()), "n_iter": float(n_iter[k]),
                "converged": float(fits.converged[k].all())}  # fmt: skip
        yield index, model, float(seconds * share[k]), cert
