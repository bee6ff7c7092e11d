"""``KernelGridSearchCV``: scikit-learn's ``GridSearchCV`` with the work of its fits shared."""

import time

from sklearn.base import _fit_context, clone, is_classifier
from sklearn.model_selection import ParameterGrid, check_cv
from sklearn.model_selection._search import BaseSearchCV
from sklearn.model_selection._validation import (
    _insert_error_scores,
    _warn_or_raise_about_fit_failures,
)
from sklearn.utils.validation import _check_method_params, indexable

from .evaluate import certificate_columns, evaluate_grid

__all__ = ["KernelGridSearchCV"]


class KernelGridSearchCV(BaseSearchCV):
    """Exhaustive search over a parameter grid with cross-validation, fits sharing work.

    A drop-in for :class:`sklearn.model_selection.GridSearchCV`: the same
    parameters, the same fitted attributes and the same ``cv_results_`` keys,
    plus each fit's certificate.  What differs is how the fits are run:

    - the candidates that differ only in ``C`` (or ``lam``) form a *path*; its
      kernel (one per value of ``kernel``, ``gamma``, ``degree``, ``coef0``, …) is
      computed once on all rows and each fold fits on its rows of it
      (:meth:`~kernfw.operators.KernelOperator.subset`), so a 6 × 6 grid of ``C``
      and ``gamma`` computes 6 kernels, not 6 × 6 × n_folds;
    - along a path each fold's fits follow ``C`` upwards (``lam`` downwards), each
      starting from the previous dual solution (math.md §7.1): through
      ``warm_start`` when the estimator has it (:class:`~kernfw.MultiClassSVM`),
      through the solver's start ``alpha0`` for :class:`~kernfw.L2SVC`, whose fold
      models are then scored on the shared kernel's rows
      (:mod:`kernfw.model_selection.l2svm_path`);
    - the (path, fold) tasks run on joblib workers that read the kernels from
      memory maps (no copy per worker; :func:`kernfw.sweep`'s machinery).

    Any estimator works (a :class:`~sklearn.pipeline.Pipeline`, a scikit-learn
    model): kernels are shared only for kernfw estimators given a kernel by name
    (:func:`kernfw.estimators._base.accepts_kernel_operator`), other fits run as
    in ``GridSearchCV``.

    Parameters
    ----------
    estimator : estimator object
        The model to tune (a kernfw estimator for shared work).
    param_grid : dict or list of dicts
        Parameter names mapped to the lists of values to try, as
        :class:`~sklearn.model_selection.ParameterGrid` takes: ``C`` or ``lam``,
        ``kernel`` (names, callables or lists of kernels), ``gamma``, ``degree``,
        ``coef0``, ``approx``, ``n_components``, ``loss``, ``k``, …
    scoring : str, callable, list, tuple, dict or None, default=None
        As ``GridSearchCV``: any scikit-learn scorer (``"accuracy"``,
        ``"top_k_accuracy"`` on ``decision_function``, a ``make_scorer``, several
        as a dict); None is the estimator's ``score``.
    n_jobs : int or None, default=None
        joblib workers for the (path, fold) tasks (None: the active
        ``joblib.parallel_config``; ``parallel_config(backend="dask")`` runs them
        on a Dask cluster).
    refit : bool, str or callable, default=True
        As ``GridSearchCV``: refit the best candidate on all the data
        (``best_estimator_``, a fit of the estimator as given, building its own kernel).
    cv : int, cross-validation generator or iterable, default=None
        As ``GridSearchCV`` (5 folds, stratified for classifiers).
    verbose : int, default=0
        ≥ 1 prints the number of fits, ≥ 2 one line per finished (path, fold) task.
    pre_dispatch : int or str, default="2*n_jobs"
        joblib's.
    error_score : "raise" or float, default=np.nan
        The score of a fit that fails.
    return_train_score : bool, default=False
        Also score each fit on its training rows (``split<k>_train_score``, …).

    Attributes
    ----------
    cv_results_ : dict of arrays
        ``GridSearchCV``'s keys (``mean_fit_time``, ``std_fit_time``,
        ``mean_score_time``, ``std_score_time``, ``param_<name>``, ``params``,
        ``split<k>_test_score``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score``, and the train scores with ``return_train_score``;
        ``<name>`` for ``score`` with several metrics) plus each fit's certificate:
        ``split<k>_duality_gap`` (the certified duality gap of the fit, on its
        problem's scale; summed over the binary problems of a one-vs-one L2SVC),
        ``split<k>_n_iter`` and ``split<k>_converged`` (1.0 when the fit met its
        ``tol``), and their ``mean_`` over the folds.  NaN for estimators that
        certify nothing.  A fit's ``fit_time`` is its solver's time on the shared
        kernel (computing a path's kernel is counted in no fit).
    best_estimator_, best_score_, best_params_, best_index_, scorer_, n_splits_, \
refit_time_, multimetric_, classes_, n_features_in_
        As ``GridSearchCV``.

    See Also
    --------
    sklearn.model_selection.GridSearchCV : the same search, every fit from scratch.
    kernfw.sweep : one parameter, every fit's full row.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import scale
    >>> from kernfw import L2SVC
    >>> from kernfw.model_selection import KernelGridSearchCV
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> grid = {"C": [0.1, 1.0, 10.0], "gamma": [0.01, 0.1]}
    >>> search = KernelGridSearchCV(L2SVC(), grid, cv=3).fit(scale(X), y)
    >>> sorted(search.best_params_), bool(search.cv_results_["mean_converged"].all())
    (['C', 'gamma'], True)
    """

    _parameter_constraints: dict = {
        **BaseSearchCV._parameter_constraints,
        "param_grid": [dict, list],
    }

    def __init__(
        self,
        estimator,
        param_grid,
        *,
        scoring=None,
        n_jobs=None,
        refit=True,
        cv=None,
        verbose=0,
        pre_dispatch="2*n_jobs",
        error_score=float("nan"),
        return_train_score=False,
    ):
        super().__init__(
            estimator=estimator,
            scoring=scoring,
            n_jobs=n_jobs,
            refit=refit,
            cv=cv,
            verbose=verbose,
            pre_dispatch=pre_dispatch,
            error_score=error_score,
            return_train_score=return_train_score,
        )
        self.param_grid = param_grid

    def _run_search(self, evaluate_candidates, *, callback_ctx=None):
        """Every candidate of ``param_grid`` (what ``GridSearchCV`` searches)."""
        evaluate_candidates(ParameterGrid(self.param_grid))

    @_fit_context(prefer_skip_nested_validation=False)  # the estimator is validated by its fits
    def fit(self, X, y=None, **params):
        """Evaluate every candidate on every fold, then refit the best on all the data.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), or a Gram
            Training inputs (a Gram matrix for ``kernel="precomputed"``).
        y : array-like of shape (n_samples,) or None
            Targets.
        **params : dict
            ``groups`` for the splitter; every other parameter goes to the
            estimator's ``fit`` (arrays of one value per row are cut to the folds).

        Returns
        -------
        self
        """
        scorers, refit_metric = self._get_scorers()
        X, y = indexable(X, y)
        params = _check_method_params(X, params=params)
        groups = params.pop("groups", None)
        cv = check_cv(self.cv, y, classifier=is_classifier(self.estimator))
        splits = list(cv.split(X, y, groups))
        self.n_splits_ = len(splits)
        candidates = list(ParameterGrid(self.param_grid))
        if self.verbose > 0:
            print(
                f"Fitting {self.n_splits_} folds for each of {len(candidates)} candidates, "
                f"totalling {self.n_splits_ * len(candidates)} fits"
            )
        entries, certificates = evaluate_grid(
            self.estimator,
            candidates,
            X,
            y,
            splits,
            fit_params=params,
            scorer=scorers,
            options={
                "return_train_score": self.return_train_score,
                "error_score": self.error_score,
            },
            n_jobs=self.n_jobs,
            pre_dispatch=self.pre_dispatch,
            progress=self._report if self.verbose > 1 else None,
        )
        self.cv_results_ = self._results(candidates, entries, certificates)
        self._select(refit_metric)
        if self.refit:
            self._refit(X, y, params)
        self.scorer_ = getattr(scorers, "_scorers", scorers)
        return self

    def _report(self, done, total):
        print(f"[KernelGridSearchCV] {done}/{total} path × fold tasks done", flush=True)

    def _results(self, candidates, entries, certificates):
        """``cv_results_``: ``GridSearchCV``'s table plus the fits' certificates."""
        if not entries:
            raise ValueError("No fits were performed: was the grid or the CV iterator empty?")
        _warn_or_raise_about_fit_failures(entries, self.error_score)
        if callable(self.scoring):
            _insert_error_scores(entries, self.error_score)
        self.multimetric_ = isinstance(entries[0]["test_scores"], dict)
        results = self._format_results(candidates, self.n_splits_, entries)
        results.update(certificate_columns(certificates, len(candidates), self.n_splits_))
        return results

    def _select(self, refit_metric):
        """``best_index_``, ``best_score_``, ``best_params_`` (as ``GridSearchCV``)."""
        if callable(self.scoring) and self.multimetric_:
            self._check_refit_for_multimetric(self._metric_names())
            refit_metric = self.refit
        if self.refit or not self.multimetric_:
            self.best_index_ = self._select_best_index(self.refit, refit_metric, self.cv_results_)
            if not callable(self.refit):
                self.best_score_ = self.cv_results_[f"mean_test_{refit_metric}"][self.best_index_]
            self.best_params_ = self.cv_results_["params"][self.best_index_]

    def _metric_names(self):
        """The metric names of a multi-metric search (from ``cv_results_``'s keys)."""
        return {k[len("mean_test_") :] for k in self.cv_results_ if k.startswith("mean_test_")}

    def _refit(self, X, y, params):
        """``best_estimator_``: the best candidate fitted on all the data."""
        self.best_estimator_ = clone(self.estimator).set_params(
            **clone(self.best_params_, safe=False)
        )
        start = time.perf_counter()
        if y is not None:
            self.best_estimator_.fit(X, y, **params)
        else:
            self.best_estimator_.fit(X, **params)
        self.refit_time_ = time.perf_counter() - start
        if hasattr(self.best_estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.best_estimator_.feature_names_in_
