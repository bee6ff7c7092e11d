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


def test_version():
    assert kernfw.__version__.count(".") == 2
