"""Input checks shared by operators, solvers and estimators."""

import numpy as np
from sklearn.utils.validation import check_array

__all__ = ["check_features", "check_gram"]

FLOAT_DTYPES = (np.float64, np.float32)


def check_features(X, name="X"):
    """Validate a feature matrix: 2-D, finite, float32 kept, CSR for sparse input."""
    return check_array(
        X,
        accept_sparse=("csr", "csc"),
        dtype=FLOAT_DTYPES,
        ensure_all_finite=True,
        input_name=name,
        estimator=None,
    )


def check_gram(K, symmetric=True, rtol=1e-8, name="Gram matrix"):
    """Validate a precomputed Gram matrix.

    Parameters
    ----------
    K : array-like of shape (n, n)
        The kernel matrix; float32 is kept as given.
    symmetric : bool
        Require ``K == Kᵀ`` up to ``rtol · max|K|`` (a looser bound for float32).
    """
    K = check_array(K, dtype=FLOAT_DTYPES, ensure_all_finite=True, input_name="K")
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be square, got shape {K.shape}")
    if symmetric:
        scale = float(np.max(np.abs(K))) if K.size else 0.0
        tol = max(rtol, 1e-5 if K.dtype == np.float32 else rtol) * max(scale, 1.0)
        asym = float(np.max(np.abs(K - K.T))) if K.size else 0.0
        if asym > tol:
            raise ValueError(
                f"{name} is not symmetric: max |K - K.T| = {asym:.3g} > {tol:.3g}"
            )
    return K
