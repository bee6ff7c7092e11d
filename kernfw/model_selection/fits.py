"""The fits of one path on one fold (runs in a worker).

One estimator is refitted value after value of the path parameter on the fold's
training rows, warm-starting from the previous dual solution when it has
``warm_start`` (math.md §7), with the kernel operator the search shares between
its fits (:mod:`kernfw.sweeps.shared`): the operator computed once on all rows,
restricted to the fold by :meth:`~kernfw.operators.KernelOperator.subset`.  Each fit
gives the entry of scikit-learn's ``_fit_and_score`` (scores, times, error) and the
fit's certificate (gap, iterations, whether it converged).
"""

import contextlib
import math
import time
import traceback

import numpy as np
from sklearn.base import clone
from sklearn.utils.metaestimators import _safe_split
from sklearn.utils.validation import _check_method_params
from threadpoolctl import threadpool_limits

from .l2svm_path import fit_l2svc_path

__all__ = ["fit_path", "CERTIFICATE_KEYS", "certificate"]

#: the certificate of each fit that the search adds to ``cv_results_`` (per split)
CERTIFICATE_KEYS = ("duality_gap", "n_iter", "converged")


def certificate(estimator):
    """``{"duality_gap", "n_iter", "converged"}`` of a fitted estimator (NaN when it
    certifies nothing).  Several sub-problems (one-vs-one L2SVC) are summed: the sum
    of their objectives is certified by the sum of their gaps; ``converged`` is
    whether all of them converged."""

    def total(name):
        value = getattr(estimator, name, None)
        try:
            return math.nan if value is None else float(np.sum(value))
        except (TypeError, ValueError):
            return math.nan

    converged = getattr(estimator, "converged_", None)
    return {
        "duality_gap": total("duality_gap_"),
        "n_iter": total("n_iter_"),
        "converged": math.nan if converged is None else float(np.all(converged)),
    }


def _failed(error_score, scorer, return_train_score, message):
    """The entry of a failed fit (scores ``error_score``)."""
    entry = {
        "test_scores": error_score,
        "fit_time": 0.0,
        "score_time": 0.0,
        "fit_error": message,
    }
    if return_train_score:
        entry["train_scores"] = error_score
    return entry


def _score(scorer, estimator, X, y):
    """The score(s) of ``estimator`` on ``(X, y)``: a float, or a dict of floats."""
    scores = scorer(estimator, X, y)
    if isinstance(scores, dict):
        return {name: float(value) for name, value in scores.items()}
    return float(scores)


def _fit_one(estimator, data, fit_params, scorer, return_train_score):
    """Fit and score one candidate on one fold; return its entry."""
    X_train, y_train, X_test, y_test = data
    start = time.perf_counter()
    estimator.fit(X_train, y_train, **fit_params)
    fit_time = time.perf_counter() - start
    entry = {"test_scores": _score(scorer, estimator, X_test, y_test)}
    score_time = time.perf_counter() - start - fit_time
    if return_train_score:
        entry["train_scores"] = _score(scorer, estimator, X_train, y_train)
    entry.update(fit_time=fit_time, score_time=score_time, fit_error=None)
    return entry


def _one_column_as_1d(data):
    """The fold's targets of shape (n, 1) as shape (n,) (a ready operator's fit takes
    ``y`` as it is; the search's refit on features warns about the column)."""
    X_train, y_train, X_test, y_test = data
    if np.ndim(y_train) == 2 and np.shape(y_train)[1] == 1:
        return X_train, np.ravel(y_train), X_test, np.ravel(y_test)
    return data


def _scored(model, rows, y, scorer, return_train_score, train):
    """The entry of a fold model that predicts rows by index (:mod:`.l2svm_path`)."""
    start = time.perf_counter()
    entry = {"test_scores": _score(scorer, model, rows[:, None], y[rows])}
    entry["score_time"] = time.perf_counter() - start
    if return_train_score:
        entry["train_scores"] = _score(scorer, model, train[:, None], y[train])
    return entry


def _l2svc_rows(task, operator, y, scorer, options):
    """The rows of an L2SVC path fitted through the solver's warm starts (after a
    failure the path's remaining candidates fail too), and the problems' solutions at
    the path's first ``C`` (None when not known): ``(rows, first)``."""
    y = np.ravel(y) if np.ndim(y) == 2 and np.shape(y)[1] == 1 else np.asarray(y)
    first = {}
    fits = fit_l2svc_path(task["estimator"], operator, task["train"], y, task["steps"],
                          test=task["test"], position=task.get("position"),
                          start=task.get("start"), first=first)  # fmt: skip
    rows, done = [], set()
    try:
        for index, model, fit_time, cert in fits:
            entry = _scored(
                model, task["test"], y, scorer, options["return_train_score"], task["train"]
            )
            entry.update(fit_time=fit_time, fit_error=None)
            rows.append((index, task["fold"], entry, cert))
            done.add(index)
    except Exception:  # the remaining candidates of the path get error_score
        if options["error_score"] == "raise":
            raise
        message = traceback.format_exc()
        for index, _ in task["steps"]:
            if index not in done:
                entry = _failed(options["error_score"], scorer, options["return_train_score"],
                                message)  # fmt: skip
                rows.append((index, task["fold"], entry, certificate(None)))
    return rows, first.get("alpha")


