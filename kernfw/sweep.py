"""Regularization sweeps: one fit per hyperparameter value, in parallel with joblib.

:func:`sweep` fits ``estimator`` once per value of one hyperparameter (by
default ``lam``, the λ of math.md §1–§3), optionally once per cross-validation
fold, and returns a :class:`SweepResults` table.

How the work is shared (the design in four points):

1. **One kernel operator.**  The operator of the estimator's kernel (built by
   :func:`kernfw.kernels.make_operator` with the estimator's ``kernel``,
   ``gamma``, ``degree``, ``coef0``) is computed once and every fit receives it
   as ``kernel=<operator>``; a fold fits on ``operator.subset(train)``.
   (Sweeping a kernel parameter — ``gamma``, ``degree``, ... — gives every
   value its own kernel: then each fit builds it.)
2. **No copy per worker.**  For a parallel sweep the Gram matrices are written
   once into a memory-mapped file (in ``/dev/shm`` when it exists) and passed
   to the workers *as arguments of their own*: joblib's process backend sends a
   memmap by file name, Dask scatters the argument once.  Each worker rebuilds
   the operator around the mapped matrix.
3. **Warm starts.**  The values are split into contiguous chunks, one per
   worker, of balanced estimated cost (fits get slower as λ decreases, like
   ``1/λ``; see :func:`_relative_costs`); within a chunk one estimator is refitted value
   after value with ``warm_start=True`` (when it has that parameter), so each
   fit starts from the previous dual solution.  Give the values in the order
   you want the path followed (decreasing λ is the usual choice: strongly
   regularized problems are cheap and their solutions are good starts).
4. **No oversubscription.**  Inside a worker the BLAS thread pools are limited
   (``threadpoolctl``) to ``cores // workers`` threads, so
   ``n_jobs × BLAS threads ≤ cores``.

With ``cv``, the kernel is computed once on all of ``X``: a data-dependent
parameter such as ``gamma="scale"`` is resolved on all rows, not per fold
(give a number to make fold models identical to models fitted on the folds
alone).

The rows do not depend on ``n_jobs``: same rows, same order.  Without warm
starts the numbers are identical; with warm starts each fit starts from a
different point and the objectives agree within the certified gaps
(``|P_a − P_b| ≤ gap_a + gap_b``).
"""

import contextlib
import copy
import csv
import math
import os
import shutil
import sys
import tempfile
import time
from numbers import Integral

import numpy as np
from joblib import cpu_count, effective_n_jobs
from sklearn.base import ClassifierMixin, clone, is_classifier
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples
from threadpoolctl import threadpool_limits

from .kernels import GRAM_MAX_MB, make_operator
from .operators import Gram, KernelFunction, KernelOperator, MultiKernel, Normalized

__all__ = ["sweep", "SweepResults", "COLUMNS"]

#: the columns of a sweep table, in order
COLUMNS = ("value", "fold", "objective", "gap", "n_iter", "fit_time",
           "train_score", "val_score", "converged", "error")


