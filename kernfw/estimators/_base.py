"""What every kernfw estimator shares: kernel input, progress, the FW-run bridge.

Estimators never do math: they validate, build the operator, call a solver
and store its :class:`~kernfw.fw.FWResult`.  This module holds the glue they
all need:

- :class:`KernelInputMixin`: the kernel parameters (a spec, "precomputed" or
  a ready operator), the training operator and support-only prediction;
- :func:`resolve_lam` (λ = 1/(C·n)) and :func:`solver_seed` (``random_state``
  for the solvers);

- :class:`FWEstimatorMixin` turns scikit-learn callbacks
  (``est.set_callbacks(ProgressBar())``, :mod:`sklearn.callback`) and
  ``verbose`` into the plain ``callback(row) -> bool`` the FW loop accepts;
- :meth:`FWEstimatorMixin._store_result` copies a result into the fitted
  attributes every estimator has (``n_iter_``, ``duality_gap_``, ...).
"""

import sys
import time
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.validation import (
    _check_sample_weight,
    _num_samples,
    check_consistent_length,
    validate_data,
)

from ..kernels import GRAM_MAX_MB, make_operator, resolve_gamma
from ..operators import (
    Features,
    KernelFunction,
    KernelOperator,
    LowRankFeatures,
    MultiKernel,
    PairwiseKernel,
)
from ..operators.lowrank import APPROXIMATIONS
from ..operators.psd import check_psd
from ._interrupt import FIT_METHODS, restore_on_interrupt
from ._plan import (
    FLOAT32_GRAM_TOL,
    PRECISIONS,
    FitPlan,
    check_approx,
    gram_budget,
    kernel_values_dtype,
)

try:  # scikit-learn >= 1.9: the callback API (est.set_callbacks(ProgressBar()))
    from sklearn.callback import CallbackSupportMixin, with_callbacks
except ImportError:  # older scikit-learn: no callbacks; ``verbose`` prints progress

    class CallbackSupportMixin:
        """Stand-in for :class:`sklearn.callback.CallbackSupportMixin` (scikit-learn < 1.9)."""

    def with_callbacks(fit):
        """Stand-in for :func:`sklearn.callback.with_callbacks` (scikit-learn < 1.9)."""
        return fit


__all__ = [
    "FWEstimatorMixin",
    "KernelInputMixin",
    "SupportKernelMixin",
    "ProgressPrinter",
    "KERNEL_PARAMETER_CONSTRAINTS",
    "APPROX_PARAMETER_CONSTRAINTS",
    "approx_seed",
    "fitted_approximation",
    "resolve_lam",
    "solver_seed",
    "example_weights",
    "accepts_kernel_operator",
    "with_callbacks",
    "FLOAT32_GRAM_TOL",
    "PRECISIONS",
    "PRECISION_PARAMETER_CONSTRAINTS",
]

#: ``_parameter_constraints`` of ``precision``
PRECISION_PARAMETER_CONSTRAINTS = {"precision": [StrOptions(set(PRECISIONS))]}

#: ``_parameter_constraints`` of the kernel approximation (``approx``, ``n_components``)
APPROX_PARAMETER_CONSTRAINTS = {
    "approx": [None, StrOptions(set(APPROXIMATIONS))],
    "n_components": [Interval(Integral, 1, None, closed="left")],
}

#: ``_parameter_constraints`` of the SVC-style kernel parameters shared by the
#: single-kernel estimators: a kernel name, a callable ``k(A, B)``, a
#: ``(name, params)`` spec or a ready :class:`~kernfw.operators.KernelOperator`,
#: and its approximation.
KERNEL_PARAMETER_CONSTRAINTS = {
    "kernel": [str, callable, tuple, HasMethods(["columns", "cross", "diag"])],
    "gamma": [StrOptions({"scale", "auto"}), Interval(Real, 0, None, closed="neither")],
    "degree": [Interval(Real, 0, None, closed="left")],
    "coef0": [Real],
    **APPROX_PARAMETER_CONSTRAINTS,
    **PRECISION_PARAMETER_CONSTRAINTS,
}


def approx_seed(random_state):
    """The ``random_state`` of a kernel approximation from an estimator's ``random_state``.

    scikit-learn's transformers take None, an int or a RandomState; a
    :class:`numpy.random.Generator` gives an int drawn from it.
    """
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(np.iinfo(np.int32).max))
    return random_state


