import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def pytest_collection_modifyitems(config, items):
    """Tests that need cvxpy are skipped (not failed) where it is missing."""
    try:
        import cvxpy  # noqa: F401
    except ImportError:
        skip = pytest.mark.skip(reason="cvxpy (the 'reference' extra) is not installed")
        for item in items:
            if "cvxpy" in item.keywords:
                item.add_marker(skip)
