"""``MultiClassSVM``: multi-category kernel SVMs with mdos losses ([Tajima2021]; math.md §1)."""

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ..kernels import GRAM_MAX_MB
from ..losses import LOSSES, make_loss
from ..operators import LowRankFeatures, shift_kernel
from ..operators.rbf_gram import DIRECT_MAX_FEATURES
from ..solvers.multiclass import SOLVERS, solve_multiclass
from ._base import (
    APPROX_PARAMETER_CONSTRAINTS,
    PRECISION_PARAMETER_CONSTRAINTS,
    FWEstimatorMixin,
    KernelInputMixin,
    check_sample_weight,
    class_weights,
    resolve_lam,
    with_callbacks,
)
from ._docs import with_kernel_parameters
from ._plan import stopping_tol
from ._probability import ProbabilityMixin

__all__ = ["MultiClassSVM"]

#: the share of the points in the largest class from which an RBF fit computes the
#: kernel's columns where blocks move instead of storing the Gram
#: (:meth:`MultiClassSVM._computes_columns`)
MAJORITY_SHARE = 0.5


def _rowwise_product(A, B):
    """``A @ B`` with every row summed in the same order whatever the other rows.

    BLAS sums a block of rows in an order that depends on the block, so a score
    (and an argmax between two classes tied up to rounding) could depend on the
    batch a row comes in.  ``numpy.einsum`` (without ``optimize``) and sparse
    products reduce each row on its own; ``B`` has only ``m`` columns, so this
    costs little next to the kernel evaluations that produce ``A``.
    """
    if hasattr(A, "tocsr"):
        return np.asarray(safe_sparse_dot(A, B, dense_output=True))
    return np.einsum("ij,jk->ik", A, B)


def _float64(K):
    """A kernel block as float64 (a float32 Gram's blocks are float32)."""
    return np.asarray(K, dtype=np.float64)


def _check_weighted_classes(y, weights):
    """Raise unless at least two classes of ``y`` have a positive weight (a zero weight is
    the example removed)."""
    if np.unique(np.asarray(y)[weights > 0]).size < 2:
        raise ValueError(
            "MultiClassSVM needs at least 2 classes with a positive weight; the sample "
            "weights are zero for all but one class (or all weights are zero)"
        )


def _largest_class_share(y):
    """The share of the labels ``y`` in their most frequent class (0 for no labels)."""
    try:
        y = np.asarray(y)
        counts = np.unique(y, return_counts=True)[1] if y.ndim == 1 else []
    except (TypeError, ValueError):  # labels the validation of y refuses (later)
        return 0.0
    return float(counts.max() / counts.sum()) if len(counts) else 0.0