def fitted_approximation(op):
    """The fitted transformer of a low-rank operator (a list of them for a MultiKernel of
    low-rank operators), or None for an exact kernel."""
    if isinstance(op, LowRankFeatures):
        return op.transformer
    if isinstance(op, MultiKernel) and all(isinstance(o, LowRankFeatures) for o in op.operators):
        return [o.transformer for o in op.operators]
    return None


class ProgressPrinter:
    """Print one line per certified iterate (``verbose=1`` and ``kernfw fit``'s progress).

    The one progress printer of the package: estimators use it for
    ``verbose``; the command line wraps it in a scikit-learn callback
    (:class:`kernfw.cli.report.LineProgress`) that passes ``min_interval``.

    Parameters
    ----------
    name : str
        Prefix of every line (the estimator's class name).
    every : int, default=1
        Print every ``every``-th call.
    stream : file-like or None, default=None
        Where to print (None: ``sys.stderr`` at the time of printing).
    min_interval : float, default=0.0
        Seconds that must pass since the previous line (or since the
        printer was created) before a new line is printed, so short fits
        print nothing.
    """

    def __init__(self, name, every=1, stream=None, min_interval=0.0):
        self.name, self.every = name, max(int(every), 1)
        self.stream = stream
        self.min_interval = float(min_interval)
        self.calls = 0
        self._last = time.perf_counter()

    def format(self, row):
        """The line of one history row (``iteration``, ``primal``, ``gap``, ``time``,
        and ``dual`` when present)."""
        dual = f"  dual {row['dual']:.6g}" if "dual" in row else ""
        return (
            f"[{self.name}] iteration {int(row['iteration']):7d}  primal {row['primal']:.6g}"
            f"{dual}  gap {row['gap']:.3e}  ({row['time']:.2f}s)"
        )

    def __call__(self, row):
        """Print ``row`` if it is due; return False (never asks the loop to stop)."""
        now = time.perf_counter()
        due = self.calls % self.every == 0 and now - self._last >= self.min_interval
        self.calls += 1
        if due:
            self._last = now
            print(self.format(row), file=self.stream or sys.stderr, flush=True)
        return False


