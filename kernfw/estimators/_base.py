"""What every kernfw estimator shares: progress reporting and the FW-run bridge.

Estimators never do math: they validate, build the operator, call a solver
and store its :class:`~kernfw.fw.FWResult`.  This module holds the two
pieces of glue they all need:

- :class:`FWEstimatorMixin` turns scikit-learn callbacks
  (``est.set_callbacks(ProgressBar())``, :mod:`sklearn.callback`) and
  ``verbose`` into the plain ``callback(row) -> bool`` the FW loop accepts;
- :meth:`FWEstimatorMixin._store_result` copies a result into the fitted
  attributes every estimator has (``n_iter_``, ``duality_gap_``, ...).
"""

import sys
from numbers import Real

from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

try:  # scikit-learn >= 1.9: the callback API (est.set_callbacks(ProgressBar()))
    from sklearn.callback import CallbackSupportMixin, with_callbacks
except ImportError:  # older scikit-learn: no callbacks; ``verbose`` prints progress
    class CallbackSupportMixin:
        """Stand-in for :class:`sklearn.callback.CallbackSupportMixin` (scikit-learn < 1.9)."""

    def with_callbacks(fit):
        """Stand-in for :func:`sklearn.callback.with_callbacks` (scikit-learn < 1.9)."""
        return fit

__all__ = ["FWEstimatorMixin", "ProgressPrinter", "KERNEL_PARAMETER_CONSTRAINTS", "resolve_lam",
           "resolve_deprecated", "with_callbacks"]

#: ``_parameter_constraints`` of the SVC-style kernel parameters shared by the
#: single-kernel estimators: a kernel name, a callable ``k(A, B)``, a
#: ``(name, params)`` spec or a ready :class:`~kernfw.operators.KernelOperator`.
KERNEL_PARAMETER_CONSTRAINTS = {
    "kernel": [str, callable, tuple, HasMethods(["columns", "cross", "diag"])],
    "gamma": [StrOptions({"scale", "auto"}), Interval(Real, 0, None, closed="neither")],
    "degree": [Interval(Real, 0, None, closed="left")],
    "coef0": [Real],
}


class ProgressPrinter:
    """Print one line per certified iterate to ``stream`` (``verbose=1``)."""

    def __init__(self, name, every=1, stream=None):
        self.name, self.every = name, max(int(every), 1)
        self.stream = stream or sys.stderr
        self.calls = 0

    def __call__(self, row):
        if self.calls % self.every == 0:
            print(f"[{self.name}] it {int(row['iteration']):6d}  "
                  f"primal {row['primal']:.6g}  dual {row['dual']:.6g}  "
                  f"gap {row['gap']:.3e}  ({row['time']:.2f}s)", file=self.stream)
        self.calls += 1
        return False


class FWEstimatorMixin(CallbackSupportMixin):
    """Callback bridge and result storage for estimators fitted by :func:`kernfw.fw.run`.

    Use inside ``fit`` (decorated with :func:`sklearn.callback.with_callbacks`)::

        callback = self._fw_callback(max_iter, X, y)
        result = solve(..., callback=callback)
        self._store_result(result)
        self._end_callbacks()
    """

    def _fw_callback(self, max_iter, X=None, y=None, every=1):
        """The ``callback(row) -> bool`` for the FW loop (None if nothing listens)."""
        listeners = []
        if getattr(self, "_skl_callbacks", None):
            ctx = self._init_callback_context(max_subtasks=None if max_iter is None
                                              else int(max_iter) + 1)
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
        """Copy the certificate and history of an FWResult into fitted attributes."""
        self.n_iter_ = int(result.n_iter)
        self.duality_gap_ = float(result.gap)
        self.primal_objective_ = float(result.primal)
        self.dual_objective_ = float(result.dual)
        self.converged_ = bool(result.converged)
        self.history_ = result.history
        self.fit_time_ = float(result.time)


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
    n_samples : int
        Number of training examples ``n``.

    Returns
    -------
    float
        ``λ``.
    """
    if lam is not None:
        return float(lam)
    return 1.0 / (float(C) * int(n_samples))


def resolve_deprecated(estimator, old, new, version="0.3"):
    """The value of parameter ``new``, honouring the deprecated alias ``old``.

    A deprecated constructor argument defaults to the string ``"deprecated"``;
    when a user sets it, a :class:`FutureWarning` names the new parameter and
    the old value is used.

    Parameters
    ----------
    estimator : BaseEstimator
        The estimator whose parameters are read.
    old, new : str
        Deprecated and current parameter names.
    version : str
        The release in which ``old`` will be removed.
    """
    import warnings

    value = getattr(estimator, old, "deprecated")
    if isinstance(value, str) and value == "deprecated":
        return getattr(estimator, new)
    warnings.warn(f"{type(estimator).__name__}: `{old}` is deprecated and will be removed in "
                  f"{version}; use `{new}` instead.", FutureWarning, stacklevel=3)
    return value
