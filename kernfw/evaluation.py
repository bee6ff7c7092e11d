"""The evaluation protocol of [Tajima2021] (:func:`kernfw.evaluate`).

Repeated splits, inner CV, top-k errors, paired t-tests.

:func:`evaluate` runs, for every method (any scikit-learn classifier with a
``decision_function`` or ``predict_proba``, kernfw's included):

1. ``n_trials`` random stratified splits of the data into a training and a
   test part (50/50 by default, as in [Tajima2021]);
2. inside each training part, the regularization (``C``, or ``lam`` for
   estimators without ``C``) chosen by ``cv``-fold cross-validation over a
   grid, through :func:`kernfw.sweep` (one shared kernel, warm starts);
3. a refit on the whole training part at the chosen value, and the top-k
   test errors ``1 − top_k_accuracy_score(y, scores, k)`` for
   ``k = 1, …, 10`` (only ``k < m``, the number of classes: at ``k = m`` the
   error is 0 by definition).

Every method sees the same splits, so the errors of two methods on one trial
are paired: :meth:`EvaluationResults.ttest` runs the paired t-test
(:func:`scipy.stats.ttest_rel`) of every pair of methods at one ``k``.

With ``checkpoint=DIR`` every finished (trial, method) is written to ``DIR`` as
it completes (and its inner-CV fits to ``DIR/inner/``), so an evaluation that
crashed or was interrupted resumes where it stopped when called again with
the same arguments (:mod:`kernfw.sweeps.checkpoint`).
"""

import csv
import os
import time
from numbers import Integral

import numpy as np
from scipy import stats
from sklearn.base import clone
from sklearn.metrics import top_k_accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_X_y

from .sweeps.results import WorkerDied

__all__ = [
    "evaluate",
    "EvaluationResults",
    "default_grid",
    "loss_methods",
    "solver_methods",
    "topk_errors",
    "DEFAULT_C_GRID",
]

#: default grid of ``C`` (SVC's convention; λ = 1/(C·n) for kernfw's λ models)
DEFAULT_C_GRID = (0.1, 1.0, 10.0)


