"""Running a sweep: one fit per value and fold, chunks of warm-started fits per worker."""

import contextlib
import math
import re
import time
from concurrent.futures.process import BrokenProcessPool
from numbers import Integral

import numpy as np
from sklearn.base import ClassifierMixin, clone, is_classifier
from sklearn.metrics import check_scoring
from sklearn.utils import _safe_indexing
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples
from threadpoolctl import threadpool_limits

from .checkpoint import Checkpoint, digest
from .plan import check_estimator, check_values, plan, splits
from .results import COLUMNS, SweepResults, WorkerDied, format_value, report_row, to_number
from .shared import shared_operator

__all__ = ["sweep", "SCORE_BATCH", "row_key"]

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
    y_train, y_val = _safe_indexing(y, train), _safe_indexing(y, val)
    if precomputed:
        return X[np.ix_(train, train)], y_train, X[np.ix_(val, train)], y_val
    return _safe_indexing(X, train), y_train, _safe_indexing(X, val), y_val


def _targets(y):
    """``y`` as an array, or as the list it is when its outputs are sequences of different
    lengths (a structured model's: label sequences of chains)."""
    try:
        return np.asarray(y)
    except ValueError:  # an inhomogeneous shape
        return list(y)


def row_key(position, fold):
    """The checkpoint key of the fit of the ``position``-th value on ``fold``."""
    return f"v{position:04d}-f{fold}"


def _parse_key(key):
    """``(position, fold)`` of a :func:`row_key`, or None."""
    try:
        value, fold = key.split("-")
        return int(value[1:]), int(fold[1:])
    except ValueError:
        return None


def _stored_row(stored, value):
    """A row read from a checkpoint, with the value as given (JSON turns tuples into lists)."""
    row = dict.fromkeys(COLUMNS, math.nan)
    row.update({k: stored[k] for k in COLUMNS if k in stored})
    row["value"] = value
    for key in COLUMNS:
        if row[key] is None and key not in ("converged",):
            row[key] = math.nan if key != "error" else ""
    return row


def _save_model(checkpoint, key, estimator, warm_start):
    """Save the fitted ``estimator`` with the user's ``warm_start`` (the sweep sets it)."""
    if warm_start is None:
        checkpoint.write_model(key, estimator)
        return
    chained = estimator.get_params(deep=False)["warm_start"]
    estimator.set_params(warm_start=warm_start)
    try:
        checkpoint.write_model(key, estimator)
    finally:
        estimator.set_params(warm_start=chained)


