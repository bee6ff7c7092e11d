"""``L2SVC``: the L2-SVM of the core vector machine, trained by (away-step) Frank-Wolfe.

Seed 001 (Frandi et al.), math.md §2: the binary L2-SVM is the minimum
enclosing ball problem of the modified kernel ``k̃``; :func:`kernfw.solvers.meb.l2svm`
solves it with one kernel column per iteration.  Multi-class problems are
split one-vs-one (as :class:`sklearn.svm.SVC`) or one-vs-rest, and the binary
problems are trained in parallel with joblib.
"""

from itertools import combinations
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.callback import with_callbacks
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import (_num_samples, check_consistent_length, check_is_fitted,
                                      validate_data)

from ..kernels import make_operator
from ..operators import KernelFunction, KernelOperator, PairwiseKernel
from ..solvers.meb import METHODS, l2svm
from ._base import KERNEL_PARAMETER_CONSTRAINTS, FWEstimatorMixin

__all__ = ["L2SVC", "SupportKernelMixin", "gram_budget"]

#: n × n Gram matrices up to this size (MB) are always precomputed
GRAM_MAX_MB = 32.0
#: with at least this many features, a Gram that fits in ``cache_size`` is precomputed:
#: one BLAS-3 product beats ~n memory-bound column products (k(X, x_i) reads all of X)
WIDE_FEATURES = 50


def gram_budget(X, cache_size):
    """Largest Gram (MB) to precompute for inputs ``X`` (see :data:`WIDE_FEATURES`).

    MFW fetches about one kernel column per iteration and needs roughly as many
    iterations as there are points, so on-the-fly columns cost about ``n²``
    kernel values too, but each column is a matrix-vector product that reads
    all of ``X``.  Few features: the columns win (and need no ``n²`` memory);
    many features: the Gram, if it fits in the cache budget.
    """
    if X is not None and getattr(X, "ndim", 0) == 2 and X.shape[1] >= WIDE_FEATURES:
        return max(GRAM_MAX_MB, float(cache_size))
    return GRAM_MAX_MB


class SupportKernelMixin:
    """Kernel input and support-only prediction shared by :class:`L2SVC` and
    :class:`~kernfw.estimators.meb.MinimumEnclosingBall`.

    ``kernel`` is an SVC-style spec, "precomputed" or a ready
    :class:`~kernfw.operators.KernelOperator`.  After ``fit`` sets
    ``support_``, :meth:`_set_predictor` keeps only what prediction needs:
    the support points (their kernel is all that is ever evaluated), and
    :meth:`_support_kernel` returns ``k(X_new, x_j)`` for ``j`` in ``support_``.
    """

    def _kernel_is_operator(self):
        return isinstance(self.kernel, KernelOperator)

    def _kernel_is_precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _validate_training_data(self, X, y=None):
        """Validated ``(X, y)`` and the training kernel operator."""
        if self._kernel_is_operator():
            op = self.kernel
            n = op.n if X is None else _num_samples(X)
            if n != op.n:
                raise ValueError(f"X has {n} samples but the kernel operator has n={op.n}")
            if y is not None:
                y = np.asarray(y)
                check_consistent_length(np.empty(op.n), y)
            return X, y, op
        kwargs = {"dtype": (np.float64, np.float32)}
        if not self._kernel_is_precomputed():
            kwargs["accept_sparse"] = ("csr", "csc")
        if y is None:
            X = validate_data(self, X, **kwargs)
        else:
            X, y = validate_data(self, X, y, **kwargs)
        if self._kernel_is_precomputed() and X.shape[0] != X.shape[1]:
            raise ValueError(f"kernel='precomputed' needs a square Gram matrix, got shape {X.shape}")
        op = make_operator(X, self.kernel, self.gamma, self.degree, self.coef0,
                           cache_size=self.cache_size,
                           gram_max_mb=gram_budget(X, self.cache_size))
        return X, y, op

    def _set_predictor(self, X, op):
        """Keep the kernel on the support points only (``support_`` must be set)."""
        self._predict_op = None
        if self._kernel_is_operator():
            self._predict_op = op
        elif not self._kernel_is_precomputed():
            self.support_vectors_ = X[self.support_]
            kernel = getattr(op, "kernel", None)
            if isinstance(kernel, PairwiseKernel):   # no Gram block of the support needed
                self._predict_op = KernelFunction(self.support_vectors_, kernel, cache_size=0,
                                                  check=False)
            else:
                self._predict_op = op.subset(self.support_)

    def _new_input(self, X):
        """Validate prediction input: features, a test Gram (n_new, n_train), or as is
        for an operator kernel (its ``cross`` checks it)."""
        if self._kernel_is_operator():
            return X
        if self._kernel_is_precomputed():
            return validate_data(self, X, dtype=(np.float64, np.float32), reset=False)
        return validate_data(self, X, accept_sparse=("csr", "csc"),
                             dtype=(np.float64, np.float32), reset=False)

    def _support_kernel(self, X):
        """``k(x, x_j)`` for validated rows ``X`` (see :meth:`_new_input`) and ``j`` in
        ``support_``, shape (n_new, n_SV); a test Gram is only read at those columns."""
        if self._kernel_is_operator():
            return self._predict_op.cross(X, self.support_)
        if self._kernel_is_precomputed():
            return X[:, self.support_]
        return self._predict_op.cross(X)

    def _kernel_tags(self, tags):
        tags.input_tags.pairwise = self._kernel_is_precomputed()
        tags.input_tags.sparse = not (self._kernel_is_precomputed() or self._kernel_is_operator())
        return tags


