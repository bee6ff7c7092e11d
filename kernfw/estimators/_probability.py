"""``probability=True``: class probabilities calibrated on internal cross-validation folds.

:class:`ProbabilityMixin` gives a classifier ``predict_proba`` and ``predict_log_proba``
with the contract of :class:`sklearn.svm.SVC`: they exist only when ``probability=True``
(otherwise reading them raises AttributeError), and the map from scores to probabilities
(:mod:`kernfw.calibration`, math.md §9) is fitted on scores the model did not train on.
As libsvm does, ``fit`` splits the training set into :data:`PROBABILITY_FOLDS` folds
(stratified, shuffled by ``random_state``), fits the model on every ``k − 1`` of them,
collects the scores of the held-out fold, fits the calibration map to those ``n``
held-out scores and keeps the model fitted on all the data.

The fold fits share the one kernel operator of the training fit
(``operator.subset(train)``: the Gram or the column cache is not built again) and start
from the full model's dual restricted to their points, a feasible point of their dual.
A classifier provides two methods:

``_heldout_scores(op, y_enc, train, val, state)``
    fit the model on ``op.subset(train)`` and return its scores on the points ``val``
    (``state``: what the full fit passed to :meth:`ProbabilityMixin._fit_probability`);
``_proba_scores(X)``
    the scores of new inputs, of the same kind (shape (n,) for two classes, else (n, m)).
"""

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..calibration import calibrated_log_proba, fit_calibration
from ._base import approx_seed

__all__ = ["ProbabilityMixin", "PROBABILITY_FOLDS", "calibration_folds"]

#: cross-validation folds of the calibration (libsvm's 5)
PROBABILITY_FOLDS = 5


def calibration_folds(y_enc, random_state, n_splits=PROBABILITY_FOLDS):
    """The ``(train, val)`` index pairs of the calibration folds.

    Stratified and shuffled by ``random_state``; ``min(n_splits, n)`` plain shuffled folds
    when a class has fewer than ``n_splits`` points.

    Parameters
    ----------
    y_enc : ndarray of int, shape (n,)
        Class indices.
    random_state : None, int, RandomState or Generator
        The estimator's ``random_state``.
    n_splits : int, default=PROBABILITY_FOLDS

    Returns
    -------
    list of (ndarray, ndarray)
    """
    y_enc = np.asarray(y_enc)
    seed = approx_seed(random_state)
    counts = np.bincount(y_enc)
    if counts[counts > 0].min() >= n_splits:
        cv = StratifiedKFold(n_splits, shuffle=True, random_state=seed)
    else:
        cv = KFold(min(n_splits, y_enc.size), shuffle=True, random_state=seed)
    return list(cv.split(np.zeros((y_enc.size, 1)), y_enc))


class ProbabilityMixin:
    """``predict_proba`` / ``predict_log_proba`` of a classifier with a ``probability`` flag.

    ``fit`` calls :meth:`_fit_probability` after the model is fitted; the classifier
    provides ``_heldout_scores`` and ``_proba_scores`` (module docstring).
    """

    def _check_proba(self):
        if not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    def _fit_probability(self, op, y_enc, state=None):
        """Fit ``calibration_`` on the held-out scores of the folds (``probability=True``).

        Parameters
        ----------
        op : KernelOperator
            The training operator (the folds use its subsets).
        y_enc : ndarray of int, shape (n,)
            Class indices of the training points.
        state : object, default=None
            What the fold fits may reuse of the full fit (passed to ``_heldout_scores``).
        """
        self.__dict__.pop("calibration_", None)
        if not self.probability:
            return
        scores = None
        for train, val in calibration_folds(y_enc, self.random_state):
            fold = self._heldout_scores(op, y_enc, train, val, state)
            if scores is None:
                scores = np.zeros((y_enc.size,) + fold.shape[1:])
            scores[val] = fold
        self._set_calibration(scores, y_enc)

    def _set_calibration(self, scores, y_enc):
        """Fit ``calibration_`` to the held-out ``scores`` of the training points (their
        class indices ``y_enc``)."""
        self.calibration_ = fit_calibration(scores, y_enc)

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs (as for ``decision_function``).

        Returns
        -------
        ndarray of shape (n_samples, m)
            Columns follow ``classes_``.
        """
        check_is_fitted(self)
        if not hasattr(self, "calibration_"):
            raise NotFittedError(
                "predict_proba is not available when fitted with probability=False"
            )
        return self._calibrated_log_proba(X)

    def _calibrated_log_proba(self, X):
        """The calibration map of the scores of ``X`` (:meth:`predict_log_proba` once
        fitted)."""
        return calibrated_log_proba(self.calibration_, self._proba_scores(X))

    @available_if(_check_proba)
    def predict_proba(self, X):
        """Class probabilities, calibrated on held-out scores of ``fit``'s internal folds.

        Each row sums to 1; columns follow ``classes_``.  As for
        :class:`sklearn.svm.SVC`, the class of largest probability may differ from
        ``predict`` (math.md §9.4).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs (as for ``decision_function``).

        Returns
        -------
        ndarray of shape (n_samples, m)
        """
        return np.exp(self.predict_log_proba(X))