def fit_path(task, X, y, fit_params, scorer, options, shell, *grams):
    """Fit the candidates of one path on one fold, in path order.

    With ``task["starts"]`` (a :class:`~kernfw.model_selection.starts.PathStarts` shared
    by the threads of a search), the path's first fit may start from the solution of the
    path ``task["path_no"] − 1`` on the fold, and this path's solutions are handed on.

    Parameters
    ----------
    task : dict
        ``estimator`` (the estimator with the path's shared parameters, and without
        its kernel when ``shell`` is given), ``path`` (the path parameter or None),
        ``steps`` (``(candidate index, params)`` in path order), ``fold``, ``train``
        and ``test`` (row indices), ``splitter`` (the estimator whose tags say how
        to cut ``X``: rows, or rows and columns of a precomputed Gram), ``l2svc``
        (fit an L2SVC path through the solver's warm starts, :mod:`.l2svm_path`), and
        optionally ``starts`` and ``path_no`` (above).
    X, y
        All the data.
    fit_params : dict
        Parameters of ``fit``; arrays of one value per row are cut to the fold.
    scorer : callable
        ``scorer(estimator, X, y)``: a score or a dict of scores.
    options : dict
        ``warm`` (refit with ``warm_start=True``), ``return_train_score``,
        ``error_score`` ("raise" or a number) and ``blas_threads`` (None: no limit set).
    shell : KernelOperator or None
        The shared operator without its matrices, which are ``grams``
        (memory-mapped for process workers; :mod:`kernfw.sweeps.shared`).

    Returns
    -------
    list of (int, int, dict, dict)
        ``(candidate index, fold, entry, certificate)`` per step.
    """
    starts = task.get("starts")
    if starts is None:
        return _path_rows(task, X, y, fit_params, scorer, options, shell, *grams)[0]
    path_no, fold, first = task["path_no"], task["fold"], None
    try:  # the next path waits for what this one hands on, even after an error
        task = {**task, "start": starts.get(path_no, fold)}
        rows, first = _path_rows(task, X, y, fit_params, scorer, options, shell, *grams)
    finally:
        starts.put(path_no, fold, first)
    return rows


def _path_rows(task, X, y, fit_params, scorer, options, shell, *grams):
    """:func:`fit_path`'s rows, and the binary problems' solutions at the path's first
    ``C`` when the fits ran on a stored Gram (None otherwise)."""
    train, test = task["train"], task["test"]
    blas = options["blas_threads"]  # threadpoolctl reads the process's libraries per call
    limits = contextlib.nullcontext() if blas is None else threadpool_limits(blas, "blas")
    with limits:
        X_train, y_train = _safe_split(task["splitter"], X, y, train)
        X_test, y_test = _safe_split(task["splitter"], X, y, test, train)
        data = (X_train, y_train, X_test, y_test)
        fold_params = _check_method_params(X, params=fit_params, indices=train)
        operator = None
        if shell is not None and task.get("l2svc"):
            return _l2svc_rows(task, shell.attach_arrays(grams), y, scorer, options)
        if shell is not None:
            operator = shell.attach_arrays(grams).subset(train)
            data = _one_column_as_1d(data)  # as the estimator's validation of features does

        def fresh():
            est = clone(task["estimator"])
            if operator is not None:
                est.set_params(kernel=operator)
            if options["warm"]:
                est.set_params(warm_start=True)
            return est

        estimator, rows = fresh(), []
        for index, params in task["steps"]:
            try:
                estimator.set_params(**params)
                entry = _fit_one(
                    estimator, data, fold_params, scorer, options["return_train_score"]
                )
                cert = certificate(estimator)
            except Exception:  # one failed fit must not lose the other candidates
                if options["error_score"] == "raise":
                    raise
                entry = _failed(
                    options["error_score"],
                    scorer,
                    options["return_train_score"],
                    traceback.format_exc(),
                )
                cert = certificate(None)
                estimator = fresh()
            rows.append((index, task["fold"], entry, cert))
        return rows, None
