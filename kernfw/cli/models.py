"""The ``--model`` registry: which estimator each name builds, and how it is reported."""

import inspect

import numpy as np

__all__ = ["Model", "MODELS", "default_kernels", "sweep_direction"]


class Model:
    """How the command line builds and reports one ``--model``.

    Parameters
    ----------
    name : str
        The estimator's public name in :mod:`kernfw` (imported on first use).
    sweep_params : tuple of str
        The parameters ``kernfw sweep`` varies by default, in order of
        preference: the first one the estimator has is used.
    kind : {"classifier", "structured", "outlier", "mkl"}
        How labels are passed, how the fit is summarized, and (``mkl``) that
        ``--kernel`` gives the list of base kernels.
    """

    def __init__(self, name, sweep_params=("C", "lam"), kind="classifier"):
        self.name, self.sweep_params, self.kind = name, tuple(sweep_params), kind

    def estimator_class(self):
        """The estimator class (through :mod:`kernfw`'s lazy public names)."""
        import kernfw

        return getattr(kernfw, self.name)

    def kernel_list_param(self):
        """The constructor parameter that takes the MKL models' list of kernels."""
        params = inspect.signature(self.estimator_class()).parameters
        old = params.get("kernels")
        if old is not None and not (isinstance(old.default, str) and old.default == "deprecated"):
            return "kernels"
        return "kernel"

    def extra_params(self, X, y):
        """Constructor arguments that depend on the data: the structured model,
        the default base kernels of the MKL models."""
        if self.kind == "structured":
            from ..structured import MultiClass

            return {"model": MultiClass(int(np.unique(y).size))}
        if self.kind == "mkl":
            return {self.kernel_list_param(): default_kernels(X)}
        return {}

    def sweep_param(self, accepted):
        """The first of :attr:`sweep_params` among the ``accepted`` parameter names."""
        return next((p for p in self.sweep_params if p in accepted), self.sweep_params[0])


def sweep_direction(param):
    """Order of the default sweep values: ``"down"`` for a regularization λ (from
    large to small: warm starts go from the easy, strongly regularized problems
    to the hard ones), ``"up"`` for a penalty C."""
    return "up" if param == "C" else "down"


def default_kernels(X):
    """Base kernels of ``--model cskl`` / ``online-mkl`` without ``--kernel``:
    RBF kernels at 0.1, 1 and 10 times SVC's ``gamma="scale"``, a quadratic
    and a linear kernel (each trace-normalized by the estimator)."""
    from ..kernels import resolve_gamma

    scale = resolve_gamma("scale", X)
    return ([("rbf", {"gamma": factor * scale}) for factor in (0.1, 1.0, 10.0)]
            + [("poly", {"degree": 2, "gamma": scale, "coef0": 1.0}), "linear"])


#: --model name -> Model
MODELS = {
    "multiclass": Model("MultiClassSVM"),
    "l2svc": Model("L2SVC"),
    "meb": Model("MinimumEnclosingBall", sweep_params=("gamma",), kind="outlier"),
    "structured": Model("StructuredSVM", kind="structured"),
    "cskl": Model("CSKLClassifier", kind="mkl"),
    "online-mkl": Model("OnlineMKLClassifier", kind="mkl"),
}
