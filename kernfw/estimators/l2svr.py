"""``L2SVR``: the L2-loss ε-insensitive support vector regression, trained by (away-step) FW.

The regression of the core vector regression [Tsang2005b] with the tube width ``ε`` of
scikit-learn's :class:`sklearn.svm.SVR` (math.md §2.15): its dual over the ``2n``
multipliers of the tube is a quadratic over a scaled simplex, solved by the simplex-QP
family (:func:`kernfw.solvers.simplex_qp.solve_l2svr`) with one kernel column per
iteration, or by vertex-coordinate passes on explicit features (math.md §2.13),
certified by the regression's own duality gap.
"""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..solvers.simplex_qp.l2svr import L2SVR_SOLVERS, solve_l2svr
from ._base import (
    KERNEL_PARAMETER_CONSTRAINTS,
    FWEstimatorMixin,
    SupportKernelMixin,
    check_sample_weight,
    with_callbacks,
)
from ._docs import with_kernel_parameters
from ._plan import explicit_features

__all__ = ["L2SVR"]


@with_kernel_parameters(
    approx_note='``solver="auto"`` then runs the vertex-coordinate passes on the '
    'features (``"dcd"``).'
)
class L2SVR(RegressorMixin, SupportKernelMixin, FWEstimatorMixin, BaseEstimator):
    """L2-loss ε-insensitive support vector regression trained by MFW or DCD (math.md §2.15).

    With the targets centred at their (weighted) mean ``ȳ``, it solves::

        min ½‖w‖² + ½b² + C Σ_i s_i max(0, |y_i − ȳ − (wᵀφ(x_i) + b)| − ε)²

    and predicts ``ȳ + wᵀφ(x) + b``.  The dual over the ``2n`` multipliers of the tube is
    a quadratic over a scaled simplex of ``2n + 1`` vertices (the points with the signs
    ``±1`` of the core vector regression and a slack vertex), solved by Frank-Wolfe with
    away steps at the cost of one kernel column per iteration: no ``n × n`` matrix is
    formed for large ``n`` (the kernel is evaluated on the fly with a column cache).  On
    explicit features (the linear kernel, an approximation ``approx``) passes of
    vertex-coordinate steps cost O(d) per step instead (math.md §2.13).  The iterations
    run compiled (numba).

    Parameters
    ----------
    epsilon : float, default=0.1
        Half-width ``ε ≥ 0`` of the tube in which errors cost nothing, as in ``SVR``.
    C : float, default=1.0
        Penalty ``C > 0`` of the squared tube violations, in scikit-learn's convention
        (``½‖w‖² + C Σ loss``, as liblinear's L2-loss SVR): ``SVR(C=C)`` puts the same ``C``
        in front of the violations ``Σ max(0, |y_i − f(x_i)| − ε)`` (L1 loss), so a
        tuned ``SVR`` ``C`` carries over (the default 1.0 is SVR's).  The bias is
        regularized like a constant feature 1, after centring the targets.
    kernel : {"linear", "rbf", "poly", "sigmoid", "precomputed"}, callable or \
KernelOperator, default="rbf"
        As in :class:`sklearn.svm.SVR`; a ready
        :class:`~kernfw.operators.KernelOperator` on the training points is used as is.
    {kernel_parameters}
    solver : {"auto", "mfw", "lsfw", "dcd"}, default="auto"
        The algorithm: Frank-Wolfe with away and drop steps ("mfw", linear convergence)
        or plain Frank-Wolfe ("lsfw"), both with the exact line search and one kernel
        column per iteration; "dcd": passes of vertex-coordinate steps (math.md §2.13),
        each step O(d) on explicit features (the linear kernel on sparse ``X`` or on
        fewer features than points, ``approx``, an operator with features).  "auto" is
        "dcd" when the kernel comes with explicit features, else "mfw"
        (:func:`kernfw.estimators._plan.explicit_features`).
    tol : float, default=0.3
        Relative tolerance on the certified duality gap of the regression:
        ``(P − D)/|D| ≤ tol`` (math.md §2.15).  At the default the held-out R² is within
        0.01 of that of a tight tolerance on Friedman's problem (``docs/benchmarks.md``,
        "Regression"); lower it for a more accurate fit.
    max_iter : int, default=None
        Budget in iterations (one kernel column each), which ``n_iter_`` counts
        (None: ``max(100000, 20 (2n + 1))``); passes over the ``2n + 1`` coordinates for
        ``solver="dcd"`` (None: 1000).  Up to 200 training points the problem is
        first solved exactly by an active-set method (math.md §2.15), whose iterations
        ``n_iter_`` counts too.
    cache_size : float, default=200
        Kernel cache in MB, as ``SVR``'s: the column cache of on-the-fly kernels (Gram
        matrices up to 32 MB are precomputed instead, see
        :func:`kernfw.estimators._plan.gram_budget`).
    verbose : int, default=0
        Print one line per certified iterate.
    random_state : int, RandomState instance or None, default=None
        Seeds the kernel approximation (``approx``) and the order of the coordinates in
        the passes of "dcd" (None: a fixed order); FW and MFW are deterministic.

    Attributes
    ----------
    support_ : ndarray of int, shape (n_SV,)
        Indices of the support vectors (``β_i = α_i − α_i* ≠ 0``: the points outside the
        tube at the returned iterate).
    support_vectors_ : ndarray of shape (n_SV, d)
        Those points (not set for precomputed kernels or operators).
    n_support_ : ndarray of shape (1,)
        Their number, as ``SVR``'s.
    dual_coef_ : ndarray of shape (1, n_SV)
        ``β_i = α_i − α_i*`` on ``support_``: ``f(x) = Σ_i β_i k(x_i, x) + intercept_``.
    intercept_ : ndarray of shape (1,)
        ``ȳ + b``, ``b = Σ_i β_i``.
    solver_ : str
        The algorithm used.
    n_iter_ : int
        Iterations.
    duality_gap_, primal_objective_, dual_objective_, converged_ : float, bool
        Certificates of the returned iterate (the regression's primal ``P`` at the returned
        model and dual ``D``; the gap ``P − D`` is never negative), each up to the rounding
        bound of :class:`kernfw.fw.FWResult` (``history_["rounding"]``).
    history_ : dict of arrays
        Trace of the run (see :class:`kernfw.fw.FWResult`).
    fit_time_ : float
        Seconds spent in the solver.
    n_features_in_ : int
        Number of features seen in ``fit``.
    kernel_approx_ : transformer or None
        The fitted kernel approximation when ``approx`` is set, else None.

    See Also
    --------
    sklearn.svm.SVR : the L1-loss ε-SVR trained by SMO.
    kernfw.L2SVC : the L2-SVM classifier of the same family.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from kernfw import L2SVR
    >>> X, y = make_friedman1(n_samples=500, noise=1.0, random_state=0)
    >>> reg = L2SVR(C=10.0).fit(X, y)
    >>> bool(reg.converged_), reg.score(X, y) > 0.9
    (True, True)
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="left")],
        "C": [Interval(Real, 0, None, closed="neither")],
        **KERNEL_PARAMETER_CONSTRAINTS,
        "solver": [StrOptions(set(L2SVR_SOLVERS))],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 0, None, closed="left"), None],
        "cache_size": [Interval(Real, 0, None, closed="left")],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        epsilon=0.1,
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
        verbose=0,
        random_state=None,
    ):
        self._store_arguments(locals())

    @with_callbacks
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the regression on ``X``, ``y``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n, d), or (n, n) Gram matrix
            Training inputs (a Gram matrix for ``kernel="precomputed"``).
        y : array-like of shape (n,)
            Targets.
        sample_weight : array-like of shape (n,), default=None
            Per-example weights ``s_i ≥ 0`` of the squared violations (math.md §2.15):
            an integer weight counts the example that many times, a weight 0 leaves it
            out; negative weights are a ValueError.

        Returns
        -------
        self
        """
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        plan = self._fit_plan(X, sample_weight)
        X, y, op = self._validate_training_data(X, y, sample_weight, plan)
        y = np.asarray(y, dtype=np.float64)
        s = check_sample_weight(sample_weight, np.empty(op.n), dtype=np.float64)
        keep = np.flatnonzero(s > 0)  # not empty: check_sample_weight refuses all zeros
        offset = float(np.average(y, weights=s))
        train = op if keep.size == op.n else op.subset(keep)
        callback = self._fw_callback(self.max_iter, X, y)
        try:
            result = solve_l2svr(
                train,
                y[keep] - offset,
                self.C,
                self.epsilon,
                sample_weight=s[keep],
                solver=plan.solver,
                tol=self.tol,
                max_iter=self.max_iter,
                random_state=plan.solver_seed,
                callback=callback,
            )
        finally:
            self._end_callbacks()
        self._store_support(X, op, result, result.solution["coef"], keep)
        self.intercept_ = np.array([result.solution["b"] + offset])
        return self

    def _plan_solver(self, X, sample_weight):
        if self.solver != "auto":
            return self.solver
        return "dcd" if explicit_features(self.kernel, self.approx, X) else "mfw"

    def predict(self, X):
        """Predicted targets ``f(x) = Σ_i β_i k(x_i, x) + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs; for ``kernel="precomputed"`` the test Gram ``K(X, X_train)`` of shape
            (n_samples, n_train), of which only the support columns are read.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        return self._support_decision(self._new_input(X), self.dual_coef_[0]) + self.intercept_[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        return self._kernel_tags(tags)
