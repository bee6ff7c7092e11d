"""Running a sweep: one fit per value and fold, chunks of warm-started fits per worker."""

import math
import time
from numbers import Integral

import numpy as np
from sklearn.base import ClassifierMixin, clone, is_classifier
from sklearn.metrics import check_scoring
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples
from threadpoolctl import threadpool_limits

from .plan import check_estimator, check_values, plan, splits
from .results import COLUMNS, SweepResults, report_row, to_number
from .shared import shared_operator

__all__ = ["sweep", "SCORE_BATCH"]

#: rows per ``predict`` call when the sweep scores accuracy itself
SCORE_BATCH = 1024


def _fit_one(estimator, param, value, fold, data, scorer):
    """Fit ``estimator`` with ``param=value`` on one fold; return its row."""
    X_train, y_train, X_val, y_val = data
    row = dict.fromkeys(COLUMNS, math.nan)
    row.update(value=value, fold=fold, converged=None, error="")
    try:
        estimator.set_params(**{param: value})
        start = time.perf_counter()
        estimator.fit(X_train, y_train)
        row["fit_time"] = time.perf_counter() - start
        row["objective"] = to_number(getattr(estimator, "primal_objective_", None))
        row["gap"] = to_number(getattr(estimator, "duality_gap_", None))
        row["n_iter"] = to_number(getattr(estimator, "n_iter_", None))
        row["n_active"] = to_number(getattr(estimator, "n_active_groups_", None))
        converged = getattr(estimator, "converged_", None)
        row["converged"] = None if converged is None else bool(np.all(converged))
        if scorer is not None:
            row["train_score"] = float(scorer(estimator, X_train, y_train))
            if X_val is not None:
                row["val_score"] = float(scorer(estimator, X_val, y_val))
    except Exception as exc:  # one failed fit must not lose the other rows
        row["error"] = f"{type(exc).__name__}: {exc}"
    return row


def _fold_data(X, y, split, precomputed):
    """``(X_train, y_train, X_val, y_val)`` of one fold (rows, and the training
    columns of a precomputed Gram)."""
    if split is None:
        return X, y, None, None
    train, val = split
    if precomputed:
        return X[np.ix_(train, train)], y[train], X[np.ix_(val, train)], y[val]
    return X[train], y[train], X[val], y[val]


def _fit_chunk(
    estimator,
    param,
    values,
    fold,
    X,
    y,
    split,
    precomputed,
    warm_start,
    scoring,
    blas_threads,
    verbose,
    shell,
    *grams,
):
    """Fit one contiguous chunk of values on one fold (runs in a worker).

    ``shell`` is the kernel operator with its Gram matrices taken out and
    ``grams`` those matrices, one argument each (so joblib memory-maps them
    for a process worker and Dask scatters each once); the operator is
    rebuilt around them.  One estimator is refitted value after
    value, warm-starting when ``warm_start`` is True; after a failed fit the
    next value starts from a fresh clone.  ``verbose`` prints one line per
    fit (to the worker's stderr, which process workers share with the parent).
    """
    with threadpool_limits(limits=blas_threads, user_api="blas"):
        data = _fold_data(X, y, split, precomputed)
        operator = None
        if shell is not None:
            operator = shell.attach_arrays(grams)
            if split is not None:
                operator = operator.subset(split[0])

        def fresh():
            est = clone(estimator)
            if operator is not None:
                est.set_params(kernel=operator)
            if warm_start:
                est.set_params(warm_start=True)
            return est

        scorer = _scorer(estimator, scoring)
        est, rows = fresh(), []
        for value in values:
            row = _fit_one(est, param, value, fold, data, scorer)
            rows.append(row)
            if verbose:
                report_row(param, row)
            if row["error"]:
                est = fresh()
        return rows


def _batched_accuracy(estimator, X, y):
    """Accuracy computed ``SCORE_BATCH`` rows at a time.

    A kernel model's ``predict`` on ``X`` forms the cross kernel
    ``k(X, support)``; on the training set that is another ``n × n`` block
    per worker.  Batches bound it to ``SCORE_BATCH × n_SV``.
    """
    correct = 0
    for start in range(0, _num_samples(X), SCORE_BATCH):
        rows = slice(start, start + SCORE_BATCH)
        correct += int(np.sum(estimator.predict(X[rows]) == np.asarray(y[rows])))
    return correct / _num_samples(X)