class FWEstimatorMixin(CallbackSupportMixin):
    """Callback bridge and result storage for estimators fitted by :func:`kernfw.fw.run`.

    Use inside ``fit`` (decorated with :func:`sklearn.callback.with_callbacks`)::

        callback = self._fw_callback(max_iter, X, y)
        result = solve(..., callback=callback)
        self._store_result(result)
        self._end_callbacks()

    A KeyboardInterrupt (Ctrl-C) during ``fit`` or ``partial_fit`` of a subclass
    leaves the estimator as it was before the call
    (:func:`~kernfw.estimators._interrupt.restore_on_interrupt`).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in FIT_METHODS:
            if name in vars(cls):
                setattr(cls, name, restore_on_interrupt(vars(cls)[name]))

    def _store_arguments(self, arguments):
        """Keep every constructor argument as given, under its own name (scikit-learn's
        rule: ``__init__`` stores, ``fit`` validates); ``arguments`` is ``locals()``."""
        for name, value in arguments.items():
            if name != "self":
                setattr(self, name, value)

    def _fw_callback(self, max_iter, X=None, y=None, every=1):
        """The ``callback(row) -> bool`` for the FW loop (None if nothing listens)."""
        listeners = []
        if getattr(self, "_skl_callbacks", None):
            ctx = self._init_callback_context(
                max_subtasks=None if max_iter is None else int(max_iter) + 1
            )
            ctx.call_on_fit_task_begin(estimator=self, X=X, y=y)
            self._fit_ctx = ctx

            def skl_bridge(row):
                sub = ctx.subcontext(task_name="iteration")
                sub.call_on_fit_task_begin(estimator=self)
                return bool(sub.call_on_fit_task_end(estimator=self, metadata=dict(row)))

            listeners.append(skl_bridge)
        if getattr(self, "verbose", 0):
            listeners.append(ProgressPrinter(type(self).__name__, every=every))
        if not listeners:
            return None

        def callback(row):
            stop = False
            for listener in listeners:
                stop |= bool(listener(row))
            return stop

        return callback

    def _end_callbacks(self):
        ctx = self.__dict__.pop("_fit_ctx", None)
        if ctx is not None:
            ctx.call_on_fit_task_end(estimator=self)

    def _store_result(self, result):
        """Copy the certificate and history of a run into fitted attributes.

        The only writer of ``n_iter_``, ``duality_gap_``, ``primal_objective_``,
        ``dual_objective_``, ``converged_``, ``history_`` and ``fit_time_``.

        Parameters
        ----------
        result : FWResult or sequence of FWResult
            One run: scalar attributes.  Several independent runs (the binary
            problems of a one-vs-one or one-vs-rest model): one array entry per
            run, ``fit_time_`` their total, and ``history_`` one dict whose
            arrays are the runs' histories concatenated, with a ``problem``
            column (the run's position) first.
        """
        if not isinstance(result, (list, tuple)):
            self.n_iter_ = int(result.n_iter)
            self.duality_gap_ = float(result.gap)
            self.primal_objective_ = float(result.primal)
            self.dual_objective_ = float(result.dual)
            self.converged_ = bool(result.converged)
            self.history_ = result.history
            self.fit_time_ = float(result.time)
            return
        if len(result) == 1:
            return self._store_result(result[0])
        results = list(result)
        self.n_iter_ = np.array([int(r.n_iter) for r in results])
        self.duality_gap_ = np.array([float(r.gap) for r in results])
        self.primal_objective_ = np.array([float(r.primal) for r in results])
        self.dual_objective_ = np.array([float(r.dual) for r in results])
        self.converged_ = np.array([bool(r.converged) for r in results])
        self.fit_time_ = float(sum(r.time for r in results))
        self.history_ = _concatenate_histories([r.history for r in results])


def _concatenate_histories(histories):
    """One history dict from several: the columns they share, stacked, after a
    ``problem`` column holding each row's run index."""
    keys = [k for k in histories[0] if all(k in h for h in histories[1:])]
    lengths = [len(np.atleast_1d(h[keys[0]])) if keys else 0 for h in histories]
    out = {"problem": np.repeat(np.arange(len(histories)), lengths)}
    for key in keys:
        out[key] = np.concatenate([np.atleast_1d(np.asarray(h[key])) for h in histories])
    return out


def check_sample_weight(sample_weight, X, **kwargs):
    """scikit-learn's ``_check_sample_weight`` with nonnegative weights, refusing all
    zeros as scikit-learn 1.7 does (1.6, the declared minimum, lets them through)."""
    w = _check_sample_weight(sample_weight, X, ensure_non_negative=True, **kwargs)
    if not np.any(w > 0):
        raise ValueError("Sample weights must contain at least one non-zero number.")
    return w


def class_weights(class_weight, classes, y, sample_weight=None):
    """The weight ``c_k`` of each class in ``classes``: scikit-learn's
    :func:`~sklearn.utils.class_weight.compute_class_weight`, whose "balanced" weights
    are ``Σ_i s_i / (m · Σ_{y_i = k} s_i)`` with the sample weights ``s`` (written here:
    scikit-learn's own function takes ``sample_weight`` from version 1.7 on)."""
    if not (isinstance(class_weight, str) and class_weight == "balanced"):
        return compute_class_weight(class_weight, classes=classes, y=y)
    classes, y = np.asarray(classes), np.asarray(y)
    y_enc = np.searchsorted(classes, y)
    if np.any(y_enc >= classes.size) or np.any(classes[np.minimum(y_enc, classes.size - 1)] != y):
        raise ValueError("classes should include all valid labels that can be in y")
    s = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    totals = np.bincount(y_enc, weights=s, minlength=classes.size)
    if np.any(totals <= 0):
        raise ValueError("class_weight='balanced' needs a positive weight in every class")
    return s.sum() / (classes.size * totals)


def example_weights(sample_weight, n, class_weight=None, y=None):
    """The per-example weights ``w_i = s_i · c_{y_i}`` of a fit, or None when all are 1.

    ``s = sample_weight`` (validated by :func:`sklearn.utils.validation._check_sample_weight`:
    shape ``(n,)``, finite, nonnegative, not all zero) and ``c = class_weight`` (None, a
    dict ``{label: weight}`` or ``"balanced"``, scikit-learn's
    :func:`~sklearn.utils.class_weight.compute_class_weight`: ``n / (m · count(label))``
    over the labels ``y``).  Weights scale each example's loss term (math.md §2.14); an
    example of weight 0 is left out of the problem.

    Parameters
    ----------
    sample_weight : array-like of shape (n,) or None
    n : int
        The number of training examples.
    class_weight : dict, "balanced" or None
    y : array-like of shape (n,) or None
        The labels (needed with ``class_weight``).

    Returns
    -------
    ndarray of shape (n,) (float64) or None
    """
    if sample_weight is None and class_weight is None:
        return None
    w = check_sample_weight(sample_weight, np.empty((n, 0)), dtype=np.float64, copy=True)
    if class_weight is not None:  # over the examples that count: "balanced" sums weights
        y = np.asarray(y)
        kept = w > 0
        classes, y_enc = np.unique(y[kept], return_inverse=True)
        c = class_weights(class_weight, classes, y[kept], w[kept])
        w[kept] *= c[y_enc]
        if not np.any(w > 0):
            raise ValueError("every example has weight zero after class_weight")
    return w


def solver_seed(random_state):
    """The one conversion of an estimator's ``random_state`` for the solvers.

    The solvers seed :func:`numpy.random.default_rng`, which takes None, an
    int or a :class:`numpy.random.Generator`; a legacy
    :class:`numpy.random.RandomState` (what scikit-learn's ``random_state``
    also allows) is turned into an int drawn from it, so it advances as
    scikit-learn users expect.

    Parameters
    ----------
    random_state : None, int, RandomState or Generator
        The estimator's parameter.

    Returns
    -------
    None, int or Generator
    """
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    if random_state is None or isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        return int(random_state)
    raise ValueError(
        f"random_state must be None, an int, a RandomState or a Generator; got {random_state!r}"
    )


def accepts_kernel_operator(estimator):
    """Whether ``estimator`` takes a ready :class:`~kernfw.operators.KernelOperator`
    as ``kernel=`` (so :func:`kernfw.sweep` can share one operator between fits).

    Reads the estimator tag ``_accepts_kernel_operator``, a class attribute set
    by :class:`KernelInputMixin`; any other estimator is False.
    """
    if not getattr(type(estimator), "_accepts_kernel_operator", False):
        return False
    return "kernel" in estimator.get_params(deep=False)


#: kernels of :mod:`sklearn.metrics.pairwise` whose Gram matrices are PSD by construction
PSD_KERNELS = frozenset({"linear", "rbf", "laplacian", "cosine", "chi2"})


def psd_by_construction(op):
    """Whether the operator's ``K`` is positive semidefinite by construction.

    True for explicit features (``K = XXᵀ``), for a Gram or on-the-fly kernel of
    a kernel in :data:`PSD_KERNELS` or a polynomial kernel with ``γ > 0``,
    ``coef0 ≥ 0`` and an integer degree, and for normalizations and
    nonnegative combinations of such operators.  False when it cannot tell
    (a sigmoid kernel, a callable, a user's Gram matrix): then
    :func:`kernfw.operators.psd.check_psd` has to test it.
    """
    if isinstance(op, Features):
        return True
    kernel = getattr(op, "kernel", None)
    if isinstance(kernel, PairwiseKernel):
        metric, params = kernel.metric, kernel.params
        if metric == "poly":
            gamma, coef0 = params.get("gamma"), params.get("coef0", 1.0)
            degree = float(params.get("degree", 3))
            return (
                (gamma is None or gamma > 0) and coef0 >= 0 and degree.is_integer() and degree >= 0
            )
        return isinstance(metric, str) and metric in PSD_KERNELS
    if isinstance(op, MultiKernel) and np.any(np.asarray(op.weights) < 0):
        return False
    children = []
    op.map_operators(lambda child: children.append(child) or child)
    return bool(children) and all(psd_by_construction(child) for child in children)


def check_base_kernels(kernels, owner):
    """Raise :class:`~kernfw.operators.psd.NotPSDError` when a base kernel ``K_j`` of a
    multiple-kernel estimator is detectably indefinite: a combination ``Σ_j γ_j K_j`` with
    ``γ_j > 0`` could then make the dual non-concave, and no gap would certify anything.
    Kernels PSD by construction (:func:`psd_by_construction`) are not tested.

    Parameters
    ----------
    kernels : sequence of KernelOperator
        The base kernels ``K_1 … K_p``.
    owner : estimator
        Named in the message.
    """
    for j, op in enumerate(kernels):
        if not psd_by_construction(op):
            check_psd(op, name=f"base kernel {j} of {type(owner).__name__}")


class KernelInputMixin:
    """Kernel input and support-only prediction shared by the single-kernel estimators.

    ``kernel`` is an SVC-style spec (with ``gamma``, ``degree``, ``coef0`` and
    ``cache_size`` parameters), "precomputed" or a ready
    :class:`~kernfw.operators.KernelOperator` on the training points.
    :meth:`_validate_training_data` returns the training operator; after
    ``fit`` sets ``support_``, :meth:`_set_predictor` keeps only what
    prediction needs (the support points: their kernel is all that is ever
    evaluated), and :meth:`_support_kernel` returns ``k(X_new, x_j)`` for
    ``j`` in ``support_`` — an (n_new, 0) array when the support is empty
    (the zero model), never an error.

    With ``approx`` set (the estimator's parameters ``approx``, ``n_components`` and
    ``random_state``), the training operator is a low-rank
    :class:`~kernfw.operators.LowRankFeatures` and ``kernel_approx_`` its fitted
    transformer; prediction maps new points through it.

    Subclasses may override :meth:`_gram_max_mb` (the largest Gram matrix, in
    MB, precomputed for the training points) and :meth:`_gram_dtype` (its
    storage type, also that of approximated features).
    """

    #: estimator tag read by :func:`accepts_kernel_operator`
    _accepts_kernel_operator = True

    def _kernel_is_operator(self):
        return isinstance(self.kernel, KernelOperator)

    def _kernel_is_precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _gram_max_mb(self, X):
        """Largest n × n Gram (MB) that ``make_operator`` precomputes for ``X``."""
        return GRAM_MAX_MB

    def _kernel_cache_mb(self, X):
        """Column cache (MB) of a kernel evaluated on the fly for ``X``: ``cache_size``."""
        return self.cache_size

    def _gram_dtype(self, n=None):
        """Type of the kernel values computed from features (None: the dtype of ``X``):
        :func:`~kernfw.estimators._plan.kernel_values_dtype` of the estimator's
        ``precision``, ``tol``, resolved solver and backend, on ``n`` training points."""
        return kernel_values_dtype(
            getattr(self, "precision", "auto"),
            getattr(self, "tol", None),
            getattr(self, "_solver", None),
            getattr(self, "backend", "local"),
            n,
        )

    def _features_dtype(self, n=None):
        """Storage type of approximated features ``Φ`` (None: the dtype of ``X``): that of
        :meth:`_gram_dtype`."""
        return self._gram_dtype(n)

    def _plan_solver(self, X, sample_weight):
        """The algorithm of a fit on ``X`` (``solver`` as given; "auto" resolved by the
        estimators that have it)."""
        return getattr(self, "solver", None)

    def _plan_samples(self, X):
        """The number of training points of a fit on ``X`` (None: unknown before the
        validation, which then refuses ``X``)."""
        if self._kernel_is_operator() and X is None:
            return self.kernel.n
        try:
            return _num_samples(X)
        except TypeError:
            return None

    def _fit_plan(self, X, sample_weight=None):
        """The :class:`~kernfw.estimators._plan.FitPlan` of a fit on ``X``, resolved once,
        before the kernel operator is built (``approx`` is checked here, and only here)."""
        approx, backend = getattr(self, "approx", None), getattr(self, "backend", "local")
        check_approx(approx, self.kernel, backend)
        self._solver = self._plan_solver(X, sample_weight)
        random_state = getattr(self, "random_state", None)
        n = self._plan_samples(X)
        self._plan = FitPlan(
            solver=self._solver,
            backend=backend,
            gram_max_mb=self._gram_max_mb(X),
            cache_mb=self._kernel_cache_mb(X),
            dtype=(self._gram_dtype if approx is None else self._features_dtype)(n),
            approx=approx,
            n_components=getattr(self, "n_components", None),
            approx_seed=approx_seed(random_state),
            solver_seed=solver_seed(random_state),
        )
        return self._plan

    def _check_targets(self, y, sample_weight):
        """The targets of a fit from the validated labels ``y`` (and ``sample_weight``),
        checked before the kernel operator is built; the default is ``y`` itself."""
        return y

    def _validate_training_data(self, X, y=None, sample_weight=None, plan=None):
        """Validated ``(X, targets)`` and the training kernel operator of the fit's ``plan``
        (None: :meth:`_fit_plan`).

        ``targets`` is :meth:`_check_targets` of the validated ``y`` (``y`` unless an
        estimator says otherwise); ``gamma="scale"`` is taken over the rows weighted by
        ``sample_weight`` (:func:`~kernfw.kernels.resolve_gamma`)."""
        plan = self._fit_plan(X, sample_weight) if plan is None else plan
        if self._kernel_is_operator():
            op = self.kernel
            n = op.n if X is None else _num_samples(X)
            if n != op.n:
                raise ValueError(f"X has {n} samples but the kernel operator has n={op.n}")
            if y is not None:
                y = np.asarray(y)
                check_consistent_length(np.empty(op.n), y)
            y = self._check_targets(y, sample_weight)
            self.kernel_approx_, self._approx_op = None, None
            return X, y, op
        kwargs = {"dtype": (np.float64, np.float32)}
        if not self._kernel_is_precomputed():
            kwargs["accept_sparse"] = ("csr", "csc")
        if y is None:
            X = validate_data(self, X, **kwargs)
        else:
            X, y = validate_data(self, X, y, **kwargs)
        if self._kernel_is_precomputed() and X.shape[0] != X.shape[1]:
            raise ValueError(
                f"kernel='precomputed' needs a square Gram matrix, got shape {X.shape}"
            )
        y = self._check_targets(y, sample_weight)
        gamma = self.gamma
        if sample_weight is not None and isinstance(gamma, str) and gamma == "scale":
            weights = _check_sample_weight(sample_weight, X, ensure_non_negative=True)
            if not self._kernel_is_precomputed() and weights.sum() > 0:
                gamma = resolve_gamma(gamma, X, weights)
        op = make_operator(
            X,
            self.kernel,
            gamma,
            self.degree,
            self.coef0,
            cache_size=plan.cache_mb,
            gram_max_mb=plan.gram_max_mb,
            gram_dtype=plan.dtype,
            approx=plan.approx,
            n_components=plan.n_components,
            random_state=plan.approx_seed,
        )
        self.kernel_approx_ = fitted_approximation(op)
        self._approx_op = None if plan.approx is None else op.subset(np.arange(0))  # maps Φ
        return X, y, op

    def _set_predictor(self, X, op):
        """Keep the kernel on the support points only (``support_`` must be set)."""
        self._predict_op = None
        if self._kernel_is_operator():
            self._predict_op = op
        elif not self._kernel_is_precomputed():
            self.support_vectors_ = X[self.support_]
            kernel = getattr(op, "kernel", None)
            if self.support_.size == 0:
                self._predict_op = None
            elif isinstance(kernel, PairwiseKernel):  # no Gram block of the support needed
                self._predict_op = KernelFunction(
                    self.support_vectors_, kernel, cache_size=0, check=False
                )
            else:
                self._predict_op = op.predictor(self.support_)

    def _new_input(self, X):
        """Validate prediction input: features, a test Gram (n_new, n_train), or as is
        for an operator kernel (its ``cross`` checks it)."""
        if self._kernel_is_operator():
            return X
        if self._kernel_is_precomputed():
            return validate_data(self, X, dtype=(np.float64, np.float32), reset=False)
        return validate_data(
            self, X, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32), reset=False
        )

    def _support_kernel(self, X):
        """``k(x, x_j)`` for validated rows ``X`` (see :meth:`_new_input`) and ``j`` in
        ``support_``, shape (n_new, n_SV); a test Gram is only read at those columns."""
        if self.support_.size == 0:
            return np.zeros((_num_samples(X), 0))
        if self._kernel_is_operator():
            return self._predict_op.cross(X, self.support_)
        if self._kernel_is_precomputed():
            return X[:, self.support_]
        return self._predict_op.cross(X)

    def _support_decision(self, X, coef):
        """``Σ_j k(x, x_j) coef_j`` over ``j`` in ``support_``, for validated rows ``X`` (see
        :meth:`_new_input`) and ``coef`` of shape (n_SV,) or (n_SV, r).  Approximated kernels
        compute ``Φ(X) (Φ_Sᵀ coef)`` (no ``n_new × n_SV`` block)."""
        if self.support_.size == 0:
            return np.zeros((_num_samples(X),) + np.shape(coef)[1:])
        if self._kernel_is_operator() or self._kernel_is_precomputed():
            return self._support_kernel(X) @ coef
        return self._predict_op.cross_matmat(X, coef)

    def _check_psd(self, op):
        """Raise :class:`~kernfw.operators.psd.NotPSDError` (a ValueError) when the training
        kernel is detectably indefinite: its dual is then not concave and no gap would
        certify anything.  Skipped for kernels PSD by construction (see
        :func:`psd_by_construction`) and for ``kernel="precomputed"``, which
        :func:`~kernfw.kernels.make_operator` has already tested."""
        if self._kernel_is_precomputed() or psd_by_construction(op):
            return
        check_psd(op, name=f"kernel matrix of {type(self).__name__}(kernel={self.kernel!r})")

    def _kernel_tags(self, tags):
        """Set the input tags: pairwise for a precomputed Gram, sparse for a kernel spec."""
        tags.input_tags.pairwise = self._kernel_is_precomputed()
        tags.input_tags.sparse = not (self._kernel_is_precomputed() or self._kernel_is_operator())
        return tags