# ---------------------------------------------------------------------------
# the results table
# ---------------------------------------------------------------------------
class SweepResults:
    """The table a sweep returns: one row per (value, fold).

    Columns (see :data:`COLUMNS`): ``value`` of the swept parameter, ``fold``
    (0 without cross-validation), ``objective`` (the primal objective P, or
    NaN for estimators without one), ``gap`` (the certified duality gap,
    NaN if none), ``n_iter``, ``fit_time`` (seconds), ``train_score`` and
    ``val_score`` (the estimator's ``score`` or ``scoring``; ``val_score`` is
    NaN without folds), ``converged`` and ``error`` (empty, or the exception
    of a failed fit, whose other numbers are NaN).

    Attributes
    ----------
    param : str
        The swept parameter.
    rows : list of dict
        The rows, ordered by value (in the order given) then fold.
    """

    def __init__(self, param, rows):
        self.param = param
        self.rows = list(rows)

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, column):
        """The column ``column`` as a numpy array (object dtype for text)."""
        if column not in COLUMNS:
            raise KeyError(f"no column {column!r}; the columns are {COLUMNS}")
        values = [row[column] for row in self.rows]
        if column == "error":
            return np.array(values, dtype=object)
        if column == "converged":
            return np.array([np.nan if v is None else float(v) for v in values])
        return np.array(values, dtype=float)

    @property
    def errors(self):
        """The rows whose fit failed."""
        return [row for row in self.rows if row["error"]]

    def to_pandas(self):
        """The table as a :class:`pandas.DataFrame` (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("SweepResults.to_pandas needs pandas: pip install pandas") from exc
        frame = pd.DataFrame(self.rows, columns=list(COLUMNS))
        frame.attrs["param"] = self.param
        return frame

    def to_csv(self, path):
        """Write the table as CSV (header row first); return ``path``."""
        with open(path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(COLUMNS))
            writer.writeheader()
            for row in self.rows:
                writer.writerow({k: ("" if row[k] is None else row[k]) for k in COLUMNS})
        return path

    def __repr__(self):
        head = f"{'value':>10s} {'fold':>4s} {'objective':>12s} {'gap':>10s} {'n_iter':>7s} " \
               f"{'fit_time':>8s} {'train':>7s} {'val':>7s}  error"
        lines = [f"SweepResults(param={self.param!r}, {len(self)} rows)", head]
        for r in self.rows:
            lines.append(f"{_fmt(r['value']):>10s} {r['fold']:4d} {r['objective']:12.6g} "
                         f"{r['gap']:10.3g} {r['n_iter']:7.0f} {r['fit_time']:8.3f} "
                         f"{r['train_score']:7.4f} {r['val_score']:7.4f}  {r['error']}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# one fit, one chunk
# ---------------------------------------------------------------------------
def _number(value):
    """A fitted scalar as float; NaN if absent.

    Per-subproblem arrays (one-vs-one L2SVC, Ridge's ``n_iter_`` per target)
    are summed: the sum of the objectives is certified by the sum of the gaps.
    """
    if value is None:
        return math.nan
    try:
        return float(np.sum(value))
    except (TypeError, ValueError):
        return math.nan


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
        row["objective"] = _number(getattr(estimator, "primal_objective_", None))
        row["gap"] = _number(getattr(estimator, "duality_gap_", None))
        row["n_iter"] = _number(getattr(estimator, "n_iter_", None))
        converged = getattr(estimator, "converged_", None)
        row["converged"] = None if converged is None else bool(np.all(converged))
        if scorer is not None:
            row["train_score"] = float(scorer(estimator, X_train, y_train))
            if X_val is not None:
                row["val_score"] = float(scorer(estimator, X_val, y_val))
    except Exception as exc:  # one failed fit must not lose the other rows
        row["error"] = f"{type(exc).__name__}: {exc}"
    return row


def _split_rows(X, idx, cols=None, precomputed=False):
    """Rows ``idx`` of X (and columns ``cols`` of a precomputed Gram)."""
    if precomputed:
        return X[np.ix_(idx, cols if cols is not None else idx)]
    return X[idx]


def _fold_data(X, y, train, val, precomputed):
    if train is None:
        return X, y, None, None
    X_train = _split_rows(X, train, precomputed=precomputed)
    X_val = _split_rows(X, val, train, precomputed=precomputed)
    return X_train, y[train], X_val, y[val]


def _fit_chunk(estimator, param, values, fold, X, y, split, precomputed, warm_start, scoring,
               blas_threads, verbose, shell, *grams):
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
        train, val = split if split is not None else (None, None)
        data = _fold_data(X, y, train, val, precomputed)
        operator = None
        if shell is not None:
            operator = _attach_grams(shell, grams)
            if train is not None:
                operator = operator.subset(train)

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
                _report(param, row)
            if row["error"]:
                est = fresh()
        return rows


#: rows per ``predict`` call when the sweep scores accuracy itself
SCORE_BATCH = 1024


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
    if scoring is None and is_classifier(estimator) and \
            type(estimator).score is ClassifierMixin.score:
        return _batched_accuracy
    return check_scoring(estimator, scoring=scoring)


# ---------------------------------------------------------------------------
# the shared kernel operator
# ---------------------------------------------------------------------------
class _GramSlot:
    """Placeholder for the Gram matrix number ``index`` of a detached operator."""

    def __init__(self, index):
        self.index = index


def _detach_grams(op, grams, seen):
    """A shallow copy of ``op`` whose Gram matrices are moved to ``grams``.

    Returns the "shell": the same operator tree (Gram, Normalized,
    MultiKernel) where every ``Gram.K`` is a :class:`_GramSlot`.
    """
    if isinstance(op, Gram):
        shell = copy.copy(op)
        key = id(op.K)
        if key not in seen:
            seen[key] = len(grams)
            grams.append(op.K)
        shell.K = _GramSlot(seen[key])
        return shell
    if isinstance(op, Normalized):
        shell = copy.copy(op)
        shell.base = _detach_grams(op.base, grams, seen)
        train = op._stats.get("train")
        if train is not None:
            shell._stats = dict(op._stats, train=_detach_grams(train, grams, seen))
        return shell
    if isinstance(op, MultiKernel):
        shell = copy.copy(op)
        shell.operators = [_detach_grams(o, grams, seen) for o in op.operators]
        return shell
    return op


def _attach_grams(shell, grams):
    """Inverse of :func:`_detach_grams`: put the matrices back (in a copy)."""
    if isinstance(shell, Gram):
        op = copy.copy(shell)
        if isinstance(shell.K, _GramSlot):
            op.K = grams[shell.K.index]
        return op
    if isinstance(shell, Normalized):
        op = copy.copy(shell)
        op.base = _attach_grams(shell.base, grams)
        if shell._stats.get("train") is not None:
            op._stats = dict(shell._stats, train=_attach_grams(shell._stats["train"], grams))
        return op
    if isinstance(shell, MultiKernel):
        op = copy.copy(shell)
        op.operators = [_attach_grams(o, grams) for o in shell.operators]
        return op
    return shell


def _without_kernel(estimator):
    """A copy of the estimator's parameters with ``kernel=None``.

    The workers set ``kernel=<operator>`` themselves; sending an estimator
    that holds an operator would pickle (and ``clone`` would deep-copy) its
    Gram matrices once per task.
    """
    params = estimator.get_params(deep=False)
    params["kernel"] = None
    return type(estimator)(**params)


def _kernel_params(estimator):
    """The ``make_operator`` arguments among the estimator's parameters."""
    params = estimator.get_params(deep=False)
    return {k: params[k] for k in KERNEL_PARAMS[1:] if k in params}


#: parameters that change the kernel itself: sweeping one of them rules out a shared operator
KERNEL_PARAMS = ("kernel", "gamma", "degree", "coef0", "normalization")


def _uses_operator(estimator, X, param):
    """Whether the sweep builds the kernel operator itself (kernel spec, not precomputed)."""
    params = estimator.get_params(deep=False)
    if "kernel" not in params or not type(estimator).__module__.startswith("kernfw."):
        return False  # only kernfw estimators accept kernel=<KernelOperator>
    if param in KERNEL_PARAMS:
        return False  # every value has its own kernel
    kernel = params["kernel"]
    if isinstance(kernel, KernelOperator):
        return True
    if isinstance(kernel, str) and kernel == "precomputed":
        return False
    if isinstance(kernel, (list, tuple)) and all(k == "precomputed" for k in kernel):
        return False
    return hasattr(X, "shape") and not isinstance(X, (list, tuple))


def _gram_fits(op):
    n, itemsize = op.n, np.dtype(op.dtype).itemsize
    return n * n * itemsize / 2**20 <= GRAM_MAX_MB


def _fill_gram(K, kernel, X, block):
    """Write ``k(X, X)`` into ``K`` by row blocks: each block computes the
    columns right of its start and mirrors them, so ``K`` is exactly
    symmetric, and the diagonal is set to the exact ``k(x, x)``."""
    n = K.shape[0]
    for start in range(0, n, block):
        stop = min(start + block, n)
        B = kernel(X[start:stop], X[start:])
        width = stop - start
        square = np.triu(B[:, :width])  # the diagonal block: keep its upper triangle
        B[:, :width] = square + np.triu(square, 1).T
        K[start:stop, start:] = B
        K[start:, start:stop] = B.T
    np.fill_diagonal(K, kernel.diag(X))
    return K


def _materialize(op, allocate):
    """Replace on-the-fly kernels that would be Gram matrices by Grams in ``allocate``d memory.

    ``op`` comes from ``make_operator(..., gram_max_mb=0)``, so every kernel is
    still a :class:`KernelFunction`; those whose n × n matrix fits the
    ``make_operator`` budget become :class:`Gram` operators written block by
    block into ``allocate((n, n), dtype)`` (a memory map for a parallel
    sweep), so the matrix is never held twice.
    """
    if isinstance(op, KernelFunction) and _gram_fits(op):
        K = _fill_gram(allocate((op.n, op.n), op.dtype), op.kernel, op.X, op.batch_size)
        return Gram(K, kernel=op.kernel, X=op.X, check=False)
    if isinstance(op, Normalized):
        out = copy.copy(op)
        out.base = _materialize(op.base, allocate)
        if op._stats.get("train") is op.base:
            out._stats = dict(op._stats, train=out.base)
        return out
    if isinstance(op, MultiKernel):
        out = copy.copy(op)
        out.operators = [_materialize(o, allocate) for o in op.operators]
        return out
    return op


class _MemmapFolder:
    """A temporary folder of ``.npy`` memory maps (in /dev/shm when it exists)."""

    def __init__(self):
        shm = "/dev/shm"
        base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
        self.path = tempfile.mkdtemp(prefix="kernfw-sweep-", dir=base)
        self.count = 0

    def allocate(self, shape, dtype):
        self.count += 1
        filename = os.path.join(self.path, f"gram{self.count}.npy")
        return np.lib.format.open_memmap(filename, mode="w+", shape=shape, dtype=dtype)

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)


