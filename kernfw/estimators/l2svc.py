"""``L2SVC``: the L2-SVM of the core vector machine, trained by (away-step) Frank-Wolfe.

[Frandi2013], math.md §2: the binary L2-SVM is the minimum
enclosing ball problem of the modified kernel ``k̃``; :func:`kernfw.solvers.simplex_qp.solve_l2svm`
solves it with one kernel column per iteration.  Multi-class problems are
split one-vs-one (as :class:`sklearn.svm.SVC`), one-vs-rest or into a decision
DAG (:mod:`kernfw.estimators._multiclass_decomposition`), and the binary
problems are trained in parallel with joblib.
"""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples, check_is_fitted

from ..calibration import calibrated_log_proba, fit_pairwise_coupling, lift_to_top
from ..operators import KernelOperator
from ..solvers.simplex_qp import (
    L2SVM_SOLVERS,
    choose_l2svm_solver,
    solve_l2svm,
    solve_l2svm_gram,
)
from ..solvers.simplex_qp.exact import EXACT_MAX
from ._base import (
    KERNEL_PARAMETER_CONSTRAINTS,
    FWEstimatorMixin,
    SupportKernelMixin,
    example_weights,
    with_callbacks,
)
from ._docs import with_kernel_parameters
from ._gram_problems import fit_gram_problems, problem_kernels
from ._multiclass_decomposition import (
    DECISION_SHAPES,
    SCHEMES,
    binary_problems,
    combine_decisions,
    shaped_decisions,
)
from ._plan import WIDE_FEATURES, WIDE_GRAM_MB, explicit_features, gram_budget
from ._probability import ProbabilityMixin, calibration_folds

__all__ = ["L2SVC", "WIDE_FEATURES", "WIDE_GRAM_MB", "gram_budget", "l2svm_fit_solver"]


def l2svm_fit_solver(solver, backend, kernel, approx, X):
    """The L2-SVM algorithm of a fit, resolved before its operator is built (math.md §2.13).

    ``"auto"`` is ``"active_set"`` on at most
    :data:`~kernfw.solvers.simplex_qp.exact.EXACT_MAX` points (the active-set method on
    the stored ``K̃``, math.md §2.16), else ``"dcd"`` when the kernel comes with explicit
    features ``K = XXᵀ``
    (an approximation ``approx``; ``kernel="linear"`` on sparse ``X`` or on fewer features
    than points, which :func:`kernfw.kernels.make_operator` keeps as features; a ready
    operator with features, :func:`~kernfw.solvers.simplex_qp.choose_l2svm_solver`) and
    ``"mfw"`` otherwise and on the Dask backend, whose shards evaluate the exact kernel
    (so neither ``"dcd"`` nor ``"active_set"`` runs there: ValueError; nor ``approx``,
    which :func:`~kernfw.estimators._plan.check_approx` refuses first).

    Parameters
    ----------
    solver, backend, kernel, approx
        The estimator's parameters.
    X : array-like, sparse matrix or None
        The training inputs (only whether they are sparse, and their shape, are read).

    Returns
    -------
    str
        One of ``"mfw"``, ``"lsfw"``, ``"cvm"``, ``"active_set"``, ``"dcd"``.
    """
    if backend == "dask":
        if solver in ("dcd", "active_set"):
            raise ValueError(
                f"solver={solver!r} runs locally only; use backend='local' or solver='mfw'"
            )
        return "mfw" if solver == "auto" else solver
    if solver != "auto":
        return solver
    if isinstance(kernel, KernelOperator):
        return "active_set" if kernel.n <= EXACT_MAX else choose_l2svm_solver(kernel)
    try:
        if _num_samples(X) <= EXACT_MAX:
            return "active_set"
    except (TypeError, ValueError):  # no length to read: validation will refuse X
        pass
    return "dcd" if explicit_features(kernel, approx, X) else "mfw"


