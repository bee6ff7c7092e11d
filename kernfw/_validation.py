"""Input checks shared by operators, solvers and estimators."""

import math
import numbers

import numpy as np
from sklearn.utils.validation import check_array

__all__ = ["check_features", "check_new_features", "check_gram", "check_positive"]

FLOAT_DTYPES = (np.float64, np.float32)

#: rows and columns of a tile of the symmetry check of a Gram matrix
_SYMMETRY_BLOCK = 128


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


def _max_asymmetry(K):
    """``max |K − Kᵀ|`` over square tiles ``(I, J)``, ``J ≥ I`` (no n × n temporary; each
    tile and its transposed partner fit in cache, so the transposed read stays cheap)."""
    n, worst = K.shape[0], 0.0
    for start in range(0, n, _SYMMETRY_BLOCK):
        rows = slice(start, start + _SYMMETRY_BLOCK)
        for other in range(start, n, _SYMMETRY_BLOCK):
            cols = slice(other, other + _SYMMETRY_BLOCK)
            diff = K[rows, cols] - K[cols, rows].T
            worst = max(worst, float(np.max(np.abs(diff))))
    return worst


def _check_not_text(K, name):
    """TypeError for strings or bytes (numpy would parse '1' and fail on 'a')."""
    if hasattr(K, "tocsr"):  # sparse: check_array raises its own TypeError
        return
    try:
        values = np.asarray(K)
    except ValueError:  # ragged nested lists: check_array reports them
        return
    if values.dtype.kind in "USV" or (
        values.dtype.kind == "O" and any(isinstance(v, (str, bytes)) for v in values.ravel())
    ):
        raise TypeError(f"{name} must hold numbers, got strings or bytes (dtype {values.dtype})")


def check_gram(K, symmetric=True, rtol=1e-8, name="Gram matrix"):
    """Validate a precomputed Gram matrix.

    Parameters
    ----------
    K : array-like of shape (n, n)
        The kernel matrix; float32 is kept as given (no copy when ``K`` is
        already a float array).
    symmetric : bool
        Require ``K == Kᵀ`` up to ``rtol · max(max|K|, 1)`` (``rtol`` is at least
        1e-5 for float32).
    rtol : float
        Relative symmetry tolerance.
    name : str
        How error messages call ``K``.
    """
    _check_not_text(K, name)
    K = check_array(K, dtype=FLOAT_DTYPES, ensure_all_finite=True, input_name=name)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be square, got shape {K.shape}")
    if symmetric:
        scale = max(float(K.max()), -float(K.min()))  # max |K_ij|, no temporary
        tol = max(rtol, 1e-5 if K.dtype == np.float32 else rtol) * max(scale, 1.0)
        asym = _max_asymmetry(K)
        if asym > tol:
            raise ValueError(f"{name} is not symmetric: max |K - K.T| = {asym:.3g} > {tol:.3g}")
    return K