@with_kernel_parameters()
class MultiClassSVM(
    ProbabilityMixin, ClassifierMixin, KernelInputMixin, FWEstimatorMixin, BaseEstimator
):
    """Multi-category kernel SVM trained by dual Frank-Wolfe with a certified duality gap.

    Minimizes ``P(W) = λ/2 ‖W‖² + (1/n) Σ_i Φ(s_i; y_i)`` (scores ``s_i = Wᵀφ(x_i)``,
    with an intercept as liblinear's: ``φ(x)`` with a constant feature appended) for
    one of six multi-category losses ``Φ`` (math.md §1.2), by Frank-Wolfe on the dual
    (math.md §1.4–§1.9): closed-form direction, exact line search, one kernel product
    per iteration; or block-coordinate FW.  Per-example weights
    (``sample_weight``, ``class_weight``) scale the loss terms (math.md §1.15).

    Parameters
    ----------
    loss : {"max_hinge", "structured_hinge", "topk_hinge", "usunier", "weighted_topk", \
"weighted_usunier"} or MulticlassLoss, default="max_hinge"
        The loss ``Φ``; a :class:`kernfw.losses.MulticlassLoss` object is used as is
        (then ``k``, ``rho`` and ``cost`` are ignored).
    k : int, default=1
        ``k`` of ``topk_hinge`` and ``usunier`` (``1 ≤ k < m``).
    rho : array-like of shape (m,), default=None
        Weights of ``weighted_topk`` / ``weighted_usunier``: nonincreasing,
        ``ρ_m = 0``.
    cost : array-like of shape (m, m) or (n, m), default=None
        Costs ``Δ`` of ``structured_hinge`` (label pairs, or one row per training
        example), zero on the true label, columns in the order of ``classes_``.
    C : float, default=1.0
        Inverse regularization, as ``SVC``'s and ``LinearSVC``'s ``C``: the
        model uses ``λ = 1/(C·n)`` (``n`` training examples), because
        ``P(W)/λ = ½‖W‖² + C Σ_i Φ(s_i; y_i)`` is the ``LinearSVC``
        objective (``multi_class="crammer_singer"`` for the default
        ``max_hinge`` loss).  A ``C`` tuned for those models carries over.
        With weights ``w_i`` (``sample_weight`` times ``class_weight``) ``n``
        is ``Σ_i w_i`` and the loss terms are weighted:
        ``P(W)/λ = ½‖W‖² + C Σ_i w_i Φ(s_i; y_i)`` (math.md §1.15).
    lam : float, default=None
        Regularization ``λ > 0`` of the papers; when given it wins over ``C``.
    smoothing : float, default=0.0
        Moreau smoothing ``σ ≥ 0`` of the loss (math.md §1.10).  With ``σ > 0``
        the model minimizes the smoothed objective ``P_σ`` and
        ``primal_objective_`` is the upper bound ``P̃`` of §1.10.
    kernel : str, callable, KernelOperator, default="rbf"
        What :class:`sklearn.svm.SVC` accepts ("linear", "rbf", "poly",
        "sigmoid", "precomputed", a callable), or a ready
        :class:`~kernfw.operators.KernelOperator` on the training points (then
        ``X`` in ``fit`` is only checked for its length, and prediction calls
        the operator's ``cross``).  A kernel that is not positive semidefinite by
        construction (a callable, "sigmoid", a user's operator or Gram matrix)
        is tested first (:func:`kernfw.operators.psd.check_psd`, a few Lanczos
        products): a detectably indefinite one raises ``NotPSDError`` (a
        ``ValueError``), since its dual is not concave and no gap would
        certify anything.
    {kernel_parameters}
    class_weight : dict, "balanced" or None, default=None
        Weight ``class_weight[c]`` of the loss terms of class ``c`` (None: 1), as
        :class:`sklearn.svm.LinearSVC`'s; "balanced" is ``n / (m · n_c)`` (scikit-learn's
        :func:`~sklearn.utils.class_weight.compute_class_weight`, with the sample
        weights).  Multiplies ``sample_weight``.
    fit_intercept : bool or "auto", default="auto"
        Fit an intercept ``b`` (``intercept_``) as liblinear does: the kernel is
        ``K + s²`` (``s = intercept_scaling``), the kernel of the points with a
        constant feature ``s`` appended whose weight is regularized like the others
        (math.md §1.15).  False: scores ``Wᵀφ(x)``, no intercept.  "auto" is True
        for ``kernel="linear"`` (``LinearSVC``'s default, worth 1.2 points on
        Rotten Tomatoes) and False for every other kernel, where it changed held-out
        accuracy by −0.2 to +0.4 points and cost 1.1–1.6× the fit time
        (docs/benchmarks.md, "Weights and the intercept").
    intercept_scaling : float, default=1.0
        The constant feature ``s > 0``: ``intercept_ = s · w_last``.  A larger
        ``s`` regularizes the intercept less.
    solver : {"bcfw", "lsfw", "stdfw", "pg"}, default="bcfw"
        The algorithm (the same names mean the same algorithms in every kernfw
        estimator).  "bcfw" (the fastest to the default tolerance, measured in
        docs/benchmarks.md): block-coordinate FW, one pass over the data per
        iteration; for the max and structured hinge it takes pairwise block
        steps (math.md §3.9); each pass runs compiled (numba), on explicit
        features, a stored Gram matrix or the kernel columns of an on-the-fly
        kernel (a built-in loss).  "lsfw": FW with exact line search;
        "stdfw": FW with the standard step ``2/(t+2)``; "pg": the
        projected-subgradient baseline (``smoothing=0``), whose iterate stays dual
        feasible: it certifies its gap and stops on ``tol`` (math.md §1.11).
    tol : float, default=3e-2
        Relative tolerance on the certified duality gap: stop when
        ``(P − D) / P ≤ tol``, i.e. the objective ``P(W)`` is certified within
        a fraction ``tol`` of the optimum (``P(W) − P* ≤ P − D``).  It does
        not depend on the scale of the data, of ``C`` or of the loss.  The
        default is one step tighter than where test accuracy stops changing
        on the benchmark suite (see docs/benchmarks/defaults.md).
        At ``precision="auto"`` a ``tol >= 1e-4`` stores a Gram matrix computed
        from features in float32 (the RBF Gram is computed in float32, within 5e-6
        of the float64 kernel): the solver reads half the memory, and the rounding
        is far below the certified gap.  ``tol=0`` runs the whole
        ``max_iter`` budget; a positive ``tol`` below the certificate's rounding
        bound stops where the gap reaches that bound (user guide, "Conventions and
        what the defaults mean").  On at most 64 training examples (a small
        problem, :data:`kernfw.fw.SMALL_PROBLEM_MAX`) the fit runs on past ``tol``
        to the rounding floor within ``max_iter``, with float64 kernel values: the
        optimum up to rounding, so that a fit with integer weights is the fit on
        repeated rows to rounding (math.md §0, "Small problems"); ``converged_``
        still states ``gap + ρ ≤ tol·P``.
    max_iter : int, default=1000
        Budget in the unit ``n_iter_`` counts: passes over the data for
        "bcfw" (one pass = ``n`` block visits), iterations for the batch
        solvers (``history_`` has one row per certificate, its ``pass``
        column the passes so far); large enough
        that fits at the defaults converge on the benchmark suite.  A run
        that stops earlier warns ``ConvergenceWarning`` and keeps the best
        certified iterate.
    warm_start : bool, default=False
        Start from the previous ``dual_coef_`` when refitting on the same
        training set, loss and classes (e.g. after ``set_params(C=...)``: the
        dual feasible set does not depend on ``λ`` or ``σ``).
    verbose : int, default=0
        Print one line per certified iterate.
    max_time : float, default=None
        Wall-clock budget in seconds.
    check_every : int or "auto", default="auto"
        Certify (compute the full gap and test ``tol``) every ``check_every``
        iterations (passes for "bcfw"; a certificate costs about a third of a
        pass).  "auto": every iteration for the full-batch solvers; for
        "bcfw" after each round of passes, a round ending when the gap
        estimate of its last pass may pass ``tol`` or has fallen fourfold
        since the last certificate (at most 50 passes; ``max_iter`` bounds
        the passes in all).  Fastest on the
        benchmark suite (docs/benchmarks/multiclass.md (d)).
    random_state : int, RandomState instance or None, default=2
        Block order of "bcfw", the landmarks or random features of ``approx``,
        and the calibration folds of ``probability=True``.  The default fixes
        them, so two fits of the same data at the defaults are the same model, as
        :class:`sklearn.svm.SVC`'s are (a fixed order is one draw of the random
        orders: 2 is the first value whose passes on the benchmark suite are at
        most the median of random orders).  None draws a new order for every
        fit: at ``tol=3e-2`` two such fits predict the same label on 97.7–98.9 %
        of held-out points (the points within the tolerance's slack of a
        decision boundary; ``tol=3e-3``: 99.4–99.9 %, at 1.5–2.1× the time;
        docs/benchmarks.md, "Two default fits").
    cache_size : float, default=200
        Kernel column cache (MB) for one fit, as :class:`sklearn.svm.SVC`'s,
        when the kernel is evaluated on the fly.  An RBF fit on at most 32 dense
        features whose largest class holds at least half of the points computes each
        kernel column when its block first moves, instead of the whole Gram first, into
        a cache that can hold every column (at most the Gram's size; docs/benchmarks.md,
        "Weights and the intercept").
    shrinking : bool, default=True
        Active-set shrinking of "bcfw".  Between two certificates, visit only
        the examples that are not block-optimal (liblinear-style active set;
        the certified gap is unaffected), and leave out the inactive classes
        of each example (exact block steps).
    probability : bool, default=False
        Enable :meth:`predict_proba` and :meth:`predict_log_proba` (as
        :class:`sklearn.svm.SVC`): ``fit`` also fits the model on 5 internal
        cross-validation folds (sharing the training kernel, warm-started from the
        full model's dual) and fits a map from scores to probabilities on their
        held-out scores: Platt's sigmoid ``σ(f/T)`` of the decision ``f`` for two
        classes (Platt's smoothed targets, no offset), temperature scaling
        ``softmax(s/T)`` otherwise; both keep the order of the scores, so the most
        probable class is the predicted one (math.md §9).  ``random_state``
        shuffles the folds.

    Notes
    -----
    Convention shared by every kernfw estimator with a λ: ``C=1.0`` (like
    ``SVC()``) and ``lam=None``, effective ``λ = lam if lam is not None else
    1/(C·n)``, stored as ``lam_``.  ``SVC``'s one-vs-one binary hinge losses and
    the multi-category losses differ, so equal ``C`` gives the same
    regularization *scale*, not the same classifier; with
    ``loss="max_hinge"`` and a linear kernel the model is exactly
    ``LinearSVC(multi_class="crammer_singer", C=C)`` (the same ``fit_intercept``,
    ``intercept_scaling``, ``class_weight`` and ``sample_weight``).

    Attributes
    ----------
    classes_ : ndarray of shape (m,)
        Class labels (any hashable, sorted).
    dual_coef_ : ndarray of shape (m, n)
        Dual variables ``A`` of *every* training example (column ``i`` is ``α_i``,
        one row per class: the multi-category dual, not ``SVC``'s ``m − 1`` rows
        of one-vs-one coefficients on the support vectors); scores are
        ``K(X, X_train) Aᵀ / (λn) + intercept_``, i.e. ``K(X, support_vectors_)
        dual_coef_[:, support_]ᵀ / (λn) + intercept_``.  After ``max_iter=0`` (no step taken) or
        on trivial data it may be all zero: then ``support_`` is empty, every
        score is 0 and ``predict`` returns ``classes_[0]``.
    support_ : ndarray of shape (n_SV,)
        Indices of the training examples with ``α_i ≠ 0`` (the support vectors).
    support_vectors_ : ndarray of shape (n_SV, d)
        Their features (not set for ``kernel="precomputed"`` or a KernelOperator).
    n_support_ : ndarray of shape (m,), dtype int32
        Support vectors per class (by their training label), as ``SVC``'s.
    intercept_ : ndarray of shape (m,)
        The intercepts ``b = s² Σ_i α_i / (λn)`` (``s = intercept_scaling``):
        ``s(x) = Wᵀφ(x) + b``; zeros without an intercept.
    class_weight_ : ndarray of shape (m,)
        The weight of each class's loss terms (ones with ``class_weight=None``).
    coef_ : ndarray of shape (m, d)
        ``Wᵀ`` (only for ``kernel="linear"``).
    lam_ : float
        The ``λ`` used (``lam``, or ``1/(C·n)``).
    n_iter_, duality_gap_, primal_objective_, dual_objective_, converged_, history_, fit_time_
        The certificate and trace of the run (see :class:`kernfw.fw.FWResult`):
        ``dual_objective_ ≤ P* ≤ primal_objective_`` and ``duality_gap_ ≥ −ρ``, up to
        the rounding bound ``ρ`` (``history_["rounding"]``, about 1e-16 times the
        magnitude of the summed terms); ``converged_`` means
        ``duality_gap_ + ρ ≤ tol · primal_objective_``.
    n_features_in_ : int
        Number of features seen in ``fit`` (not set for a KernelOperator kernel).
    kernel_approx_ : transformer or None
        The fitted kernel approximation (``Nystroem``, ``RBFSampler`` or
        ``PolynomialCountSketch``) when ``approx`` is set, else None.
    calibration_ : kernfw.calibration.Calibration
        The map from scores to probabilities (only with ``probability=True``).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from kernfw import MultiClassSVM
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = MultiClassSVM(random_state=0).fit(X, y)
    >>> clf.converged_, clf.duality_gap_ <= clf.tol * clf.primal_objective_
    (True, True)
    >>> clf.predict_topk(X[:1], 2).shape
    (1, 2)
    """

    _parameter_constraints = {
        "loss": [StrOptions(set(LOSSES)), HasMethods(["lmo", "value", "costs", "check"])],
        "k": [Interval(Integral, 1, None, closed="left")],
        "rho": ["array-like", None],
        "cost": ["array-like", None],
        "C": [Interval(Real, 0, None, closed="neither")],
        "lam": [Interval(Real, 0, None, closed="neither"), None],
        "smoothing": [Interval(Real, 0, None, closed="left")],
        "kernel": [str, callable, HasMethods(["matmat", "columns", "cross"]), tuple, list],
        "gamma": [StrOptions({"scale", "auto"}), Interval(Real, 0, None, closed="neither")],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Real],
        **APPROX_PARAMETER_CONSTRAINTS,
        **PRECISION_PARAMETER_CONSTRAINTS,
        "solver": [StrOptions(set(SOLVERS))],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
        "check_every": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "random_state": ["random_state"],
        "cache_size": [Interval(Real, 0, None, closed="left")],
        "shrinking": ["boolean"],
        "probability": ["boolean"],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "fit_intercept": ["boolean", StrOptions({"auto"})],
        "intercept_scaling": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        loss="max_hinge",
        k=1,
        rho=None,
        cost=None,
        C=1.0,
        lam=None,
        smoothing=0.0,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        approx=None,
        n_components=1000,
        solver="bcfw",
        tol=3e-2,
        max_iter=1000,
        warm_start=False,
        verbose=0,
        max_time=None,
        check_every="auto",
        random_state=2,
        cache_size=200.0,
        precision="auto",
        shrinking=True,
        probability=False,
        class_weight=None,
        fit_intercept="auto",
        intercept_scaling=1.0,
    ):
        self._store_arguments(locals())

    # -- input ---------------------------------------------------------------------------
    def _warm_start_point(self, loss, classes, n):
        if not (self.warm_start and hasattr(self, "dual_coef_")):
            return None
        same = (
            self.dual_coef_.shape == (classes.size, n)
            and np.array_equal(self.classes_, classes)
            and self._fit_loss == loss
        )
        return self.dual_coef_ if same else None

    # -- fit -----------------------------------------------------------------------------------
    @with_callbacks
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model on training inputs ``X`` and labels ``y``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n, d), or (n, n) Gram matrix
            Training inputs (a Gram matrix for ``kernel="precomputed"``; only
            its length is used when ``kernel`` is a KernelOperator, and it may
            then be None).
        y : array-like of shape (n,)
            Labels (any hashable values; at least 2 classes).
        sample_weight : array-like of shape (n,), default=None
            Per-example weights ``≥ 0`` of the loss terms (None: 1), times
            ``class_weight``: a weight of 0 is the example removed, an integer
            weight ``k`` the example repeated ``k`` times (math.md §1.15).

        Returns
        -------
        self
        """
        if sample_weight is not None and y is not None:  # before the kernel is built
            _check_weighted_classes(y, _check_sample_weight(sample_weight, np.asarray(y)))
        self._largest_class_share = _largest_class_share(y)  # (read by the fit plan)
        X, y, op = self._validate_training_data(X, y, sample_weight)
        check_classification_targets(y)
        self._check_psd(op)
        classes, y_enc = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"MultiClassSVM needs at least 2 classes; got {classes.size} class ({classes[0]!r})"
            )
        weights = self._weights(X if X is not None else np.empty((op.n, 0)), y, y_enc, classes,
                                sample_weight)  # fmt: skip
        if self.rho is not None and not (
            isinstance(self.loss, str) and self.loss in ("weighted_topk", "weighted_usunier")
        ):
            raise ValueError(
                f"rho is only used by loss='weighted_topk' or 'weighted_usunier', not {self.loss!r}"
            )
        loss = make_loss(self.loss, self.k, self.rho, self.cost)
        n_eff = op.n if weights is None else float(weights.sum())
        self.lam_ = resolve_lam(self.C, self.lam, n_eff)
        if self.solver == "pg" and self.smoothing > 0:
            raise ValueError("solver='pg' is defined for smoothing=0 only")
        A_init = self._warm_start_point(loss, classes, op.n)
        callback = self._fw_callback(self.max_iter, X, y)
        shift = self.intercept_scaling**2 if self._fits_intercept() else 0.0
        # the Gram computed here from the features is private to the fit (unless the
        # calibration folds read it): shifted in place; a user's Gram is never written to
        overwrite = self._owns_kernel() and not self.probability
        op_fit = shift_kernel(op, shift, overwrite=overwrite)
        self._fit_weights = None if weights is None else weights * (op.n / n_eff)
        try:
            result = self._solve(
                op_fit, y_enc, loss, self.lam_, classes.size, A_init, callback=callback,
                weights=self._fit_weights,
            )  # fmt: skip
        finally:
            self._end_callbacks()
        self._store_result(result)
        self.classes_ = classes
        self._fit_loss = loss
        self._set_model(result["A"], X, op)
        self.n_support_ = np.bincount(y_enc[self.support_], minlength=classes.size).astype(np.int32)
        self.intercept_ = shift * result["A"].sum(axis=1) / (self.lam_ * op.n)
        self._fit_probability(op_fit, y_enc, result["S"])
        return self

    def _computes_columns(self, X):
        """Whether the fit computes the RBF kernel's columns where blocks move (a kernel
        evaluated on the fly whose column cache can hold the whole Gram) instead of
        storing the Gram first (the fit plan's backend, :meth:`_gram_max_mb`).

        BCFW reads the column of a block only when the block moves.  When one class holds
        at least :data:`MAJORITY_SHARE` of the points, most of its points lie among their
        own class, their margins are met by their neighbours' steps and their blocks never
        move: a quarter to two thirds of the points on the 10:1 problems of
        docs/benchmarks.md ("Weights and the intercept"), against under a tenth on the
        balanced 10-class problem of the defaults, where the Gram's tiles (half of it, by
        symmetry) cost less than the columns of nine points in ten.  A column of at most
        ``DIRECT_MAX_FEATURES`` dense features costs what a row of the Gram costs.  Not
        for other kernels, sparse or wider features (their Gram comes from one BLAS
        product), ``probability=True`` (the folds share one Gram) or a Gram above the
        budget.
        """
        if not (self.solver == "bcfw" and isinstance(self.kernel, str) and self.kernel == "rbf"):
            return False
        shape = getattr(X, "shape", ())  # (the input as given: not yet validated)
        if self.approx is not None or self.probability or sp.issparse(X) or len(shape) != 2:
            return False
        if getattr(self, "_largest_class_share", 0.0) < MAJORITY_SHARE:
            return False
        return shape[1] <= DIRECT_MAX_FEATURES and self._gram_mb(X) <= GRAM_MAX_MB

    def _gram_mb(self, X):
        """Size (MB) of the Gram of ``X`` in the type of its kernel values."""
        dtype = self._gram_dtype() or getattr(X, "dtype", np.float64)
        itemsize = 4 if np.dtype(dtype) == np.float32 else 8
        return X.shape[0] ** 2 * itemsize / 2**20

    def _gram_max_mb(self, X):
        return 0.0 if self._computes_columns(X) else super()._gram_max_mb(X)

    def _kernel_cache_mb(self, X):
        if self._computes_columns(X):  # a cache of every column: no column computed twice
            return max(self.cache_size, self._gram_mb(X) + 1.0)
        return self.cache_size

    def _fits_intercept(self):
        """Whether the fit adds ``intercept_scaling²`` to the kernel (resolves "auto")."""
        if self.fit_intercept == "auto":
            return isinstance(self.kernel, str) and self.kernel == "linear"
        return bool(self.fit_intercept)

    def _owns_kernel(self):
        """Whether the training operator is built by ``fit`` from features (not a
        user's Gram matrix or operator), so that its values may be overwritten."""
        return not (self._kernel_is_precomputed() or self._kernel_is_operator())

    def _weights(self, X, y, y_enc, classes, sample_weight):
        """The weights ``w_i`` of the loss terms: ``sample_weight`` times the weight of
        the class (``class_weight_``); None when every one is 1.  A negative or
        non-finite weight, or fewer than two classes with a positive weight, raise."""
        sample_weight = check_sample_weight(sample_weight, X)
        self.class_weight_ = class_weights(self.class_weight, classes, y, sample_weight)
        weights = sample_weight * self.class_weight_[y_enc]
        _check_weighted_classes(y_enc, weights)
        return None if np.all(weights == 1.0) else weights

    def _solve(
        self, op, y_enc, loss, lam, n_classes, A_init, S_init=None, callback=None, weights=None
    ):
        """One run of :func:`~kernfw.solvers.multiclass.solve_multiclass` with the
        estimator's settings (``weights``: the per-example weights ``v_i`` of the
        solver, mean 1)."""
        return solve_multiclass(
            op,
            y_enc,
            loss=loss,
            lam=lam,
            smoothing=self.smoothing,
            solver=self.solver,
            n_classes=n_classes,
            A_init=A_init,
            S_init=S_init,
            tol=stopping_tol(self.tol, op.n),
            max_iter=self.max_iter,
            max_time=self.max_time,
            check_every=self.check_every,
            callback=callback,
            random_state=self._plan.solver_seed,
            shrinking=self.shrinking,
            shrink_classes=self.shrinking,
            weights=weights,
        )

    def _heldout_scores(self, op, y_enc, train, val, state):
        """Scores on the points ``val`` of the model fitted on ``op.subset(train)``, started
        from the full model's dual on ``train`` (see :mod:`._probability`).

        ``state`` is the full model's training scores ``S = K Aᵀ/(λn)``: the start's scores
        are ``S`` on ``train`` less the part of the held-out points, one block
        ``K[train, val ∩ support]`` instead of a product with the fold's Gram.
        """
        v = None if self._fit_weights is None else self._fit_weights[train]
        lam = resolve_lam(self.C, self.lam, train.size if v is None else v.sum())
        if v is not None:  # the fold's weights, mean 1, and its λn = 1/C (weighted n)
            v = v * (train.size / v.sum())
        A0 = self.dual_coef_[:, train]
        KA = state[train] * (self.lam_ * op.n)
        out = val[np.any(self.dual_coef_[:, val] != 0, axis=0)]
        if out.size:
            KA -= _rowwise_product(_float64(op.block(train, out)), self.dual_coef_[:, out].T)
        sub = op.subset(train)
        A = self._solve(
            sub, y_enc[train], self._fit_loss, lam, A0.shape[0], A0, KA / (lam * train.size),
            weights=v,
        )["A"]  # fmt: skip
        support = np.flatnonzero(np.any(A != 0, axis=0))
        coef = A[:, support].T / (lam * train.size)
        F = op.features()
        if F is not None:  # K = F Fᵀ: scores F_val (F_Sᵀ coef), no kernel block
            S = _rowwise_product(
                F[val], safe_sparse_dot(F[train[support]].T, coef, dense_output=True)
            )
        else:
            S = _rowwise_product(_float64(op.block(val, train[support])), coef)
        return S[:, 1] - S[:, 0] if S.shape[1] == 2 else S

    def _proba_scores(self, X):
        """The scores of :meth:`decision_function` (what the calibration map reads)."""
        return self.decision_function(X)

    def _set_model(self, A, X, op):
        """Store ``dual_coef_`` and what prediction needs (only support points)."""
        scale = self.lam_ * op.n
        for stale in ("coef_", "support_vectors_", "_predict_op", "_feature_coef"):
            self.__dict__.pop(stale, None)
        self.dual_coef_ = A
        self.support_ = np.flatnonzero(np.any(A != 0, axis=0))
        self._support_coef = A[:, self.support_].T / scale  # (|support|, m)
        if isinstance(op, LowRankFeatures):  # W = Φᵀ Aᵀ / (λn): scores Φ(x) W
            self._feature_coef = op.primal(A.T) / scale
        elif isinstance(self.kernel, str) and self.kernel == "linear" and self.approx is None:
            self.coef_ = np.asarray(safe_sparse_dot(A, X, dense_output=True)) / scale
        else:
            self._set_predictor(X, op)
        if not (self._kernel_is_operator() or self._kernel_is_precomputed()):
            self.support_vectors_ = X[self.support_]

    # -- prediction ------------------------------------------------------------------------
    def decision_function(self, X):
        """Scores ``s(x) = Wᵀφ(x)``, shape (n_samples, m) (columns follow ``classes_``).

        With two classes the scikit-learn binary convention is followed: a 1-D
        array ``s_1(x) − s_0(x)`` (positive means ``classes_[1]``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs; for ``kernel="precomputed"`` the test Gram ``K(X, X_train)``
            of shape (n_samples, n_train).
        """
        S = self._scores(X)
        return S[:, 1] - S[:, 0] if S.shape[1] == 2 else S

    def _scores(self, X):
        """All ``m`` scores, shape (n_samples, m), each row computed independently of the
        others (see :func:`_rowwise_product`)."""
        check_is_fitted(self)
        if hasattr(self, "coef_"):
            X = validate_data(
                self, X, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32), reset=False
            )
            S = _rowwise_product(X, self.coef_.T)
        elif hasattr(self, "_feature_coef"):
            features = self._approx_op.transform(self._new_input(X))
            S = _rowwise_product(features, self._feature_coef)
        else:
            S = _rowwise_product(self._support_kernel(self._new_input(X)), self._support_coef)
        return S + self.intercept_

    def predict(self, X):
        """Labels ``classes_[argmax_j s_j(x)]`` (ties: the first class).

        A row's scores do not depend on the other rows of ``X``, so neither does
        its prediction, even between classes tied up to rounding.
        """
        check_is_fitted(self)
        return self.classes_[np.argmax(self._scores(X), axis=1)]

    def predict_topk(self, X, k):
        """The ``k`` labels with the largest scores per row, best first (stable ties).

        Returns
        -------
        ndarray of shape (n_samples, k)
        """
        check_is_fitted(self)
        if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= k <= self.classes_.size:
            raise ValueError(f"k must be an integer in [1, {self.classes_.size}], got {k!r}")
        order = np.argsort(-self._scores(X), axis=1, kind="stable")
        return self.classes_[order[:, :k]]

    def __sklearn_tags__(self):
        return self._kernel_tags(super().__sklearn_tags__())
