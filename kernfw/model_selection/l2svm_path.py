"""The L2SVC path of one fold through the solver's warm-start hook.

:class:`~kernfw.L2SVC` has no ``warm_start``; its solver has:
:func:`~kernfw.solvers.simplex_qp.solve_l2svm` takes a start ``alpha0`` on the
simplex.  Along ``C`` the scaled start of [Chu2015] is, on the simplex, the previous
solution itself (math.md §7.1), so each binary problem of the fold (one-vs-one,
one-vs-rest or DDAG, as the estimator splits it) starts from its solution at the
previous ``C``, with the points that solution proves are not support vectors at the
new ``C`` left out of the fit and the certificate taken on the full problem (safe sample
screening, math.md §2.17).  The fold's models are scored on rows of the search's data through
the shared kernel (:class:`RowModel`): the test rows' kernel values against the
support vectors are read from it, not recomputed.
"""

import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets

from ..estimators._base import solver_seed
from ..estimators._multiclass_decomposition import binary_problems, combine_decisions
from ..estimators.l2svc import L2SVC, l2svm_fit_solver
from ..solvers.simplex_qp import PathStart, solve_l2svm_screened

__all__ = ["applies", "RowModel", "fit_l2svc_path"]


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
    problems as the estimator combines them.
    """

    def __init__(self, operator=None, classes=None, problems=None, support=None,
                 dual_coef=None, multi_class="ovo"):  # fmt: skip
        self.operator = operator
        self.classes = classes
        self.problems = problems
        self.support = support
        self.dual_coef = dual_coef
        self.multi_class = multi_class

    @property
    def classes_(self):
        return self.classes

    def decision_function(self, X):
        rows = np.asarray(X, dtype=np.intp).ravel()
        K = (
            self.operator.block(rows, self.support)
            if self.support.size
            else np.zeros((rows.size, 0))
        )
        decision = (K + 1.0) @ self.dual_coef.T
        scores = combine_decisions(decision, self.problems, self.classes.size, self.multi_class)
        return scores

    def predict(self, X):
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes[(scores > 0).astype(int)]
        return self.classes[np.argmax(scores, axis=1)]


def _model(operator, train, classes, problems, results, multi_class):
    """The :class:`RowModel` of the fold's solutions (support in the search's rows)."""
    supports = [train[p.index[r.solution["support"]]] for p, r in zip(problems, results)]
    support = np.unique(np.concatenate(supports)) if supports else np.zeros(0, np.intp)
    dual_coef = np.zeros((len(problems), support.size))
    for k, (sup, r) in enumerate(zip(supports, results)):
        dual_coef[k, np.searchsorted(support, sup)] = r.solution["coef"]
    pairs = [p.classes for p in problems]
    return RowModel(operator, classes, pairs, support, dual_coef, multi_class)


def _certificate(results):
    return {
        "duality_gap": float(sum(r.gap for r in results)),
        "n_iter": float(sum(r.n_iter for r in results)),
        "converged": float(all(r.converged for r in results)),
    }


def fit_l2svc_path(estimator, operator, train, y, steps):
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

    Yields
    ------
    (int, RowModel, float, dict)
        The candidate index, its fold model, its fit time and certificate.
    """
    params = estimator.get_params(deep=False)
    check_classification_targets(y[train])
    classes, y_enc = np.unique(y[train], return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"L2SVC needs at least 2 classes; got 1 class ({classes[0]!r})")
    problems = binary_problems(y_enc, classes.size, params["multi_class"])
    fold = operator.subset(train)
    ops = [fold if p.index.size == fold.n else fold.subset(p.index) for p in problems]
    solver = l2svm_fit_solver(params["solver"], "local", fold, None, None)
    seed = solver_seed(params["random_state"])
    starts = [None] * len(problems)
    for index, step in steps:
        start = time.perf_counter()
        results = [
            solve_l2svm_screened(
                op,
                p.y,
                step["C"],
                start=a0,
                solver=solver,
                tol=params["tol"],
                max_iter=params["max_iter"],
                random_state=seed,
            )  # fmt: skip
            for op, p, a0 in zip(ops, problems, starts)
        ]
        fit_time = time.perf_counter() - start
        starts = [PathStart.of(r, step["C"]) for r in results]
        model = _model(operator, train, classes, problems, results, params["multi_class"])
        yield index, model, fit_time, _certificate(results)
