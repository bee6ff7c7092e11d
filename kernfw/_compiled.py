"""The package-wide rule for compiled (numba) backends.

Every hot loop that has a compiled backend keeps its numpy path and uses the
compiled one only when :func:`compiled_module` returns it:

- :mod:`numba` must be importable (it is a runtime dependency, but a platform
  without a wheel still gets a working, slower kernfw);
- the environment variable ``KERNFW_DISABLE_NUMBA`` must not be set to a
  non-empty value other than ``0`` (tests and users force the numpy path
  with it).

Solvers call ``compiled_module("kernfw.solvers._bcfw_numba")`` (or their own
module name) and fall back to numpy on None.
"""

import importlib
import os

__all__ = ["compiled_module", "numba_disabled"]


def numba_disabled():
    """True when ``KERNFW_DISABLE_NUMBA`` asks for the numpy paths."""
    return os.environ.get("KERNFW_DISABLE_NUMBA", "") not in ("", "0")


#: the modules :func:`compiled_module` has imported, by name (None: not importable);
#: hot loops ask for their module at every call, a dictionary lookup after the first
_loaded = {}


def compiled_module(name):
    """The compiled-backend module ``name``, or None (numba missing or disabled).

    Parameters
    ----------
    name : str
        Absolute module name, e.g. ``"kernfw.solvers._bcfw_numba"``.
    """
    if numba_disabled():
        return None
    try:
        return _loaded[name]
    except KeyError:
        pass
    try:
        module = importlib.import_module(name)
    except ImportError:
        module = None
    _loaded[name] = module
    return module