class SupportKernelMixin(KernelInputMixin):
    """:class:`KernelInputMixin` of the simplex-QP estimators (:class:`~kernfw.L2SVC`,
    :class:`~kernfw.MinimumEnclosingBall`, :class:`~kernfw.L2SVR`), which fetch one kernel
    column per iteration: the Gram budget of :func:`~kernfw.estimators._plan.gram_budget`,
    and approximated features ``Φ`` in float64 for the Frank-Wolfe solvers (their steps
    test the curvature ``dᵀQd`` to 1e-8 of its scale, below the float32 rounding of
    products of float32 features: two equal points would look like negative curvature),
    in the type of :meth:`_gram_dtype` for the coordinate passes (``solver="dcd"``)."""

    def _gram_max_mb(self, X):
        return gram_budget(X, self.cache_size)

    def _features_dtype(self, n=None):
        return self._gram_dtype(n) if getattr(self, "_solver", None) == "dcd" else np.float64

    def _validate_training_data(self, X, y=None, sample_weight=None, plan=None):
        """:meth:`KernelInputMixin._validate_training_data`, and a ready operator tested for
        indefiniteness (a few products ``K v``: an indefinite ``K`` certifies nothing)."""
        X, y, op = super()._validate_training_data(X, y, sample_weight, plan)
        if self._kernel_is_operator():
            check_psd(op)
        return X, y, op

    def _store_support(self, X, op, result, coef, rows=None):
        """The fitted attributes of a fit of one problem: the certificate of ``result``,
        ``solver_`` (the plan's), ``support_`` (the problem's support among the training
        ``rows``; None: all), ``dual_coef_`` (``coef`` on it, shape (1, n_SV)),
        ``n_support_`` and the predictor on the support points."""
        self._store_result(result)
        self.solver_ = self._plan.solver
        support = result.solution["support"]
        self.support_ = support if rows is None else rows[support]
        self.dual_coef_ = coef[support][None, :]
        self.n_support_ = np.array([self.support_.size], dtype=np.int32)
        self._set_predictor(X, op)


def resolve_lam(C, lam, n_samples):
    """The regularization λ of the papers from the scikit-learn ``C``.

    kernfw's primal objectives are ``λ/2 ‖W‖² + (1/n) Σ_i ℓ_i(W)``; dividing by
    ``λ`` gives ``½ ‖W‖² + C Σ_i ℓ_i(W)`` — the convention of ``SVC`` and
    ``LinearSVC`` — with ``C = 1/(λ n)``.  So ``λ = 1/(C · n)`` unless ``lam``
    is given explicitly, which wins.

    Parameters
    ----------
    C : float
        Inverse regularization strength (``SVC``'s ``C``), > 0.
    lam : float or None
        Explicit ``λ``; None derives it from ``C``.
    n_samples : float
        Number of training examples ``n`` (with weights their sum ``Σ_i w_i``, which
        need not be an integer).

    Returns
    -------
    float
        ``λ``.
    """
    if lam is not None:
        return float(lam)
    return 1.0 / (float(C) * float(n_samples))