def _fit_binary(op, y_pm, C, method, tol, max_iter, callback):
    """One binary L2-SVM: ``(support, coef, b, result)`` in the sub-problem's indices."""
    result = l2svm(op, y_pm, C, method=method, tol=tol, max_iter=max_iter,
                   callback=callback, stop="relative")
    sol = result.solution
    return sol["support"], sol["coef"], sol["b"], result


def _ovo_votes(decision, pairs, n_classes):
    """One-vs-one votes turned into per-class scores, as :class:`sklearn.svm.SVC` does.

    Pair ``(i, j)`` (``i < j``) votes for ``j`` when its decision is positive.
    The vote counts are broken by the summed confidences, squashed into
    ``(−1/3, 1/3)`` so that they never overturn a vote.
    """
    votes = np.zeros((decision.shape[0], n_classes))
    confidence = np.zeros_like(votes)
    for k, (i, j) in enumerate(pairs):
        positive = decision[:, k] > 0
        votes[:, j] += positive
        votes[:, i] += ~positive
        confidence[:, j] += decision[:, k]
        confidence[:, i] -= decision[:, k]
    return votes + confidence / (3 * (np.abs(confidence) + 1))


class L2SVC(ClassifierMixin, SupportKernelMixin, FWEstimatorMixin, BaseEstimator):
    """L2-SVM classifier (the core vector machine's formulation) trained by FW / MFW.

    Each binary problem ``min ‖w‖² + b² − 2ρ + C Σ ξ_i²`` s.t.
    ``y_i (wᵀφ(x_i) + b) ≥ ρ − ξ_i`` (math.md §2.1) is solved in its dual, a
    minimum enclosing ball over the unit simplex, by Frank-Wolfe with away
    steps (MFW, linear convergence) or plain Frank-Wolfe, at the cost of one
    kernel column per iteration: no ``n × n`` matrix is formed for large
    ``n`` (the kernel is evaluated on the fly with a column cache).

    Parameters
    ----------
    C : float, default=1.0
        Penalty ``C > 0`` of the squared slacks.  Not the same scale as
        ``SVC``'s ``C`` (hinge loss with ``½‖w‖²``).
    kernel : {"linear", "rbf", "poly", "sigmoid", "precomputed"}, callable or \
KernelOperator, default="rbf"
        As in :class:`sklearn.svm.SVC`; a ready
        :class:`~kernfw.operators.KernelOperator` on the training points is
        used as is (``X`` is then only checked for its length).
    gamma : {"scale", "auto"} or float, default="scale"
        Kernel coefficient, as in ``SVC``.
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=0.0
        Independent term of the polynomial and sigmoid kernels.
    method : {"mfw", "fw"}, default="mfw"
        "mfw": Frank-Wolfe with away and drop steps; "fw": plain Frank-Wolfe.
        Both use the exact line search.
    tol : float, default=1e-3
        Stop when the relative duality gap ``(P − D)/|D| = gap/ρ ≤ tol``
        (math.md §2.5; the FW gap ``2(ρ − min_i v_i)`` over ``ρ`` is the largest
        margin violation relative to the margin ``ρ``, times two).  Classification
        accuracy usually settles at a much looser tolerance (0.1 or more on
        large problems; see ``docs/benchmarks/l2svm.md``).
    max_iter : int, default=None
        Iterations per binary problem (None: ``max(100000, 20 n)``).
    cache_size : float, default=500
        Kernel cache in MB: the column cache of on-the-fly kernels.  Gram
        matrices up to 32 MB are precomputed instead, and so are Grams that
        fit in ``cache_size`` when ``X`` has 50 features or more (see
        :func:`gram_budget`).
    multi_class : {"ovo", "ovr"}, default="ovo"
        One-vs-one (``m(m−1)/2`` problems, as SVC) or one-vs-rest (``m``).
    n_jobs : int, default=None
        Binary problems trained in parallel (joblib; None means 1 unless in a
        ``joblib.parallel_config`` context).
    verbose : int, default=0
        Print one line per certified iterate (single problem, sequential runs).
    backend : {"local", "dask"}, default="local"
        "dask": data-parallel MFW on the current Dask cluster (the default
        ``distributed.Client``, or Dask's configured ``scheduler-address``):
        the rows are split over the workers, which keep them and their part
        of the solver state for the whole fit (:mod:`kernfw.distributed`;
        same iterates as "local").  The fitted model is the same in-memory
        model.  Needs a kernel given by name or callable.

    Attributes
    ----------
    classes_ : ndarray of shape (m,)
        Class labels.
    support_ : ndarray of int
        Indices of the training points that are support vectors of any binary
        problem (``α_i > 0``).
    support_vectors_ : ndarray of shape (n_SV, d)
        Those points (not set for precomputed kernels or operators).
    n_support_ : ndarray of shape (m,)
        Number of support vectors per class.
    dual_coef_ : ndarray of shape (n_problems, n_SV)
        ``α_i y_i`` of each binary problem on ``support_`` (zero where a point
        is not a support vector of that problem).  Binary problems give one row.
    intercept_ : ndarray of shape (n_problems,)
        The biases ``b = Σ α_i y_i``; the decision function of problem ``p`` is
        ``h_p(x) = Σ_i dual_coef_[p, i] k(x_i, x) + intercept_[p]``.
    rho_ : ndarray of shape (n_problems,)
        The margins ``ρ = αᵀK̃α``.
    problems_ : list of tuple
        The classes of each binary problem: ``(i, j)`` pairs for "ovo" (positive
        decision = class ``classes_[j]``), ``(k,)`` for "ovr" and for binary
        problems ``(0, 1)``.
    n_iter_ : int or ndarray of shape (n_problems,)
        Iterations (an int for binary problems, as all of the following).
    duality_gap_, primal_objective_, dual_objective_, converged_ : float/bool or ndarray
        Certificates of the returned iterates (dual ``D = −ρ``, primal ``D + gap``).
    history_ : dict of arrays, or list of them
        Traces of the runs (see :class:`kernfw.fw.FWResult`).
    fit_time_ : float
        Seconds spent in the solver(s).
    n_features_in_ : int
        Number of features seen in ``fit``.

    See Also
    --------
    sklearn.svm.SVC : the L1-SVM (hinge loss) trained by SMO.
    kernfw.MinimumEnclosingBall : the same solver on the data's own ball.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from kernfw import L2SVC
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = (X - X.mean(0)) / X.std(0)
    >>> clf = L2SVC(C=10.0).fit(X, y)
    >>> bool(clf.converged_), clf.score(X, y) > 0.95
    (True, True)
    """

    _parameter_constraints = {
        "C": [Interval(Real, 0, None, closed="neither")],
        **KERNEL_PARAMETER_CONSTRAINTS,
        "method": [StrOptions(set(METHODS))],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 0, None, closed="left"), None],
        "cache_size": [Interval(Real, 0, None, closed="left")],
        "multi_class": [StrOptions({"ovo", "ovr"})],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
        "backend": [StrOptions({"local", "dask"})],
    }

    def __init__(self, C=1.0, kernel="rbf", gamma="scale", degree=3, coef0=0.0, method="mfw",
                 tol=1e-3, max_iter=None, cache_size=500, multi_class="ovo", n_jobs=None,
                 verbose=0, backend="local"):
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.multi_class = multi_class
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.backend = backend

    # -- fit -------------------------------------------------------------------------------
    def _problems(self, y_enc, n_classes):
        """``(classes of the problem, training indices, labels ±1)`` for every binary problem."""
        if n_classes == 2:
            yield (0, 1), np.arange(y_enc.size), np.where(y_enc == 1, 1.0, -1.0)
        elif self.multi_class == "ovr":
            for k in range(n_classes):
                yield (k,), np.arange(y_enc.size), np.where(y_enc == k, 1.0, -1.0)
        else:
            for i, j in combinations(range(n_classes), 2):
                idx = np.flatnonzero((y_enc == i) | (y_enc == j))
                yield (i, j), idx, np.where(y_enc[idx] == j, 1.0, -1.0)

    @with_callbacks
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the binary L2-SVM(s) on ``X``, ``y``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n, d), or (n, n) Gram matrix
            Training inputs (a Gram matrix for ``kernel="precomputed"``).
        y : array-like of shape (n,)
            Labels (any hashable values, at least two classes).

        Returns
        -------
        self
        """
        X, y, op = self._validate_training_data(X, y)
        check_classification_targets(y)
        classes, y_enc = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(f"L2SVC needs at least 2 classes; got 1 class ({classes[0]!r})")
        problems = list(self._problems(y_enc, classes.size))
        single = len(problems) == 1
        callback = self._fw_callback(self.max_iter, X, y) if single else None
        try:
            jobs = (delayed(_fit_binary)(op if idx.size == op.n else op.subset(idx), y_pm,
                                         self.C, self.method, self.tol, self.max_iter,
                                         callback)
                    for _, idx, y_pm in problems)
            if self.backend == "dask":     # data-parallel MFW on the Dask cluster
                from ..distributed import fit_l2svm_problems
                fits = fit_l2svm_problems(X, op, y_enc, problems, self.C, self.method,
                                          self.tol, self.max_iter, callback, self.cache_size)
            else:
                fits = Parallel(n_jobs=self.n_jobs)(jobs)
        finally:
            self._end_callbacks()
        self.classes_ = classes
        self.problems_ = [p for p, _, _ in problems]
        self._set_model(X, y_enc, [idx for _, idx, _ in problems], fits, op)
        return self

    def _set_model(self, X, y_enc, indices, fits, op):
        """Merge the binary solutions on the union of their supports."""
        supports = [idx[s] for idx, (s, _, _, _) in zip(indices, fits)]
        self.support_ = np.unique(np.concatenate(supports))
        self.dual_coef_ = np.zeros((len(fits), self.support_.size))
        for p, (sup, (_, coef, _, _)) in enumerate(zip(supports, fits)):
            self.dual_coef_[p, np.searchsorted(self.support_, sup)] = coef
        self.intercept_ = np.array([b for _, _, b, _ in fits])
        results = [r for _, _, _, r in fits]
        self.rho_ = np.array([r.solution["rho"] for r in results])
        self.n_support_ = np.bincount(y_enc[self.support_], minlength=self.classes_.size)
        if len(results) == 1:
            self._store_result(results[0])
        else:
            self.n_iter_ = np.array([r.n_iter for r in results])
            self.duality_gap_ = np.array([r.gap for r in results])
            self.primal_objective_ = np.array([r.primal for r in results])
            self.dual_objective_ = np.array([r.dual for r in results])
            self.converged_ = np.array([r.converged for r in results])
            self.history_ = [r.history for r in results]
            self.fit_time_ = float(sum(r.time for r in results))
        self._set_predictor(X, op)

    # -- prediction ------------------------------------------------------------------------
    def decision_function(self, X):
        """Decision values.

        Binary problems: ``h(x) = Σ_i α_i y_i (k(x_i, x) + 1)``, shape
        (n_samples,), positive for ``classes_[1]``.  Multi-class: shape
        (n_samples, m), the one-vs-rest scores (for "ovo", votes with
        confidences as in ``SVC(decision_function_shape="ovr")``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs; for ``kernel="precomputed"`` the test Gram
            ``K(X, X_train)`` of shape (n_samples, n_train), of which only the
            support columns are read.
        """
        check_is_fitted(self)
        K = self._support_kernel(self._new_input(X))      # (n_samples, n_SV)
        decision = K @ self.dual_coef_.T + self.intercept_
        if self.classes_.size == 2:
            return decision[:, 0]
        if self.multi_class == "ovr":
            return decision
        return _ovo_votes(decision, self.problems_, self.classes_.size)

    def predict(self, X):
        """Class labels: the sign of ``h`` (binary) or the largest score."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        return self._kernel_tags(tags)