def _build_operator(estimator, X, allocate):
    """The estimator's kernel operator, its Gram matrices in ``allocate``d memory.

    Serial and parallel sweeps build the matrices the same way (only the
    memory differs), so their numbers agree exactly.
    """
    kernel = estimator.get_params(deep=False)["kernel"]
    if isinstance(kernel, KernelOperator):
        return kernel
    op = make_operator(X, kernel, gram_max_mb=0, **_kernel_params(estimator))
    return _materialize(op, allocate)


def _allocate_in_memory(shape, dtype):
    return np.empty(shape, dtype=dtype)


# ---------------------------------------------------------------------------
# the sweep
# ---------------------------------------------------------------------------
def _check_values(values):
    if values is None:
        raise ValueError("sweep needs values: the parameter values to fit")
    values = list(np.ravel(np.asarray(values, dtype=object)))
    if not values:
        raise ValueError("sweep needs at least one value")
    return [v.item() if isinstance(v, np.generic) else v for v in values]


def _relative_costs(param, values):
    """A rough relative cost of fitting each value, to balance the chunks.

    Frank-Wolfe needs ``O(C_f / ε)`` iterations, and the curvature ``C_f``
    of the kernfw duals grows like ``1/λ`` (like ``C`` for a penalty ``C``):
    the model is cost ∝ ``1/λ`` for ``lam``, ∝ ``C`` for ``C``, uniform for
    any other parameter.  It is a heuristic — warm starts and small active
    sets make real costs grow more slowly.
    """
    v = np.array([x if isinstance(x, (int, float)) else np.nan for x in values], dtype=float)
    if param not in ("lam", "C") or not np.all(v > 0):
        return np.ones(len(values))
    return v / v.max() if param == "C" else v.min() / v


