import subprocess
import sys

import kernfw


def test_import_is_light():
    code = (
        "import sys, kernfw, kernfw.operators, kernfw.kernels, kernfw.fw, kernfw.reference; "
        "bad = [m for m in ('cvxpy', 'matplotlib', 'dask') if m in sys.modules]; "
        "print(bad); assert not bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_kernfw_imports_nothing_heavy():
    """``import kernfw`` alone loads no numpy, scipy, scikit-learn or numba: every public name,
    ``kernfw.sweep`` included, is imported on first use."""
    code = (
        "import sys, kernfw; "
        "bad = [m for m in ('numpy', 'scipy', 'sklearn', 'numba', 'joblib') if m in sys.modules]; "
        "assert not bad, bad; "
        "assert callable(kernfw.sweep) and kernfw.sweep.__module__ == 'kernfw.sweeps.run'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_version():
    assert kernfw.__version__.count(".") == 2
