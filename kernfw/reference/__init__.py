"""cvxpy reference formulations of every kernfw problem (the ``reference`` extra).

Each submodule holds the formulations of one problem family; their public
functions are re-exported here lazily, so ``import kernfw.reference`` does
not import cvxpy until a reference solver is called:

- :mod:`kernfw.reference.common`: Gram factorization, the Clarabel call;
- :mod:`kernfw.reference.multiclass`: §1 multi-category SVMs;
- :mod:`kernfw.reference.meb`: §2 minimum enclosing ball and L2-SVM;
- :mod:`kernfw.reference.svr`: §2.15 the L2-loss support vector regression;
- :mod:`kernfw.reference.structural`: §3 structural SVMs (n-slack primal);
- :mod:`kernfw.reference.mkl`: §4–§5 online MKL, CSKL and MKL baselines;
- :mod:`kernfw.reference.comparison`: ``compare(estimator, X, y)``.
"""

import importlib

_SUBMODULES = ("common", "multiclass", "meb", "svr", "structural", "mkl", "comparison")


def __getattr__(name):
    for sub in _SUBMODULES:
        try:
            module = importlib.import_module(f"{__name__}.{sub}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{sub}":
                continue  # that family has no reference module yet
            raise
        if name in getattr(module, "__all__", ()):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
