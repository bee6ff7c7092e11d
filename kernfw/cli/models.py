"""The ``--model`` registry: which estimator each name builds, and how it is reported."""

import numpy as np

__all__ = ["Model", "MODELS", "sweep_direction"]


class Model:
    """How the command line builds and reports one ``--model``.

    Parameters
    ----------
    name : str
        The estimator's public name in :mod:`kernfw` (imported on first use).
    sweep_params : tuple of str
        The parameters ``kernfw sweep`` varies by default, in order of
        preference: the first one the estimator has is used.
    kind : {"classifier", "regressor", "structured", "outlier", "mkl"}
        How labels (targets) are passed, how the fit is summarized (a regressor by R²,
        beside ``SVR()`` for ``--baseline``), and (``mkl``) that ``--kernel`` gives the
        list of base kernels.
    """

    def __init__(self, name, sweep_params=("C", "lam"), kind="classifier"):
        self.name, self.sweep_params, self.kind = name, tuple(sweep_params), kind

    def estimator_class(self):
        """The estimator class (through :mod:`kernfw`'s lazy public names)."""
        import kernfw

        return getattr(kernfw, self.name)

    def extra_params(self, X, y):
        """Constructor arguments that depend on the data: the structured model.

        (The MKL models need none: ``kernel=None`` is their default family of
        base kernels, :func:`kernfw.estimators.mkl.default_kernels`.)"""
        if self.kind == "structured":
            from ..structured import MultiClass

            return {"model": MultiClass(int(np.unique(y).size))}
        return {}

    def sweep_param(self, accepted):
        """The first of :attr:`sweep_params` among the ``accepted`` parameter names."""
        return next((p for p in self.sweep_params if p in accepted), self.sweep_params[0])


def sweep_direction(param):
    """Order of the default sweep values: ``"down"`` for a regularization λ (from
    large to small: warm starts go from the easy, strongly regularized problems
    to the hard ones), ``"up"`` for a penalty C."""
    return "up" if param == "C" else "down"


#: --model name -> Model
MODELS = {
    "multiclass": Model("MultiClassSVM"),
    "l2svc": Model("L2SVC"),
    "l2svr": Model("L2SVR", kind="regressor"),
    "meb": Model("MinimumEnclosingBall", sweep_params=("gamma",), kind="outlier"),
    "structured": Model("StructuredSVM", kind="structured"),
    "cskl": Model("CSKLClassifier", kind="mkl"),
    "lpmkl": Model("LpMKLClassifier", kind="mkl"),
    "online-mkl": Model("OnlineMKLClassifier", kind="mkl"),
    "online-mkl-structured": Model("OnlineMKLStructured", kind="structured"),
}