def _chunks(costs, n_chunks):
    """Split positions ``0 … len(costs)−1`` into at most ``n_chunks`` contiguous
    chunks whose largest total cost is as small as possible (the linear
    partition problem, solved exactly by dynamic programming)."""
    costs = np.asarray(costs, dtype=float)
    n = costs.size
    k = min(n_chunks, n)
    prefix = np.concatenate([[0.0], np.cumsum(costs)])
    # best[j][i]: smallest largest-chunk cost for the first i values in j chunks
    best = np.full((k + 1, n + 1), np.inf)
    cut = np.zeros((k + 1, n + 1), dtype=int)
    best[0][0] = 0.0
    for j in range(1, k + 1):
        for i in range(1, n + 1):
            for start in range(j - 1, i):
                value = max(best[j - 1][start], prefix[i] - prefix[start])
                if value < best[j][i] - 1e-12:
                    best[j][i], cut[j][i] = value, start
    bounds, i = [n], n
    for j in range(k, 0, -1):
        i = cut[j][i]
        bounds.append(i)
    bounds = bounds[::-1]
    return [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def sweep(estimator, X, y, param="lam", values=None, cv=None, n_jobs=None,
          warm_start=True, verbose=0, scoring=None):
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
    param : str, default="lam"
        The swept hyperparameter (λ for the kernfw SVMs).
    values : sequence
        Its values, fitted in this order within each worker.
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
    params = _check_estimator(estimator, param)
    values = _check_values(values)
    if not isinstance(verbose, Integral) or verbose < 0:
        raise ValueError(f"verbose must be a nonnegative integer, got {verbose!r}")
    y = np.asarray(y)
    splits = _splits(estimator, X, y, cv)
    warm = bool(warm_start) and "warm_start" in params
    kernel = params.get("kernel")
    precomputed = isinstance(kernel, str) and kernel == "precomputed"
    tasks, parallel, blas_threads = _plan(param, values, len(splits), warm, n_jobs)

    with _shared_operator(estimator, X, param, parallel) as (template, shell, grams):
        jobs = (delayed(_fit_chunk)(template, param, [values[i] for i in chunk], f, X, y,
                                    splits[f], precomputed, warm, scoring, blas_threads, verbose,
                                    shell, *grams)
                for f, chunk in tasks)
        runner = Parallel(n_jobs=n_jobs if parallel else 1, return_as="generator")
        ordered = []
        for (f, chunk), chunk_rows in zip(tasks, runner(jobs)):
            ordered.extend(((i, f), row) for i, row in zip(chunk, chunk_rows))
    ordered.sort(key=lambda item: item[0])
    return SweepResults(param, [row for _, row in ordered])


def _check_estimator(estimator, param):
    """The estimator's parameters; it must have ``param``."""
    if not hasattr(estimator, "get_params"):
        raise TypeError(f"sweep needs a scikit-learn estimator, got {type(estimator).__name__}")
    params = estimator.get_params(deep=False)
    if param not in params:
        raise ValueError(f"{type(estimator).__name__} has no parameter {param!r}; "
                         f"its parameters are {sorted(params)}")
    return params


def _splits(estimator, X, y, cv):
    """``[None]`` (fit on everything) or the list of (train, val) index pairs."""
    if cv is None:
        return [None]
    splitter = check_cv(cv, y, classifier=is_classifier(estimator))
    return [(np.asarray(tr), np.asarray(va)) for tr, va in splitter.split(X, y)]


def _plan(param, values, n_folds, warm, n_jobs):
    """The tasks ``(fold, chunk of value positions)``, whether they run in
    parallel, and the BLAS threads each worker may use.

    With warm starts each fold's values are cut into as many contiguous
    chunks as there are workers per fold; without, every value is a task.
    Tasks are dispatched from the most to the least expensive (estimated),
    so the workers finish together; the rows are reordered afterwards.
    """
    n_workers = max(1, effective_n_jobs(n_jobs))
    n_chunks = len(values)
    if warm:
        n_chunks = min(len(values), max(1, math.ceil(n_workers / n_folds)))
    costs = _relative_costs(param, values)
    chunks = _chunks(costs, n_chunks)
    # dispatch the most expensive chunks first (longest-processing-time order)
    chunks.sort(key=lambda chunk: -costs[chunk].sum())
    tasks = [(f, chunk) for chunk in chunks for f in range(n_folds)]
    parallel = n_workers > 1 and len(tasks) > 1
    blas_threads = max(1, cpu_count() // min(n_workers, len(tasks))) if parallel else None
    return tasks, parallel, blas_threads


@contextlib.contextmanager
def _shared_operator(estimator, X, param, parallel):
    """``(template, shell, grams)`` for the workers; removes the memory maps after.

    ``template`` is the estimator to clone in the workers (without its kernel
    when the sweep shares an operator), ``shell`` the operator without its
    Gram matrices and ``grams`` those matrices (memory-mapped when
    ``parallel``).  Without a shared operator: ``(estimator, None, [])``.
    """
    if not _uses_operator(estimator, X, param):
        yield estimator, None, []
        return
    folder = _MemmapFolder() if parallel else None
    try:
        allocate = folder.allocate if folder is not None else _allocate_in_memory
        operator = _build_operator(estimator, X, allocate)
        grams = []
        shell = _detach_grams(operator, grams, {}) if parallel else operator
        del operator
        yield _without_kernel(estimator), shell, grams
    finally:
        if folder is not None:
            folder.cleanup()


def _fmt(value):
    return f"{value:.4g}" if isinstance(value, (int, float)) else str(value)


def _report(param, row):
    """One progress line for a finished fit (stderr)."""
    parts = [f"P={row['objective']:.6g}" if np.isfinite(row["objective"]) else "",
             f"gap={row['gap']:.2g}" if np.isfinite(row["gap"]) else "",
             f"train={row['train_score']:.4f}"]
    status = row["error"] or " ".join(p for p in parts if p)
    print(f"[sweep] {param}={_fmt(row['value'])} fold {row['fold']}: {status} "
          f"({row['fit_time']:.2f}s)", file=sys.stderr, flush=True)
