"""kernfw: kernel and multiple-kernel classifiers trained by dual Frank-Wolfe solvers.

Every solver is a Frank-Wolfe method on a dual problem with closed-form steps
and a certified duality gap; every solver talks to the data only through a
:class:`~kernfw.operators.KernelOperator`.
"""

import importlib

__version__ = "0.1.0"

# public name -> module that defines it (imported on first use, so that
# ``import kernfw`` stays light and never imports cvxpy, matplotlib or dask)
_LAZY = {
    "make_operator": "kernfw.kernels",
    "Gram": "kernfw.operators",
    "Features": "kernfw.operators",
    "KernelFunction": "kernfw.operators",
    "LowRankFeatures": "kernfw.operators",
    "MultiKernel": "kernfw.operators",
    "KernelOperator": "kernfw.operators",
    "FWResult": "kernfw.fw",
    "MultiClassSVM": "kernfw.estimators.multiclass",
    "L2SVC": "kernfw.estimators.l2svc",
    "L2SVR": "kernfw.estimators.l2svr",
    "MinimumEnclosingBall": "kernfw.estimators.meb",
    "StructuredSVM": "kernfw.estimators.structured",
    "CSKLClassifier": "kernfw.estimators.mkl",
    "OnlineMKLClassifier": "kernfw.estimators.online_mkl",
    "OnlineMKLStructured": "kernfw.estimators.online_mkl",
    "LpMKLClassifier": "kernfw.estimators.mkl",
    "evaluate": "kernfw.evaluation",
    "sweep": "kernfw.sweeps",
    "approx_error": "kernfw.approximation",
}

# subpackages reachable as attributes (``kernfw.datasets.load_ocr()``), also imported on first use
_SUBMODULES = {
    "datasets",
    "estimators",
    "fw",
    "kernels",
    "model_selection",
    "operators",
    "plotting",
    "reference",
    "solvers",
    "structured",
    "sweeps",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"kernfw.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kernfw' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:  # a component not built in this version
        raise AttributeError(f"kernfw.{name} is not available: {exc}") from exc
    globals()[name] = value
    return value


def __dir__():
    return __all__