def _fit_binary(op, y_pm, C, solver, tol, max_iter, callback, random_state, weights=None):
    """One binary L2-SVM: ``(support, coef, b, result)`` in the sub-problem's indices
    (``weights``: its examples' positive weights, or None)."""
    result = solve_l2svm(
        op,
        y_pm,
        C,
        solver=solver,
        tol=tol,
        max_iter=max_iter,
        callback=callback,
        random_state=random_state,
        sample_weight=weights,
    )
    sol = result.solution
    return sol["support"], sol["coef"], sol["b"], result


def _fit_binary_gram(op, rows, y_pm, C, tol, max_iter):
    """One binary L2-SVM on the rows ``rows`` of the stored Gram of ``op``, in one compiled
    call (:func:`~kernfw.solvers.simplex_qp.solve_l2svm_gram`, pairwise FW from the uniform
    start): ``(support, coef, b, ρ)`` in the sub-problem's indices, as :func:`_fit_binary`'s
    (math.md §2.1: ``coef = α_S ⊙ y_S``, ``b = Σ_i α_i y_i``, ``ρ = αᵀK̃α``)."""
    K = np.ascontiguousarray(op.block(rows, rows), dtype=np.float64)  # symmetric as K is
    fit = solve_l2svm_gram(K, y_pm, C, tol=tol, max_iter=max_iter)
    support = np.flatnonzero(fit.alpha)
    coef = fit.alpha[support] * y_pm[support]
    return support, coef, float(fit.alpha @ y_pm), fit.rho