class EvaluationResults:
    """Top-k test errors of several methods over paired random splits.

    Attributes
    ----------
    methods : list of str
        Method names, in the order given.
    ks : ndarray of shape (n_ks,)
        The ``k`` of each top-k error column.
    errors : ndarray of shape (n_methods, n_trials, n_ks)
        ``errors[a, t, j]``: top-``ks[j]`` test error of method ``a`` on trial ``t``.
    param : list of str or None
        The hyperparameter each method selected by inner CV (None: none).
    selected : ndarray of shape (n_methods, n_trials)
        The value chosen on each trial (NaN without a grid).
    fit_times : ndarray of shape (n_methods, n_trials)
        Seconds of the inner CV plus the final refit.
    """

    def __init__(self, methods, ks, errors, param, selected, fit_times):
        self.methods = list(methods)
        self.ks = np.asarray(ks)
        self.errors = np.asarray(errors, dtype=float)
        self.param = list(param)
        self.selected = np.asarray(selected, dtype=float)
        self.fit_times = np.asarray(fit_times, dtype=float)

    @property
    def n_trials(self):
        """Number of random splits."""
        return self.errors.shape[1]

    def mean(self):
        """Mean top-k error over trials, shape (n_methods, n_ks)."""
        return self.errors.mean(axis=1)

    def std(self):
        """Standard deviation over trials (ddof = 1 when n_trials > 1), shape (n_methods, n_ks)."""
        ddof = 1 if self.n_trials > 1 else 0
        return self.errors.std(axis=1, ddof=ddof)

    def _column(self, k):
        hits = np.flatnonzero(self.ks == k)
        if hits.size == 0:
            raise ValueError(f"k={k} was not evaluated; the evaluated k are {self.ks.tolist()}")
        return int(hits[0])

    def ttest(self, k=1):
        """Paired t-tests of every pair of methods on the top-``k`` errors.

        Parameters
        ----------
        k : int, default=1
            Which top-k error to compare.

        Returns
        -------
        t, p : ndarray of shape (n_methods, n_methods)
            ``t[a, b]`` is the statistic of ``errors[a] − errors[b]`` over the
            trials (positive: ``a`` has the larger errors) and ``p[a, b]`` its
            two-sided p-value; the diagonal, and pairs whose differences are
            all equal (the test is undefined), hold NaN and 1.0.
        """
        j = self._column(k)
        n = len(self.methods)
        t = np.full((n, n), np.nan)
        p = np.ones((n, n))
        for a in range(n):
            for b in range(n):
                diff = self.errors[a, :, j] - self.errors[b, :, j]
                if a == b or self.n_trials < 2:
                    continue
                if np.ptp(diff) <= 1e-12:  # constant differences: no variance
                    if abs(diff[0]) > 1e-12:
                        t[a, b], p[a, b] = np.copysign(np.inf, diff[0]), 0.0
                    continue
                res = stats.ttest_rel(self.errors[a, :, j], self.errors[b, :, j])
                t[a, b], p[a, b] = float(res.statistic), float(res.pvalue)
        return t, p

    def best(self, k=1, alpha=0.05):
        """The method with the smallest mean top-``k`` error and those not significantly worse.

        Returns
        -------
        best : str
            Name of the best method.
        ties : list of str
            Methods whose paired t-test against the best has ``p ≥ alpha``
            (no significant difference; [Tajima2021] underlines them).
        """
        j = self._column(k)
        a = int(np.argmin(self.mean()[:, j]))
        _, p = self.ttest(k)
        ties = [m for b, m in enumerate(self.methods) if b != a and p[a, b] >= alpha]
        return self.methods[a], ties

    def table(self, ks=None):
        """The mean ± std table as text: one row per method, one column per k.

        Parameters
        ----------
        ks : sequence of int or None
            The columns to show (default all evaluated k).
        """
        ks = self.ks if ks is None else np.asarray(ks)
        cols = [self._column(k) for k in ks]
        mean, std = self.mean(), self.std()
        width = max(len(m) for m in self.methods + ["method"])
        head = f"{'method':<{width}}  " + "  ".join(f"{'top-' + str(k):>15}" for k in ks)
        lines = [head]
        for a, name in enumerate(self.methods):
            cells = [f"{mean[a, j]:.4f} ± {std[a, j]:.4f}" for j in cols]
            lines.append(f"{name:<{width}}  " + "  ".join(f"{c:>15}" for c in cells))
        return "\n".join(lines)

    def ttest_table(self, k=1):
        """The p-values of :meth:`ttest` as text (row method vs column method)."""
        _, p = self.ttest(k)
        width = max(len(m) for m in self.methods + [f"top-{k} p"])
        lines = [f"{f'top-{k} p':<{width}}  " + "  ".join(f"{m[:12]:>12}" for m in self.methods)]
        for a, name in enumerate(self.methods):
            cells = ["—" if a == b else f"{p[a, b]:.3g}" for b in range(len(self.methods))]
            lines.append(f"{name:<{width}}  " + "  ".join(f"{c:>12}" for c in cells))
        return "\n".join(lines)

    def rows(self):
        """One dict per (method, trial, k): the long format of the errors."""
        out = []
        for a, name in enumerate(self.methods):
            for t in range(self.n_trials):
                for j, k in enumerate(self.ks):
                    out.append(
                        {
                            "method": name,
                            "trial": t,
                            "k": int(k),
                            "error": float(self.errors[a, t, j]),
                            "param": self.param[a] or "",
                            "selected": float(self.selected[a, t]),
                            "fit_time": float(self.fit_times[a, t]),
                        }
                    )
        return out

    def to_csv(self, path):
        """Write :meth:`rows` to ``path`` as CSV."""
        rows = self.rows()
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    def to_pandas(self):
        """:meth:`rows` as a :class:`pandas.DataFrame` (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.rows())

    def __repr__(self):
        return (
            f"EvaluationResults({len(self.methods)} methods, {self.n_trials} trials, "
            f"k={self.ks.tolist()})"
        )


def default_grid(estimator):
    """The hyperparameter and grid the inner CV searches for ``estimator``.

    ``C`` over :data:`DEFAULT_C_GRID` when the estimator has ``C``; else None
    (no inner search).  kernfw's λ models take ``C`` (``λ = 1/(C·n)``).

    Returns
    -------
    param : str or None
    values : tuple of float or None
    """
    if "C" in estimator.get_params(deep=False):
        return "C", DEFAULT_C_GRID
    return None, None


def _rho(k, m):
    """Linearly decreasing weights on the top ``k`` of ``m`` positions (sum 1, ρ_m = 0)."""
    rho = np.zeros(m)
    rho[:k] = np.arange(k, 0, -1, dtype=float)
    return rho / rho.sum()


def loss_methods(n_classes, k=3, **params):
    """The six losses of [Tajima2021] as :class:`~kernfw.MultiClassSVM` methods.

    Parameters
    ----------
    n_classes : int
        Number of classes ``m`` (sets the length of ``ρ``; needs ``k < m``).
    k : int, default=3
        ``k`` of the top-k and Usunier losses; the weighted losses use
        ``ρ ∝ (k, k − 1, …, 1, 0, …, 0)``.
    **params
        Further MultiClassSVM parameters shared by all six (kernel, solver, ...).

    Returns
    -------
    dict of {str: MultiClassSVM}
    """
    from .estimators.multiclass import MultiClassSVM

    if not 1 <= k < n_classes:
        raise ValueError(f"k must satisfy 1 ≤ k < m = {n_classes}, got {k}")
    rho = _rho(k, n_classes)
    return {
        "max_hinge": MultiClassSVM(loss="max_hinge", **params),
        "structured_hinge": MultiClassSVM(loss="structured_hinge", **params),
        f"topk_hinge(k={k})": MultiClassSVM(loss="topk_hinge", k=k, **params),
        f"usunier(k={k})": MultiClassSVM(loss="usunier", k=k, **params),
        "weighted_topk": MultiClassSVM(loss="weighted_topk", rho=rho, **params),
        "weighted_usunier": MultiClassSVM(loss="weighted_usunier", rho=rho, **params),
    }


def solver_methods(max_iter=1000, **params):
    """The methods of Table 1 of [Tajima2021]: PG, StdFW and LSFW with the same iteration budget.

    Parameters
    ----------
    max_iter : int, default=1000
        The budget of every solver ([Tajima2021] runs 1,000 iterations).
    **params
        Further MultiClassSVM parameters (loss, kernel, ...).

    Returns
    -------
    dict of {str: MultiClassSVM}
    """
    from .estimators.multiclass import MultiClassSVM

    return {
        name: MultiClassSVM(solver=solver, max_iter=max_iter, **params)
        for name, solver in (("PG", "pg"), ("StdFW", "stdfw"), ("LSFW", "lsfw"))
    }


def _names(estimators):
    """Method names: the dict keys, or class names (``Name#2`` for repeats)."""
    if isinstance(estimators, dict):
        return list(estimators), list(estimators.values())
    estimators = list(estimators)
    names, seen = [], {}
    for est in estimators:
        name = type(est).__name__
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return names, estimators


def _scores(estimator, X):
    """Class scores for top-k: ``decision_function`` or ``predict_proba``."""
    if hasattr(estimator, "decision_function"):
        return np.asarray(estimator.decision_function(X))
    if hasattr(estimator, "predict_proba"):
        return np.asarray(estimator.predict_proba(X))
    raise TypeError(
        f"{type(estimator).__name__} has neither decision_function nor "
        "predict_proba: top-k errors need class scores"
    )


def topk_errors(estimator, X, y, ks):
    """``1 − top_k_accuracy_score`` of a fitted classifier for each ``k`` in ``ks``."""
    scores = _scores(estimator, X)
    labels = estimator.classes_
    return np.array([1.0 - top_k_accuracy_score(y, scores, k=int(k), labels=labels) for k in ks])


def _select(estimator, X, y, param, values, cv, n_jobs, checkpoint=None):
    """The grid value with the best mean validation score (ties: the first)."""
    from .sweeps import sweep

    table = sweep(
        estimator, X, y, param=param, values=values, cv=cv, n_jobs=n_jobs, checkpoint=checkpoint
    )
    val = table["val_score"]
    value = table["value"]
    means = [
        np.nanmean(val[value == v]) if np.any(np.isfinite(val[value == v])) else -np.inf
        for v in values
    ]
    if not np.any(np.isfinite(means)):
        errors = "; ".join(sorted({row["error"] for row in table.errors}))
        raise RuntimeError(f"every inner-CV fit failed: {errors}")
    return values[int(np.argmax(means))]


def _open_checkpoint(
    path, names, ests, X, y, n_trials, test_size, grids, cv, ks, seeds, random_state, save_models
):
    """The opened :class:`~kernfw.sweeps.checkpoint.Checkpoint` of an evaluation, or None."""
    if path is None:
        if save_models:
            raise ValueError("save_models=True needs a checkpoint directory to save the models in")
        return None
    from .sweeps.checkpoint import Checkpoint, digest

    if not isinstance(random_state, Integral):
        raise ValueError(
            "checkpoint needs an integer random_state: a resumed evaluation must draw the "
            f"same splits, got random_state={random_state!r}"
        )
    arguments = {
        "methods": list(names),
        "estimators": [
            f"{type(e).__module__}.{type(e).__qualname__} {digest(e.get_params(deep=False))}"
            for e in ests
        ],
        "X": digest(X),
        "y": digest(y),
        "n_trials": int(n_trials),
        "test_size": float(test_size),
        "grids": digest([(p, None if v is None else list(v)) for p, v in grids]),
        "cv": cv if isinstance(cv, Integral) else digest(cv),
        "ks": [int(k) for k in ks],
        "seeds": [int(s) for s in seeds],
        "save_models": bool(save_models),
    }
    return Checkpoint(path, "evaluate", arguments).open()


def _check_grid(estimator, param, values):
    if param is None:
        return default_grid(estimator)
    if param not in estimator.get_params(deep=False):
        raise ValueError(f"{type(estimator).__name__} has no parameter {param!r}")
    if values is None or len(values) == 0:
        raise ValueError(f"param={param!r} needs a nonempty grid of values")
    return param, tuple(values)


def _check_protocol(names, ests, X, y, n_trials, test_size, ks):
    """Validated ``(X, y, classes, ks)`` of :func:`evaluate` (``ks`` sorted, ``1 ≤ k < m``)."""
    if not ests:
        raise ValueError("estimators is empty: give at least one classifier")
    if len(set(names)) != len(names):
        raise ValueError(f"method names must be unique, got {names}")
    X, y = check_X_y(X, y, accept_sparse=("csr", "csc"), dtype=None)
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(f"y has a single class ({classes[0]!r}): nothing to classify")
    if not isinstance(n_trials, Integral) or n_trials < 1:
        raise ValueError(f"n_trials must be a positive integer, got {n_trials!r}")
    if not 0.0 < float(test_size) < 1.0:
        raise ValueError(f"test_size must lie in (0, 1), got {test_size!r}")
    ks = np.array(sorted({int(k) for k in ks if 1 <= int(k) < classes.size}))
    if ks.size == 0:
        raise ValueError(f"no k in ks satisfies 1 ≤ k < m = {classes.size}")
    return X, y, classes, ks


def _method_grid(name, est, param, values):
    """``(param, values)`` of the method ``name`` (dicts give one per method; a method
    given ``param=None`` explicitly is fitted at its parameters)."""
    if isinstance(param, dict) and name in param and param[name] is None:
        return None, None
    p = param.get(name) if isinstance(param, dict) else param
    v = values.get(name) if isinstance(values, dict) else values
    return _check_grid(est, p, v)


def evaluate(
    estimators,
    X,
    y,
    *,
    n_trials=20,
    test_size=0.5,
    param=None,
    values=None,
    cv=3,
    ks=range(1, 11),
    random_state=0,
    n_jobs=None,
    verbose=0,
    checkpoint=None,
    save_models=False,
):
    """Compare classifiers by the top-k protocol of [Tajima2021].

    Parameters
    ----------
    estimators : dict of {str: estimator} or list of estimators
        The methods (cloned, never modified).  A list is named by class
        (``Name#2`` for a repeated class).
    X : array-like or sparse matrix of shape (n, d)
        Inputs.
    y : array-like of shape (n,)
        Class labels (at least 2 classes).
    n_trials : int, default=20
        Number of random stratified splits ([Tajima2021] uses 20).
    test_size : float, default=0.5
        Test fraction of each split.
    param : str, dict of {str: str or None} or None
        Hyperparameter searched by inner CV, per method or for all; None
        takes :func:`default_grid` (``C`` when the estimator has it).  A dict
        entry of None disables the search for that method.
    values : sequence of float, dict of {str: sequence} or None
        The grid (per method or for all); required with an explicit ``param``.
    cv : int or CV splitter, default=3
        Inner cross-validation of :func:`kernfw.sweep`.
    ks : iterable of int, default=range(1, 11)
        The top-k errors to report; ``k ≥ m`` (number of classes) is dropped.
    random_state : int, RandomState or None, default=0
        Seeds the splits (trial ``t`` uses one seed drawn from it).
    n_jobs : int or None
        Workers of the inner CV sweeps.
    verbose : int, default=0
        ≥ 1 prints one line per (trial, method).
    checkpoint : str, path-like or None
        A directory (created if absent) where each finished (trial, method)
        is written as it completes, and the inner-CV fits in ``inner/`` (each
        a :func:`kernfw.sweep` checkpoint).  Calling ``evaluate`` again with
        the same arguments and directory computes only what is missing (after
        a crash or Ctrl-C).  The directory records the method names, a digest
        of each estimator's parameters, of ``X`` and ``y``, and ``n_trials``,
        ``test_size``, the grids, ``cv``, ``ks`` and the split seeds: if any
        differs, :class:`~kernfw.sweeps.checkpoint.CheckpointMismatch` is
        raised (use a new directory).  Needs an integer ``random_state``
        (the splits must be the same on resume).
    save_models : bool, default=False
        Also save the model refitted on each trial's training part in
        ``checkpoint`` (``models/t<trial>-m<method>.joblib``, methods numbered
        in the order given).

    Returns
    -------
    EvaluationResults

    Raises
    ------
    kernfw.sweeps.CheckpointMismatch
        ``checkpoint`` holds an evaluation with other arguments.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from kernfw import evaluate
    >>> X, y = load_iris(return_X_y=True)
    >>> res = evaluate({"logreg": LogisticRegression(max_iter=500)}, X, y, n_trials=3,
    ...                ks=[1, 2])
    >>> res.errors.shape
    (1, 3, 2)
    """
    names, ests = _names(estimators)
    X, y, classes, ks = _check_protocol(names, ests, X, y, n_trials, test_size, ks)
    grids = [_method_grid(name, est, param, values) for name, est in zip(names, ests)]

    seeds = check_random_state(random_state).randint(np.iinfo(np.int32).max, size=n_trials)
    store = _open_checkpoint(
        checkpoint, names, ests, X, y, n_trials, test_size, grids, cv, ks, seeds, random_state,
        save_models,
    )  # fmt: skip
    shape = (len(ests), n_trials)
    errors = np.full(shape + (ks.size,), np.nan)
    selected = np.full(shape, np.nan)
    fit_times = np.zeros(shape)
    try:
        for t, seed in enumerate(seeds):
            split = None
            for a, (name, est) in enumerate(zip(names, ests)):
                key = f"t{t:04d}-m{a:03d}"
                stored = None if store is None else store.read_row(key)
                if stored is not None:
                    errors[a, t] = stored["errors"]
                    selected[a, t] = np.nan if stored["selected"] is None else stored["selected"]
                    fit_times[a, t] = stored["fit_time"]
                    continue
                if split is None:
                    split = train_test_split(
                        X, y, test_size=test_size, stratify=y, random_state=int(seed)
                    )
                X_tr, X_te, y_tr, y_te = split
                if store is not None:
                    store.start(key)
                start = time.perf_counter()
                model = clone(est)
                p, grid = grids[a]
                if p is not None:
                    inner = None if store is None else os.path.join(store.path, "inner", key)
                    best = _select(model, X_tr, y_tr, p, grid, cv, n_jobs, inner)
                    model.set_params(**{p: best})
                    selected[a, t] = best
                model.fit(X_tr, y_tr)
                fit_times[a, t] = time.perf_counter() - start
                errors[a, t] = topk_errors(model, X_te, y_te, ks)
                if store is not None:
                    if save_models:
                        store.write_model(key, model)
                    chosen = None if p is None else float(selected[a, t])
                    row = {"method": name, "trial": t, "errors": errors[a, t].tolist()}
                    row.update(selected=chosen, fit_time=float(fit_times[a, t]))
                    store.write_row(key, row)
                if verbose:
                    chosen = "" if p is None else f"  {p}={selected[a, t]:g}"
                    print(
                        f"[evaluate] trial {t + 1}/{n_trials}  {name}: top-1 error "
                        f"{errors[a, t, 0]:.4f}{chosen}  ({fit_times[a, t]:.1f}s)"
                    )
    except (KeyboardInterrupt, WorkerDied) as exc:
        if store is not None:
            exc.add_note(
                f"kernfw.evaluate: the finished (trial, method) results are saved in "
                f"{store.path!r}: call evaluate again with the same arguments (or rerun the same "
                "kernfw command) to resume"
            )
        raise
    return EvaluationResults(names, ks, errors, [g[0] for g in grids], selected, fit_times)