def _scorer(estimator, scoring):
    """The scorer of the score columns.

    None (NaN scores) for an estimator without ``score`` (e.g. an outlier
    detector) when ``scoring`` is None; batched accuracy for classifiers
    whose ``score`` is scikit-learn's accuracy (the same number, less memory).
    """
    if scoring is None and not hasattr(estimator, "score"):
        return None
    if (
        scoring is None
        and is_classifier(estimator)
        and type(estimator).score is ClassifierMixin.score
    ):
        return _batched_accuracy
    return check_scoring(estimator, scoring=scoring)


def sweep(
    estimator,
    X,
    y,
    param="C",
    values=None,
    cv=None,
    n_jobs=None,
    warm_start=True,
    verbose=0,
    scoring=None,
):
    """Fit ``estimator`` once per value of ``param`` (and per CV fold), in parallel.

    Parameters
    ----------
    estimator : estimator
        Any scikit-learn estimator; kernfw estimators add their certified
        objective P (``primal_objective_``), gap, iterations and convergence to
        each row.  It is cloned, never modified.
    X : array-like or sparse matrix of shape (n, d), or a Gram matrix
        Training inputs.
    y : array-like of shape (n,)
        Labels.
    param : str, default="C"
        The swept hyperparameter: ``"C"`` (as scikit-learn's SVMs; the kernfw
        models with a λ use λ = 1/(C·n)) or ``"lam"`` (λ itself), or any other
        parameter of the estimator.
    values : sequence
        Its values, fitted in this order within each worker (for warm starts,
        from strong to weak regularization: increasing ``C``, decreasing ``lam``).
    cv : None, int, CV splitter or iterable of (train, val) index pairs
        None fits on all of ``X`` (fold 0, no validation score); otherwise as
        :func:`sklearn.model_selection.check_cv` (stratified folds for
        classifiers).
    n_jobs : int or None
        Number of joblib workers (None: the active ``joblib.parallel_config``,
        -1: all cores).  ``joblib.parallel_config(backend="dask")`` runs the
        sweep on a ``dask.distributed`` cluster.
    warm_start : bool, default=True
        Within a worker, start each fit from the previous solution (only for
        estimators with a ``warm_start`` parameter).
    verbose : int, default=0
        ≥ 1 prints one line per finished fit (stderr).
    scoring : str, callable or None
        Score of the ``train_score``/``val_score`` columns (default: the
        estimator's ``score``, accuracy for classifiers).

    Returns
    -------
    SweepResults
        One row per (value, fold), ordered by value then fold.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import RidgeClassifier
    >>> from kernfw import sweep
    >>> X, y = load_iris(return_X_y=True)
    >>> table = sweep(RidgeClassifier(), X, y, param="alpha", values=[10.0, 1.0, 0.1], cv=3)
    >>> len(table)
    9
    """
    params = check_estimator(estimator, param)
    values = check_values(values)
    if not isinstance(verbose, Integral) or verbose < 0:
        raise ValueError(f"verbose must be a nonnegative integer, got {verbose!r}")
    y = np.asarray(y)
    folds = splits(estimator, X, y, cv)
    warm = bool(warm_start) and "warm_start" in params
    kernel = params.get("kernel")
    precomputed = isinstance(kernel, str) and kernel == "precomputed"
    tasks, parallel, blas_threads = plan(param, values, len(folds), warm, n_jobs)

    with shared_operator(estimator, X, param, parallel) as (template, shell, grams):
        jobs = (
            delayed(_fit_chunk)(
                template,
                param,
                [values[i] for i in chunk],
                f,
                X,
                y,
                folds[f],
                precomputed,
                warm,
                scoring,
                blas_threads,
                verbose,
                shell,
                *grams,
            )
            for f, chunk in tasks
        )
        runner = Parallel(n_jobs=n_jobs if parallel else 1, return_as="generator")
        ordered = []
        for (f, chunk), chunk_rows in zip(tasks, runner(jobs)):
            ordered.extend(((i, f), row) for i, row in zip(chunk, chunk_rows))
    ordered.sort(key=lambda item: item[0])
    return SweepResults(param, [row for _, row in ordered])
