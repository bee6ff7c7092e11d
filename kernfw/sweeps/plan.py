"""Planning a sweep: checked values, folds, and chunks of values per worker.

The values are split into contiguous chunks, one per worker, of balanced
estimated cost (fits get slower as λ decreases, like ``1/λ``, or as ``C``
grows; see :func:`relative_costs`); within a chunk one estimator is refitted
value after value with warm starts.  Inside a worker the BLAS thread pools are
limited to ``cores // workers`` threads, so ``n_jobs × BLAS threads ≤ cores``.
"""

import math

import numpy as np
from joblib import cpu_count, effective_n_jobs
from sklearn.base import is_classifier
from sklearn.model_selection import check_cv

__all__ = ["check_values", "check_estimator", "splits", "relative_costs", "chunks", "plan"]


def check_values(values):
    """The values as a list of Python scalars (at least one)."""
    if values is None:
        raise ValueError("sweep needs values: the parameter values to fit")
    values = list(np.ravel(np.asarray(values, dtype=object)))
    if not values:
        raise ValueError("sweep needs at least one value")
    return [v.item() if isinstance(v, np.generic) else v for v in values]


def check_estimator(estimator, param):
    """The estimator's parameters; it must have ``param``."""
    if not hasattr(estimator, "get_params"):
        raise TypeError(f"sweep needs a scikit-learn estimator, got {type(estimator).__name__}")
    params = estimator.get_params(deep=False)
    if param not in params:
        raise ValueError(
            f"{type(estimator).__name__} has no parameter {param!r}; "
            f"its parameters are {sorted(params)}"
        )
    return params


def splits(estimator, X, y, cv):
    """``[None]`` (fit on everything) or the list of (train, val) index pairs."""
    if cv is None:
        return [None]
    splitter = check_cv(cv, y, classifier=is_classifier(estimator))
    return [(np.asarray(tr), np.asarray(va)) for tr, va in splitter.split(X, y)]


def relative_costs(param, values):
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


def chunks(costs, n_chunks):
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


def plan(param, values, n_folds, warm, n_jobs, done=frozenset()):
    """The tasks ``(fold, chunk of value positions)``, whether they run in
    parallel, and the BLAS threads each worker may use.

    With warm starts each fold's values are cut into as many contiguous
    chunks as there are workers per fold; without, every value is a task.
    Tasks are dispatched from the most to the least expensive (estimated),
    so the workers finish together; the rows are reordered afterwards.
    The ``(position, fold)`` pairs in ``done`` (fits a checkpoint already
    holds) are left out of their chunks, and empty chunks dropped.
    """
    n_workers = max(1, effective_n_jobs(n_jobs))
    n_chunks = len(values)
    if warm:
        n_chunks = min(len(values), max(1, math.ceil(n_workers / n_folds)))
    costs = relative_costs(param, values)
    parts = chunks(costs, n_chunks)
    # dispatch the most expensive chunks first (longest-processing-time order)
    parts.sort(key=lambda chunk: -costs[chunk].sum())
    tasks = [(f, chunk) for chunk in parts for f in range(n_folds)]
    tasks = [(f, [i for i in chunk if (i, f) not in done]) for f, chunk in tasks]
    tasks = [(f, chunk) for f, chunk in tasks if chunk]
    parallel = n_workers > 1 and len(tasks) > 1
    blas_threads = max(1, cpu_count() // min(n_workers, len(tasks))) if parallel else None
    return tasks, parallel, blas_threads
