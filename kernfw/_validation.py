"""Input checks shared by operators, solvers and estimators."""

import math
import numbers

import numpy as np
from sklearn.utils.validation import check_array

__all__ = ["check_features", "check_new_features", "check_positive"]

FLOAT_DTYPES = (np.float64, np.float32)


def check_positive(name, value):
    """``float(value)`` if it is a finite real number ``> 0``, else ValueError naming ``name``.

    Booleans are refused (``True`` is not a tolerance), and so are NaN and ±inf.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return float(value)


def check_features(X, name="X"):
    """Validate a feature matrix: 2-D, finite, float32 kept, CSR for sparse input.

    A non-empty 2-D float32/float64 ndarray with finite entries is returned as it is
    (what :func:`~sklearn.utils.validation.check_array` returns for it) without the
    generic checks, whose fixed cost shows on small problems that validate the same
    ``X`` once per kernel; anything else goes through ``check_array`` and its errors.
    """
    if _is_finite_float_matrix(X):
        return X
    return check_array(
        X,
        accept_sparse=("csr", "csc"),
        dtype=FLOAT_DTYPES,
        ensure_all_finite=True,
        input_name=name,
        estimator=None,
    )


def _is_finite_float_matrix(X):
    """True for a 2-D float32/float64 ``np.ndarray`` with at least one row and one column
    and no NaN or ±inf (``Σ x`` is finite exactly when every ``x`` is, unless it overflows,
    then every entry is tested)."""
    if type(X) is not np.ndarray or X.ndim != 2 or X.dtype not in FLOAT_DTYPES:
        return False
    if X.shape[0] < 1 or X.shape[1] < 1:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        if math.isfinite(float(X.sum())):
            return True
    return bool(np.isfinite(X).all())


def check_new_features(X_new, n_features, name="X_new"):
    """Validate new points ``X_new`` against ``n_features`` training features."""
    X_new = check_features(X_new, name=name)
    if X_new.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X_new.shape[1]} features, the training data had {n_features}"
        )
    return X_new
