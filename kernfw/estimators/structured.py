"""Structural SVM estimator ([LacosteJulien2013]; math.md §3)."""

import copy
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils._tags import ClassifierTags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..losses import MaxHinge, StructuredHinge
from ..operators import Features
from ..solvers.multiclass import solve_multiclass
from ..solvers.structural import (
    AVERAGING,
    StructuredProblem,
    solve_structural_bcfw,
    solve_structural_cutting_plane,
    solve_structural_fw,
    solve_structural_ssg,
)
from ..structured import MultiClass
from ._base import (
    FWEstimatorMixin,
    class_weights,
    example_weights,
    resolve_lam,
    solver_seed,
    with_callbacks,
)
from ._plan import stopping_tol

__all__ = ["StructuredSVM"]

#: the step rule of each Frank-Wolfe solver name (as in :class:`~kernfw.MultiClassSVM`)
_STEP_RULES = {
    "lsfw": "line_search",
    "stdfw": "standard",
    "bcfw": "line_search",
    "stdbcfw": "standard",
}


def _is_multiclass(model):
    """Whether ``model`` makes a :class:`StructuredSVM` a classifier (None or ``MultiClass``)."""
    return model is None or isinstance(model, MultiClass)


def multiclass_model(model, classes):
    """The ``MultiClass`` model of the labels ``classes`` (sorted, ``k ≥ 2`` of them).

    Without a model it is ``MultiClass(k)`` with the 0/1 cost.  A given
    ``MultiClass(m, cost)`` whose labels are its class indices (integers in
    ``0 … m−1``) keeps the cost of the classes seen, ``Δ[classes][:, classes]``; other
    labels (strings, …) are its classes in sorted order, which a 0/1 cost allows in any
    number and a cost matrix only ``m`` of.

    Parameters
    ----------
    model : MultiClass or None
    classes : ndarray of shape (k,)
        The sorted labels of the training set.

    Returns
    -------
    MultiClass
        A new model of ``k`` classes; class ``j`` is ``classes[j]``.
    """
    k = classes.size
    if k < 2:
        raise ValueError(f"StructuredSVM needs at least 2 classes; got {k} class ({classes[0]!r})")
    if model is None:
        return MultiClass(k)
    zero_one = np.array_equal(model.cost, 1.0 - np.eye(model.n_classes))
    indices = np.issubdtype(classes.dtype, np.number) and np.all(
        (np.mod(classes, 1) == 0) & (classes >= 0) & (classes < model.n_classes)
    )
    if indices:
        seen = classes.astype(np.intp)
        return MultiClass(k, cost=model.cost[np.ix_(seen, seen)])
    if zero_one:
        return MultiClass(k)
    if k != model.n_classes:
        raise ValueError(
            f"the labels are not class indices 0..{model.n_classes - 1} of the model's cost "
            f"matrix, so they are its classes in sorted order: expected {model.n_classes} "
            f"classes, got {k}"
        )
    return MultiClass(k, cost=model.cost)