def _fit_chunk(
    estimator,
    param,
    positions,
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
    checkpoint,
    save_models,
    shell,
    *grams,
):
    """Fit one contiguous chunk of values on one fold (runs in a worker); return
    ``(position, fold, row)`` triples.

    With a ``checkpoint`` (:class:`~kernfw.sweeps.checkpoint.Checkpoint`) each fit
    is marked running, then its model (``save_models``) and its row are written as
    it finishes; a fit whose row is already there (a task retried after its worker
    died) is not refitted.

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
        user_warm_start = estimator.get_params(deep=False).get("warm_start")
        model_warm = user_warm_start if warm_start else None
        est, rows = fresh(), []
        for position, value in zip(positions, values):
            key = row_key(position, fold)
            row = _stored(checkpoint, key, value)
            if row is None:
                row = _fit_one(est, param, value, fold, data, scorer)
                _write(checkpoint, key, row, est if save_models else None, model_warm)
                if verbose:
                    report_row(param, row)
                if row["error"]:
                    est = fresh()
            rows.append((position, fold, row))
        return rows


def _stored(checkpoint, key, value):
    """The row ``key`` already in ``checkpoint`` (None: not there, or a failed fit, which
    is fitted again); otherwise the fit is marked running."""
    if checkpoint is None:
        return None
    stored = checkpoint.read_row(key)
    if stored is not None and not stored.get("error"):
        return _stored_row(stored, value)
    checkpoint.start(key)
    return None


def _write(checkpoint, key, row, model, model_warm):
    """Write a finished fit's row to ``checkpoint`` and its fitted ``model`` (None: not
    saved) with ``warm_start=model_warm``."""
    if checkpoint is None:
        return
    if model is not None and not row["error"]:
        _save_model(checkpoint, key, model, model_warm)
    checkpoint.write_row(key, row)


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
    checkpoint=None,
    save_models=False,
):
    """Fit ``estimator`` once per value of ``param`` (and per CV fold), in parallel.

    With ``checkpoint``, every finished fit's row is written to that directory
    as the fit completes, and a call with the same arguments resumes: it fits
    only the rows that are missing (see :mod:`kernfw.sweeps.checkpoint`).

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
    checkpoint : str, path-like or None
        A directory (created if absent) where each finished fit's row is
        written as it completes.  Calling ``sweep`` again with the same
        arguments and directory fits only the missing rows (after a crash, a
        killed worker or Ctrl-C) and returns the whole table; rows of failed
        fits (``error``) are fitted again.  The directory records a digest of
        the estimator's parameters, ``X``, ``y``, ``param``, ``values``, the
        folds, ``warm_start``, ``scoring`` and ``save_models``: if any differs,
        :class:`~kernfw.sweeps.checkpoint.CheckpointMismatch` is raised (use a
        new directory).  ``n_jobs`` and ``verbose`` may change between calls.
        Every worker must be able to write it (a shared filesystem for a Dask
        cluster).
    save_models : bool, default=False
        Also save each fitted model in ``checkpoint`` (``models/<key>.joblib``,
        read them with :meth:`kernfw.sweeps.SweepResults.model`).  Each fit then builds its
        own kernel (no operator shared between fits), so that a saved model
        predicts on new inputs.

    Returns
    -------
    SweepResults
        One row per (value, fold), ordered by value then fold.

    Raises
    ------
    kernfw.sweeps.WorkerDied
        A worker process died (killed, out of memory, a crash in compiled
        code).  The message names the fits it left unfinished and says how to
        resume; the rows finished before are kept (in ``checkpoint``, and in
        the exception's ``results``).  On a Dask cluster a dead worker's
        tasks are rerun on another worker by the scheduler; only when they
        fail there too (``distributed.scheduler.allowed-failures``) is this
        raised.
    kernfw.sweeps.CheckpointMismatch
        ``checkpoint`` holds the rows of a sweep with other arguments.

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
    y = _targets(y)
    folds = splits(estimator, X, y, cv)
    warm = bool(warm_start) and "warm_start" in params
    kernel = params.get("kernel")
    precomputed = isinstance(kernel, str) and kernel == "precomputed"
    if save_models and checkpoint is None:
        raise ValueError("save_models=True needs a checkpoint directory to save the models in")
    store, done = _open_checkpoint(
        checkpoint, estimator, params, param, values, folds, X, y, warm, scoring, save_models
    )
    tasks, parallel, blas_threads = plan(param, values, len(folds), warm, n_jobs, done)
    results = dict(done)
    if not tasks:
        return _table(param, results, store)

    share = contextlib.nullcontext((estimator, None, [])) if save_models else None
    with share or shared_operator(estimator, X, param, parallel) as (template, shell, grams):
        jobs = (
            delayed(_fit_chunk)(
                template,
                param,
                chunk,
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
                store,
                bool(save_models),
                shell,
                *grams,
            )
            for f, chunk in tasks
        )
        runner = Parallel(n_jobs=n_jobs if parallel else 1, return_as="generator_unordered")
        total = len(values) * len(folds)
        try:
            for chunk_rows in runner(jobs):
                for i, f, row in chunk_rows:
                    results[(i, f)] = row
                    if store is not None and not store.has_row(row_key(i, f)):
                        store.write_row(row_key(i, f), row)  # a worker on another filesystem
        except KeyboardInterrupt as exc:
            _collect(store, values, folds, results)
            exc.add_note(_resume_advice(store, results, total))
            raise
        except Exception as exc:
            if not _is_worker_death(exc):
                raise
            raise _worker_died(store, exc, param, values, folds, results) from exc
    return _table(param, results, store)


def _open_checkpoint(checkpoint, estimator, params, param, values, folds, X, y, warm, scoring,
                     save_models):  # fmt: skip
    """``(store, done)``: the :class:`~kernfw.sweeps.checkpoint.Checkpoint` of the sweep's
    arguments (None without a directory) and the rows it already holds, by
    ``(position, fold)`` (rows of failed fits are fitted again)."""
    if checkpoint is None:
        return None, {}
    arguments = {
        "estimator": f"{type(estimator).__module__}.{type(estimator).__qualname__} "
        + digest(params),
        "param": param,
        "values": [v if isinstance(v, (int, float, str, bool)) else repr(v) for v in values],
        "folds": digest(folds),
        "X": digest(X),
        "y": digest(y),
        "warm_start": warm,
        "scoring": digest(scoring),
        "save_models": bool(save_models),
    }
    store, done = Checkpoint(checkpoint, "sweep", arguments).open(), {}
    for key, stored in store.rows().items():
        at = _parse_key(key)
        if at is not None and at[0] < len(values) and at[1] < len(folds):
            if not stored.get("error"):
                done[at] = _stored_row(stored, values[at[0]])
    return store, done


def _worker_died(store, exc, param, values, folds, results):
    """The :class:`WorkerDied` of a sweep whose worker died with ``exc``: it names the fits
    left unfinished and keeps the finished rows."""
    _collect(store, values, folds, results)
    missing = [(i, f) for i in range(len(values)) for f in range(len(folds))]
    missing = [at for at in missing if at not in results]
    running = [_parse_key(k) for k in store.running()] if store is not None else []
    running = [at for at in running if at in missing]
    return WorkerDied(
        f"sweep: a worker process died ({_death(exc)}) "
        + (
            f"while fitting {_fits(param, values, running)}"
            if running
            else f"with {len(missing)} fits unfinished: {_fits(param, values, missing)}"
        )
        + f". {_resume_advice(store, results, len(values) * len(folds))}",
        results=_table(param, results, store),
        unfinished=[(values[i], f) for i, f in missing],
    )


def _table(param, results, store):
    """The :class:`SweepResults` of ``{(position, fold): row}``, by value then fold."""
    order = sorted(results)
    return SweepResults(
        param,
        [results[at] for at in order],
        checkpoint=None if store is None else store.path,
        keys=[row_key(*at) for at in order],
    )


def _collect(store, values, folds, results):
    """Add to ``results`` the rows the workers wrote in ``store`` but did not return."""
    if store is None:
        return
    for key, stored in store.rows().items():
        at = _parse_key(key)
        if at is not None and at not in results and at[0] < len(values) and at[1] < len(folds):
            if not stored.get("error"):
                results[at] = _stored_row(stored, values[at[0]])


def _is_worker_death(exc):
    """Whether ``exc`` says a worker process died (loky/multiprocessing, or Dask's
    ``KilledWorker`` once the scheduler gave up rerunning a task)."""
    return isinstance(exc, BrokenProcessPool) or type(exc).__name__ == "KilledWorker"


def _death(exc):
    """One line on a dead worker: the exception's name and the exit codes loky reports."""
    text = " ".join(str(exc).split())
    codes = re.search(r"exit codes of the workers are (\{[^}]*\})", text)
    if codes:
        return f"{type(exc).__name__}, exit codes {codes.group(1)}"
    first = text.split(". ")[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _fits(param, values, positions, limit=6):
    """``"C=1 fold 0, C=10 fold 0"`` for ``(position, fold)`` pairs (the first ``limit``)."""
    text = ", ".join(f"{param}={format_value(values[i])} fold {f}" for i, f in positions[:limit])
    more = len(positions) - limit
    return text + (f" and {more} more" if more > 0 else "")


def _resume_advice(store, results, total):
    """How to get the missing rows: rerun with the checkpoint, or pass one."""
    if store is None:
        return (
            f"{len(results)} of {total} fits finished (in this exception's results); pass "
            "checkpoint=DIR (kernfw sweep --checkpoint DIR) to keep finished fits and resume"
        )
    return (
        f"{len(results)} of {total} fits are saved in {store.path!r}: call sweep again with "
        "the same arguments and checkpoint (or rerun the same kernfw command) to fit the others"
    )
