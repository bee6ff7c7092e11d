"""Evaluating a grid: every candidate on every fold, the work shared along paths.

The candidates are cut into paths (:func:`~kernfw.model_selection.candidates.group_paths`):
candidates that differ only in ``C`` (or ``λ``).  For each path the kernel operator is
built once on all rows (its Gram memory-mapped for process workers,
:func:`kernfw.sweeps.shared.shared_operator`), and each fold fits the path's
candidates one after the other on ``operator.subset(train)``, warm-started
(:func:`~kernfw.model_selection.fits.fit_path`).  The tasks — one per (path, fold) —
run on joblib workers (any joblib backend: ``parallel_config(backend="dask")`` runs
them on a Dask cluster).

When every path is an :class:`~kernfw.L2SVC` path of the RBF kernel on dense
features (:func:`~kernfw.model_selection.l2svm_path.applies`), the kernels of all
``γ`` come from one :class:`~kernfw.operators.rbf_family.RBFFamily` (math.md §7.2), with
the values the estimator's fit computes (float32 at its default ``tol``), and the tasks
run in threads of this process, whatever joblib backend is active (their fits are
compiled calls that release the GIL, :func:`~kernfw.solvers.simplex_qp.solve_l2svm_gram`):
the kernels stay in this process's memory, shared without copies or memory maps, and the
paths, in the order of ``γ``, hand their first fits' solutions on
(:class:`~kernfw.model_selection.starts.PathStarts`).
"""

import contextlib

import numpy as np
from joblib import cpu_count, effective_n_jobs
from sklearn.base import clone
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples

from .._threads import one_blas_thread
from .._validation import check_features
from ..estimators._plan import kernel_values_dtype
from ..operators.pairwise import resolve_gamma
from ..operators.rbf_family import RBFFamily
from ..sweeps.shared import shared_operator
from . import l2svm_path
from .candidates import group_paths, path_parameter
from .fits import fit_path
from .starts import PathStarts

__all__ = ["evaluate_grid", "SHARED_MAX_MB"]

#: the Gram matrices (MB) held at once for the paths being evaluated: paths are
#: evaluated in batches whose kernels fit this budget
SHARED_MAX_MB = 4096.0

#: above this total size (MB) of the RBF kernels of a threaded search, its paths run in
#: batches of one per worker whose kernels reuse the same memory; below, all at once
REUSE_ABOVE_MB = 256.0


def _batches(paths, n, itemsize=8, extra=0.0, at_most=None):
    """The paths cut into consecutive batches whose Grams (n × n, ``itemsize`` bytes per
    value) fit :data:`SHARED_MAX_MB` besides ``extra`` MB (the squared distances), of at
    most ``at_most`` paths."""
    gram_mb = max(n * n * itemsize / 2**20, 1e-9)
    per_path = max(1, int((SHARED_MAX_MB - extra) // gram_mb))
    per_path = per_path if at_most is None else max(1, min(per_path, at_most))
    return [paths[k : k + per_path] for k in range(0, len(paths), per_path)]


def _tasks(estimator, candidates, paths, splits, path, shells, fit_params, position=None,
           starts=None, first_path=0):  # fmt: skip
    """The (path, fold) tasks of one batch, path by path (``position``: the shared
    kernels' index of each data row, None for the data's order; ``starts``: the
    :class:`PathStarts` of the search, the batch's paths numbered from ``first_path``)."""
    tasks = []
    for number, ((shared, members), (template, shell, grams)) in enumerate(
        zip(paths, shells), start=first_path
    ):
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
                "position": position,
            }
            if starts is not None:
                task.update(starts=starts, path_no=number)
            tasks.append((task, shell, grams))
    return tasks


def _rbf_family(estimator, paths, path, X, fit_params, y=None, splits=()):
    """``(family, position)``: the :class:`~kernfw.operators.rbf_family.RBFFamily` of
    ``X`` when every path is an L2SVC path of the RBF kernel on dense finite features (the
    search's kernels then come from it, one per path) and its memory with one kernel fits
    :data:`SHARED_MAX_MB`, else None.  Its values are float32 when every path's fit
    would compute float32 values on the folds (:func:`kernel_values_dtype`), else
    float64.  The family is that of the rows in the order :func:`class_major_order` gives
    for the targets ``y`` and the ``splits`` (None: the data's order), ``position`` the
    index of each data row in it (None: the data's order)."""
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind in "fiu" and X.size):
        return None
    n_fit = min((np.size(train) for train, _ in splits), default=X.shape[0])
    dtype = np.float32
    for est in _path_estimators(estimator, paths):
        params = est.get_params(deep=False)
        if not (l2svm_path.applies(est, path, True, fit_params) and params["kernel"] == "rbf"):
            return None
        if kernel_values_dtype("auto", params["tol"], params["solver"], n=n_fit) is None:
            dtype = np.float64
    if (1 + (dtype == np.float64)) * X.shape[0] ** 2 * np.dtype(
        dtype
    ).itemsize > SHARED_MAX_MB * 2**20:
        return None  # the kernel (and D) would not fit
    X = np.asarray(X, dtype=np.float64)
    if not np.all(np.isfinite(X)):
        return None  # the estimator's error, raised by the generic route
    if y is None:
        return RBFFamily(X, dtype), None
    order = class_major_order(y, splits)
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    return RBFFamily(X[order], dtype), position