@with_kernel_parameters()
class L2SVC(ProbabilityMixin, ClassifierMixin, SupportKernelMixin, FWEstimatorMixin, BaseEstimator):
    """L2-SVM classifier (the core vector machine's formulation) trained by FW / MFW.

    Each binary problem ``min ‖w‖² + b² − 2ρ + C Σ ξ_i²`` s.t.
    ``y_i (wᵀφ(x_i) + b) ≥ ρ − ξ_i`` (math.md §2.1) is solved in its dual, a
    minimum enclosing ball over the unit simplex, by Frank-Wolfe with away
    steps (MFW, linear convergence) or plain Frank-Wolfe, at the cost of one
    kernel column per iteration: no ``n × n`` matrix is formed for large
    ``n`` (the kernel is evaluated on the fly with a column cache).  The
    iterations run compiled (numba).

    Parameters
    ----------
    C : float, default=1.0
        Penalty ``C > 0`` of the squared slacks.  Exact mapping: at the optimum
        ``ρ > 0``, and ``(w, b)/ρ`` minimizes
        ``½‖w‖² + ½b² + (C/2) Σ_i max(0, 1 − y_i h(x_i))²`` — the squared-hinge
        SVM in scikit-learn's convention (``½‖w‖² + C'·Σ loss``) with
        ``C' = C/2`` and the bias regularized like a constant feature 1
        (``LinearSVC(loss="squared_hinge", C=C/2, intercept_scaling=1)`` for
        the linear kernel: same predictions, decision functions equal up to the
        factor ``ρ``).  ``SVC(C=C)`` puts the same ``C`` in front of the hinge
        loss ``Σ max(0, 1 − y_i h(x_i))`` with ``½‖w‖²`` and an unregularized
        bias, so a tuned ``SVC`` ``C`` carries over as ``C`` here (the same
        balance of norm and loss sum; the default 1.0 is SVC's).
    kernel : {"linear", "rbf", "poly", "sigmoid", "precomputed"}, callable or \
KernelOperator, default="rbf"
        As in :class:`sklearn.svm.SVC`; a ready
        :class:`~kernfw.operators.KernelOperator` on the training points is
        used as is (``X`` is then only checked for its length).
    {kernel_parameters}
    solver : {"auto", "mfw", "lsfw", "cvm", "active_set", "dcd"}, default="auto"
        The algorithm.  "mfw": Frank-Wolfe with away and drop steps; "lsfw":
        plain Frank-Wolfe (as in :class:`~kernfw.MultiClassSVM`); both with the
        exact line search.  "cvm": the core vector machine baseline (core-set
        iterations, each solving the QP on the core set;
        :class:`kernfw.solvers.simplex_qp.CoreVectorIterate`).  "active_set": the
        active-set method on the stored ``K̃`` (math.md §2.16), to the optimum
        whatever ``tol``; for small problems.  "dcd": passes
        of vertex-coordinate steps (math.md §2.13), each step O(d) on explicit
        features (the linear kernel; needs them).  "auto": "active_set" on at most 64
        training points, else "dcd" when the kernel
        comes with explicit features (``kernel="linear"`` on sparse input or on
        fewer features than points),
        "mfw" otherwise (and always with ``backend="dask"``);
        :func:`kernfw.solvers.simplex_qp.choose_l2svm_solver`.
    tol : float, default=0.3
        Relative tolerance on the certified duality gap:
        ``(P − D)/|D| = gap/ρ ≤ tol`` (math.md §2.5), where ``D = −ρ``,
        ``ρ = αᵀK̃α`` and the FW gap is ``gap = 2(ρ − min_i (K̃α)_i)``: twice
        the largest margin violation, relative to the margin ``ρ``.  The
        default sits where test accuracy has plateaued (see
        ``docs/benchmarks/l2svm.md``); lower it for a more accurate dual.
    max_iter : int, default=None
        Budget in iterations (one kernel column each; core-set iterations for
        ``solver="cvm"``; passes over the data for ``solver="dcd"``) per binary
        problem, which ``n_iter_`` counts (None: ``max(100000, 20 n)``
        iterations, 1000 passes for "dcd").
    cache_size : float, default=200
        Kernel cache in MB for one fit, as :class:`sklearn.svm.SVC`'s: the
        column cache of on-the-fly kernels.  Gram matrices up to 32 MB
        (``kernfw.kernels.COLUMN_GRAM_MAX_MB``) are precomputed instead, and
        so are Grams up to ``max(256 MB, cache_size)`` when ``X`` has 50
        features or more (see :func:`gram_budget`).  MFW requests most columns
        only once or twice, so the cache size matters little (see
        ``docs/benchmarks/l2svm.md``, "Cache size").
    class_weight : dict, "balanced" or None, default=None
        Weights ``c_k`` of the classes, as :class:`sklearn.svm.SVC`'s: example ``i`` gets
        the weight ``w_i = c_{y_i} · sample_weight_i`` on its slack, ``C w_i ξ_i²``
        (math.md §2.14).  "balanced": ``c_k = n / (m · n_k)`` (scikit-learn's
        :func:`~sklearn.utils.class_weight.compute_class_weight`, with ``n`` and ``n_k``
        summed over ``sample_weight``); None: all 1.
    multi_class : {"ovo", "ovr", "ddag"}, default="ovo"
        One-vs-one (``m(m−1)/2`` problems, votes as SVC), one-vs-rest (``m``
        problems) or DDAG (the one-vs-one problems evaluated as a decision
        DAG: ``m − 1`` machines per prediction).
    decision_function_shape : {"ovr", "ovo"}, default="ovr"
        The shape of :meth:`decision_function`, as :class:`sklearn.svm.SVC`'s:
        "ovr" one score per class (n_samples, m); "ovo" the decisions of the
        one-vs-one problems (``multi_class`` "ovo" or "ddag"), shape
        (n_samples, m(m−1)/2), pairs ``(i, j)`` in ``SVC``'s order and sign
        (positive for ``classes_[i]``).  ``predict`` does not depend on it.
    n_jobs : int, default=None
        Binary problems trained in parallel (joblib; None means 1 unless in a
        ``joblib.parallel_config`` context).
    verbose : int, default=0
        Print one line per certified iterate (single problem, sequential runs).
    random_state : int, RandomState instance or None, default=None
        Chooses the first point of the CVM start ``α₀ = ½(e_a + e_b)``
        (math.md §2.6), or of the start ``e_a`` of "dcd" and the order of its
        passes; None starts at point 0 (and "dcd" orders its passes by ``default_rng(0)``).
        Also shuffles the calibration folds of ``probability=True``.
    backend : {"local", "dask"}, default="local"
        Where the solver runs: "local" (this process) or "dask".  With "dask",
        data-parallel MFW on the current Dask cluster (the default
        ``distributed.Client``, or Dask's configured ``scheduler-address``):
        the rows are split over the workers, which keep them and their part
        of the solver state for the whole fit (:mod:`kernfw.distributed`).
        The shards evaluate the kernel in float64: at ``tol < 1e-4`` the
        iterates are those of "local" (which keeps float32 kernel values from
        ``tol = 1e-4`` on at ``precision="auto"``; then both are certified to
        ``tol`` but their iterations differ by rounding).  The fitted model is the same in-memory
        model.  Needs a kernel given by name or callable.
    probability : bool, default=False
        Enable :meth:`predict_proba` and :meth:`predict_log_proba` (as
        :class:`sklearn.svm.SVC`): ``fit`` also fits the binary problems on 5
        internal cross-validation folds (sharing the training kernel; on the
        local backend) and fits a map from their held-out decision values to
        probabilities (math.md §9): for one-vs-one and DDAG models of three
        classes or more, Platt's sigmoid of each pair machine's decision ``h_p/ρ_p``
        (with its offset), the pairs coupled into class probabilities as libsvm
        couples them, the predicted class lifted to the most probable where the
        coupling ranks another first; otherwise Platt's sigmoid ``σ(f/T)`` for two
        classes (no offset) and temperature scaling ``softmax(s/T)`` of the
        one-vs-rest decisions (divided by the mean margin ``ρ``).  The most probable
        class is always the predicted one.  With ``solver="auto"``
        resolved to "mfw", no weights and a stored Gram or a kernel evaluated on
        the fly, the problems and the folds' are solved pair by pair on their
        kernel blocks by compiled pairwise FW (``solver_`` is then "pairwise"; the
        model is certified to ``tol`` like the MFW one, and differs from it within
        that tolerance).  ``random_state`` shuffles the folds.

    Attributes
    ----------
    classes_ : ndarray of shape (m,)
        Class labels.
    solver_ : str
        The algorithm used (``solver`` with "auto" resolved; "pairwise" for the
        pairwise FW of ``probability=True`` on kernel blocks).
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
        The classes of each binary problem: ``(i, j)`` pairs for "ovo" and
        "ddag" (positive decision = class ``classes_[j]``), ``(k,)`` for "ovr"
        and for binary problems ``(0, 1)``.
    n_iter_ : int or ndarray of shape (n_problems,)
        Iterations (an int for binary problems, as all of the following).
    duality_gap_, primal_objective_, dual_objective_, converged_ : float/bool or ndarray
        Certificates of the returned iterates (dual ``D = −ρ``, primal ``D + gap``),
        each up to the rounding bound of :class:`kernfw.fw.FWResult`
        (``history_["rounding"]``); the gap is never negative.
    history_ : dict of arrays
        Trace of the run(s) (see :class:`kernfw.fw.FWResult`); several binary
        problems are stacked with a ``problem`` column.
    fit_time_ : float
        Seconds spent in the solver(s).
    n_features_in_ : int
        Number of features seen in ``fit``.
    kernel_approx_ : transformer or None
        The fitted kernel approximation (``Nystroem``, ``RBFSampler`` or
        ``PolynomialCountSketch``) when ``approx`` is set, else None.
    calibration_ : kernfw.calibration.Calibration
        The map from decision values to probabilities (only with ``probability=True``).

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
        "solver": [StrOptions(set(L2SVM_SOLVERS))],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 0, None, closed="left"), None],
        "cache_size": [Interval(Real, 0, None, closed="left")],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "multi_class": [StrOptions(set(SCHEMES))],
        "decision_function_shape": [StrOptions(set(DECISION_SHAPES))],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
        "backend": [StrOptions({"local", "dask"})],
        "probability": ["boolean"],
    }

    def __init__(
        self,
        C=1.0,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        approx=None,
        n_components=1000,
        solver="auto",
        tol=0.3,
        max_iter=None,
        cache_size=200,
        precision="auto",
        class_weight=None,
        multi_class="ovo",
        decision_function_shape="ovr",
        n_jobs=None,
        verbose=0,
        random_state=None,
        backend="local",
        probability=False,
    ):
        self._store_arguments(locals())

    # -- fit -------------------------------------------------------------------------------
    @with_callbacks
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the binary L2-SVM(s) on ``X``, ``y``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n, d), or (n, n) Gram matrix
            Training inputs (a Gram matrix for ``kernel="precomputed"``).
        y : array-like of shape (n,)
            Labels (any hashable values, at least two classes).
        sample_weight : array-like of shape (n,), default=None
            Nonnegative weights of the examples' slacks, ``C w_i ξ_i²`` (math.md §2.14;
            multiplied by ``class_weight``).  An integer weight counts as that many
            copies of the example; an example of weight 0 is left out of the
            problems (as if removed).

        Returns
        -------
        self
        """
        plan = self._fit_plan(X, sample_weight)
        X, (y, classes, weights), op = self._validate_training_data(X, y, sample_weight, plan)
        kept = slice(None) if weights is None else np.flatnonzero(weights > 0)
        y_enc = np.searchsorted(classes, y)  # rows of weight 0 take part in no problem
        problems = binary_problems(y_enc[kept], classes.size, self.multi_class)
        if weights is not None:  # the problems' rows among the kept ones
            problems = [p._replace(index=kept[p.index]) for p in problems]
        single = len(problems) == 1
        callback = self._fw_callback(self.max_iter, X, y) if single else None
        self.classes_ = classes
        self.problems_ = [p.classes for p in problems]
        kernels = self._problem_kernels(op, problems, weights, callback, plan)
        if kernels is not None:  # the full and the fold problems on their kernel blocks
            self._fit_on_blocks(X, op, kernels, y_enc, problems)
            return self
        try:
            options = {"C": self.C, "tol": self.tol, "max_iter": self.max_iter}
            options.update(callback=callback, cache_size=self.cache_size)
            fits = plan.solve_l2svms(X, op, y_enc, problems, options, weights, self._fit_binaries)
        finally:
            self._end_callbacks()
        self.solver_ = plan.solver
        self._set_model(X, y_enc, [p.index for p in problems], fits, op)
        if weights is None:
            self._fit_probability(op, y_enc)
        else:  # the folds of the rows that count, with their weights
            self._fit_probability(op.subset(kept), y_enc[kept], weights[kept])
        return self

    def _problem_kernels(self, op, problems, weights, callback, plan):
        """How a ``probability=True`` fit reads the kernel blocks of its problems when it
        solves them and its folds' on those blocks (:mod:`._gram_problems`), or None:
        ``solver="auto"`` resolved to ``"mfw"`` on the local backend, no weights, nothing
        listening to iterations, a stored Gram or a kernel evaluated on the fly, and the
        largest problem's block within ``max(cache_size, the Gram budget)`` MB."""
        if not (self.probability and self.solver == "auto" and plan.solver == "mfw"):
            return None
        if plan.backend != "local" or weights is not None or callback is not None:
            return None
        size = max(p.index.size for p in problems)
        if size * size * 8 / 2**20 > max(self.cache_size, plan.gram_max_mb):
            return None
        return problem_kernels(op)

    def _fit_on_blocks(self, X, op, kernels, y_enc, problems):
        """Fit the problems and the calibration folds' on their kernel blocks
        (:func:`~kernfw.estimators._gram_problems.fit_gram_problems`; ``solver_`` is
        ``"pairwise"``) and the calibration map on the folds' held-out scores."""
        folds = calibration_folds(y_enc, self.random_state)
        solved = fit_gram_problems(kernels, y_enc, problems, self.C, self.tol, self.max_iter, folds)
        self._end_callbacks()
        self.solver_ = "pairwise"
        self._set_model(X, y_enc, [p.index for p in problems], solved.fits, op)
        scores = None
        for (_, val), rho in zip(folds, solved.fold_rho):
            fold = _calibration_scores(
                solved.heldout[val], rho, self.problems_, self.classes_.size, self.multi_class
            )
            if scores is None:
                scores = np.zeros((y_enc.size,) + fold.shape[1:])
            scores[val] = fold
        self._set_calibration(scores, y_enc)

    def _plan_solver(self, X, sample_weight):
        return l2svm_fit_solver(self.solver, self.backend, self.kernel, self.approx, X)

    def _check_targets(self, y, sample_weight):
        """``(y, classes, weights)``: the labels, the classes of the examples of positive
        weight (at least two) and the examples' weights (None: all 1)."""
        check_classification_targets(y)
        weights = example_weights(sample_weight, _num_samples(y), self.class_weight, y)
        classes = np.unique(y if weights is None else y[weights > 0])
        if classes.size < 2:
            raise ValueError(
                f"L2SVC needs at least 2 classes (of positive weight); got 1 class ({classes[0]!r})"
            )
        return y, classes, weights

    def _fit_binaries(self, op, problems, weights=None, callback=None):
        """The ``(support, coef, b, result)`` of the binary problems ``(rows, y)`` on those
        rows of ``op``, in parallel (joblib), by the fit's plan (``weights``: the weights of
        the rows of ``op``, or None)."""
        jobs = (
            delayed(_fit_binary)(
                op if rows.size == op.n else op.subset(rows),
                y,
                self.C,
                self._plan.solver,
                self.tol,
                self.max_iter,
                callback,
                self._plan.solver_seed,
                weights=None if weights is None else weights[rows],
            )
            for rows, y in problems
        )
        return Parallel(n_jobs=self.n_jobs)(jobs)

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
        self._store_result(results)
        self._set_predictor(X, op)

    # -- probabilities -----------------------------------------------------------------------
    def _heldout_scores(self, op, y_enc, train, val, state=None):
        """Calibration scores on the points ``val`` of the binary problems fitted on
        ``op.subset(train)`` (see :mod:`._probability`).  The fold problems start cold: a
        start from the full model's ``α`` costs one kernel column per support point, as
        much as the solve it would shorten.  A problem left with one class (tiny data)
        decides for that class everywhere.  ``state``: the points' weights, or None."""
        problems = binary_problems(y_enc[train], self.classes_.size, self.multi_class)
        solved = [q for q, p in enumerate(problems) if np.unique(p.y).size == 2]
        decision = np.tile([np.sign(p.y.sum()) for p in problems], (val.size, 1))
        rho = np.ones(len(problems))
        for q, (sup, c, b, rho_q) in zip(
            solved, self._fold_fits(op, train, problems, solved, state)
        ):
            block = np.asarray(op.block(val, train[problems[q].index[sup]]), dtype=np.float64)
            decision[:, q] = block @ c + b
            rho[q] = rho_q
        return _calibration_scores(decision, rho, problems, self.classes_.size, self.multi_class)

    def _fold_fits(self, op, train, problems, solved, weights):
        """``(support, coef, b, ρ)`` of the binary problems ``solved`` of a calibration fold
        (rows ``train``).  On a stored Gram without weights each is one compiled solve on
        its principal submatrix (:func:`_fit_binary_gram`: the many small pair problems of
        one-vs-one cost no Python per iteration or certificate); else the estimator's
        solver on ``op.subset`` (:func:`_fit_binary`)."""
        if weights is None and op.stored_gram() is not None:
            return [
                _fit_binary_gram(
                    op, train[problems[q].index], problems[q].y, self.C, self.tol, self.max_iter
                )  # fmt: skip
                for q in solved
            ]
        fits = self._fit_binaries(
            op, [(train[problems[q].index], problems[q].y) for q in solved], weights
        )
        return [(sup, c, b, result.solution["rho"]) for sup, c, b, result in fits]

    def _set_calibration(self, scores, y_enc):
        """The calibration map of the held-out ``scores`` (:func:`_calibration_scores`):
        Platt's map of each pair machine, coupled (math.md §9.5), for one-vs-one and DDAG
        models of three classes or more; else the map of :class:`ProbabilityMixin`."""
        if _pairwise_calibration(self.classes_.size, self.multi_class):
            self.calibration_ = fit_pairwise_coupling(scores, y_enc, self.problems_)
        else:
            super()._set_calibration(scores, y_enc)

    def _calibrated_log_proba(self, X):
        """The calibration map of the scores of ``X``; for coupled pair machines the
        predicted class lifted to the most probable (math.md §9.5)."""
        decision = self._binary_decisions(X)
        scores = _calibration_scores(
            decision, self.rho_, self.problems_, self.classes_.size, self.multi_class
        )
        log_p = calibrated_log_proba(self.calibration_, scores)
        if self.calibration_.kind != "pairwise":
            return log_p
        votes = combine_decisions(decision, self.problems_, self.classes_.size, self.multi_class)
        return lift_to_top(log_p, np.argmax(votes, axis=1))

    def _proba_scores(self, X):
        """Calibration scores of new inputs (:func:`_calibration_scores`)."""
        return _calibration_scores(
            self._binary_decisions(X),
            self.rho_,
            self.problems_,
            self.classes_.size,
            self.multi_class,
        )

    # -- prediction ------------------------------------------------------------------------
    def decision_function(self, X):
        """Decision values.

        Binary problems: ``h(x) = Σ_i α_i y_i (k(x_i, x) + 1)``, shape
        (n_samples,), positive for ``classes_[1]``.  Multi-class: shape
        (n_samples, m), one score per class (largest = predicted): the
        one-vs-rest decisions for "ovr", votes with confidences for "ovo" (as
        ``SVC(decision_function_shape="ovr")``), and for "ddag" the step at
        which the DAG removed each class (``m − 1`` for the predicted one).
        With ``decision_function_shape="ovo"`` (and one-vs-one problems) the
        pairwise decisions instead, shape (n_samples, m(m−1)/2), with ``SVC``'s
        sign (:func:`~kernfw.estimators._multiclass_decomposition.shaped_decisions`).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs; for ``kernel="precomputed"`` the test Gram
            ``K(X, X_train)`` of shape (n_samples, n_train), of which only the
            support columns are read.

        Returns
        -------
        ndarray of shape (n_samples,), (n_samples, m) or (n_samples, m(m−1)/2)
        """
        return shaped_decisions(
            self._binary_decisions(X),
            self.problems_,
            self.classes_.size,
            self.multi_class,
            self.decision_function_shape,
        )

    def _binary_decisions(self, X):
        """``h_p(x)`` of every binary problem, shape (n_samples, n_problems)."""
        check_is_fitted(self)
        return self._support_decision(self._new_input(X), self.dual_coef_.T) + self.intercept_

    def predict(self, X):
        """Class labels: the sign of ``h`` (binary) or the largest score.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs (as in :meth:`decision_function`).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        scores = combine_decisions(
            self._binary_decisions(X), self.problems_, self.classes_.size, self.multi_class
        )
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        return self._kernel_tags(tags)


def _pairwise_calibration(n_classes, scheme):
    """Whether the probabilities couple the pair machines' (math.md §9.5): one-vs-one
    and DDAG models of at least three classes."""
    return n_classes >= 3 and scheme in ("ovo", "ddag")


def _calibration_scores(decision, rho, problems, n_classes, scheme):
    """The scores the calibration map reads (math.md §9.4): the pair machines' decisions
    ``h_p / ρ_p`` of a one-vs-one or DDAG model of three classes or more (each on the scale
    of its own margin); else the scores of :func:`combine_decisions` (whose argmax is
    ``predict``) of the binary decisions ``h_p`` divided by the mean margin ``ρ``.  Either
    puts the decisions of models fitted on different points (the folds, the full model)
    on one scale."""
    if _pairwise_calibration(n_classes, scheme):
        return decision / rho
    return combine_decisions(decision / np.mean(rho), problems, n_classes, scheme)