class StructuredSVM(FWEstimatorMixin, BaseEstimator):
    """Structural SVM trained by (block-coordinate) Frank-Wolfe on the dual.

    Minimizes the n-slack, margin-rescaled primal of math.md §3.1,

        P(w) = λ/2 ‖w‖² + (1/n) Σ_i max_y [L(y_i, y) − ⟨w, φ(x_i, y_i) − φ(x_i, y)⟩],

    for any :class:`~kernfw.structured.StructuredModel` (``MultiClass``,
    ``Chain``, ``Matching`` or your own), with a certified duality gap.
    Dividing by ``λ`` gives ``½‖w‖² + C Σ_i max_y [...]``, SVMstruct's and
    scikit-learn's convention, with ``C = 1/(λn)``.

    Parameters
    ----------
    model : StructuredModel or None, default=None
        Joint feature map, task loss and decoding oracles (copied at fit).  None, or
        a :class:`~kernfw.structured.MultiClass` model, makes the estimator a
        classifier to scikit-learn (``is_classifier``; stratified folds in
        ``cross_val_score`` and ``GridSearchCV``): ``y`` holds labels of any kind,
        ``classes_`` their sorted values, and the model is built from them
        (:func:`multiclass_model`: ``MultiClass(len(classes_))`` with the 0/1 cost
        for None; a given ``MultiClass`` contributes its cost matrix).  Other models
        (``Chain``, ``Matching``, your own) take ``y`` in their format.
    C : float, default=1.0
        Inverse regularization ``C > 0``: ``λ = 1/(C·n)`` (``n`` training
        examples; with weights ``n`` is their sum ``Σ_i w_i``) unless ``lam`` is given.
    lam : float or None, default=None
        Regularization ``λ > 0`` of the primal above; overrides ``C``.
    solver : {"auto", "bcfw", "stdbcfw", "lsfw", "stdfw", "pairwise", "cutting_plane", \
"ssg"}, default="auto"
        The algorithm (the names mean what they mean in
        :class:`~kernfw.MultiClassSVM`):

        - "auto": "bcfw", and for a ``MultiClass`` model "pairwise" (the fastest
          certified solver there), handing over to "cutting_plane" when it stops
          unconverged (the FW solvers crawl where the dual is ill-conditioned: data
          far from the origin or of large scale, a large ``C``; ``solver_`` says
          which solver returned ``coef_``);
        - "bcfw": block-coordinate Frank-Wolfe with the exact block line
          search (Lacoste-Julien et al., Algorithm 4), one oracle call per
          block step; compiled passes for ``Chain``;
        - "stdbcfw": the same with the predefined block step ``2n/(k+2n)``
          (``k`` block steps so far);
        - "lsfw": batch Frank-Wolfe with the exact line search (Algorithm 2),
          one oracle pass per iteration;
        - "stdfw": batch Frank-Wolfe with the standard step ``2/(t+2)``;
        - "pairwise": for ``MultiClass`` models, block-coordinate FW with
          pairwise block steps on the multi-class dual
          (:func:`kernfw.solvers.multiclass.solve_multiclass`; math.md §3.7,
          §3.9), linearly convergent — what ``MultiClassSVM(solver="bcfw")``
          runs for the max hinge;
        - "cutting_plane": the 1-slack cutting-plane baseline of SVMstruct
          (:mod:`kernfw.solvers.structural.cutting_plane`), one oracle pass and one small QP
          per iteration, with the same certified gap;
        - "ssg": stochastic subgradient baseline (§3.6); certifies nothing
          (``duality_gap_`` is inf) and always runs ``max_iter`` passes.
    averaging : {"weighted", "none"}, default="weighted"
        The returned iterate of "bcfw", "stdbcfw" and "ssg": "weighted", the
        average ``w̄`` of the iterates with weights ``∝ k`` (BCFW-wavg, SSG-wavg),
        which is certified and returned as ``coef_``, or the last iterate
        ("none").  The other solvers return their last (or best certified)
        iterate.
    max_iter : int, default=2000
        Budget, in the unit ``n_iter_`` counts: passes over the data (``n``
        oracle calls each) for "bcfw", "stdbcfw", "pairwise" and "ssg";
        iterations (one oracle pass each) for "lsfw", "stdfw" and
        "cutting_plane".
    tol : float, default=1e-2
        Relative tolerance on the certified duality gap: stop when
        ``(P − D)/P ≤ tol``, i.e. ``P(coef_)`` is certified within a fraction
        ``tol`` of the optimum (``P(coef_) − P* ≤ P − D``), whatever the scale
        of the features, of ``C`` or of the task loss.  ``tol=0`` runs the whole
        ``max_iter`` budget.  On at most 64 training examples (a small problem,
        :data:`kernfw.fw.SMALL_PROBLEM_MAX`) the fit runs on past ``tol`` to the
        rounding floor within ``max_iter`` (math.md §0, "Small problems"; "pairwise"
        and "cutting_plane" get there, the sublinear block and batch FW may spend the
        budget): a fit with integer weights is then the fit on repeated rows to
        rounding; ``converged_`` still states ``gap + ρ ≤ tol·P``.
    check_every : int, default=5
        Passes between two duality-gap computations of "bcfw", "stdbcfw",
        "pairwise" and "ssg" (each costs one oracle pass); "lsfw", "stdfw" and
        "cutting_plane" get their gap every iteration for free.
    sample : {"uniform", "perm"}, default="uniform"
        Block order: uniform draws, or a random permutation per pass.
    random_state : int, Generator, RandomState or None
        Seed of the block order; the same seed gives the same iterates.
    verbose : int, default=0
        Print one line per duality-gap computation.
    class_weight : dict, "balanced" or None, default=None
        For a classifier: the weight ``class_weight[c]`` of the loss terms of class
        ``c`` (None: 1), as :class:`~kernfw.MultiClassSVM`'s; "balanced" is
        ``Σ_i s_i / (m · Σ_{y_i = c} s_i)`` with the sample weights ``s``
        (scikit-learn's formula).  It multiplies ``sample_weight``: class weights are
        per-example weights (math.md §3.11).  Other models: None only.
    fit_intercept : bool or "auto", default="auto"
        For a classifier: fit intercepts ``b`` (``intercept_``) as liblinear does,
        the inputs with a constant feature ``s = intercept_scaling`` appended, whose
        weights are regularized like the others (the joint features
        ``φ(x, y) = e_y ⊗ [x; s]``; math.md §3.7).  "auto" is True without a model
        (the classifier built from the labels, as :class:`~kernfw.MultiClassSVM` for
        the linear kernel and :class:`sklearn.svm.LinearSVC` at their defaults) and
        False for a given model, whose joint features are its own (``MultiClass(m)``:
        ``e_y ⊗ x``); True with a model other than ``MultiClass`` is a ValueError.
    intercept_scaling : float, default=1.0
        The constant feature ``s > 0``: ``intercept_ = s · W[:, d]``; a larger ``s``
        regularizes the intercept less.

    Attributes
    ----------
    model_ : StructuredModel
        The initialized copy of ``model`` (for a classifier: the ``MultiClass``
        model of ``classes_``).
    classes_ : ndarray of shape (m,)
        The sorted labels seen in ``fit`` (classifiers only); class ``j`` of
        ``model_`` is ``classes_[j]``.
    lam_ : float
        The ``λ`` used (``lam``, or ``1/(C·n)``).
    n_features_in_ : int
        Input features per example (``MultiClass``) or per position
        (``Chain``); absent for models without a feature count.
    coef_ : ndarray (D,)
        The weights ``w`` in the model's joint-feature layout (for
        ``MultiClass``: ``vec(W)``, ``W`` of shape (m, d), row ``j`` scoring
        ``classes_[j]``; without the intercept's column).
    intercept_ : ndarray of shape (m,)
        A classifier's intercepts ``b`` (zeros without ``fit_intercept``): scores
        ``W x + b``.
    class_weight_ : ndarray of shape (m,)
        A classifier's weight of each class's loss terms (ones for
        ``class_weight=None``).
    primal_objective_ : float
        ``P(coef_)``.
    dual_objective_ : float
        Dual objective of the returned dual point (NaN for "ssg").
    duality_gap_ : float
        ``P − D ≥ P(coef_) − P*`` (inf for "ssg"), up to the rounding bound ``ρ``
        of the certificate (``history_["rounding"]``): never below ``−ρ``.
    n_iter_ : int
        Passes or iterations performed (the unit of ``max_iter``).
    converged_ : bool
        Whether ``duality_gap_ + ρ ≤ tol · primal_objective_``.
    history_ : dict of arrays
        One row per gap computation: ``iteration``, ``time``, ``primal``,
        ``dual``, ``gap``, ``step``, ``pass`` and, for the structural solvers,
        ``oracle_calls`` (calls made by the optimization, gap passes excluded).
    fit_time_ : float
        Seconds spent in the solver.
    solver_ : str
        The solver used (``solver``, with "auto" resolved).

    Notes
    -----
    With ``MultiClass(m)`` the objective is exactly that of
    ``MultiClassSVM(loss="max_hinge", lam=λ, kernel="linear")`` with the same
    ``λ``, ``fit_intercept`` and ``intercept_scaling`` (math.md §3.7, §1.15; both use
    ``λ/2‖W‖² + (1/n) Σ``): the two reach the same optimum ``W``
    (``coef_.reshape(m, d)``) and intercepts.

    :meth:`score` is higher-is-better, ``1 −`` the mean task loss: the
    accuracy for ``MultiClass`` with 0/1 costs, the mean per-position accuracy
    for ``Chain`` with the normalized Hamming loss (:meth:`task_loss` gives the
    loss itself).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.model_selection import cross_val_score
    >>> from kernfw import StructuredSVM
    >>> X, y = load_iris(return_X_y=True)  # sorted labels: stratified folds
    >>> bool(cross_val_score(StructuredSVM(), X, y).mean() > 0.9)
    True
    >>> from kernfw.datasets import make_chains
    >>> from kernfw.structured import Chain
    >>> X, Y = make_chains(30, n_states=3, random_state=0)
    >>> svm = StructuredSVM(Chain(3), lam=0.1, max_iter=30, random_state=0).fit(X, Y)
    >>> svm.score(X, Y) > 0.8
    True
    """

    _parameter_constraints = {
        "model": [HasMethods(["joint_feature", "loss", "loss_augmented_decode", "decode"]), None],
        "C": [Interval(Real, 0, None, closed="neither")],
        "lam": [Interval(Real, 0, None, closed="neither"), None],
        "solver": [StrOptions({"auto", *_STEP_RULES, "pairwise", "cutting_plane", "ssg"})],
        "averaging": [StrOptions(set(AVERAGING))],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "check_every": [Interval(Integral, 1, None, closed="left")],
        "sample": [StrOptions({"uniform", "perm"})],
        "random_state": ["random_state", np.random.Generator],
        "verbose": ["verbose"],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "fit_intercept": ["boolean", StrOptions({"auto"})],
        "intercept_scaling": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        model=None,
        C=1.0,
        lam=None,
        solver="auto",
        averaging="weighted",
        max_iter=2000,
        tol=1e-2,
        check_every=5,
        sample="uniform",
        random_state=None,
        verbose=0,
        class_weight=None,
        fit_intercept="auto",
        intercept_scaling=1.0,
    ):
        self._store_arguments(locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        if _is_multiclass(self.model):
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
            tags.input_tags.sparse = True
        return tags

    def _is_classifier(self):
        return _is_multiclass(self.model)

    def _fits_intercept(self):
        """Whether a classifier's inputs get the constant feature (resolves "auto"); True
        with another model is a ValueError."""
        if self.fit_intercept == "auto":
            return self.model is None
        if self.fit_intercept and not self._is_classifier():
            raise ValueError(
                f"fit_intercept=True needs a classifier (model None or MultiClass); "
                f"{type(self.model).__name__} has its own joint features"
            )
        return bool(self.fit_intercept)

    def _model_inputs(self, X):
        """A classifier's inputs of its ``MultiClass`` model: ``X`` with the constant
        column ``intercept_scaling`` appended when it fits an intercept."""
        if not self._fits_intercept():
            return X
        column = np.full((X.shape[0], 1), float(self.intercept_scaling))
        if sp.issparse(X):
            return sp.hstack([X, sp.csr_matrix(column)], format="csr")
        return np.hstack([X, column])

    def _classifier_weights(self, y, Y, sample_weight):
        """The per-example weights ``w_i = s_i · c_{y_i}`` of a classifier (``class_weight_``
        set; None when no weight is given)."""
        s = example_weights(sample_weight, len(Y))
        self.class_weight_ = class_weights(self.class_weight, self.classes_, y, s)
        if s is None and self.class_weight is None:
            return None
        return (np.ones(len(Y)) if s is None else s) * self.class_weight_[Y]

    def _check_sparse(self, X):
        if sp.issparse(X) and not getattr(self.model, "accepts_sparse", False):
            raise TypeError(
                f"{type(self.model).__name__} does not accept sparse input; "
                "pass dense arrays (MultiClass accepts scipy.sparse matrices)"
            )

    @with_callbacks
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on examples ``X`` (sequence of inputs) and outputs ``y``.

        Parameters
        ----------
        X : sequence of length n
            Inputs in the model's format (e.g. arrays (T_i, d) for ``Chain``,
            a matrix (n, d), dense or scipy.sparse, for ``MultiClass``).
        y : sequence of length n
            Outputs in the model's format (``Y`` in the docs of the models).
        sample_weight : array-like of shape (n,), default=None
            Per-example weights ``w_i ≥ 0`` of the loss terms (None: 1; class weights
            are sample weights, e.g. ``sklearn.utils.class_weight.compute_sample_weight``
            of the labels): the primal is ``λ/2‖w‖² + (1/Σ_i w_i) Σ_i w_i H_i(w)``
            with ``λ = 1/(C Σ_i w_i)``, so a weight of 0 is the example removed and an
            integer weight ``k`` the example repeated ``k`` times (math.md §3.11).

        Returns
        -------
        self
            The fitted estimator.
        """
        if y is None:
            raise ValueError(
                "StructuredSVM requires y to be passed, but the target y is None "
                "(Y holds the outputs in the model's format)"
            )
        if self._is_classifier():
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
            check_classification_targets(y)
            self.classes_, Y = np.unique(y, return_inverse=True)
            sample_weight = self._classifier_weights(y, Y, sample_weight)
            X = self._model_inputs(X)
            model = multiclass_model(self.model, self.classes_).initialize(X, Y)
        else:
            if self.class_weight is not None:
                raise ValueError(
                    f"class_weight needs a classifier (model None or MultiClass); pass "
                    f"sample_weight to weigh the examples of a {type(self.model).__name__} model"
                )
            self._fits_intercept()  # True with this model: ValueError
            self._check_sparse(X)
            Y = y
            model = copy.deepcopy(self.model).initialize(X, Y)
        weights, n_eff = self._loss_weights(sample_weight, len(Y))
        self.lam_ = resolve_lam(self.C, self.lam, n_eff)
        solver = self.solver
        if solver == "auto":
            solver = "pairwise" if isinstance(model, MultiClass) else "bcfw"
        callback = self._fw_callback(self.max_iter, X, Y)
        try:
            result = self._solve(solver, model, X, Y, weights, callback)
            if solver == "pairwise" and self.solver == "auto" and not result.converged:
                solver = "cutting_plane"
                result = self._solve(solver, model, X, Y, weights, callback)
        finally:
            self._end_callbacks()
        self.model_ = model
        if not self._is_classifier():
            if getattr(model, "n_features", None) is not None:
                self.n_features_in_ = int(model.n_features)
            for name in ("classes_", "intercept_", "class_weight_"):
                self.__dict__.pop(name, None)
        self._set_coef(np.asarray(result["w"], dtype=float))
        self._store_result(result)
        self.solver_ = solver
        return self

    def _set_coef(self, w):
        """``coef_`` (and a classifier's ``intercept_``) from the solution ``w`` in the
        model's joint-feature layout (a classifier's ``W`` has the intercept's column last
        when it fits one)."""
        if not self._is_classifier():
            self.coef_ = w
            return
        W = w.reshape(self.classes_.size, -1)
        if self._fits_intercept():
            self.coef_ = W[:, :-1].ravel()
            self.intercept_ = self.intercept_scaling * W[:, -1]
        else:
            self.coef_, self.intercept_ = w, np.zeros(self.classes_.size)

    def _joint_coef(self):
        """The weights in the model's joint-feature layout (``coef_`` with a classifier's
        intercept column)."""
        if not (self._is_classifier() and self._fits_intercept()):
            return self.coef_
        W = self.coef_.reshape(self.classes_.size, -1)
        return np.column_stack([W, self.intercept_ / self.intercept_scaling]).ravel()

    def _loss_weights(self, sample_weight, n):
        """``(v, Σ_i w_i)``: the weights ``v_i = n w_i / Σ_j w_j`` (mean 1) of the solvers'
        loss terms from the sample weights ``w_i`` (``v`` is None when every ``w_i`` is 1),
        and the weighted number of examples.

        With ``λ = 1/(C Σ_i w_i)`` the solvers' primal ``λ/2‖w‖² + (1/n) Σ_i v_i H_i(w)``
        is ``λ/2‖w‖² + (1/Σ_i w_i) Σ_i w_i H_i(w)`` (math.md §3.11)."""
        w = example_weights(sample_weight, n)
        if w is None or np.all(w == 1.0):
            return None, n
        total = float(w.sum())
        return w * (n / total), total

    def _solve(self, solver, model, X, Y, weights, callback):
        """One run of ``solver`` (resolved) on the examples with loss weights ``weights``."""
        budget = dict(max_iter=self.max_iter, tol=stopping_tol(self.tol, len(Y)))
        blocks = dict(
            sample=self.sample,
            random_state=solver_seed(self.random_state),
            callback=callback,
            check_every=self.check_every,
        )
        args = (model, X, Y, self.lam_)
        if solver in ("lsfw", "stdfw"):
            return solve_structural_fw(
                *args, step=_STEP_RULES[solver], callback=callback, sample_weight=weights, **budget
            )
        if solver in ("bcfw", "stdbcfw"):
            return solve_structural_bcfw(
                *args,
                averaging=self.averaging,
                step=_STEP_RULES[solver],
                sample_weight=weights,
                **budget,
                **blocks,
            )
        if solver == "cutting_plane":
            return solve_structural_cutting_plane(
                *args, callback=callback, sample_weight=weights, **budget
            )
        if solver == "ssg":
            return solve_structural_ssg(
                *args,
                averaging=self.averaging,
                max_iter=self.max_iter,
                sample_weight=weights,
                **blocks,
            )
        return self._fit_pairwise(
            model, X, Y, blocks, handover=self.solver == "auto", weights=weights
        )

    def _fit_pairwise(self, model, X, Y, blocks, handover=False, weights=None):
        """The multi-class dual with pairwise block steps (math.md §3.7, §3.9), linear kernel;
        its result gains ``w`` = ``coef_``.  With ``handover`` an unconverged run does not
        warn (the cutting plane takes over); ``weights``: the loss weights ``v_i`` (math.md
        §1.15: the same weighted problem)."""
        if not isinstance(model, MultiClass):
            raise ValueError(
                f"solver='pairwise' needs a MultiClass model, got {type(model).__name__}"
            )
        op = Features(model.prepare(X))
        m = model.n_classes
        zero_one = np.array_equal(model.cost, 1.0 - np.eye(m))
        with warnings.catch_warnings():
            if handover:
                warnings.simplefilter("ignore", ConvergenceWarning)
            result = solve_multiclass(
                op,
                model.check_labels(Y),
                loss=MaxHinge() if zero_one else StructuredHinge(model.cost),
                lam=self.lam_,
                solver="bcfw",
                block_step="pairwise",
                n_classes=m,
                weights=weights,
                tol=stopping_tol(self.tol, len(Y)),
                max_iter=self.max_iter,
                name="StructuredSVM solver='pairwise'",
                remedy="increase max_iter, loosen tol, use a smaller C (a larger lam), "
                "or use solver='cutting_plane'",
                **blocks,
            )
        result.history["pass"] = result.history["iteration"].astype(float)
        # W = Xᵀ Aᵀ/(λn), (d, m); coef_ = vec(Wᵀ)
        W = np.asarray(op.primal(result["A"].T), dtype=float) / (self.lam_ * op.n)
        result.solution["w"] = W.T.ravel()
        return result

    def predict(self, X):
        """Plain decoding ``argmax_y ⟨coef_, φ(x, y)⟩`` of every input.

        Parameters
        ----------
        X : sequence
            Inputs in the model's format.

        Returns
        -------
        list or ndarray
            The decoded outputs (an int array for ``MultiClass``).
        """
        check_is_fitted(self)
        if self._is_classifier():
            return self.classes_[np.argmax(self._scores(X), axis=1)]
        self._check_sparse(X)
        return self.model_.batch_decode(self.model_.prepare(X), self.coef_)

    @available_if(_is_classifier)
    def decision_function(self, X):
        """Class scores ``W x`` of a classifier, shape (n_samples, m) (columns follow
        ``classes_``); with two classes scikit-learn's binary convention, the 1-D
        ``s_1(x) − s_0(x)`` (positive means ``classes_[1]``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs.

        Returns
        -------
        ndarray of shape (n_samples, m) or (n_samples,)
            The scores ``⟨coef_, φ(x, j)⟩``.
        """
        S = self._scores(X)
        return S[:, 1] - S[:, 0] if S.shape[1] == 2 else S

    def _scores(self, X):
        """All ``m`` class scores ``X Wᵀ`` of a classifier, shape (n_samples, m)."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        W = self.coef_.reshape(self.classes_.size, -1)  # (m, d)
        return np.asarray(X @ W.T) + self.intercept_

    def task_loss(self, X, y):
        """Mean task loss ``(1/n) Σ_i L(y_i, ŷ_i)`` of the predictions (lower is better).

        Parameters
        ----------
        X, y : sequences
            Inputs and true outputs.

        Returns
        -------
        float
            The mean loss.
        """
        Y_pred = self.predict(X)
        if self._is_classifier():
            return self._label_loss(np.asarray(y), Y_pred)
        return float(np.mean(self.model_.batch_loss(self.model_.prepare_outputs(y), Y_pred)))

    def _label_loss(self, y, y_pred):
        """Mean cost ``Δ[y_i, ŷ_i]`` of predicted labels (a label unseen in ``fit`` costs
        what it costs under the 0/1 cost, 1; with a cost matrix it is an error)."""
        cost = self.model_.cost
        if np.array_equal(cost, 1.0 - np.eye(self.classes_.size)):
            return float(np.mean(y != y_pred))
        true = np.searchsorted(self.classes_, y).clip(0, self.classes_.size - 1)
        if not np.array_equal(self.classes_[true], y):
            raise ValueError("y has labels not seen in fit, which the cost matrix does not cost")
        return float(np.mean(cost[true, np.searchsorted(self.classes_, y_pred)]))

    def score(self, X, y):
        """``1 − task_loss(X, Y)``: higher is better (scikit-learn's convention).

        The accuracy for ``MultiClass`` with 0/1 costs; the mean per-position
        accuracy for ``Chain`` with the normalized Hamming loss.

        Parameters
        ----------
        X, y : sequences
            Inputs and true outputs.

        Returns
        -------
        float
            ``1 − (1/n) Σ_i L(y_i, ŷ_i)``.
        """
        return 1.0 - self.task_loss(X, y)

    def primal_objective(self, X, y, sample_weight=None):
        """``P(coef_)`` on data ``(X, Y)`` with the fitted ``λ`` (one oracle pass).

        Parameters
        ----------
        X, y : sequences
            Inputs and outputs.
        sample_weight : array-like of shape (n,), default=None
            Weights ``s_i`` of the loss terms, as in :meth:`fit` (a classifier's times
            ``class_weight_``).

        Returns
        -------
        float
            ``λ/2‖w‖² + (1/Σ_i w_i) Σ_i w_i H_i(w)`` (``w_i = 1``: the mean of ``H_i``).
        """
        check_is_fitted(self)
        if self._is_classifier():
            X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
            X = self._model_inputs(X)
            y = np.searchsorted(self.classes_, np.asarray(y))
            if self.class_weight is not None:
                s = example_weights(sample_weight, len(y))
                sample_weight = (np.ones(len(y)) if s is None else s) * self.class_weight_[y]
        weights, _ = self._loss_weights(sample_weight, len(y))
        problem = StructuredProblem(self.model_, X, y, self.lam_, weights)
        return problem.primal(self._joint_coef())
