"""Evaluating a grid: every candidate on every fold, the work shared along paths.

The candidates are cut into paths (:func:`~kernfw.model_selection.candidates.group_paths`):
candidates that differ only in ``C`` (or ``λ``).  For each path the kernel operator is
built once on all rows (its Gram memory-mapped for process workers,
:func:`kernfw.sweeps.shared.shared_operator`), and each fold fits the path's
candidates one after the other on ``operator.subset(train)``, warm-started
(:func:`~kernfw.model_selection.fits.fit_path`).  The tasks — one per (path, fold) —
run on joblib workers (any joblib backend: ``parallel_config(backend="dask")`` runs
them on a Dask cluster).
"""

import contextlib

import numpy as np
from joblib import cpu_count, effective_n_jobs
from sklearn.base import clone
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples

from .._validation import check_features
from ..sweeps.shared import shared_operator
from . import l2svm_path
from .candidates import group_paths, path_parameter
from .fits import fit_path

__all__ = ["evaluate_grid", "SHARED_MAX_MB"]

#: the Gram matrices (MB) held at once for the paths being evaluated: paths are
#: evaluated in batches whose kernels fit this budget
SHARED_MAX_MB = 4096.0


def _batches(paths, n):
    """The paths cut into consecutive batches whose float64 Grams fit :data:`SHARED_MAX_MB`."""
    per_path = max(1, int(SHARED_MAX_MB // max(n * n * 8 / 2**20, 1e-9)))
    return [paths[k : k + per_path] for k in range(0, len(paths), per_path)]


def _tasks(estimator, candidates, paths, splits, path, shells, fit_params):
    """The (path, fold) tasks of one batch, the most expensive paths first."""
    tasks = []
    for (shared, members), (template, shell, grams) in zip(paths, shells):
        steps = [(i, {path: candidates[i][path]} if path else {}) for i in members]
        splitter = clone(estimator).set_params(**shared)
        l2svc = l2svm_path.applies(splitter, path, shell is not None, fit_params)
        for fold, (train, test) in enumerate(splits):
            task = {
                "estimator": template,
                "path": path,
                "steps": steps,
                "fold": fold,
                "train": train,
                "test": test,
                "splitter": splitter,
                "l2svc": l2svc,
            }
            tasks.append((task, shell, grams))
    return tasks


@contextlib.contextmanager
def _shared(estimator, X, path, parallel):
    """:func:`~kernfw.sweeps.shared.shared_operator` of one path; when its kernel cannot
    be built (a bad kernel parameter), no shared kernel: the path's fits then fail
    one by one and get ``error_score``, as in ``GridSearchCV``.  Invalid features (NaN,
    text) raise the estimator's error at once."""
    with contextlib.ExitStack() as stack:
        try:
            shared = stack.enter_context(shared_operator(estimator, X, path or "", parallel))
        except Exception:  # noqa: BLE001 -- reported by the fits that use the kernel
            check_features(X)  # but bad data is the caller's error: raised here
            shared = (estimator, None, [])
        yield shared


def _path_estimators(estimator, paths):
    """The estimator with each path's shared parameters set."""
    return [clone(estimator).set_params(**shared) for shared, _ in paths]


def evaluate_grid(estimator, candidates, X, y, splits, *, fit_params, scorer, options,
                  n_jobs=None, pre_dispatch="2*n_jobs", progress=None):  # fmt: skip
    """Every candidate on every fold.

    Parameters
    ----------
    estimator : estimator
        The search's estimator (unfitted).
    candidates : list of dict
        The parameter settings, in the order of ``cv_results_``.
    X, y
        All the data.
    splits : list of (train, test)
        The folds.
    fit_params, scorer, options
        As :func:`~kernfw.model_selection.fits.fit_path` (``options`` without
        ``warm`` and ``blas_threads``, which are set here).
    n_jobs, pre_dispatch
        joblib's.
    progress : callable or None
        Called as ``progress(done, total)`` after each finished task (a path on a fold).

    Returns
    -------
    entries : list of dict
        ``_fit_and_score``'s entries, candidate-major then fold (``cv_results_``'s order).
    certificates : list of dict
        The certificates of the same fits (:func:`~kernfw.model_selection.fits.certificate`).
    """
    path = path_parameter(estimator, candidates)
    paths = group_paths(candidates, path)
    warm = path is not None and "warm_start" in estimator.get_params(deep=False)
    n_workers = max(1, effective_n_jobs(n_jobs))
    n_tasks = len(paths) * len(splits)
    parallel = n_workers > 1 and n_tasks > 1
    blas = max(1, cpu_count() // min(n_workers, n_tasks)) if parallel else None
    options = {**options, "warm": warm, "blas_threads": blas}
    found, done = {}, 0
    for batch in _batches(paths, _num_samples(X)):
        with contextlib.ExitStack() as stack:
            shells = [
                stack.enter_context(_shared(est, X, path, parallel))
                for est in _path_estimators(estimator, batch)
            ]
            jobs = (
                delayed(fit_path)(task, X, y, fit_params, scorer, options, shell, *grams)
                for task, shell, grams in _tasks(
                    estimator, candidates, batch, splits, path, shells, fit_params
                )
            )
            runner = Parallel(
                n_jobs=n_jobs if parallel else 1,
                pre_dispatch=pre_dispatch,
                return_as="generator_unordered",
            )
            for rows in runner(jobs):
                for index, fold, entry, cert in rows:
                    found[(index, fold)] = (entry, cert)
                done += 1
                if progress is not None:
                    progress(done, n_tasks)
    order = [(i, f) for i in range(len(candidates)) for f in range(len(splits))]
    return [found[at][0] for at in order], [found[at][1] for at in order]


def certificate_columns(certificates, n_candidates, n_splits):
    """``{"split<k>_<key>": array, "mean_<key>": array}`` of the fits' certificates."""
    columns = {}
    for key in certificates[0] if certificates else ():
        table = np.array([c[key] for c in certificates], dtype=float)
        table = table.reshape(n_candidates, n_splits)
        for k in range(n_splits):
            columns[f"split{k}_{key}"] = table[:, k]
        columns[f"mean_{key}"] = table.mean(axis=1)
    return columns