def _by_gamma(estimator, paths, family):
    """The paths in increasing order of their resolved ``γ`` (one that does not resolve,
    whose fits fail, last): neighbours in this order hand starts on (:class:`PathStarts`)."""

    def gamma(est):
        try:
            return resolve_gamma(est.get_params(deep=False)["gamma"], family.X)
        except (TypeError, ValueError):
            return np.inf

    keys = [gamma(est) for est in _path_estimators(estimator, paths)]
    return [paths[k] for k in np.argsort(keys, kind="stable")]


def class_major_order(y, splits):
    """The rows ordered by class, then by the test sets they belong to (the first split's
    last), then as given: a fold's training rows of one class are then few runs of
    consecutive rows (two, when the test sets partition the data), and a one-vs-one
    problem's rows few runs of the shared kernel's rows, read in place
    (:func:`~kernfw.solvers.simplex_qp.solve_l2svm_gram_paths`)."""
    _, codes = np.unique(np.ravel(y), return_inverse=True)
    keys = []
    for _, test in reversed(splits):
        member = np.zeros(codes.size, dtype=bool)
        member[test] = True
        keys.append(member)
    return np.lexsort([np.arange(codes.size), *keys, codes])


@contextlib.contextmanager
def _shared(estimator, X, path, parallel, distances=None, out=None):
    """:func:`~kernfw.sweeps.shared.shared_operator` of one path (the RBF Gram read off
    ``distances`` when given, into ``out``); when its kernel cannot be built (a bad kernel
    parameter), no shared kernel: the path's fits then fail one by one and get
    ``error_score``, as in ``GridSearchCV``.  Invalid features (NaN, text) raise the
    estimator's error at once."""
    if distances is not None:
        try:
            gamma = resolve_gamma(estimator.get_params(deep=False)["gamma"], distances.X)
            yield estimator, distances.gram(gamma, out=out), []
        except (TypeError, ValueError):  # a bad gamma: the path's fits fail one by one
            yield estimator, None, []
        return
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


def _run(jobs, found, run):
    """Run the (path, fold) ``jobs`` on joblib workers, their rows into ``found``
    (``run``: joblib's ``n_jobs``, ``pre_dispatch``, ``prefer``; the ``progress``
    callback, the ``total`` of tasks and the count ``done`` so far)."""
    runner = Parallel(
        n_jobs=run["n_jobs"],
        pre_dispatch=run["pre_dispatch"],
        return_as="generator_unordered",
        prefer=run["prefer"],
        require=run["require"],
    )
    for rows in runner(jobs):
        for index, fold, entry, cert in rows:
            found[(index, fold)] = (entry, cert)
        run["done"] = run.get("done", 0) + 1
        if run["progress"] is not None:
            run["progress"](run["done"], run["total"])


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
    family = _rbf_family(estimator, paths, path, X, fit_params, y, splits)
    distances, position = (None, None) if family is None else family
    threads = distances is not None  # compiled fits without the GIL, kernels in memory
    if threads:  # neighbours in γ hand their first fits' solutions on (math.md §7.2)
        paths, starts = _by_gamma(estimator, paths, distances), PathStarts()
    blas = max(1, cpu_count() // min(n_workers, n_tasks)) if parallel and not threads else None
    options = {**options, "warm": warm, "blas_threads": blas}
    found = {}
    run = {"n_jobs": n_jobs if parallel else 1, "pre_dispatch": pre_dispatch,
           "prefer": "threads" if threads else None, "require": "sharedmem" if threads else None,
           "progress": progress, "total": n_tasks}  # fmt: skip
    # threads, large kernels: batches of one path per worker, whose kernels reuse the same
    # memory (fresh memory costs a page fault per 4 kB: more than the kernel's exp)
    n = _num_samples(X)
    reuse = threads and len(paths) * n * n * distances.dtype.itemsize / 2**20 > REUSE_ABOVE_MB
    itemsize = distances.dtype.itemsize if threads else 8
    extra = distances.D.nbytes / 2**20 if threads and distances.D is not None else 0.0
    batches = _batches(paths, n, itemsize, extra, at_most=n_workers if reuse else None)
    memory = [np.empty((n, n), distances.dtype) for _ in batches[0]] if reuse else []
    with one_blas_thread() if threads else contextlib.nullcontext():  # threads share the pools
        for first_path, batch in zip(np.cumsum([0] + [len(b) for b in batches]), batches):
            with contextlib.ExitStack() as stack:
                shells = [
                    stack.enter_context(
                        _shared(est, X, path, parallel and not threads, distances, out)
                    )
                    for est, out in zip(
                        _path_estimators(estimator, batch), memory or [None] * len(batch)
                    )
                ]
                tasks = _tasks(
                    estimator, candidates, batch, splits, path, shells, fit_params, position,
                    starts if threads else None, int(first_path),
                )  # fmt: skip
                jobs = (
                    delayed(fit_path)(task, X, y, fit_params, scorer, options, shell, *grams)
                    for task, shell, grams in tasks
                )
                _run(jobs, found, run)
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
